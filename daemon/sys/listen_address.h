// SPDX-License-Identifier: GPL-2.0
// Where the HTTP endpoints listen (--listen): "127.0.0.1:9464", "[::1]:9464",
// a bare port (loopback), or "unix:/run/stackmapd/http.sock". Numeric hosts
// only (and "localhost"): a daemon that resolves names at start waits on DNS.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace stackmapd {

struct ListenAddress {
  std::string host;       // numeric IPv4 or IPv6, without brackets; empty for unix
  uint16_t port = 0;      // 0 asks the kernel for a free one
  std::string unix_path;  // absolute; empty for TCP

  // Throws Error naming the bad value and the forms there are.
  static ListenAddress parse(std::string_view text);
  bool is_unix() const { return !unix_path.empty(); }
  bool loopback() const;  // a unix socket counts as loopback
  std::string str() const;
  bool operator==(const ListenAddress&) const = default;
};

}  // namespace stackmapd
