// SPDX-License-Identifier: GPL-2.0
// A foreground session on the tracefs path (daemon/tracefs/tracefs_session.h),
// the counterpart of trace() on the BPF path (daemon/run/tracer.h). Apart
// from tracer.h so that a build without the BPF skeleton
// (tests/kernel/build-static.sh) links it.
#pragma once

#include <optional>
#include <vector>

#include "daemon/model/snapshot.h"
#include "daemon/tracefs/tracefs_session.h"

namespace stackmapd {

// Traces `events` (those whose records pass `filter`, an ftrace event filter,
// when it is not empty) until `duration_s` passes or SIGINT/SIGTERM arrives,
// draining every `drain_interval_ms`, then stops the events, drains what is
// left and returns the final Snapshot.
Snapshot trace_tracefs(const std::vector<Tracepoint>& events, const std::string& filter,
                       std::optional<double> duration_s, int drain_interval_ms = 100);

}  // namespace stackmapd
