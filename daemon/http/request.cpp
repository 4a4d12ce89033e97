// SPDX-License-Identifier: GPL-2.0
#include "daemon/http/request.h"

#include <algorithm>
#include <cctype>

namespace stackmapd::http {

namespace {

constexpr size_t kMaxTarget = 2048;

ParseResult error(int status, std::string reason) {
  ParseResult r;
  r.state = ParseResult::State::error;
  r.status = status;
  r.reason = std::move(reason);
  return r;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// nullopt on a broken escape or a decoded NUL.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += plus_is_space && c == '+' ? ' ' : c;
    }
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Lines end in CRLF or a bare LF (RFC 9112 2.2 lets a server take both).
std::string_view next_line(std::string_view& rest) {
  size_t nl = rest.find('\n');
  std::string_view line = rest.substr(0, nl);
  rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

ParseResult parse_request_line(std::string_view line) {
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return error(400, "malformed request line: send 'GET /path HTTP/1.1'");
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    if (version.substr(0, 5) != "HTTP/")
      return error(400, "malformed request line: send 'GET /path HTTP/1.1'");
    return error(505, "only HTTP/1.0 and HTTP/1.1 are served");
  }
  if (method != "GET" && method != "HEAD")
    return error(405, "only GET and HEAD are served: the endpoints are read-only");
  if (target.size() > kMaxTarget) return error(414, "request target too long");
  if (target.empty() || target[0] != '/')
    return error(400, "request target must be a path starting with '/'");
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return error(400, "request target holds a control character");
  ParseResult r;
  r.state = ParseResult::State::done;
  r.request.head = method == "HEAD";
  r.request.target = std::string(target);
  size_t q = target.find('?');
  auto path = percent_decode(target.substr(0, q), false);
  if (!path) return error(400, "bad percent-escape in the request path");
  r.request.path = *path;
  if (q != std::string_view::npos) {
    // A malformed escape in any parameter is the client's error, said here:
    // query_param() could only take it for a parameter not given.
    for (std::string_view query = target.substr(q + 1); !query.empty();) {
      const size_t amp = query.find('&');
      if (!percent_decode(query.substr(0, amp), true))
        return error(400, "bad percent-escape in the query: escape '%' as %25");
      query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
    }
    r.request.query = std::string(target.substr(q + 1));
  }
  return r;
}

}  // namespace

ParseResult parse_request(std::string_view buf, size_t max_head) {
  // Browsers may send an empty line before a request (RFC 9112 2.2). What is
  // skipped still counts against max_head: blank lines are not free.
  const size_t received = buf.size();
  while (buf.substr(0, 2) == "\r\n") buf.remove_prefix(2);
  while (buf.substr(0, 1) == "\n") buf.remove_prefix(1);
  const size_t skipped = received - buf.size();
  size_t end = std::string_view::npos, crlf = buf.find("\r\n\r\n"), lf = buf.find("\n\n");
  size_t head_size = 0;
  if (crlf != std::string_view::npos) end = crlf, head_size = skipped + crlf + 4;
  if (lf != std::string_view::npos && lf < end) end = lf, head_size = skipped + lf + 2;

  // The request line can be judged before the head is complete.
  size_t first_nl = buf.find('\n');
  if (first_nl != std::string_view::npos) {
    std::string_view rest = buf;
    ParseResult line = parse_request_line(next_line(rest));
    if (line.state == ParseResult::State::error) return line;
  } else if (received > max_head) {
    return error(431, "request head too large");
  } else if (buf.size() > kMaxTarget + 32) {  // a request line this long holds a long target
    return error(414, "request target too long");
  }
  if (end == std::string_view::npos) {
    if (received > max_head) return error(431, "request head too large");
    return {};
  }
  if (head_size > max_head) return error(431, "request head too large");

  std::string_view rest = buf.substr(0, head_size - skipped);
  ParseResult r = parse_request_line(next_line(rest));
  while (!rest.empty()) {
    std::string_view line = next_line(rest);
    if (line.empty()) break;
    size_t colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos || line[0] == ' ' || line[0] == '\t')
      return error(400, "malformed header line");
    std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
    if (name.find_first_of(" \t") != std::string_view::npos)
      return error(400, "malformed header line");
    // No endpoint takes a body; one announced would be read as the next request.
    if (iequals(name, "Transfer-Encoding") || (iequals(name, "Content-Length") && value != "0"))
      return error(413, "a request body is not accepted: the endpoints are read-only");
  }
  return r;
}

std::optional<std::string> query_param(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
    size_t eq = item.find('=');
    auto key = percent_decode(item.substr(0, eq), true);
    if (!key || *key != name) continue;
    if (eq == std::string_view::npos) return std::string();
    return percent_decode(item.substr(eq + 1), true);
  }
  return std::nullopt;
}

}  // namespace stackmapd::http
