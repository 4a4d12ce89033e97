// SPDX-License-Identifier: GPL-2.0
// A listening stream socket, unix or TCP (listen_address.h), non-blocking,
// for stream_server.h.
#pragma once

#include <sys/types.h>

#include <string>

#include "daemon/sys/listen_address.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

// Who listens, for messages: "cannot bind ADDRESS for `purpose`: ...: check `option`".
struct ListenPurpose {
  std::string purpose;  // "HTTP"
  std::string option;   // "--listen"
};

// Listens on `address` (throws Error naming it, the purpose and the fix). A
// socket left at a unix path by a daemon that was killed is replaced; the new
// one is made 0660 with `group` (-1: the creator's).
UniqueFd listen_on(const ListenAddress& address, gid_t group, const ListenPurpose& why);

// The port the kernel chose for a TCP socket bound to port 0.
uint16_t bound_port(int fd);

}  // namespace stackmapd
