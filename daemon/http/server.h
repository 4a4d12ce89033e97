// SPDX-License-Identifier: GPL-2.0
// The daemon's HTTP endpoints (--listen), served by a small responder of our
// own rather than a library: libmicrohttpd's static archive in Debian needs
// GnuTLS, which the static arm64 build (scripts/build-arm64.sh) cannot take
// along, and cpp-httplib and civetweb ship no static archive at all. What a
// scraper and a browser need is small: GET and HEAD, one request per
// connection, Connection: close.
//
// Connections, limits and deadlines are the stream server's
// (daemon/sys/stream_server.h); a head that never ends, a client that never
// reads or too many clients get their status from here: 408, or 503 only when
// every slot concerned holds a complete request. A handler may answer later
// (a delta profile): the connection then waits in its slot until respond()
// is called.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/http/request.h"
#include "daemon/sys/event_loop.h"
#include "daemon/sys/listen_address.h"
#include "daemon/sys/stream_server.h"

namespace stackmapd::http {

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // A large body shared by many responses (one export for every client):
  // sent from this buffer, never copied per connection; `body` is then unused.
  std::shared_ptr<const std::string> shared_body;
  // Held until the response is sent or dropped: lets an endpoint count its
  // responses in flight (waiting to be built, or being read).
  std::shared_ptr<const void> lease;
  std::vector<std::pair<std::string, std::string>> headers;  // beyond the usual ones
};

// A plain-text response carrying `reason`, for the errors.
Response error_response(int status, const std::string& reason);
// The bytes on the wire: status line, headers, and `body` unless `head` or
// the body is shared (then it follows these bytes on the wire).
std::string serialize(const Response& r, bool head);

class Server {
 public:
  // Sends the response; does nothing if the connection (or server) is gone.
  using Respond = std::function<void(Response)>;
  // Called in the loop for each complete request; calls respond() now or later.
  using Handler = std::function<void(const Request&, Respond respond)>;
  struct Limits {
    size_t max_connections = 64;
    size_t max_per_peer = 48;  // per source address: 16 slots stay for the others
    size_t max_head = 8192;
    std::chrono::milliseconds request_time{5000};    // connect to the end of the head
    std::chrono::milliseconds response_time{10000};  // for the client to read it all
  };

  // Listens on `address` (throws Error naming it and the fix); a unix socket
  // is made 0660 with `group` (kNoGroup: root's).
  Server(EventLoop& loop, const ListenAddress& address, gid_t group, Handler handler,
         Limits limits);
  ~Server();  // drops every connection; removes a unix socket
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The address listened on, with the kernel's port when 0 was asked.
  const ListenAddress& address() const { return stream_.address(); }
  size_t connections() const { return stream_.connections(); }

 private:
  void on_input(StreamServer::Key key, std::string_view in);

  Handler handler_;
  size_t max_head_;
  StreamServer stream_;
  // Held by every Respond: a late one finds the server gone.
  std::shared_ptr<Server*> self_ = std::make_shared<Server*>(this);
};

}  // namespace stackmapd::http
