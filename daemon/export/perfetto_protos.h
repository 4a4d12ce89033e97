// SPDX-License-Identifier: GPL-2.0
// The field numbers of Perfetto's protos that --perfetto writes
// (daemon/export/perfetto_writer.h), each enum checked against the .proto
// its comment names (github.com/google/perfetto, protos/perfetto/...), at
// ec5d16b. A number here is the format: a wrong one is dropped as unknown
// by trace processor without a word. tests/perfetto/stackmapd_trace.proto
// repeats them for protoc, from the same files.
#pragma once

#include <cstdint>

namespace stackmapd::pf {

// protos/perfetto/trace/trace.proto
enum Trace : uint32_t { kPacket = 1 };

// protos/perfetto/trace/trace_packet.proto
enum TracePacket : uint32_t {
  kProcessTree = 2,
  kTimestamp = 8,
  kTrustedPacketSequenceId = 10,
  kInternedData = 12,
  kSequenceFlags = 13,
  kTimestampClockId = 58,
  kTracePacketDefaults = 59,
  kPerfSample = 66,
  kFirstPacketOnSequence = 87,
};
// protos/perfetto/trace/trace_packet.proto (TracePacket.SequenceFlags)
enum SequenceFlags : uint64_t { kIncrementalStateCleared = 1, kNeedsIncrementalState = 2 };

// protos/perfetto/trace/trace_packet_defaults.proto
enum TracePacketDefaults : uint32_t { kDefaultsTimestampClockId = 58, kPerfSampleDefaults = 12 };

// protos/perfetto/trace/interned_data/interned_data.proto
enum InternedData : uint32_t {
  kFunctionNames = 5,
  kFrames = 6,
  kCallstacks = 7,
  kBuildIds = 16,
  kMappingPaths = 17,
  kMappings = 19,
};

// protos/perfetto/trace/profiling/profile_common.proto (InternedString)
enum InternedString : uint32_t { kIid = 1, kStr = 2 };
// protos/perfetto/trace/profiling/profile_common.proto (Frame)
enum Frame : uint32_t { kFrameIid = 1, kFunctionNameId = 2, kMappingId = 3, kRelPc = 4 };
// protos/perfetto/trace/profiling/profile_common.proto (Mapping)
// The kernel's mapping leaves start (4), end (5) and exact_offset (8) unset:
// 0, as trace processor's test for traced_perf's kernel mapping wants them.
enum Mapping : uint32_t { kMappingIid = 1, kBuildId = 2, kPathStringIds = 7 };
// protos/perfetto/trace/profiling/profile_common.proto (Callstack)
enum Callstack : uint32_t { kCallstackIid = 1, kFrameIds = 2 };

// protos/perfetto/trace/profiling/profile_packet.proto (PerfSample)
enum PerfSample : uint32_t {
  kCpu = 1,
  kPid = 2,
  kTid = 3,
  kSampleCallstackIid = 4,
  kCpuMode = 5,
  kTimebaseCount = 6,
  kFollowerCounts = 7,
};
// protos/perfetto/trace/profiling/profile_packet.proto (Profiling.CpuMode)
enum CpuMode : uint64_t { kCpuModeKernel = 1, kCpuModeUser = 2 };
// protos/perfetto/trace/profiling/profile_packet.proto (PerfSampleDefaults)
enum PerfSampleDefaults : uint32_t { kTimebase = 1, kFollowers = 4 };

// protos/perfetto/common/perf_events.proto (PerfEvents.Timebase)
enum Timebase : uint32_t {
  kPeriod = 1,
  kFrequency = 2,
  kTracepoint = 3,
  kCounter = 4,
  kTimebaseName = 10,
};
// protos/perfetto/common/perf_events.proto (PerfEvents.Tracepoint)
enum Tracepoint : uint32_t { kTracepointName = 1 };
// protos/perfetto/common/perf_events.proto (PerfEvents.Counter)
enum Counter : uint64_t { kSwCpuClock = 1 };
// protos/perfetto/common/perf_events.proto (FollowerEvent)
enum FollowerEvent : uint32_t { kFollowerName = 4 };

// protos/perfetto/trace/ps/process_tree.proto (ProcessTree)
enum ProcessTree : uint32_t { kProcesses = 1, kThreads = 2 };
// protos/perfetto/trace/ps/process_tree.proto (ProcessTree.Process)
enum Process : uint32_t {
  kProcessPid = 1,
  kPpid = 2,
  kCmdline = 3,
  kIsKthread = 8,
  kCmdlineIsComm = 9,
};
// protos/perfetto/trace/ps/process_tree.proto (ProcessTree.Thread)
enum Thread : uint32_t { kThreadTid = 1, kThreadName = 2, kTgid = 3 };

// protos/perfetto/common/builtin_clock.proto (BuiltinClock)
enum BuiltinClock : uint64_t { kClockBoottime = 6 };

}  // namespace stackmapd::pf
