// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/otlp.h"

#include <algorithm>
#include <map>
#include <optional>

#include "daemon/export/otlp_request.h"

namespace stackmapd {

using otlp_detail::kOtlpRequestOverhead;
using otlp_detail::OtlpEntry;
using otlp_detail::OtlpRequest;

std::vector<std::string> encode_otlp(const Snapshot& snap, const FrameNames& names,
                                     const OtlpOptions& opt) {
  // The samples, grouped by resource: a container's, or the host's (0).
  std::vector<ContainerIdentity> resources{{}};
  std::map<ContainerIdentity, size_t> resource_of{{{}, 0}};
  const bool by_cgroup = snap.keys.has(KeyField::cgroup);
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
      if (by_cgroup && !k.other) {
        auto [it, added] =
            resource_of.try_emplace(container_of_cgroup(k.key.cgroup), resources.size());
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
