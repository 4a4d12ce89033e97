// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "daemon/sys/error.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

namespace {

using namespace std::chrono_literals;

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_octal(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    bool octal = s[i] == '\\' && i + 3 < s.size() &&
                 std::all_of(s.begin() + i + 1, s.begin() + i + 4,
                             [](char c) { return c >= '0' && c <= '7'; });
    if (octal) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Adds the directory `fd` (whose path is `rel`) and everything below it,
// while there is room. Cgroups removed meanwhile are skipped.
void walk_dir(int fd, const std::string& rel, std::unordered_map<uint64_t, std::string>& out) {
  struct stat st;
  if (fstat(fd, &st) != 0 || out.size() >= CgroupNames::kMaxPaths) return;
  out.insert_or_assign(st.st_ino, rel.empty() ? "/" : rel);
  DIR* dir = fdopendir(dup(fd));
  if (!dir) return;
  while (dirent* e = readdir(dir)) {
    if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    UniqueFd child(openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (child) walk_dir(child.get(), rel + "/" + e->d_name, out);
  }
  closedir(dir);
}

// systemd's unit_name_is_valid() for plain and instance names: a known type
// suffix, a prefix of [A-Za-z0-9:_.\\-] and at most one '@' with an instance.
bool is_unit_name(std::string_view n) {
  static constexpr std::array<std::string_view, 11> kTypes = {
      "service", "socket", "target", "device", "mount", "automount",
      "swap",    "timer",  "path",   "slice",  "scope"};
  size_t dot = n.rfind('.');
  if (dot == std::string_view::npos || dot == 0 || n.size() >= 256) return false;
  std::string_view type = n.substr(dot + 1);
  if (std::find(kTypes.begin(), kTypes.end(), type) == kTypes.end()) return false;
  size_t at = std::string_view::npos;
  for (size_t i = 0; i < dot; ++i) {
    char c = n[i];
    if (c == '@' && at == std::string_view::npos) at = i;
    if (!std::isalnum(static_cast<unsigned char>(c)) && !std::strchr(":-_.\\@", c)) return false;
  }
  return at != 0 && (at == std::string_view::npos || dot > at + 1);
}

bool ends_with_slice(std::string_view n) { return n.ends_with(".slice"); }

}  // namespace

std::string CgroupNames::cgroup2_mount(const std::string& mountinfo) {
  std::ifstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream tail(line.substr(sep + 3)), head(line.substr(0, sep));
    std::string fstype, skip, point;
    tail >> fstype;
    if (fstype != "cgroup2") continue;
    head >> skip >> skip >> skip >> skip >> point;
    if (!point.empty()) return unescape_octal(point);
  }
  throw Error(
      "no cgroup2 mount in " + mountinfo +
      ": mount one (mount -t cgroup2 none /sys/fs/cgroup) or drop cgroup and unit from --by");
}

CgroupNames::CgroupNames(std::string root, Clock now)
    : root_(root.empty() ? cgroup2_mount() : std::move(root)), now_(std::move(now)) {
  UniqueFd fd(open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd)
    throw Error("cannot read the cgroup tree " + root_ + ": " + std::strerror(errno) +
                ": run as root on a kernel with cgroup v2");
  walk();
}

void CgroupNames::walk() {
  last_walk_ = now_();
  if (paths_.size() >= kMaxPaths) paths_.clear();  // keeps the cgroups alive now, up to the bound
  UniqueFd fd(open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) walk_dir(fd.get(), "", paths_);
}

const std::string& CgroupNames::path(uint64_t id) {
  auto it = paths_.find(id);
  if (it != paths_.end()) return it->second;
  std::string unnamed = "cgroup:" + std::to_string(id);
  if (now_() - last_walk_ < 1s) return pending_ = std::move(unnamed);
  walk();
  // Not there after the event that named it: removed, for good.
  return paths_.try_emplace(id, std::move(unnamed)).first->second;
}

std::string unit_of_cgroup(std::string_view path) {
  std::string_view slice;
  while (true) {
    size_t b = path.find_first_not_of('/');
    if (b == std::string_view::npos) break;
    path.remove_prefix(b);
    std::string_view part = path.substr(0, path.find('/'));
    path.remove_prefix(part.size());
    if (part.starts_with('_')) part.remove_prefix(1);  // systemd's cg_escape() prefix
    if (!is_unit_name(part)) return "";
    if (!ends_with_slice(part)) return std::string(part);
    slice = part;
  }
  return slice.empty() ? "-.slice" : std::string(slice);
}

}  // namespace stackmapd
