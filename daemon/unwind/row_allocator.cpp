// SPDX-License-Identifier: GPL-2.0
#include "daemon/unwind/row_allocator.h"

#include <algorithm>
#include <iterator>

namespace stackmapd {

RowAllocator::RowAllocator(uint32_t max_rows) : max_rows_(max_rows) {
  counts_.max_rows = max_rows;
  if (max_rows) free_.emplace(0, max_rows);
}

bool RowAllocator::take_rows(uint32_t n, uint32_t& first) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const auto [at, len] = *it;
    if (len < n) continue;
    free_.erase(it);
    if (len > n) free_.emplace(at + n, len - n);
    first = at;
    return true;
  }
  return false;
}

void RowAllocator::give_back(uint32_t first, uint32_t n) {
  auto [run, added] = free_.emplace(first, n);
  // Merged with its neighbours: a later big file needs one run.
  if (auto next = std::next(run); next != free_.end() && run->first + run->second == next->first) {
    run->second += next->second;
    free_.erase(next);
  }
  if (run != free_.begin()) {
    auto prev = std::prev(run);
    if (prev->first + prev->second == run->first) {
      prev->second += run->second;
      free_.erase(run);
    }
  }
}

bool RowAllocator::evict_one(uint64_t now, const LastUse& last_use) {
  auto oldest = placed_.end();
  uint64_t oldest_use = 0;
  for (auto it = placed_.begin(); it != placed_.end(); ++it) {
    const uint64_t use = std::max(last_use(it->first), it->second.placed_at);
    if (use + kInUseTicks > now) continue;  // in use: kept
    if (oldest == placed_.end() || use < oldest_use) {
      oldest = it;
      oldest_use = use;
    }
  }
  if (oldest == placed_.end()) return false;
  const auto n = static_cast<uint32_t>(oldest->first->rows.size());
  give_back(oldest->second.first, n);
  counts_.rows -= n;
  --counts_.tables;
  ++counts_.tables_evicted;
  evicted_.push_back(oldest->first);
  placed_.erase(oldest);
  return true;
}

std::optional<RowAllocator::Placement> RowAllocator::place(const Table& t, uint64_t now,
                                                           const LastUse& last_use) {
  if (auto it = placed_.find(t); it != placed_.end()) return Placement{it->second.first, false};
  const auto n = static_cast<uint32_t>(std::min<size_t>(t->rows.size(), UINT32_MAX));
  // No std::optional here: aarch64's gcc takes its value for uninitialized.
  uint32_t first = 0;
  bool found = n <= max_rows_ && take_rows(n, first);
  // Evicted one at a time, tried after each: freed rows join the free runs
  // around them, a run that may hold n where neither did alone.
  while (!found && n <= max_rows_ && evict_one(now, last_use)) found = take_rows(n, first);
  if (!found) {
    ++counts_.rows_full;
    return std::nullopt;
  }
  counts_.rows += n;
  ++counts_.tables;
  placed_.emplace(t, Placed{first, now});
  return Placement{first, true};
}

}  // namespace stackmapd
