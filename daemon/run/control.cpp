// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/control.h"

#include <sys/socket.h>
#include <sys/un.h>

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

ListenAddress listen_address(const std::string& path) {
  address(path);  // the length check, with its message
  ListenAddress a;
  a.unix_path = path;
  return a;
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
    : handler_(std::move(handler)),
      max_line_(limits.max_line),
      stream_(
          loop, listen_address(path), group, {"the control socket", "--export-dir"},
          {limits.max_clients, limits.max_per_peer, limits.request_time, limits.reply_time},
          {[this](StreamServer::Key key, std::string_view in) { on_input(key, in); },
           "error\ntoo many control clients at once (" + std::to_string(limits.max_clients) + ", " +
               std::to_string(limits.max_per_peer) + " per user): try again in a moment\n",
           "error\nno request line yet: a newer client took this slot\n",
           "error\nno request line within " + seconds(limits.request_time) +
               ": send one line, such as 'stat'\n",
           "error\nno request line received: the connection closed before a newline\n"}) {}

void ControlServer::on_input(StreamServer::Key key, std::string_view in) {
  const size_t nl = in.find('\n');
  // However the bytes arrived: a line past the limit is refused whole.
  if ((nl == std::string_view::npos ? in.size() : nl) > max_line_)
    return stream_.reply(key, "error\nrequest line longer than " + std::to_string(max_line_) +
                                  " bytes: send one short line, such as 'stat'\n");
  if (nl == std::string_view::npos) return;
  std::string line(in.substr(0, nl));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  stream_.await_reply(key);
  // Keys are never reused: an answer for a client gone meanwhile is dropped.
  const Respond respond = [this, key](const ControlReply& reply) {
    // Replies carry names (ctl top) and echo the request: bytes made text.
    stream_.reply(key, (reply.ok ? "ok\n" : "error\n") + utf8_text(reply.text));
  };
  try {
    handler_(line, respond);
  } catch (const std::exception& e) {
    respond({false, e.what()});
  }
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
