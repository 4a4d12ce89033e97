// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/otlp.h"

#include <algorithm>
#include <map>
#include <optional>

#include "daemon/export/otlp_request.h"
#include "daemon/sys/error.h"

namespace stackmapd {

using otlp_detail::kOtlpRequestOverhead;
using otlp_detail::OtlpEntry;
using otlp_detail::OtlpRequest;

OtlpResources parse_otlp_resources(const std::string& word) {
  if (word == "auto") return OtlpResources::automatic;
  if (word == "host") return OtlpResources::host;
  if (word == "process") return OtlpResources::process;
  throw Error("otlp-resources '" + word + "' is not one of auto, host, process");
}

std::string service_of_unit(std::string_view unit) {
  if (unit.ends_with(".service")) unit.remove_suffix(std::string_view(".service").size());
  return std::string(unit);
}

std::string service_of_cgroup(std::string_view path) {
  for (size_t end = path.size(); end > 0;) {
    const size_t slash = path.rfind('/', end - 1);
    const size_t start = slash == std::string_view::npos ? 0 : slash + 1;
    const std::string_view c = path.substr(start, end - start);
    if (c.size() > std::string_view(".service").size() && c.ends_with(".service"))
      return service_of_unit(c);
    if (slash == std::string_view::npos) break;
    end = slash;
  }
  return "";
}

namespace {

// The resource of one key: what of it says who ran.
OtlpResource resource_of(const KeySpec& keys, const KeyValues& k, bool process) {
  OtlpResource r;
  if (keys.has(KeyField::cgroup)) {
    r.container = container_of_cgroup(k.cgroup);
    if (process) r.service = service_of_cgroup(k.cgroup);
  }
  if (!process) return r;
  // Pid 0: the pairs of exited processes folded into their comm (or the idle task).
  if (keys.has(KeyField::pid) && k.pid) r.pid = k.pid;
  if (keys.has(KeyField::comm)) r.executable = k.comm;
  if (keys.has(KeyField::unit) && !k.unit.empty()) r.service = service_of_unit(k.unit);
  return r;
}

}  // namespace

std::vector<std::string> encode_otlp(const Snapshot& snap, const FrameNames& names,
                                     const OtlpOptions& opt) {
  // The samples, grouped by resource: its own, or the host's (0).
  const bool process = opt.resources == OtlpResources::process ||
                       (opt.resources == OtlpResources::automatic &&
                        (snap.keys.has(KeyField::pid) || snap.keys.has(KeyField::unit) ||
                         snap.keys.has(KeyField::cgroup)));
  std::vector<OtlpResource> resources{{}};
  std::map<OtlpResource, size_t> resource_of_key{{{}, 0}};
  std::vector<OtlpEntry> entries;
  const std::vector<Callstack>& cs = callstacks(snap);
  for (uint32_t i = 0; i < cs.size(); ++i) {
    const Callstack& c = cs[i];
    if (!snap.keys_requested || c.keys.empty()) {
      if (c.count) entries.push_back({0, i, nullptr, c.count, c.weight});
      continue;
    }
    for (uint32_t key : c.keys) {
      const KeyCount& k = snap.stacks[c.stack].by[key];
      if (!k.count) continue;
      size_t resource = 0;
      if (!k.other) {
        auto [it, added] =
            resource_of_key.try_emplace(resource_of(snap.keys, k.key, process), resources.size());
        if (added) resources.push_back(it->first);
        resource = it->second;
      }
      entries.push_back({resource, i, &k, k.count, k.weight});
    }
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const OtlpEntry& a, const OtlpEntry& b) { return a.resource < b.resource; });

  const size_t budget = opt.max_request_bytes > kOtlpRequestOverhead
                            ? opt.max_request_bytes - kOtlpRequestOverhead
                            : 0;
  std::vector<std::string> requests;
  std::optional<OtlpRequest> req;
  for (const OtlpEntry& e : entries) {
    if (!req) req.emplace(snap, names, opt);
    if (!req->empty() && req->size() + req->cost(e, resources) > budget) {
      requests.push_back(req->finish());
      req.emplace(snap, names, opt);
    }
    req->add(e, resources);
  }
  if (req && !req->empty()) requests.push_back(req->finish());
  return requests;
}

}  // namespace stackmapd
