// SPDX-License-Identifier: GPL-2.0
// OpenTelemetry profiles (opentelemetry-proto, profiles/v1development): what
// Pyroscope 2.0 and an OpenTelemetry collector ingest, as a --otlp file or
// pushed by the daemon (daemon/run/otlp_sender.h). Field numbers: otlp_protos.h.
//
// Data flow: Snapshot + its FrameNames -> encode_otlp -> one or more
// ExportProfilesServiceRequest messages, each at most max_request_bytes,
// each with its own ProfilesDictionary:
//
//   ResourceProfiles  one per container (container.id, k8s.pod.uid from the
//                     cgroup path of --by cgroup's keys) and one for the rest;
//                     host.name, service.name = stackmapd.
//   Profile           one per value: events (or samples, --profile) count,
//                     and the --sum field / --offcpu nanoseconds.
//   Sample            one per (callstack, key): its stack, the --by keys as
//                     attributes, its value.
//   stack_table       each of the model's callstacks once per request, its
//                     locations leaf first: kernel frames, then user frames.
//   location_table    each of the model's frames once per request: a kernel
//                     ip in the kernel's mapping, a user frame's file offset
//                     in its binary's mapping (build id as the
//                     process.executable.build_id.gnu attribute).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/export/frame_names.h"
#include "daemon/model/container_id.h"
#include "daemon/model/snapshot.h"

namespace stackmapd {

// What the receivers take in one request (the collector's default
// max_request_body_size is larger; Pyroscope's limit is 4 MiB).
inline constexpr size_t kOtlpMaxRequestBytes = 4u << 20;

struct OtlpOptions {
  uint32_t profile_hz = 0;     // --profile HZ: samples/count, period 1e9/HZ ns
  int64_t time_nanos = 0;      // start of the recording, CLOCK_REALTIME; 0: not written
  int64_t duration_nanos = 0;  // its length; 0: not written
  std::string host_name;       // host.name; empty: not written
  size_t max_request_bytes = kOtlpMaxRequestBytes;
};

// The requests, serialized; none when the snapshot has no sample. A request
// is also a valid ProfilesData message (same fields). A single callstack
// never comes near the limit (its frames are capped at 127 + 127).
std::vector<std::string> encode_otlp(const Snapshot& snap, const FrameNames& names,
                                     const OtlpOptions& opt);

}  // namespace stackmapd
