// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/listen_address.h"

#include <arpa/inet.h>

#include <charconv>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

[[noreturn]] void bad(std::string_view text, const std::string& why) {
  throw Error("listen address '" + std::string(text) + "' " + why +
              ": use HOST:PORT (127.0.0.1:9464, [::1]:9464), PORT (loopback) or unix:/PATH");
}

}  // namespace

ListenAddress ListenAddress::parse(std::string_view text) {
  ListenAddress a;
  if (text.substr(0, 5) == "unix:") {
    a.unix_path = std::string(text.substr(5));
    if (a.unix_path.empty() || a.unix_path[0] != '/') bad(text, "needs an absolute socket path");
    if (a.unix_path.size() >= 108) bad(text, "has a socket path longer than 107 bytes");
    return a;
  }
  std::string_view host, port;
  if (text.substr(0, 1) == "[") {
    size_t close = text.find("]:");
    if (close == std::string_view::npos) bad(text, "has no ]:PORT after its IPv6 host");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else if (size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) bad(text, "needs brackets around its IPv6 host");
  } else {
    host = "127.0.0.1";
    port = text;
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535)
    bad(text, "has no port number 0..65535");
  a.port = static_cast<uint16_t>(value);
  a.host = host == "localhost" ? "127.0.0.1" : std::string(host);
  in6_addr buf;
  if (inet_pton(AF_INET, a.host.c_str(), &buf) != 1 &&
      inet_pton(AF_INET6, a.host.c_str(), &buf) != 1)
    bad(text, "has no numeric host address");
  return a;
}

bool ListenAddress::loopback() const {
  if (is_unix()) return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return host == "::1";
}

std::string ListenAddress::str() const {
  if (is_unix()) return "unix:" + unix_path;
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace stackmapd
