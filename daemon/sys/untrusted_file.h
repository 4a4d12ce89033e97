// SPDX-License-Identifier: GPL-2.0
// Opening, as root, files that other users control (the binaries of traced
// processes, their perf maps): never following a link they made, never
// blocking on a FIFO or a device they put at the path, never taking another
// file for the one meant. The descriptor comes back only for a regular file.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/sys/unique_fd.h"

namespace stackmapd {

// A file as the kernel knows it: a path may name another file later.
struct FileIdentity {
  uint64_t dev = 0, ino = 0;
  bool known() const { return dev != 0 || ino != 0; }
  bool operator==(const FileIdentity&) const = default;
};

struct OpenedFile {
  UniqueFd fd;
  struct stat st = {};
  FileIdentity identity() const { return {st.st_dev, st.st_ino}; }
};

enum class Links {
  // The last component must not be a symbolic link (O_NOFOLLOW): a path a
  // user can change.
  refused,
  // /proc's own links (map_files/, fd/, root), which name the file the kernel
  // holds, not a path: they are followed.
  kernel,
};

// Opens `path` O_RDONLY | O_NONBLOCK | O_CLOEXEC (| O_NOFOLLOW) and keeps it
// only if it is a regular file (and, when `expect` is known, that very file).
// Otherwise nullopt, and *why says what is there instead, e.g. "a FIFO, not
// a regular file", "a symbolic link", or the errno's text.
std::optional<OpenedFile> open_regular(const std::string& path, Links links, std::string* why,
                                       FileIdentity expect = {});
// The same, relative to the directory `dir`, resolved as if `dir` were the
// root and with no symbolic link at any component (openat2's
// RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS; O_NOFOLLOW alone on kernels before
// 5.6): a file in another process's root (/proc/PID/root).
std::optional<OpenedFile> open_regular_beneath(int dir, const std::string& path, std::string* why);

// "a FIFO", "a directory", "a character device", ... for a mode.
std::string file_kind(mode_t mode);

}  // namespace stackmapd
