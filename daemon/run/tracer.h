// SPDX-License-Identifier: GPL-2.0
// A foreground tracing session: load, attach, drain on a timer until the
// duration passes or SIGINT/SIGTERM arrives, then hand back the final state.
#pragma once

#include <chrono>
#include <optional>

#include "daemon/bpf/bpf_session.h"
#include "daemon/export/exports.h"

namespace stackmapd {

class CommandChild;

struct TraceOptions {
  SessionConfig session;
  std::vector<std::string> function_patterns;  // -f, resolved against tracefs
  std::string trace_path;                      // --trace: "-" for stdout; empty: none
  std::string perfetto_path;                   // --perfetto: a Perfetto trace; empty: none
  std::optional<double> duration_s;            // none: until SIGINT/SIGTERM
  // -- CMD (session.follow_command): followed and released once the session
  // is attached; its exit ends the session. Null: none.
  CommandChild* command = nullptr;
  // The BPF side submits ids without waking the daemon (a wakeup costs more
  // than capturing the stack), so the daemon drains on this timer.
  int drain_interval_ms = 100;
};

// When the programs were attached and detached: what the session recorded,
// without loading before and symbolizing after (pprof's duration).
struct Recording {
  std::chrono::system_clock::time_point start, end;
};

// Runs the preflight checks (privileges, BTF, sources) and the session;
// `recording`, when given, gets its times.
Snapshot trace(TraceOptions options, Recording* recording = nullptr);

}  // namespace stackmapd
