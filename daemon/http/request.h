// SPDX-License-Identifier: GPL-2.0
// The request head of our small HTTP/1.x responder (server.h): request line
// and headers, parsed from bytes as they arrive. Only what a scraper or a
// browser sends to a read-only endpoint is accepted: GET or HEAD, no body,
// a bounded head. Everything else gets the status that names its problem.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace stackmapd::http {

struct Request {
  bool head = false;   // HEAD: the response without its body
  std::string target;  // as sent: "/metrics?x=1"
  std::string path;    // percent-decoded, without the query: "/metrics"
  std::string query;   // after '?', raw: "seconds=10"
};

struct ParseResult {
  enum class State { incomplete, done, error } state = State::incomplete;
  Request request;     // when done
  int status = 0;      // when error: 400, 405, 413, 414, 431, 505
  std::string reason;  // when error: one line for the client
};

// Parses `buf`, everything the client sent so far. incomplete until the
// blank line ending the head; an error as soon as the bytes so far show one
// (a head past max_head bytes without its end: 431).
ParseResult parse_request(std::string_view buf, size_t max_head);

// The value of `name` in a query string ("seconds=10&x=y"), percent-decoded.
std::optional<std::string> query_param(std::string_view query, std::string_view name);

}  // namespace stackmapd::http
