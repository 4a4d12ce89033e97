// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/runtime_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "daemon/sys/error.h"

namespace stackmapd {

RuntimeLock::RuntimeLock(const std::string& dir) : path_(dir + "/stackmapd.pid") {
  fd_.reset(open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd_) throw Error("cannot open " + path_ + ": " + std::strerror(errno));
  if (flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = pread(fd_.get(), buf, sizeof(buf) - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
    while (!pid.empty() && pid.back() == '\n') pid.pop_back();
    throw Error("another stackmapd (pid " + pid + ") already runs on " + dir +
                ": stop it first (systemctl stop stackmapd) or give this one another --export-dir");
  }
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd_.get(), 0) != 0 || pwrite(fd_.get(), pid.data(), pid.size(), 0) < 0) {
    int err = errno;
    unlink(path_.c_str());
    throw Error("cannot write " + path_ + ": " + std::strerror(err));
  }
}

RuntimeLock::~RuntimeLock() { release(); }

RuntimeLock& RuntimeLock::operator=(RuntimeLock&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    fd_ = std::move(o.fd_);
  }
  return *this;
}

void RuntimeLock::release() noexcept {
  if (!fd_) return;
  // Unlink while still holding the lock, so no newcomer locks a file that then vanishes.
  unlink(path_.c_str());
  fd_.reset();
}

}  // namespace stackmapd
