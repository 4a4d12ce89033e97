// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/listen_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"

namespace stackmapd {

UniqueFd listen_on(const ListenAddress& a, gid_t group, const ListenPurpose& why) {
  const std::string where = a.str();
  auto fail = [&](const char* what) {
    int e = errno;
    throw Error("cannot " + std::string(what) + " " + where + " for " + why.purpose + ": " +
                strerror(e) +
                (e == EADDRINUSE ? ": another program listens there, choose another " + why.option
                                 : ": check " + why.option));
  };
  if (a.is_unix()) {
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, a.unix_path.c_str(), a.unix_path.size() + 1);
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) fail("create a socket for");
    struct stat st;
    if (lstat(a.unix_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
      unlink(a.unix_path.c_str());  // left by a daemon that was killed
    mode_t old = umask(0117);       // never more open than 0660
    int err = bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    umask(old);
    if (err != 0) fail("bind");
    if (group != static_cast<gid_t>(-1) &&
        chown(a.unix_path.c_str(), static_cast<uid_t>(-1), group) != 0)
      fail("give the export group");
    if (listen(fd.get(), 64) != 0) fail("listen on");
    return fd;
  }
  sockaddr_storage ss = {};
  socklen_t len;
  int family;
  if (a.host.find(':') == std::string::npos) {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    in->sin_family = family = AF_INET;
    in->sin_port = htons(a.port);
    inet_pton(AF_INET, a.host.c_str(), &in->sin_addr);
    len = sizeof(*in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    in6->sin6_family = family = AF_INET6;
    in6->sin6_port = htons(a.port);
    inet_pton(AF_INET6, a.host.c_str(), &in6->sin6_addr);
    len = sizeof(*in6);
  }
  UniqueFd fd(socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) fail("create a socket for");
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (family == AF_INET6) setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) fail("bind");
  if (listen(fd.get(), 64) != 0) fail("listen on");
  return fd;
}

uint16_t bound_port(int fd) {
  sockaddr_storage ss = {};
  socklen_t len = sizeof(ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

}  // namespace stackmapd
