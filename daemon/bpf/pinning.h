// SPDX-License-Identifier: GPL-2.0
// The table's maps pinned in bpffs, so that a restarted daemon continues the
// same ids and counts instead of starting over.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "daemon/sys/unique_fd.h"

struct bpf_map;

namespace stackmapd {

struct PinnedMap {
  std::string name;  // file name under the pin directory
  bpf_map* map;      // opened, sized, not yet loaded
};

// Makes `dir` exist on a mounted bpffs, mode 0700 when it creates it (and
// then returns true). Mounts
// bpffs (mode 0700, as systemd does) only on /sys/fs/bpf itself, the parent
// of a default pin dir where containers leave it unmounted; any other parent
// must already be on bpffs: one line says so, nothing is mounted.
bool prepare_pin_dir(const std::string& dir);

// One daemon per pinned table: an exclusive flock on the pin directory,
// taken before anything reads or changes the pins, held for the daemon's
// life. bpffs holds no regular files, so the directory itself is locked.
class PinDirLock {
 public:
  // prepare_pin_dir(dir), then the lock; throws Error when another holds it.
  explicit PinDirLock(const std::string& dir);
  ~PinDirLock();  // removes the directory if it made it and it is empty
  PinDirLock(PinDirLock&& o) noexcept;
  PinDirLock& operator=(PinDirLock&& o) noexcept;
  PinDirLock(const PinDirLock&) = delete;
  PinDirLock& operator=(const PinDirLock&) = delete;

  const std::string& dir() const { return dir_; }

 private:
  void release() noexcept;

  std::string dir_;
  bool made_ = false;  // a failed start leaves no empty pin dir behind
  UniqueFd fd_;        // the lock goes with the fd
};

// Why the pins under `dir` cannot be taken over by maps shaped like `maps`
// (missing, another type, size or flags); empty when all of them can.
std::string pin_mismatch(const std::string& dir, const std::vector<PinnedMap>& maps);

bool any_pins(const std::string& dir, const std::vector<std::string>& names);
void remove_pins(const std::string& dir, const std::vector<std::string>& names);

}  // namespace stackmapd
