// SPDX-License-Identifier: GPL-2.0
// Which container a cgroup belongs to, read from its path alone: what the
// OpenTelemetry export (daemon/export/otlp.h) writes as container.id and
// k8s.pod.uid, so that a host's profile splits by container.
#pragma once

#include <compare>
#include <string>
#include <string_view>

namespace stackmapd {

// A container's identity as its cgroup path shows it: docker
// (/docker/<id>, docker-<id>.scope), containerd/cri (cri-containerd-<id>.scope),
// CRI-O (crio-<id>.scope) and kubepods (/kubepods/burstable/pod<uid>/<id>,
// kubepods-burstable-pod<uid>.slice/...). An id is 64 hex digits; a pod uid
// is written with dashes. Both empty: not a container's.
struct ContainerIdentity {
  std::string container_id, pod_uid;
  bool operator==(const ContainerIdentity&) const = default;
  auto operator<=>(const ContainerIdentity&) const = default;
};
ContainerIdentity container_of_cgroup(std::string_view path);

}  // namespace stackmapd
