// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/container_id.h"

#include <algorithm>

namespace stackmapd {

namespace {

bool all_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  });
}

}  // namespace

ContainerIdentity container_of_cgroup(std::string_view path) {
  ContainerIdentity id;
  bool kubepods = false;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view c = path.substr(start, end - start);
    start = end + 1;
    // systemd's unit names: "docker-<id>.scope", "kubepods-burstable-pod<uid>.slice"
    for (std::string_view suffix : {".scope", ".slice"})
      if (c.ends_with(suffix)) c.remove_suffix(suffix.size());
    if (c.starts_with("kubepods")) {
      kubepods = true;
      const size_t pod = c.rfind("-pod");
      if (pod != std::string_view::npos) c = c.substr(pod + 1);
    }
    if (kubepods && c.starts_with("pod") && c.size() == 3 + 36) {
      std::string uid(c.substr(3));
      std::replace(uid.begin(), uid.end(), '_', '-');  // systemd escapes '-' in a unit name
      id.pod_uid = uid;
      continue;
    }
    for (std::string_view prefix : {"docker-", "cri-containerd-", "crio-"})
      if (c.starts_with(prefix)) c.remove_prefix(prefix.size());
    if (c.size() == 64 && all_hex(c)) id.container_id = std::string(c);
  }
  if (id.container_id.empty()) id.pod_uid.clear();  // a pod's own cgroup: no container's
  return id;
}

}  // namespace stackmapd
