// SPDX-License-Identifier: GPL-2.0
// The client side of the stream server tests (stream, control, HTTP): the
// test's own thread turns the server's loop while it reads as a client.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "daemon/sys/event_loop.h"
#include "daemon/sys/unique_fd.h"

namespace stackmapd {

// Turns `loop` until `fd` has everything up to its end of file, or `limit`
// passes ("<no end of file>" appended). Fails if one turn waited on a client:
// a wait lasts a client's deadline (2 s in these tests), so 1.5 s tells the
// two apart however loaded the machine, emulated (arm64 under qemu-user) too.
inline std::string read_to_end(EventLoop& loop, const UniqueFd& fd,
                               std::chrono::milliseconds limit) {
  using namespace std::chrono_literals;
  std::string out;
  const auto end = EventLoop::Clock::now() + limit;
  while (EventLoop::Clock::now() < end) {
    const auto t = EventLoop::Clock::now();
    loop.run_once(10ms);
    EXPECT_LT(EventLoop::Clock::now() - t, 1500ms) << "a turn of the loop waited";
    char buf[65536];
    for (;;) {
      const ssize_t n = recv(fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return out;
      break;
    }
  }
  return out + "<no end of file>";
}

// Turns `loop` for `d`, `step` at most a turn.
inline void turn_loop_for(EventLoop& loop, std::chrono::milliseconds d,
                          std::chrono::milliseconds step) {
  const auto end = EventLoop::Clock::now() + d;
  while (EventLoop::Clock::now() < end) loop.run_once(step);
}

}  // namespace stackmapd
