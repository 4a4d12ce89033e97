// SPDX-License-Identifier: GPL-2.0
// The daemon's non-blocking stream server, under the control socket's line
// protocol (daemon/run/control.h) and HTTP (daemon/http/server.h). It listens
// (unix or TCP, listen_socket.h), accepts, and keeps each connection on the
// daemon's one event loop with a bounded buffer and two deadlines: one from
// accept to the end of its request (a trickle cannot extend it), one for the
// client to read its whole reply. A client that is slow, silent, never reads
// or sends too much costs the loop nothing but its slot. Slots are shared out
// by admission.h: a newcomer past a cap evicts the connection whose request
// has been incomplete longest, and is refused only when every slot concerned
// holds a complete request.
//
// The protocol on top sees the request's bytes as they arrive and answers
// with reply(), at once or later. Keys are never reused: a late reply to a
// connection that is gone is dropped.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "daemon/sys/admission.h"
#include "daemon/sys/event_loop.h"
#include "daemon/sys/listen_socket.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

class StreamServer {
 public:
  using Key = uint64_t;
  struct Limits {
    size_t max_connections;
    size_t max_per_peer;
    std::chrono::milliseconds request_time;  // accept to the end of the request
    std::chrono::milliseconds reply_time;    // for the client to read its reply
  };
  struct Protocol {
    // Each time bytes arrive, with the request's bytes so far (valid until
    // reply() or await_reply()): calls reply() (a whole request, or a bad
    // one) or await_reply(), or nothing to read on.
    std::function<void(Key, std::string_view request)> on_input;
    // What the server sends on its own, one try, never waiting:
    std::string refused;    // a newcomer, when every slot concerned holds a request
    std::string evicted;    // the connection a newcomer evicts
    std::string timed_out;  // a request not ended within request_time
    std::string cut_short;  // the client ended its side first; empty: just close
  };

  // Listens on `address` (throws Error) and serves it on `loop` from now on.
  StreamServer(EventLoop& loop, const ListenAddress& address, gid_t group, const ListenPurpose& why,
               Limits limits, Protocol protocol);
  ~StreamServer();  // drops every connection; removes a unix socket
  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;

  // The request is whole: nothing more is read and its deadline is off;
  // reply() follows, now or later.
  void await_reply(Key key);
  // Sends `head`, then `body` when given (shared, never copied), holding
  // `lease` until the connection ends. The first reply only.
  void reply(Key key, std::string head, std::shared_ptr<const std::string> body = nullptr,
             std::shared_ptr<const void> lease = nullptr);

  // The address listened on, with the kernel's port when 0 was asked.
  const ListenAddress& address() const { return address_; }
  size_t connections() const { return conns_.size(); }

 private:
  struct Conn {
    UniqueFd fd;
    std::string in;       // the request so far
    bool reading = true;  // false once whole, answered or awaited
    bool replied = false;
    std::string out;                          // the reply's head, or all of it
    std::shared_ptr<const std::string> body;  // a shared body, sent after `out`
    std::shared_ptr<const void> lease;
    size_t sent = 0;  // of `out`, then of `body`
    EventLoop::Id watch = 0;
    EventLoop::Id deadline = 0;
  };

  void on_accept();
  void on_readable(Key key);
  void on_writable(Key key);
  void stop_reading(Conn& c, Key key);
  void drop(Key key);
  static void refuse(UniqueFd fd, const std::string& why);

  EventLoop& loop_;
  ListenAddress address_;
  Limits limits_;
  Protocol protocol_;
  UniqueFd fd_;
  EventLoop::Id watch_ = 0;
  Key next_key_ = 1;
  std::map<Key, Conn> conns_;
  Admission admission_;
};

}  // namespace stackmapd
