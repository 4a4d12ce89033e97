// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/tracefs_trace.h"

#include <spdlog/spdlog.h>

#include "daemon/run/foreground.h"

namespace stackmapd {

Snapshot trace_tracefs(const std::vector<Tracepoint>& events, const std::string& filter,
                       std::optional<double> duration_s, int drain_interval_ms) {
  Foreground foreground;
  TracefsSession session(events, "", "stackmapd", filter);
  std::string names;
  for (const auto& tp : events) names += (names.empty() ? "" : ", ") + tp.str();
  foreground.check_not_stopped();
  spdlog::info("tracing {} through tracefs ({}){}", names, session.dir(),
               duration_s ? fmt::format(" for {} s", *duration_s) : std::string(" until Ctrl-C"));
  // trace_pipe wakes pollers only past buffer_percent: the timer drains.
  ForegroundBackend backend;
  backend.drain = [&] { session.drain(0); };
  foreground.run(backend, duration_s, drain_interval_ms);
  // Stop the events before the last drain, so that the ids read and the
  // map's counts are one consistent cut.
  session.detach();
  session.drain(0);
  Snapshot snap = session.snapshot();
  if (snap.stats.bad_records)
    spdlog::warn("{} stack ids read from trace_pipe are not in stack_map_bin",
                 snap.stats.bad_records);
  return snap;
}

}  // namespace stackmapd
