// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/pinning.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace fs = std::filesystem;

namespace {
constexpr const char* kBpffsRoot = "/sys/fs/bpf";
}  // namespace

bool prepare_pin_dir(const std::string& dir) {
  const fs::path root = fs::path(dir).parent_path();
  struct statfs st;
  // Containers and minimal systems may leave bpffs unmounted. 0700 as systemd
  // does: with the default 1777 any user could remove our pins, or take
  // the names of the next start's (mkdir slots).
  if (root == kBpffsRoot && statfs(root.c_str(), &st) == 0 && st.f_type != BPF_FS_MAGIC &&
      mount("bpf", root.c_str(), "bpf", 0, "mode=0700") != 0)
    throw Error("cannot mount bpffs on " + root.string() + ": " + std::strerror(errno) +
                ": mount it with 'mount -t bpf -o mode=0700 bpf " + root.string() +
                "' or set pin-dir \"\"");
  if (statfs(root.c_str(), &st) != 0 || st.f_type != BPF_FS_MAGIC)
    throw Error("cannot pin the table: " + root.string() +
                " is not a bpf filesystem: set pin-dir to a directory on bpffs (under " +
                kBpffsRoot + "), or mount bpffs there first ('mount -t bpf -o mode=0700 bpf " +
                root.string() + "')");
  if (mkdir(dir.c_str(), 0700) == 0) return true;
  if (errno != EEXIST)
    throw Error("cannot create pin directory " + dir + ": " + std::strerror(errno));
  return false;
}

PinDirLock::PinDirLock(const std::string& dir) : dir_(dir), made_(prepare_pin_dir(dir)) {
  fd_.reset(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd_ || flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    release();
    if (err == EWOULDBLOCK)
      throw Error("another stackmapd already uses the table pinned in " + dir +
                  ": stop it first, or give this one another pin-dir");
    throw Error("cannot lock pin directory " + dir + ": " + std::strerror(err));
  }
}

PinDirLock::~PinDirLock() { release(); }

PinDirLock::PinDirLock(PinDirLock&& o) noexcept
    : dir_(std::move(o.dir_)), made_(std::exchange(o.made_, false)), fd_(std::move(o.fd_)) {}

PinDirLock& PinDirLock::operator=(PinDirLock&& o) noexcept {
  if (this != &o) {
    release();
    dir_ = std::move(o.dir_);
    made_ = std::exchange(o.made_, false);
    fd_ = std::move(o.fd_);
  }
  return *this;
}

void PinDirLock::release() noexcept {
  // Before unlocking: a newcomer never locks a directory that then vanishes.
  if (made_) rmdir(dir_.c_str());  // only when empty: pins kept stay
  made_ = false;
  fd_.reset();
}

std::string pin_mismatch(const std::string& dir, const std::vector<PinnedMap>& maps) {
  for (const auto& [name, map] : maps) {
    const std::string path = dir + "/" + name;
    int fd = bpf_obj_get(path.c_str());
    if (fd < 0) return path + " is missing (" + std::strerror(errno) + ")";
    bpf_map_info info = {};
    uint32_t len = sizeof(info);
    int err = bpf_obj_get_info_by_fd(fd, &info, &len);
    close(fd);
    if (err) return path + " is not a BPF map";
    if (info.type != static_cast<uint32_t>(bpf_map__type(map)) ||
        info.key_size != bpf_map__key_size(map) || info.value_size != bpf_map__value_size(map) ||
        info.max_entries != bpf_map__max_entries(map) || info.map_flags != bpf_map__map_flags(map))
      return path + " has another layout (type " + std::to_string(info.type) + ", value size " +
             std::to_string(info.value_size) + ", " + std::to_string(info.max_entries) +
             " entries; want " + std::to_string(bpf_map__value_size(map)) + " bytes, " +
             std::to_string(bpf_map__max_entries(map)) + " entries)";
  }
  return "";
}

bool any_pins(const std::string& dir, const std::vector<std::string>& names) {
  std::error_code ec;
  for (const auto& name : names)
    if (fs::exists(dir + "/" + name, ec)) return true;
  return false;
}

void remove_pins(const std::string& dir, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    const std::string path = dir + "/" + name;
    if (unlink(path.c_str()) != 0 && errno != ENOENT)
      throw Error("cannot remove pinned map " + path + ": " + std::strerror(errno));
  }
  rmdir(dir.c_str());  // only when empty: another tool's pins stay
}

}  // namespace stackmapd
