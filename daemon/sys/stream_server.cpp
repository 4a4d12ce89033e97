// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/stream_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace stackmapd {

namespace {

// Reads what the client sent beyond its request, so that closing gives it a
// clean end of file after the reply instead of ECONNRESET.
void discard_input(int fd) {
  char buf[4096];
  for (int i = 0; i < 16 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; ++i) {
  }
}

}  // namespace

StreamServer::StreamServer(EventLoop& loop, const ListenAddress& address, gid_t group,
                           const ListenPurpose& why, Limits limits, Protocol protocol)
    : loop_(loop),
      address_(address),
      limits_(limits),
      protocol_(std::move(protocol)),
      admission_({limits.max_connections, limits.max_per_peer}) {
  fd_ = listen_on(address_, group, why);
  if (!address_.is_unix()) address_.port = bound_port(fd_.get());
  watch_ = loop_.watch(fd_.get(), POLLIN, [this](short) { on_accept(); });
}

StreamServer::~StreamServer() {
  while (!conns_.empty()) drop(conns_.begin()->first);
  loop_.unwatch(watch_);
  if (address_.is_unix()) unlink(address_.unix_path.c_str());
}

void StreamServer::on_accept() {
  for (;;) {
    UniqueFd fd(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) return;  // EAGAIN: all taken; anything else is the client's loss
    const std::string peer = Admission::peer_of(fd.get());
    const auto now = EventLoop::Clock::now();
    Admission::Decision d = admission_.decide(peer);
    if (!d.admit) {
      refuse(std::move(fd), protocol_.refused);
      continue;
    }
    if (d.evict) {
      refuse(std::move(conns_.at(d.evict).fd), protocol_.evicted);
      drop(d.evict);
    }
    Key key = next_key_++;
    Conn& c = conns_[key];
    c.fd = std::move(fd);
    admission_.add(key, peer);
    c.watch = loop_.watch(c.fd.get(), POLLIN, [this, key](short) { on_readable(key); });
    // From accept, never moved by what arrives: a trickle cannot extend it.
    c.deadline = loop_.at(now + limits_.request_time, [this, key] {
      conns_.at(key).deadline = 0;
      reply(key, protocol_.timed_out);
    });
    // A request sent whole before its connection was accepted (the loop was
    // busy) is read now: it must not look incomplete to the next newcomer of
    // this batch, which would evict it in a trickler's place.
    on_readable(key);
  }
}

// One try, never waiting: a refused or evicted client gets its message or nothing.
void StreamServer::refuse(UniqueFd fd, const std::string& why) {
  send(fd.get(), why.data(), why.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  discard_input(fd.get());
}

void StreamServer::on_readable(Key key) {
  char buf[2048];
  for (;;) {
    Conn& c = conns_.at(key);
    ssize_t n = recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // more later
    if (n < 0 || (n == 0 && protocol_.cut_short.empty())) return drop(key);
    if (n == 0) return reply(key, protocol_.cut_short);
    c.in.append(buf, static_cast<size_t>(n));
    protocol_.on_input(key, c.in);
    // The protocol may have answered, or be waiting to: c may be gone.
    auto it = conns_.find(key);
    if (it == conns_.end() || !it->second.reading) return;
  }
}

void StreamServer::stop_reading(Conn& c, Key key) {
  admission_.completed(key);
  c.reading = false;
  std::string().swap(c.in);
  if (c.watch) loop_.unwatch(c.watch);
  c.watch = 0;
  if (c.deadline) loop_.cancel(c.deadline);
  c.deadline = 0;
}

void StreamServer::await_reply(Key key) {
  auto it = conns_.find(key);
  if (it != conns_.end() && it->second.reading) stop_reading(it->second, key);
}

void StreamServer::reply(Key key, std::string head, std::shared_ptr<const std::string> body,
                         std::shared_ptr<const void> lease) {
  auto it = conns_.find(key);
  if (it == conns_.end() || it->second.replied) return;
  Conn& c = it->second;
  stop_reading(c, key);
  c.replied = true;
  c.out = std::move(head);
  c.body = std::move(body);
  c.lease = std::move(lease);
  c.sent = 0;
  c.deadline = loop_.at(EventLoop::Clock::now() + limits_.reply_time, [this, key] {
    conns_.at(key).deadline = 0;
    drop(key);  // it stopped reading: the rest of its reply is dropped
  });
  c.watch = loop_.watch(c.fd.get(), POLLOUT, [this, key](short) { on_writable(key); });
  on_writable(key);  // most replies fit in the socket buffer at once
}

void StreamServer::on_writable(Key key) {
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

void StreamServer::drop(Key key) {
  auto it = conns_.find(key);
  if (it == conns_.end()) return;
  if (it->second.watch) loop_.unwatch(it->second.watch);
  if (it->second.deadline) loop_.cancel(it->second.deadline);
  admission_.remove(key);
  conns_.erase(it);  // closes the connection
}

}  // namespace stackmapd
