// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/control.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

sockaddr_un address(const std::string& path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path))
    throw Error("control socket path " + path + " is too long: use a shorter export-dir");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

void write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away: nothing to tell it
    off += static_cast<size_t>(n);
  }
}

}  // namespace

ControlServer::ControlServer(const std::string& path, gid_t group) : path_(path) {
  sockaddr_un addr = address(path);
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw Error(std::string("cannot create the control socket: ") + strerror(errno));
  unlink(path.c_str());  // left by a daemon that was killed; the lock says none runs
  // Bind under a 0117 umask so the socket is never more open than 0660.
  mode_t old = umask(0117);
  int err = bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old);
  if (err != 0 || listen(fd_, 16) != 0 ||
      (group != static_cast<gid_t>(-1) && chown(path.c_str(), static_cast<uid_t>(-1), group) != 0)) {
    int e = errno;
    close(fd_);
    throw Error("cannot listen on " + path + ": " + strerror(e));
  }
}

ControlServer::~ControlServer() {
  close(fd_);
  unlink(path_.c_str());
}

std::optional<ControlServer::Request> ControlServer::accept_request() {
  int client = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (client < 0) return std::nullopt;
  // Nor may one that stops reading its reply.
  timeval timeout = {1, 0};
  setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  // A client that connects and says nothing must not stall the daemon.
  std::string line;
  char buf[256];
  while (line.find('\n') == std::string::npos && line.size() < 1024) {
    pollfd p = {client, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) break;
    ssize_t n = recv(client, buf, sizeof(buf), 0);
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
  }
  auto nl = line.find('\n');
  if (nl == std::string::npos) {
    reply(client, false, "no request line received\n");
    return std::nullopt;
  }
  line.resize(nl);
  return Request{client, line};
}

void ControlServer::reply(int client, bool ok, const std::string& body) {
  write_all(client, std::string(ok ? "ok\n" : "error\n") + body);
  close(client);
}

std::optional<std::string> control_request(const std::string& socket_path,
                                           const std::string& request) {
  sockaddr_un addr = address(socket_path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(std::string("cannot create a socket: ") + strerror(errno));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    close(fd);
    if (e == ENOENT || e == ECONNREFUSED) return std::nullopt;
    throw Error("cannot reach the daemon at " + socket_path + ": " + strerror(e) +
                (e == EACCES ? ": run as root or as a member of the export group" : ""));
  }
  write_all(fd, request + "\n");
  shutdown(fd, SHUT_WR);
  std::string reply;
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  auto nl = reply.find('\n');
  std::string status = reply.substr(0, nl);
  std::string body = nl == std::string::npos ? "" : reply.substr(nl + 1);
  if (status == "ok") return body;
  if (status == "error") {
    while (!body.empty() && body.back() == '\n') body.pop_back();
    throw Error(body);
  }
  throw Error("the daemon at " + socket_path + " sent no reply: see 'journalctl -u stackmapd'");
}

}  // namespace stackmapd
