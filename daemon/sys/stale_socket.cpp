// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/stale_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

void remove_stale_socket(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw Error("cannot check " + path + ": " + std::strerror(errno));
  }
  if (!S_ISSOCK(st.st_mode))
    throw Error(path + " is in the way and is not a socket: move it away, or choose another " +
                "export-dir");
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) throw Error("socket path " + path + " is too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw Error(std::string("cannot create a unix socket: ") + std::strerror(errno));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0)
    throw Error(path + " is a socket another program listens on: stop it, or choose another " +
                "export-dir");
  if (errno != ECONNREFUSED) throw Error("cannot check " + path + ": " + std::strerror(errno));
  if (unlink(path.c_str()) != 0 && errno != ENOENT)
    throw Error("cannot remove the stale socket " + path + ": " + std::strerror(errno));
}

}  // namespace stackmapd
