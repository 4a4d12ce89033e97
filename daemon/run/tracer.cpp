// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/tracer.h"

#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>

#include "daemon/bpf/preflight.h"
#include "daemon/export/trace_writer.h"

namespace stackmapd {

namespace {

volatile std::sig_atomic_t stop_requested = 0;
volatile std::sig_atomic_t reset_requested = 0;

void on_signal(int sig) {
  if (sig == SIGUSR1)
    reset_requested = 1;
  else
    stop_requested = 1;
}

// SIGINT/SIGTERM stop, SIGUSR1 resets the table. Installed without
// SA_RESTART so that a signal interrupts the ring-buffer poll at once.
class SessionSignals {
 public:
  SessionSignals() {
    stop_requested = 0;
    reset_requested = 0;
    struct sigaction sa = {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SessionSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGUSR1};
  std::array<struct sigaction, 3> old_ = {};
};

// Says once, as it happens, when the table or the ring buffer starts losing
// events, instead of leaving it to the exports at the end.
class HealthWatch {
 public:
  void check(const BpfSession& session) {
    auto now = std::chrono::steady_clock::now();
    if (now < next_) return;
    next_ = now + std::chrono::seconds(1);
    TableStats st = session.stats();
    if (st.pool_full() && !pool_warned_) {
      pool_warned_ = true;
      spdlog::warn("element pool full ({} unique stacks): new stacks are dropped and counted; "
                   "raise --bits", st.entries);
    }
    if (st.get(SMC_DROP_RINGBUF_FULL) && !ring_warned_) {
      ring_warned_ = true;
      spdlog::warn("ring buffer full: ids are dropped and counted; raise --ringbuf-kb");
    }
  }

 private:
  std::chrono::steady_clock::time_point next_{};
  bool pool_warned_ = false;
  bool ring_warned_ = false;
};

}  // namespace

Snapshot trace(TraceOptions options) {
  check_privileges();
  check_btf();
  const std::string events_dir = mount_tracefs_events();
  check_tracepoints(options.session.events, events_dir);
  options.session.functions = resolve_functions(
      options.function_patterns, std::filesystem::path(events_dir).parent_path().string());
  options.session.trace = !options.trace_path.empty();
  std::optional<TraceWriter> writer;
  if (options.session.trace) writer.emplace(options.trace_path);

  SessionSignals signals;
  BpfSession session(options.session);
  if (writer) {
    writer->set_sources(session.sources());
    session.set_trace_sink([&](const smt_trace_record& r) { writer->write(r); });
  }
  std::string names;
  for (const auto& source : session.sources()) {
    if (names.size() > 200) {
      names += ", ...";
      break;
    }
    names += (names.empty() ? "" : ", ") + source;
  }
  if (options.duration_s)
    spdlog::info("tracing {} for {} s (Ctrl-C stops early, SIGUSR1 resets)", names,
                 *options.duration_s);
  else
    spdlog::info("tracing {} until Ctrl-C or SIGTERM (SIGUSR1 resets)", names);

  using clock = std::chrono::steady_clock;
  auto deadline = clock::time_point::max();
  if (options.duration_s)
    deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                  std::chrono::duration<double>(*options.duration_s));
  HealthWatch health;
  while (!stop_requested) {
    health.check(session);
    if (reset_requested) {
      reset_requested = 0;
      Snapshot ended = session.reset();
      spdlog::info("reset: epoch {} ended with {} events in {} unique stacks", session.epoch() - 1,
                   ended.stats.events(), ended.stacks.size());
    }
    auto now = clock::now();
    if (now >= deadline) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    session.drain(static_cast<int>(std::min<long long>(left + 1, options.drain_interval_ms)));
  }
  // Detach before the last drain so that the exports are one consistent cut.
  session.detach();
  session.drain(0);
  if (writer) {
    writer->finish();
    spdlog::info("trace: {} events written to {}", writer->lines(),
                 options.trace_path == "-" ? "stdout" : options.trace_path);
  }
  return session.snapshot();
}

}  // namespace stackmapd
