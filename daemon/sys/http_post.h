// SPDX-License-Identifier: GPL-2.0
// A small HTTP/1.1 client for one thing: POST a body to an http:// URL and
// read the status, over plain TCP, one connection per request. Every step
// has its deadline (connect, send, receive), and a cancel fd aborts it at
// once, so the thread that calls it can always be stopped. No TLS: an
// https:// URL is refused where it is parsed.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace stackmapd {

struct HttpUrl {
  std::string host, port, path;  // host without brackets; port "80" when none is given

  // "http://HOST[:PORT]/PATH"; throws Error naming `what` (the option) and the fix.
  static HttpUrl parse(const std::string& url, const char* what);
  std::string str() const;
};

struct HttpTimeouts {
  std::chrono::milliseconds connect{3000}, send{10000}, receive{10000};
};

struct HttpPostResult {
  int status = 0;     // 0: no response (see error)
  std::string error;  // the network failure: "connection reset", "timed out sending", ...
  bool timed_out = false;
  std::optional<int> retry_after_s;  // Retry-After in seconds, when the response has it
};

// `cancel_fd` (-1: none) readable aborts the request ("cancelled").
HttpPostResult http_post(const HttpUrl& url, std::string_view content_type, std::string_view body,
                         const HttpTimeouts& timeouts, int cancel_fd = -1);

}  // namespace stackmapd
