// SPDX-License-Identifier: GPL-2.0
// The wall clock as the exports stamp their profiles (OTLP's time_unix_nano,
// pprof's time_nanos): CLOCK_REALTIME, nanoseconds since the epoch. Timers
// use EventLoop::Clock instead (steady: the wall clock may jump).
#pragma once

#include <chrono>
#include <cstdint>

namespace stackmapd {

inline int64_t realtime_nanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace stackmapd
