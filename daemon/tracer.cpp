// SPDX-License-Identifier: GPL-2.0
#include "daemon/tracer.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>

#include "daemon/preflight.h"

namespace stackmapd {

namespace {

volatile std::sig_atomic_t stop_requested = 0;

void on_stop_signal(int) { stop_requested = 1; }

// Installed without SA_RESTART so that a signal interrupts the ring-buffer
// poll at once instead of waiting for the drain timer.
class StopSignals {
 public:
  StopSignals() {
    stop_requested = 0;
    struct sigaction sa = {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
};

}  // namespace

Snapshot trace(const TraceOptions& options) {
  check_privileges();
  check_btf();
  check_tracepoints(options.session.events, find_tracefs_events());

  StopSignals signals;
  BpfSession session(options.session);
  std::string names;
  for (const auto& tp : options.session.events) names += (names.empty() ? "" : ", ") + tp.str();
  if (options.duration_s)
    spdlog::info("tracing {} for {} s (Ctrl-C stops early)", names, *options.duration_s);
  else
    spdlog::info("tracing {} until Ctrl-C or SIGTERM", names);

  using clock = std::chrono::steady_clock;
  auto deadline = clock::time_point::max();
  if (options.duration_s)
    deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                  std::chrono::duration<double>(*options.duration_s));
  while (!stop_requested) {
    auto now = clock::now();
    if (now >= deadline) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    session.drain(static_cast<int>(std::min<long long>(left + 1, options.drain_interval_ms)));
  }
  // Detach before the last drain so that the exports are one consistent cut.
  session.detach();
  session.drain(0);
  return session.snapshot();
}

}  // namespace stackmapd
