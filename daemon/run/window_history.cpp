// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/window_history.h"

namespace stackmapd {

size_t WindowHistory::approx_bytes(const Snapshot& snap) {
  size_t n = sizeof(Snapshot);
  for (const StackRecord& s : snap.stacks)
    n += sizeof(s) + s.ips.size() * sizeof(uint64_t) + s.by.size() * (sizeof(KeyCount) + 32);
  n += snap.frames.size() * sizeof(Frame);
  for (const Callstack& c : snap.callstacks)
    n += sizeof(c) + (c.frames.size() + c.keys.size()) * sizeof(uint32_t);
  return n;
}

void WindowHistory::add(Clock::time_point at, Snap snap) {
  const size_t bytes = approx_bytes(*snap);
  entries_.push_back({at, std::move(snap), bytes});
  bytes_ += bytes;
  thin(at);
}

void WindowHistory::thin(Clock::time_point now) {
  auto drop_front = [this] {
    bytes_ -= entries_.front().bytes;
    entries_.pop_front();
  };
  while (!entries_.empty() && entries_.front().at < now - limits_.span) drop_front();
  // Past the fine span one per coarse step: drop an entry that follows the
  // kept one before it by less than a step.
  for (size_t i = 1; i < entries_.size() && entries_[i].at < now - limits_.fine;) {
    if (entries_[i].at - entries_[i - 1].at < limits_.coarse) {
      bytes_ -= entries_[i].bytes;
      entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  while (entries_.size() > 1 && bytes_ > limits_.max_bytes) drop_front();
}

WindowHistory::Base WindowHistory::oldest_within(Clock::time_point now,
                                                 Clock::duration window) const {
  for (const Entry& e : entries_)
    if (e.at >= now - window) return {e.snap, e.at};
  return {};
}

}  // namespace stackmapd
