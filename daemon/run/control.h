// SPDX-License-Identifier: GPL-2.0
// The control channel: a Unix stream socket in the runtime directory. A client
// sends one line ("stat", "top 20", "reset", "snapshot", "reload") and reads
// the reply: "ok\n" or "error\n", then the text, until the daemon closes.
// Access is the socket file's: mode 0660, root and the export group.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace stackmapd {

class ControlServer {
 public:
  ControlServer(const std::string& path, gid_t group);  // throws Error
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  int fd() const { return fd_; }

  struct Request {
    int client;  // reply() closes it
    std::string line;
  };
  // One pending client and its request line; nullopt if none is waiting or
  // it sent nothing usable within a short timeout.
  std::optional<Request> accept_request();
  static void reply(int client, bool ok, const std::string& body);

 private:
  std::string path_;
  int fd_ = -1;
};

// Sends `request` to the daemon at `socket_path`. nullopt when no daemon
// listens there; throws Error with the daemon's message on an error reply.
std::optional<std::string> control_request(const std::string& socket_path,
                                           const std::string& request);

}  // namespace stackmapd
