// SPDX-License-Identifier: GPL-2.0
// The daemon's HTTP endpoints (--listen), served by a small responder of our
// own rather than a library: libmicrohttpd's static archive in Debian needs
// GnuTLS, which the static arm64 build (scripts/build-arm64.sh) cannot take
// along, and cpp-httplib and civetweb ship no static archive at all. What a
// scraper and a browser need is small: GET and HEAD, one request per
// connection, Connection: close.
//
// Like the control socket (daemon/run/control.h), every connection is
// non-blocking on the daemon's one event loop with a bounded buffer and two
// deadlines: one for its request head, one for reading its response. A client
// that never ends its head, never reads, or sends too much costs the loop
// nothing but its slot. Slots are shared out by daemon/sys/admission.h: a
// newcomer past a cap evicts the connection whose head has been incomplete
// longest, and gets one 503 only when every slot concerned holds a complete
// request. A handler may answer later (a delta profile): the connection then
// waits in its slot until respond() is called.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/http/listen_address.h"
#include "daemon/http/request.h"
#include "daemon/run/event_loop.h"
#include "daemon/sys/admission.h"
#include "daemon/sys/unique_fd.h"

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
  const ListenAddress& address() const { return address_; }
  size_t connections() const { return conns_.size(); }

 private:
  struct Conn {
    UniqueFd fd;
    std::string in;
    std::string out;                          // status line, headers, small body
    std::shared_ptr<const std::string> body;  // a shared body, sent after `out`
    std::shared_ptr<const void> lease;        // Response::lease
    size_t sent = 0;                          // of `out`, then of `body`
    EventLoop::Id watch = 0;
    EventLoop::Id deadline = 0;
  };

  void on_accept();
  void on_readable(uint64_t key);
  void on_writable(uint64_t key);
  void respond(uint64_t key, const Response& r, bool head);
  void drop(uint64_t key);
  void refuse(UniqueFd fd, const Response& r);

  EventLoop& loop_;
  ListenAddress address_;
  Handler handler_;
  Limits limits_;
  UniqueFd fd_;
  EventLoop::Id watch_ = 0;
  uint64_t next_key_ = 1;
  std::map<uint64_t, Conn> conns_;
  Admission admission_;
  // Held by every Respond: a late one finds the server gone.
  std::shared_ptr<Server*> self_ = std::make_shared<Server*>(this);
};

}  // namespace stackmapd::http
