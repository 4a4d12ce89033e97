// SPDX-License-Identifier: GPL-2.0
#include "daemon/http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"

namespace stackmapd::http {

namespace {

const char* status_text(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
  }
  return "Error";
}

// Reads what the client sent beyond its head, so that closing gives it a
// clean end of file after the response instead of ECONNRESET.
void discard_input(int fd) {
  char buf[4096];
  for (int i = 0; i < 16 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; ++i) {
  }
}

UniqueFd listen_on(const ListenAddress& a, gid_t group) {
  const std::string where = a.str();
  auto fail = [&](const char* what) {
    int e = errno;
    throw Error("cannot " + std::string(what) + " " + where + " for HTTP: " + strerror(e) +
                (e == EADDRINUSE ? ": another program listens there, choose another --listen"
                                 : ": check --listen"));
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

}  // namespace

Response error_response(int status, const std::string& reason) {
  Response r;
  r.status = status;
  r.body = reason + "\n";
  if (status == 405) r.headers.emplace_back("Allow", "GET, HEAD");
  if (status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

std::string serialize(const Response& r, bool head) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + status_text(r.status) + "\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  const size_t length = r.shared_body ? r.shared_body->size() : r.body.size();
  out += "Content-Length: " + std::to_string(length) + "\r\n";
  out += "Connection: close\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n";
  for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
  out += "\r\n";
  if (!head && !r.shared_body) out += r.body;
  return out;
}

Server::Server(EventLoop& loop, const ListenAddress& address, gid_t group, Handler handler,
               Limits limits)
    : loop_(loop),
      address_(address),
      handler_(std::move(handler)),
      limits_(limits),
      admission_({limits.max_connections, limits.max_per_peer}) {
  fd_ = listen_on(address_, group);
  if (!address_.is_unix()) address_.port = bound_port(fd_.get());
  watch_ = loop_.watch(fd_.get(), POLLIN, [this](short) { on_accept(); });
}

Server::~Server() {
  *self_ = nullptr;
  while (!conns_.empty()) drop(conns_.begin()->first);
  loop_.unwatch(watch_);
  if (address_.is_unix()) unlink(address_.unix_path.c_str());
}

void Server::on_accept() {
  for (;;) {
    UniqueFd fd(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) return;  // EAGAIN: all taken; anything else is the client's loss
    const std::string peer = Admission::peer_of(fd.get());
    const auto now = EventLoop::Clock::now();
    Admission::Decision d = admission_.decide(peer);
    if (!d.admit) {
      refuse(std::move(fd), error_response(503, "too many HTTP connections at once (" +
                                                    std::to_string(limits_.max_connections) + ", " +
                                                    std::to_string(limits_.max_per_peer) +
                                                    " per address): try again in a moment"));
      continue;
    }
    if (d.evict) {
      refuse(std::move(conns_.at(d.evict).fd),
             error_response(408, "request head not complete: a newer client took its slot"));
      drop(d.evict);
    }
    uint64_t key = next_key_++;
    Conn& c = conns_[key];
    c.fd = std::move(fd);
    admission_.add(key, peer);
    c.watch = loop_.watch(c.fd.get(), POLLIN, [this, key](short) { on_readable(key); });
    // From accept, never moved by what arrives: a trickle cannot extend it.
    c.deadline = loop_.at(now + limits_.request_time, [this, key] {
      conns_.at(key).deadline = 0;
      respond(key, error_response(408, "request head not complete in time"), false);
    });
  }
}

// One try, never waiting: a refused or evicted client gets its status or nothing.
void Server::refuse(UniqueFd fd, const Response& r) {
  std::string msg = serialize(r, false);
  send(fd.get(), msg.data(), msg.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  discard_input(fd.get());
}

void Server::on_readable(uint64_t key) {
  Conn& c = conns_.at(key);
  char buf[2048];
  for (;;) {
    ssize_t n = recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // more later
    if (n <= 0) return drop(key);  // gone before its head ended: nobody to answer
    c.in.append(buf, static_cast<size_t>(n));
    ParseResult p = parse_request(c.in, limits_.max_head);
    if (p.state == ParseResult::State::incomplete) continue;
    if (p.state == ParseResult::State::error)
      return respond(key, error_response(p.status, p.reason), false);
    c.in.clear();
    admission_.completed(key);
    loop_.unwatch(c.watch);  // nothing more is read until the response is out
    c.watch = 0;
    if (c.deadline) loop_.cancel(c.deadline);
    c.deadline = 0;
    std::weak_ptr<Server*> self = self_;
    const bool head = p.request.head;
    handler_(p.request, [self, key, head](Response r) {
      if (auto s = self.lock(); s && *s) (*s)->respond(key, r, head);
    });
    return;  // c may be gone: the handler ran
  }
}

void Server::respond(uint64_t key, const Response& r, bool head) {
  auto it = conns_.find(key);
  if (it == conns_.end() || !it->second.out.empty()) return;
  Conn& c = it->second;
  admission_.completed(key);
  c.out = serialize(r, head);
  if (!head) c.body = r.shared_body;
  c.lease = r.lease;
  c.sent = 0;
  if (c.deadline) loop_.cancel(c.deadline);
  c.deadline = loop_.at(EventLoop::Clock::now() + limits_.response_time, [this, key] {
    conns_.at(key).deadline = 0;
    drop(key);  // it stopped reading: the rest of its response is dropped
  });
  if (c.watch) loop_.unwatch(c.watch);
  c.watch = loop_.watch(c.fd.get(), POLLOUT, [this, key](short) { on_writable(key); });
  on_writable(key);  // most responses fit in the socket buffer at once
}

void Server::on_writable(uint64_t key) {
  Conn& c = conns_.at(key);
  const size_t total = c.out.size() + (c.body ? c.body->size() : 0);
  while (c.sent < total) {
    const bool in_out = c.sent < c.out.size();
    const char* from = in_out ? c.out.data() + c.sent : c.body->data() + (c.sent - c.out.size());
    const size_t len = in_out ? c.out.size() - c.sent : total - c.sent;
    ssize_t n = send(c.fd.get(), from, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // POLLOUT later
    if (n <= 0) break;  // the client went away: nothing to tell it
    c.sent += static_cast<size_t>(n);
  }
  shutdown(c.fd.get(), SHUT_WR);
  discard_input(c.fd.get());
  drop(key);
}

void Server::drop(uint64_t key) {
  auto it = conns_.find(key);
  if (it == conns_.end()) return;
  if (it->second.watch) loop_.unwatch(it->second.watch);
  if (it->second.deadline) loop_.cancel(it->second.deadline);
  admission_.remove(key);
  conns_.erase(it);  // closes the connection
}

}  // namespace stackmapd::http
