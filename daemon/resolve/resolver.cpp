// SPDX-License-Identifier: GPL-2.0
#include "daemon/resolve/resolver.h"

namespace stackmapd {

Resolver::Resolver(StringTable& strings, const KeySpec& keys,
                   std::unique_ptr<UserStackCollector> user_stacks)
    : strings_(strings),
      user_(std::move(user_stacks)),
      unnamed_(strings.intern("[unnamed]")),
      needs_comm_(keys.has(KeyField::comm)),
      needs_cgroup_(keys.has(KeyField::cgroup)),
      needs_unit_(keys.has(KeyField::unit)),
      hist_(keys.has(KeyField::bucket)) {
  if (needs_cgroup_ || needs_unit_) cgroups_.emplace();
}

void Resolver::name(uint32_t name, std::string_view comm) {
  names_[name] = strings_.intern(comm);
  last_name_ = {};
}

const std::string& Resolver::comm_of(uint32_t name) const {
  auto it = names_.find(name);
  return strings_.str(it == names_.end() ? unnamed_ : it->second);
}

// Cgroups are named when first seen: by the end of the session one that
// was removed meanwhile could no longer be.
uint32_t Resolver::new_cgroup(uint64_t id, bool unit) {
  auto it = cgroup_strings_.find(id);
  if (it != cgroup_strings_.end()) {
    last_cgroup_ = {id, &it->second};  // node-based: stays valid as the map grows
    return unit ? it->second.second : it->second.first;
  }
  const std::string path = cgroups_->path(id);
  const std::pair<uint32_t, uint32_t> ids(strings_.intern(path),
                                          strings_.intern(unit_of_cgroup(path)));
  // A cgroup made since the last walk is named for good by a later one.
  if (!cgroups_->provisional(id)) cgroup_strings_.emplace(id, ids);
  return unit ? ids.second : ids.first;
}

}  // namespace stackmapd
