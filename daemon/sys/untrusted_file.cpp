// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/untrusted_file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace stackmapd {

namespace {

constexpr int kFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;

std::optional<OpenedFile> checked(int fd, std::string* why, FileIdentity expect) {
  if (fd < 0) {
    if (why) *why = errno == ELOOP ? "a symbolic link (not followed)" : std::strerror(errno);
    return std::nullopt;
  }
  OpenedFile f{UniqueFd(fd), {}};
  if (fstat(fd, &f.st) != 0) {
    if (why) *why = std::strerror(errno);
    return std::nullopt;
  }
  if (!S_ISREG(f.st.st_mode)) {
    if (why) *why = file_kind(f.st.st_mode) + ", not a regular file";
    return std::nullopt;
  }
  if (expect.known() && f.identity() != expect) {
    if (why) *why = "another file than the one mapped (replaced since)";
    return std::nullopt;
  }
  return f;
}

}  // namespace

std::string file_kind(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "a special file";
  }
}

std::optional<OpenedFile> open_regular(const std::string& path, Links links, std::string* why,
                                       FileIdentity expect) {
  const int flags = kFlags | (links == Links::refused ? O_NOFOLLOW : 0);
  return checked(open(path.c_str(), flags), why, expect);
}

std::optional<OpenedFile> open_regular_beneath(int dir, const std::string& path, std::string* why) {
  open_how how = {};
  how.flags = kFlags | O_NOFOLLOW;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(syscall(SYS_openat2, dir, path.c_str(), &how, sizeof(how)));
  if (fd >= 0 || errno != ENOSYS) return checked(fd, why, {});
  // Before Linux 5.6 (Android's 4.19 and 5.4, qemu-user): one component at
  // a time, none of them a link, no "..".
  UniqueFd at;
  size_t from = 0;
  for (size_t slash; (slash = path.find('/', from)) != std::string::npos; from = slash + 1) {
    const std::string part = path.substr(from, slash - from);
    if (part.empty() || part == "." || part == "..") {
      errno = EXDEV;
      return checked(-1, why, {});
    }
    const int next =
        openat(at ? at.get() : dir, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) return checked(-1, why, {});
    at.reset(next);
  }
  return checked(openat(at ? at.get() : dir, path.c_str() + from, kFlags | O_NOFOLLOW), why, {});
}

}  // namespace stackmapd
