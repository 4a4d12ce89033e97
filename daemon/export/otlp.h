// SPDX-License-Identifier: GPL-2.0
// OpenTelemetry profiles (opentelemetry-proto, profiles/v1development): what
// Pyroscope 2.0 and an OpenTelemetry collector ingest, as a --otlp file or
// pushed by the daemon (daemon/run/otlp_sender.h). Field numbers: otlp_protos.h.
//
// Data flow: Snapshot + its FrameNames -> encode_otlp -> one or more
// ExportProfilesServiceRequest messages, each at most max_request_bytes,
// each with its own ProfilesDictionary:
//
//   ResourceProfiles  per process (OtlpResources::process): one per value of
//                     the keys that say who ran (process.pid, and
//                     process.executable.name from --by comm; service.name
//                     from the systemd unit of --by unit or of the cgroup
//                     path; container.id, k8s.pod.uid from a container's
//                     cgroup path); else (host) one per container and one
//                     for the rest. Always host.name; the rest, and the
//                     host's, service.name = stackmapd.
//   Profile           one per value: events (or samples, --profile) count,
//                     and the --sum field / --offcpu nanoseconds; a period
//                     type Pyroscope names the profile by (profile_name()).
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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/export/frame_names.h"
#include "daemon/model/container_id.h"
#include "daemon/model/snapshot.h"

namespace stackmapd {

// What the receivers take in one request (the collector's default
// max_request_body_size is larger; Pyroscope's limit is 4 MiB).
inline constexpr size_t kOtlpMaxRequestBytes = 4u << 20;

// What a ResourceProfiles stands for: Pyroscope lists one service per
// service.name (or per process.executable.name without one), so a host's
// processes are each a service only as resources of their own.
enum class OtlpResources : uint8_t {
  automatic,  // process when the snapshot is split by pid, unit or cgroup; else host
  host,
  process,
};
// "auto", "host" or "process"; anything else throws one line naming them.
OtlpResources parse_otlp_resources(const std::string& word);

struct OtlpOptions {
  uint32_t profile_hz = 0;     // --profile HZ: samples/count, period 1e9/HZ ns
  int64_t time_nanos = 0;      // start of the recording, CLOCK_REALTIME; 0: not written
  int64_t duration_nanos = 0;  // its length; 0: not written
  std::string host_name;       // host.name; empty: not written
  OtlpResources resources = OtlpResources::automatic;
  size_t max_request_bytes = kOtlpMaxRequestBytes;
};

// The requests, serialized; none when the snapshot has no sample. A request
// is also a valid ProfilesData message (same fields). A single callstack
// never comes near the limit (its frames are capped at 127 + 127).
// Who a resource is: empty for the host's.
struct OtlpResource {
  std::optional<uint32_t> pid;
  std::string executable;  // --by comm's value
  std::string service;     // from a systemd unit; empty: none known
  ContainerIdentity container;
  auto operator<=>(const OtlpResource&) const = default;
};
// The service a systemd unit names: "nginx.service" -> "nginx"; another
// unit (a scope, a slice) by its whole name; "" for none.
std::string service_of_unit(std::string_view unit);
// The service of the last "*.service" component of a cgroup path
// ("/system.slice/nginx.service" -> "nginx"); "" when there is none.
std::string service_of_cgroup(std::string_view path);

std::vector<std::string> encode_otlp(const Snapshot& snap, const FrameNames& names,
                                     const OtlpOptions& opt);

}  // namespace stackmapd
