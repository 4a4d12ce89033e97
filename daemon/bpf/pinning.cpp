// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/pinning.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace fs = std::filesystem;

void prepare_pin_dir(const std::string& dir) {
  const fs::path root = fs::path(dir).parent_path();
  struct statfs st;
  // Containers and minimal systems may leave bpffs unmounted.
  if (statfs(root.c_str(), &st) == 0 && st.f_type != BPF_FS_MAGIC)
    mount("bpf", root.c_str(), "bpf", 0, nullptr);
  if (statfs(root.c_str(), &st) != 0 || st.f_type != BPF_FS_MAGIC)
    throw Error("cannot pin the table: " + root.string() +
                " is not a bpf filesystem: mount it with 'mount -t bpf bpf " + root.string() +
                "' or set pin-dir to a directory on bpffs");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create pin directory " + dir + ": " + ec.message());
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
