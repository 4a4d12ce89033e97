// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/tracer.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <optional>

#include "daemon/export/perfetto_writer.h"
#include "daemon/export/trace_writer.h"
#include "daemon/run/command_child.h"
#include "daemon/run/foreground.h"
#include "daemon/source/session_setup.h"
#include "daemon/symbols/symbol_sources.h"
#include "daemon/sys/preflight.h"

namespace stackmapd {

namespace {

// Says once, as it happens, when the table starts losing events, instead of
// leaving it to the exports at the end (checked each second). A full ring
// buffer the session says itself, once per burst (BpfSession::drain()).
class HealthWatch {
 public:
  void check(const BpfSession& session) {
    TableStats st = session.stats();
    if (st.pool_full() && !pool_warned_) {
      pool_warned_ = true;
      spdlog::warn(
          "element pool full ({} unique stacks): new stacks are dropped and counted; "
          "raise --bits",
          st.entries);
    }
  }

 private:
  bool pool_warned_ = false;
};

}  // namespace

Snapshot trace(TraceOptions options, Recording* recording) {
  check_privileges();
  check_btf();
  const std::string events_dir = mount_tracefs_events();
  options.session.trace = !options.trace_path.empty() || !options.perfetto_path.empty();
  resolve_session_events(options.session, events_dir);
  const std::string tracefs_dir = std::filesystem::path(events_dir).parent_path().string();
  if (!options.function_patterns.empty()) {
    FunctionPlan functions =
        resolve_functions(options.function_patterns, tracefs_dir, options.session.probe_mechanism,
                          ProbeSupport::probe(tracefs_dir));
    options.session.functions = std::move(functions.targets);
    options.session.kprobe_fallback = functions.kprobe_fallback;
  }
  std::optional<TraceWriter> writer;
  if (!options.trace_path.empty()) writer.emplace(options.trace_path);
  // Perfetto interns a stack's function names with its first event: the
  // symbols are read now (modules loaded later stay addresses there).
  std::optional<Kallsyms> ksyms;
  std::optional<PerfettoWriter> perfetto;
  if (!options.perfetto_path.empty()) {
    ksyms = load_host_symbols();
    const Kallsyms* ks = ksyms ? &*ksyms : nullptr;
    perfetto.emplace(options.perfetto_path, kallsyms_namer(ks));
  }

  Foreground foreground;
  BpfSession session(options.session);
  if (writer) writer->set_sources(session.sources(), events_dir);
  if (perfetto) perfetto->set_sources(perfetto_sources(session.sources(), options.session));
  if (options.session.trace)
    session.set_trace_sink([&](const smt_trace_record& r, const std::string& comm) {
      if (writer) writer->write(r, comm);
      if (perfetto) {
        // Counted before the sink runs, so the store holds the frames.
        static const std::vector<uint64_t> none;
        const StackRecord* s = session.store().find(r.event.stack_id);
        perfetto->write(r, comm, s ? s->ips : none, session.user_stacks());
      }
    });
  std::string names;
  for (const auto& source : session.sources()) {
    if (names.size() > 200) {
      names += ", ...";
      break;
    }
    names += (names.empty() ? "" : ", ") + source;
  }
  foreground.check_not_stopped();
  if (options.command)
    spdlog::info("tracing {} while '{}' runs (pid {}; Ctrl-C and SIGTERM go to it)", names,
                 options.command->name(), options.command->pid());
  else if (options.duration_s)
    spdlog::info("tracing {} for {} s (Ctrl-C stops early, SIGUSR1 resets)", names,
                 *options.duration_s);
  else spdlog::info("tracing {} until Ctrl-C or SIGTERM (SIGUSR1 resets)", names);

  HealthWatch health;
  ForegroundBackend backend;
  backend.drain = [&] {
    session.drain(0);
    if (writer) writer->flush();
  };
  backend.wakeup_fd = session.wakeup_fd();
  backend.reset = [&] {
    const SnapshotCut ended = session.reset();
    spdlog::info("reset: epoch {} ended with {} events in {} unique stacks", session.epoch() - 1,
                 ended.snap.stats.events(), ended.store.size());
  };
  backend.each_second = [&] { health.check(session); };
  if (session.has_user_stacks()) {
    backend.user_scan = [&] { session.see_user_stacks(); };
    backend.user_scan_ms = BpfSession::kUserStackScanMs;
  }
  if (recording) recording->start = std::chrono::system_clock::now();
  if (options.command) {
    session.track(static_cast<uint32_t>(options.command->pid()));
    foreground.follow(*options.command);
    options.command->release();
  }
  foreground.run(backend, options.duration_s, options.drain_interval_ms);
  // Detach before the last drain so that the exports are one consistent cut.
  session.detach();
  if (recording) recording->end = std::chrono::system_clock::now();
  session.drain(0);
  session.close_open_blocks();
  if (options.command && session.tracked_lost())
    spdlog::warn("{} processes of '{}' were not followed: more than {} of them at once",
                 session.tracked_lost(), options.command->name(), SMT_MAX_TRACKED);
  if (writer) {
    writer->finish();
    spdlog::info("trace: {} events written to {}", writer->lines(),
                 options.trace_path == "-" ? "stdout" : options.trace_path);
  }
  if (perfetto) {
    perfetto->finish();
    spdlog::info("perfetto: {} samples written to {} (open it in ui.perfetto.dev)",
                 perfetto->samples(), options.perfetto_path);
  }
  return session.snapshot();
}

}  // namespace stackmapd
