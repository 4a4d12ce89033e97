// SPDX-License-Identifier: GPL-2.0
// Names for the cgroup v2 ids events carry (--by cgroup, --by unit).
// bpf_get_current_cgroup_id() returns the cgroup's kernfs id, which on 64-bit
// kernels is the inode number of its directory on the cgroup2 mount (checked
// on 6.18: st_ino == the id bpftrace's `cgroup` reports). Paths are relative
// to that mount's root: "/" is the root cgroup (or, in a cgroup namespace,
// the namespace's root).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace stackmapd {

class CgroupNames {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  static constexpr size_t kMaxPaths = 16384;  // ids cached; past it the cache starts over

  // Walks `root` (empty: the cgroup2 mount in /proc/self/mountinfo) once;
  // throws Error if it cannot be read. `now` is for tests.
  explicit CgroupNames(std::string root = {}, Clock now = std::chrono::steady_clock::now);

  // The cgroup's path, valid until the next call. A miss re-walks the tree,
  // at most once a second; an id that walk does not find (a cgroup removed
  // before it was named) is "cgroup:<id>" from then on. A miss within the
  // second is "cgroup:<id>" for now only (provisional): a caller that caches
  // names must not keep that one.
  const std::string& path(uint64_t id);
  bool provisional(uint64_t id) const { return !paths_.contains(id); }
  const std::string& root() const { return root_; }

  // The first cgroup2 mount point in a mountinfo file; throws Error if none.
  static std::string cgroup2_mount(const std::string& mountinfo = "/proc/self/mountinfo");

 private:
  void walk();

  std::string root_;
  Clock now_;
  std::chrono::steady_clock::time_point last_walk_;
  std::unordered_map<uint64_t, std::string> paths_;
  std::string pending_;  // a miss within a second of the last walk, named by id for now
};

// The systemd unit a cgroup path belongs to, as systemd's cg_path_get_unit()
// decides: the first component after the leading slices, if it is a unit
// name ("/system.slice/ssh.service" -> "ssh.service",
// "/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope" ->
// "user@1000.service"); with only slices, the innermost slice; "/" ->
// "-.slice"; a path outside systemd's tree ("/docker/abc") -> "".
std::string unit_of_cgroup(std::string_view path);

}  // namespace stackmapd
