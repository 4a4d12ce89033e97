// SPDX-License-Identifier: GPL-2.0
// Whether a process has exited: what the state kept per pid (unwind rows,
// --by keys) asks before letting it go. A seam, so that tests say which
// processes live.
#pragma once

#include <signal.h>

#include <cerrno>
#include <cstdint>
#include <functional>

namespace stackmapd {

// Whether process `pid` exited and was reaped.
using ProcessGone = std::function<bool(uint32_t pid)>;

// kill(pid, 0): a zombie still answers, so what it held waits until it is
// reaped. A thread's id answers as well, while the thread lives.
inline bool process_gone(uint32_t pid) {
  return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace stackmapd
