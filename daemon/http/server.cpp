// SPDX-License-Identifier: GPL-2.0
#include "daemon/http/server.h"

#include <utility>

namespace stackmapd::http {

namespace {

const char* status_text(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
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
  // 204 has no content, and so no Content-Length (RFC 9110 8.6).
  if (r.status != 204) {
    out += "Content-Type: " + r.content_type + "\r\n";
    const size_t length = r.shared_body ? r.shared_body->size() : r.body.size();
    out += "Content-Length: " + std::to_string(length) + "\r\n";
  }
  out += "Connection: close\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n";
  for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
  out += "\r\n";
  if (!head && !r.shared_body && r.status != 204) out += r.body;
  return out;
}

Server::Server(EventLoop& loop, const ListenAddress& address, gid_t group, Handler handler,
               Limits limits)
    : handler_(std::move(handler)),
      max_head_(limits.max_head),
      stream_(
          loop, address, group, {"HTTP", "--listen"},
          {limits.max_connections, limits.max_per_peer, limits.request_time, limits.response_time},
          {[this](StreamServer::Key key, std::string_view in) { on_input(key, in); },
           serialize(error_response(503, "too many HTTP connections at once (" +
                                             std::to_string(limits.max_connections) + ", " +
                                             std::to_string(limits.max_per_peer) +
                                             " per address): try again in a moment"),
                     false),
           serialize(error_response(408,
                                    "request head not complete: a newer client took "
                                    "its slot"),
                     false),
           serialize(error_response(408, "request head not complete in time"), false), ""}) {}

Server::~Server() { *self_ = nullptr; }

void Server::on_input(StreamServer::Key key, std::string_view in) {
  ParseResult p = parse_request(in, max_head_);
  if (p.state == ParseResult::State::incomplete) return;
  if (p.state == ParseResult::State::error)
    return stream_.reply(key, serialize(error_response(p.status, p.reason), false));
  stream_.await_reply(key);
  std::weak_ptr<Server*> self = self_;
  const bool head = p.request.head;
  handler_(p.request, [self, key, head](Response r) {
    auto s = self.lock();
    if (!s || !*s) return;
    (*s)->stream_.reply(key, serialize(r, head), head ? nullptr : r.shared_body, r.lease);
  });
}

}  // namespace stackmapd::http
