// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/staged_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "daemon/sys/error.h"
#include "daemon/sys/file_io.h"

namespace stackmapd {

StagedFiles::~StagedFiles() {
  for (const auto& [tmp, path] : staged_) unlink(tmp.c_str());
}

void StagedFiles::add(const std::string& path, const std::string& content, mode_t mode,
                      gid_t group) {
  std::string tmp = path + ".tmp-XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) throw Error("cannot create a file beside " + path + ": " + std::strerror(errno));
  auto fail = [&](const char* what) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    throw Error(std::string("cannot ") + what + " " + path + ": " + std::strerror(err) +
                ": check free space and permissions");
  };
  if (fchmod(fd, mode) != 0) fail("set the mode of");
  if (group != kNoGroup && fchown(fd, static_cast<uid_t>(-1), group) != 0) fail("set the group of");
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) fail("sync");
  if (close(fd) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    throw Error("cannot write " + path + ": " + std::strerror(err));
  }
  staged_.emplace_back(std::move(tmp), path);
}

void StagedFiles::commit() {
  while (!staged_.empty()) {
    const auto& [tmp, path] = staged_.front();
    if (rename(tmp.c_str(), path.c_str()) != 0)
      throw Error("cannot replace " + path + ": " + std::strerror(errno));
    staged_.erase(staged_.begin());
  }
}

}  // namespace stackmapd
