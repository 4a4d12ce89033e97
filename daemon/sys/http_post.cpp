// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/http_post.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxResponseBytes = 64 << 10;  // a status and an error message are plenty

// Waits for `events` on fd until `deadline`; 1: ready, 0: timed out, -1: cancelled.
int wait_for(int fd, short events, Clock::time_point deadline, int cancel_fd) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd fds[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    const int n = poll(fds, cancel_fd >= 0 ? 2 : 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (cancel_fd >= 0 && fds[1].revents) return -1;
    if (n > 0) return 1;
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

HttpPostResult failure(std::string error, bool timed_out = false) {
  HttpPostResult r;
  r.error = std::move(error);
  r.timed_out = timed_out;
  return r;
}

// The status line and Retry-After of a response's head.
HttpPostResult parse_head(std::string_view head) {
  HttpPostResult r;
  if (!head.starts_with("HTTP/1.") || head.size() < 12 || head[8] != ' ')
    return failure("not an HTTP response");
  r.status = std::atoi(std::string(head.substr(9, 3)).c_str());
  size_t at = head.find("\r\n");
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const size_t end = head.find("\r\n", at + 2);
    const std::string_view line = head.substr(at + 2, end - at - 2);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos && lower(line.substr(0, colon)) == "retry-after") {
      const std::string value(line.substr(colon + 1));
      char* stop = nullptr;
      const long s = std::strtol(value.c_str(), &stop, 10);
      if (stop != value.c_str() && s >= 0) r.retry_after_s = static_cast<int>(std::min(s, 3600L));
    }
    at = end;
  }
  return r;
}

}  // namespace

HttpUrl HttpUrl::parse(const std::string& url, const char* what) {
  if (url.starts_with("https://"))
    throw Error(std::string(what) + " " + url +
                ": https is not supported, use http:// (a local collector or a TLS proxy)");
  if (!url.starts_with("http://"))
    throw Error(std::string(what) + " '" + url +
                "' is not an http:// URL: use http://HOST:PORT/v1development/profiles");
  std::string_view rest = std::string_view(url).substr(7);
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  HttpUrl u;
  u.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  u.port = "80";
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      throw Error(std::string(what) + " '" + url + "': unclosed '[' in the host");
    u.host = authority.substr(1, close - 1);
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority[0] != ':')
      throw Error(std::string(what) + " '" + url + "': ':PORT' must follow ']'");
    if (!authority.empty()) u.port = authority.substr(1);
  } else {
    const size_t colon = authority.rfind(':');
    u.host = authority.substr(0, colon);
    if (colon != std::string_view::npos) u.port = authority.substr(colon + 1);
  }
  const bool port_ok = !u.port.empty() && u.port.size() <= 5 &&
                       u.port.find_first_not_of("0123456789") == std::string::npos &&
                       std::stoul(u.port) >= 1 && std::stoul(u.port) <= 65535;
  if (u.host.empty() || !port_ok)
    throw Error(std::string(what) + " '" + url +
                "' needs a host and a port of 1 to 65535: use http://HOST:PORT/PATH");
  if (u.path.find_first_of(" \r\n") != std::string::npos)
    throw Error(std::string(what) + " '" + url + "': the path holds a space or a line break");
  return u;
}

std::string HttpUrl::str() const {
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + port + path;
}

HttpPostResult http_post(const HttpUrl& url, std::string_view content_type, std::string_view body,
                         const HttpTimeouts& t, int cancel_fd) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &found); rc != 0)
    return failure("cannot resolve " + url.host + ": " + gai_strerror(rc));
  UniqueFd fd;
  std::string error = "no address";
  bool timed_out = false;
  const auto connect_deadline = Clock::now() + t.connect;
  for (addrinfo* a = found; a && !fd; a = a->ai_next) {
    UniqueFd s(socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!s) continue;
    if (connect(s.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      error = std::string("connect: ") + strerror(errno);
      continue;
    }
    const int ready = wait_for(s.get(), POLLOUT, connect_deadline, cancel_fd);
    if (ready < 0) {
      freeaddrinfo(found);
      return failure("cancelled");
    }
    if (ready == 0) {
      error = "timed out connecting";
      timed_out = true;
      continue;
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error) {
      error = std::string("connect: ") + strerror(so_error);
      continue;
    }
    fd = std::move(s);
  }
  freeaddrinfo(found);
  if (!fd) return failure(error, timed_out);

  std::string request = "POST " + url.path + " HTTP/1.1\r\nHost: " + url.host + ":" + url.port +
                        "\r\nContent-Type: " + std::string(content_type) +
                        "\r\nContent-Length: " + std::to_string(body.size()) +
                        "\r\nUser-Agent: stackmapd\r\nConnection: close\r\n\r\n";
  request.append(body);
  const auto send_deadline = Clock::now() + t.send;
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n =
        send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return failure(errno == ECONNRESET || errno == EPIPE
                         ? "connection reset while sending"
                         : std::string("send: ") + strerror(errno));
    const int ready = wait_for(fd.get(), POLLOUT, send_deadline, cancel_fd);
    if (ready < 0) return failure("cancelled");
    if (ready == 0) return failure("timed out sending", true);
  }

  // The head is all we need; a body that never ends is cut at the cap.
  std::string response;
  const auto receive_deadline = Clock::now() + t.receive;
  while (response.find("\r\n\r\n") == std::string::npos && response.size() < kMaxResponseBytes) {
    char buf[4096];
    const ssize_t n = recv(fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      response.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;
    if (errno != EAGAIN && errno != EINTR)
      return failure(errno == ECONNRESET ? "connection reset"
                                         : std::string("recv: ") + strerror(errno));
    const int ready = wait_for(fd.get(), POLLIN, receive_deadline, cancel_fd);
    if (ready < 0) return failure("cancelled");
    if (ready == 0) return failure("timed out waiting for the response", true);
  }
  const size_t head_end = response.find("\r\n\r\n");
  if (head_end == std::string::npos)
    return failure(response.empty() ? "connection closed without a response"
                                    : "incomplete response");
  return parse_head(std::string_view(response).substr(0, head_end + 2));
}

}  // namespace stackmapd
