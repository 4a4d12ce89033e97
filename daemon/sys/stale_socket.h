// SPDX-License-Identifier: GPL-2.0
// A unix socket path left by a daemon that was killed: bind() needs it gone,
// but only a dead socket may go, never a file of somebody else's.
#pragma once

#include <string>

namespace stackmapd {

// Removes `path` when it is a socket nobody listens on (connect refused);
// does nothing when nothing is there. Throws Error, changing nothing, when
// it is anything else: a live socket, a regular file, a directory.
void remove_stale_socket(const std::string& path);

}  // namespace stackmapd
