// SPDX-License-Identifier: GPL-2.0
// The control channel: a Unix stream socket in the runtime directory. A client
// sends one line ("stat", "top 20", "reset", "snapshot", "reload") and reads
// the reply: "ok\n" or "error\n", then the text, until the daemon closes.
// Access is the socket file's: mode 0660, root and the export group.
//
// Every client is non-blocking on the daemon's event loop (daemon/run/event_loop.h)
// with its own small buffer and a deadline for its request line and one for
// reading its reply; a client that is slow, silent or never reads costs the
// loop nothing but its slot. Slots are shared out by daemon/sys/admission.h
// (per uid, SO_PEERCRED): a newcomer past a cap evicts the client that has
// waited longest without a whole line, and is refused with one line only when
// every slot concerned holds a request. Requests are answered in the loop,
// one at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "daemon/run/event_loop.h"
#include "daemon/sys/admission.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

struct ControlReply {
  bool ok;
  std::string text;
};

class ControlServer {
 public:
  // Answers one request line (without its newline); an exception it throws
  // is sent back as the error text.
  using Handler = std::function<ControlReply(const std::string& line)>;
  struct Limits {
    size_t max_clients = 16;
    size_t max_per_peer = 12;  // per uid: 4 slots stay for the other users
    size_t max_line = 1024;
    std::chrono::milliseconds request_time{3000};  // connect to newline
    std::chrono::milliseconds reply_time{5000};    // for the client to read it all
  };

  // Listens on `path` (throws Error) and serves it on `loop` from now on.
  ControlServer(EventLoop& loop, const std::string& path, gid_t group, Handler handler);
  ControlServer(EventLoop& loop, const std::string& path, gid_t group, Handler handler,
                Limits limits);
  ~ControlServer();  // drops every client, removes the socket
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  size_t clients() const { return clients_.size(); }

 private:
  struct Client {
    UniqueFd fd;
    std::string in;   // the request line so far
    std::string out;  // the reply, from `sent` on still to write
    size_t sent = 0;
    EventLoop::Id watch = 0;
    EventLoop::Id deadline = 0;
  };

  void on_accept();
  void on_readable(uint64_t key);
  void on_writable(uint64_t key);
  void answer(uint64_t key, bool ok, std::string text);
  void drop(uint64_t key);
  void refuse(UniqueFd fd, const std::string& why);

  EventLoop& loop_;
  std::string path_;
  Handler handler_;
  Limits limits_;
  UniqueFd fd_;
  EventLoop::Id watch_ = 0;
  uint64_t next_key_ = 1;
  std::map<uint64_t, Client> clients_;
  Admission admission_;
};

// Sends `request` to the daemon at `socket_path`. nullopt when no daemon
// listens there; throws Error with the daemon's message on an error reply.
std::optional<std::string> control_request(const std::string& socket_path,
                                           const std::string& request);

}  // namespace stackmapd
