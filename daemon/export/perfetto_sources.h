// SPDX-License-Identifier: GPL-2.0
// --perfetto: what a sample of each source of the session is, as the trace
// tells trace processor (PerfSampleDefaults, daemon/export/perfetto_writer.h):
// the timebase that names the source's perf session, and what each of its
// events adds to PerfSample.timebase_count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/export/proto_wire.h"
#include "daemon/source/session_config.h"

namespace stackmapd {

struct PerfettoSource {
  enum class Kind { tracepoint, function, profile, offcpu };
  Kind kind = Kind::function;
  std::string name;         // the session's name of it: "sched:sched_switch", "vfs_read", ...
  uint32_t profile_hz = 0;  // profile
  std::string sum_field;    // tracepoint: --sum FIELD's, else empty
  bool operator==(const PerfettoSource&) const = default;
};

// The session's sources (BpfSession::sources(): names by index) as `config`
// made them.
std::vector<PerfettoSource> perfetto_sources(const std::vector<std::string>& names,
                                             const SessionConfig& config);

// The PerfSampleDefaults message of the source's samples: its timebase
// (-e CAT:NAME: tracepoint CAT:NAME, period 1; --profile HZ: cpu-clock at
// HZ; -f FUNCTION: named FUNCTION, period 1; --offcpu: named "offcpu"),
// and with --sum a follower named after the field.
ProtoWriter perf_sample_defaults(const PerfettoSource& src);

// What one event adds to its CPU's timebase_count: 1 for period 1, 1e9/HZ ns
// for cpu-clock (the period the kernel makes of its frequency); 0: the
// event's weight (--offcpu: ns off the CPU).
uint64_t timebase_step(const PerfettoSource& src);

}  // namespace stackmapd
