// SPDX-License-Identifier: GPL-2.0
// The live page's time windows (last minute, last 10 minutes): snapshots
// the HTTP endpoints took, kept in memory, bounded. A window's profile is
// the newest snapshot less the oldest kept inside the window
// (delta_snapshot). Kept: every snapshot of the last `fine` span, then one
// per `coarse` step back to `span`, and never more than `max_bytes` (the
// oldest go first). Snapshots are immutable and shared with the worker that
// reads them. The loop's only: no locks.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>

#include "daemon/model/snapshot.h"

namespace stackmapd {

class WindowHistory {
 public:
  using Clock = std::chrono::steady_clock;
  using Snap = std::shared_ptr<const Snapshot>;
  struct Limits {
    Clock::duration fine = std::chrono::seconds(70);
    Clock::duration coarse = std::chrono::seconds(60);
    Clock::duration span = std::chrono::minutes(11);
    size_t max_bytes = 64 << 20;
  };
  struct Base {
    Snap snap;
    Clock::time_point at;
  };

  WindowHistory() = default;
  explicit WindowHistory(Limits limits) : limits_(limits) {}

  void add(Clock::time_point at, Snap snap);
  // The oldest snapshot taken at or after `now - window`; none (null) when
  // none is kept there.
  Base oldest_within(Clock::time_point now, Clock::duration window) const;

  size_t size() const { return entries_.size(); }
  size_t bytes() const { return bytes_; }
  // What a snapshot holds in memory, roughly: its stacks, frames and keys.
  static size_t approx_bytes(const Snapshot& snap);

 private:
  struct Entry {
    Clock::time_point at;
    Snap snap;
    size_t bytes;
  };
  void thin(Clock::time_point now);

  Limits limits_;
  std::deque<Entry> entries_;  // oldest first
  size_t bytes_ = 0;
};

}  // namespace stackmapd
