// SPDX-License-Identifier: GPL-2.0
// One daemon per runtime directory: an exclusive flock on DIR/stackmapd.pid,
// which holds the owner's pid for the message a second daemon prints.
#pragma once

#include <string>

#include "daemon/sys/unique_fd.h"

namespace stackmapd {

class RuntimeLock {
 public:
  // Throws Error naming the running daemon's pid when another holds the lock.
  explicit RuntimeLock(const std::string& dir);
  ~RuntimeLock();  // removes the pid file
  RuntimeLock(RuntimeLock&& o) noexcept = default;
  RuntimeLock& operator=(RuntimeLock&& o) noexcept;
  RuntimeLock(const RuntimeLock&) = delete;
  RuntimeLock& operator=(const RuntimeLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  void release() noexcept;

  std::string path_;
  UniqueFd fd_;
};

}  // namespace stackmapd
