// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/control.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <utility>

#include "daemon/export/utf8_text.h"
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

// Reads what the client sent beyond its line, so that closing the socket
// gives it a clean end of file after the reply instead of ECONNRESET.
void discard_input(int fd) {
  char buf[4096];
  for (int i = 0; i < 16 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; ++i) {
  }
}

std::string seconds(std::chrono::milliseconds ms) {
  std::string s = std::to_string(ms.count() / 1000.0);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s + " s";
}

}  // namespace

ControlServer::ControlServer(EventLoop& loop, const std::string& path, gid_t group, Handler handler)
    : ControlServer(loop, path, group, std::move(handler), Limits{}) {}

ControlServer::ControlServer(EventLoop& loop, const std::string& path, gid_t group, Handler handler,
                             Limits limits)
    : loop_(loop),
      path_(path),
      handler_(std::move(handler)),
      limits_(limits),
      admission_({limits.max_clients, limits.max_per_peer}) {
  sockaddr_un addr = address(path);
  fd_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd_) throw Error(std::string("cannot create the control socket: ") + strerror(errno));
  unlink(path.c_str());  // left by a daemon that was killed; the lock says none runs
  // Bind under a 0117 umask so the socket is never more open than 0660.
  mode_t old = umask(0117);
  int err = bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old);
  if (err != 0 || listen(fd_.get(), 64) != 0 ||
      (group != static_cast<gid_t>(-1) && chown(path.c_str(), static_cast<uid_t>(-1), group) != 0))
    throw Error("cannot listen on " + path + ": " + strerror(errno));
  watch_ = loop_.watch(fd_.get(), POLLIN, [this](short) { on_accept(); });
}

ControlServer::~ControlServer() {
  while (!clients_.empty()) drop(clients_.begin()->first);
  loop_.unwatch(watch_);
  unlink(path_.c_str());
}

void ControlServer::on_accept() {
  for (;;) {
    UniqueFd fd(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) return;  // EAGAIN: all taken; anything else is the client's loss
    const std::string peer = Admission::peer_of(fd.get());
    const auto now = EventLoop::Clock::now();
    Admission::Decision d = admission_.decide(peer);
    if (!d.admit) {
      refuse(std::move(fd),
             "too many control clients at once (" + std::to_string(limits_.max_clients) + ", " +
                 std::to_string(limits_.max_per_peer) + " per user): try again in a moment\n");
      continue;
    }
    if (d.evict) {
      refuse(std::move(clients_.at(d.evict).fd),
             "no request line yet: a newer client took this slot\n");
      drop(d.evict);
    }
    uint64_t key = next_key_++;
    Client& c = clients_[key];
    c.fd = std::move(fd);
    admission_.add(key, peer);
    c.watch = loop_.watch(c.fd.get(), POLLIN, [this, key](short) { on_readable(key); });
    // From accept, never moved by what arrives: a trickle cannot extend it.
    c.deadline = loop_.at(now + limits_.request_time, [this, key] {
      clients_.at(key).deadline = 0;
      answer(key, false,
             "no request line within " + seconds(limits_.request_time) +
                 ": send one line, such as 'stat'\n");
    });
  }
}

// One try, never waiting: a refused or evicted client gets one line or nothing.
void ControlServer::refuse(UniqueFd fd, const std::string& why) {
  std::string msg = "error\n" + why;
  send(fd.get(), msg.data(), msg.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  discard_input(fd.get());
}

void ControlServer::on_readable(uint64_t key) {
  Client& c = clients_.at(key);
  char buf[512];
  for (;;) {
    ssize_t n = recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // more later
    if (n < 0) return drop(key);
    if (n == 0)
      return answer(key, false,
                    "no request line received: the connection closed before a newline\n");
    c.in.append(buf, static_cast<size_t>(n));
    size_t nl = c.in.find('\n');
    if (nl != std::string::npos) {
      c.in.resize(nl);
      if (!c.in.empty() && c.in.back() == '\r') c.in.pop_back();
      break;
    }
    if (c.in.size() > limits_.max_line)
      return answer(key, false,
                    "request line longer than " + std::to_string(limits_.max_line) +
                        " bytes: send one short line, such as 'stat'\n");
  }
  ControlReply reply{false, ""};
  try {
    reply = handler_(c.in);
  } catch (const std::exception& e) {
    reply = {false, e.what()};
  }
  // Replies carry names (ctl top) and echo the request: bytes made text.
  answer(key, reply.ok, utf8_text(reply.text));  // c may be gone: the handler ran
}

void ControlServer::answer(uint64_t key, bool ok, std::string text) {
  auto it = clients_.find(key);
  if (it == clients_.end()) return;
  Client& c = it->second;
  admission_.completed(key);
  c.out = (ok ? "ok\n" : "error\n") + std::move(text);
  c.sent = 0;
  if (c.deadline) loop_.cancel(c.deadline);
  c.deadline = loop_.at(EventLoop::Clock::now() + limits_.reply_time, [this, key] {
    clients_.at(key).deadline = 0;
    drop(key);  // it stopped reading: the rest of its reply is dropped
  });
  loop_.unwatch(c.watch);
  c.watch = loop_.watch(c.fd.get(), POLLOUT, [this, key](short) { on_writable(key); });
  on_writable(key);  // most replies fit in the socket buffer at once
}

void ControlServer::on_writable(uint64_t key) {
  Client& c = clients_.at(key);
  while (c.sent < c.out.size()) {
    ssize_t n =
        send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // POLLOUT later
    if (n <= 0) break;  // the client went away: nothing to tell it
    c.sent += static_cast<size_t>(n);
  }
  discard_input(c.fd.get());
  drop(key);
}

void ControlServer::drop(uint64_t key) {
  auto it = clients_.find(key);
  if (it == clients_.end()) return;
  loop_.unwatch(it->second.watch);
  if (it->second.deadline) loop_.cancel(it->second.deadline);
  admission_.remove(key);
  clients_.erase(it);  // closes the connection
}

std::optional<std::string> control_request(const std::string& socket_path,
                                           const std::string& request) {
  sockaddr_un addr = address(socket_path);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw Error(std::string("cannot create a socket: ") + strerror(errno));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    if (e == ENOENT || e == ECONNREFUSED) return std::nullopt;
    throw Error("cannot reach the daemon at " + socket_path + ": " + strerror(e) +
                (e == EACCES ? ": run as root or as a member of the export group" : ""));
  }
  write_all(fd.get(), request + "\n");
  shutdown(fd.get(), SHUT_WR);
  std::string reply;
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
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
