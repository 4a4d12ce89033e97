// SPDX-License-Identifier: GPL-2.0
// The control channel: a Unix stream socket in the runtime directory. A client
// sends one line ("stat", "top 20", "reset", "snapshot", "reload") and reads
// the reply: "ok\n" or "error\n", then the text, until the daemon closes.
// Access is the socket file's: mode 0660, root and the export group.
//
// Clients, limits and deadlines are the stream server's
// (daemon/sys/stream_server.h), with slots shared out per uid (SO_PEERCRED);
// a client that never ends its line, never reads or comes one too many gets
// one error line from here. A request is taken in the loop; its answer may
// come later (a snapshot finished on a worker), from the loop's thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/sys/event_loop.h"
#include "daemon/sys/stream_server.h"

namespace stackmapd {

struct ControlReply {
  bool ok;
  std::string text;
};

class ControlServer {
 public:
  // Sends the answer, now or in a later turn of the loop; once.
  using Respond = std::function<void(ControlReply)>;
  // Takes one request line (without its newline) and calls respond(); an
  // exception it throws is sent back as the error text.
  using Handler = std::function<void(const std::string& line, const Respond& respond)>;
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
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  size_t clients() const { return stream_.connections(); }

 private:
  void on_input(StreamServer::Key key, std::string_view in);

  Handler handler_;
  size_t max_line_;
  StreamServer stream_;
};

// Sends `request` to the daemon at `socket_path`. nullopt when no daemon
// listens there; throws Error with the daemon's message on an error reply.
std::optional<std::string> control_request(const std::string& socket_path,
                                           const std::string& request);

}  // namespace stackmapd
