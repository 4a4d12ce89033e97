// SPDX-License-Identifier: GPL-2.0
// Drops come in bursts (a full ring buffer while the consumer falls behind):
// one report per burst, with how many and over how long, instead of a line
// per drop or one line ever. A burst ends after `quiet` without a new drop;
// one that goes on is also reported every `longest`. The caller passes the
// time, so tests drive it with a clock of their own.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace stackmapd {

class DropBursts {
 public:
  using Clock = std::chrono::steady_clock;
  struct Burst {
    uint64_t dropped;
    double seconds;  // from the last look without drops to the last look with some
  };

  DropBursts(Clock::duration quiet, Clock::duration longest) : quiet_(quiet), longest_(longest) {}

  // total: the drops counted so far (it only grows; a smaller one is a new
  // count from zero). The first look sets where counting starts. Returns a
  // burst to report when one ended, or went on for `longest`.
  std::optional<Burst> observe(Clock::time_point now, uint64_t total) {
    std::optional<Burst> out;
    if (started_ && total < last_total_) out = finish();
    if (!started_ || total < last_total_) {
      started_ = true;
    } else if (total > last_total_) {
      if (!open_) {
        open_ = true;
        burst_from_ = last_total_;
        burst_start_ = last_look_;
      }
      last_drop_ = now;
      last_total_ = total;
      if (now - burst_start_ >= longest_) {
        out = Burst{total - burst_from_, seconds(now - burst_start_)};
        burst_from_ = total;
        burst_start_ = now;
      }
    } else if (open_ && now - last_drop_ >= quiet_) {
      out = close();
    }
    last_total_ = total;
    last_look_ = now;
    return out;
  }

  // The end of counting: the burst still open, if any.
  std::optional<Burst> finish() { return open_ ? close() : std::nullopt; }

 private:
  static double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
  std::optional<Burst> close() {
    open_ = false;
    // Nothing since the part reported for going on too long: said already.
    if (last_total_ == burst_from_) return std::nullopt;
    return Burst{last_total_ - burst_from_, seconds(last_drop_ - burst_start_)};
  }

  Clock::duration quiet_, longest_;
  bool started_ = false, open_ = false;
  uint64_t last_total_ = 0, burst_from_ = 0;
  Clock::time_point last_look_, burst_start_, last_drop_;
};

}  // namespace stackmapd
