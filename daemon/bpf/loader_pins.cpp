// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/loader_pins.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "daemon/sys/error.h"
#include "stackmapd/abi.h"
#include "stackmapd/bpfloader_abi.h"

namespace stackmapd {

namespace {

constexpr const char* kObject = "stackmapd";

std::string load_hint(const std::string& dir) {
  return "load stackmapd.o (share/stackmapd/bpfloader/{r,s}/, built with -DSMT_BPFLOADER) "
         "with bpfloader or another loader that pins into " +
         dir + " first";
}

bool power_of_two(uint32_t v) { return v && !(v & (v - 1)); }

// flock() of the pin directory, shared by every LoaderPins of this process.
std::shared_ptr<UniqueFd> lock_dir(const std::string& dir) {
  static std::mutex mu;
  static std::map<std::pair<dev_t, ino_t>, std::weak_ptr<UniqueFd>> held;
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st;
  if (!fd || fstat(fd.get(), &st) != 0)
    throw Error("--pinned " + dir + ": " + std::strerror(errno) + ": " + load_hint(dir));
  std::lock_guard<std::mutex> guard(mu);
  std::weak_ptr<UniqueFd>& slot = held[{st.st_dev, st.st_ino}];
  if (auto lock = slot.lock()) return lock;
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0)
    throw Error("another stackmapd uses the programs pinned in " + dir +
                ": stop it first (one reader per table)");
  auto lock = std::make_shared<UniqueFd>(std::move(fd));
  slot = lock;
  return lock;
}

}  // namespace

std::string LoaderPins::map_pin(const std::string& map) {
  return std::string("map_") + kObject + "_" + map;
}

std::string LoaderPins::tracepoint_section(uint32_t slot) {
  return "tracepoint/stackmapd_" + std::to_string(slot);
}

std::string LoaderPins::prog_pin(const std::string& section) {
  std::string name = std::string("prog_") + kObject + "_" + section;
  for (char& c : name)
    if (c == '/') c = '_';
  return name;
}

LoaderPins::LoaderPins(const std::string& dir) : dir_(dir), lock_(lock_dir(dir)) {
  pool = open_map("pool", BPF_MAP_TYPE_ARRAY, sizeof(smt_elt), BPF_F_MMAPABLE);  // gives bits
  slots = open_map("slots", BPF_MAP_TYPE_ARRAY, sizeof(smt_slot), BPF_F_MMAPABLE);
  batches = open_map("batches", BPF_MAP_TYPE_ARRAY, sizeof(smt_batch), BPF_F_MMAPABLE);
  ids = open_map("ids", BPF_MAP_TYPE_RINGBUF, 0, 0);
  settings = open_map("settings", BPF_MAP_TYPE_ARRAY, sizeof(smt_config), 0);
  globals = open_map("globals", BPF_MAP_TYPE_ARRAY, sizeof(smt_globals), BPF_F_MMAPABLE);
  names = open_map("names", BPF_MAP_TYPE_HASH, sizeof(uint32_t), 0);
  cookies = open_map("cookies", BPF_MAP_TYPE_HASH, sizeof(uint64_t), 0);
  for (uint32_t slot = 0; slot < SMT_LOADER_TRACEPOINTS; ++slot) {
    const int fd = open_prog(tracepoint_section(slot), BPF_PROG_TYPE_TRACEPOINT, slot == 0);
    if (fd < 0) break;
    tracepoint_progs.push_back(fd);
  }
  profile_prog = open_prog("perf_event/stackmapd", BPF_PROG_TYPE_PERF_EVENT, false);
}

LoaderPins::~LoaderPins() = default;

int LoaderPins::open_map(const std::string& name, uint32_t type, uint32_t value_size,
                         uint32_t flags) {
  const std::string path = dir_ + "/" + map_pin(name);
  int fd = bpf_obj_get(path.c_str());
  if (fd < 0)
    throw Error("--pinned: " + path + " is missing (" + std::strerror(errno) +
                "): " + load_hint(dir_));
  fds_.emplace_back(fd);
  bpf_map_info info = {};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
    throw Error("--pinned: " + path + " is not a BPF map: " + load_hint(dir_));
  if (info.type != type || (value_size && info.value_size != value_size) ||
      (info.map_flags & flags) != flags)
    throw Error("--pinned: " + path + " has another layout (type " + std::to_string(info.type) +
                ", value size " + std::to_string(info.value_size) + "; want type " +
                std::to_string(type) + ", value size " + std::to_string(value_size) +
                "): it comes from another build of stackmapd.o; load this version's");
  if (name == "pool") {
    bits = 0;
    while ((1u << bits) < info.max_entries) ++bits;
    if (!power_of_two(info.max_entries) || bits < SMT_MIN_BITS || bits > SMT_MAX_BITS)
      throw Error("--pinned: " + path + " holds " + std::to_string(info.max_entries) +
                  " stacks; stackmapd.o must be built with SMT_BPFLOADER_BITS in " +
                  std::to_string(SMT_MIN_BITS) + ".." + std::to_string(SMT_MAX_BITS));
  } else if (name == "slots" && info.max_entries != 2u << bits) {
    throw Error("--pinned: " + path + " has " + std::to_string(info.max_entries) +
                " slots, not twice the pool's " + std::to_string(1u << bits) +
                ": pins of two different builds; reload stackmapd.o");
  } else if (name == "batches") {
    const int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0 || info.max_entries < static_cast<uint32_t>(cpus) * SMT_MAX_NEST)
      throw Error("--pinned: " + path + " has batches for " +
                  std::to_string(info.max_entries / SMT_MAX_NEST) + " CPUs, this machine has " +
                  std::to_string(cpus) +
                  ": build stackmapd.o with SMT_BPFLOADER_CPUS at least that");
    batch_count = info.max_entries;
  } else if (name == "ids") {
    ring_bytes = info.max_entries;
  }
  return fd;
}

int LoaderPins::open_prog(const std::string& section, uint32_t type, bool required) {
  const std::string path = dir_ + "/" + prog_pin(section);
  int fd = bpf_obj_get(path.c_str());
  if (fd < 0) {
    if (!required && errno == ENOENT) return -1;
    throw Error("--pinned: " + path + " is missing (" + std::strerror(errno) +
                "): " + load_hint(dir_));
  }
  fds_.emplace_back(fd);
  bpf_prog_info info = {};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0 || info.type != type)
    throw Error("--pinned: " + path + " is not a BPF program of type " + std::to_string(type) +
                ": " + load_hint(dir_));
  return fd;
}

}  // namespace stackmapd
