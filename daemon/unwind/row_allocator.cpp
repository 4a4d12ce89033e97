// SPDX-License-Identifier: GPL-2.0
#include "daemon/unwind/row_allocator.h"

#include <algorithm>
#include <iterator>

namespace stackmapd {

RowAllocator::RowAllocator(uint32_t max_rows, ProcessGone gone)
    : max_rows_(max_rows), gone_(std::move(gone)) {
  counts_.max_rows = max_rows;
  if (max_rows) free_.emplace(0, max_rows);
}

std::optional<uint32_t> RowAllocator::take_rows(uint32_t n) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const auto [first, len] = *it;
    if (len < n) continue;
    free_.erase(it);
    if (len > n) free_.emplace(first + n, len - n);
    return first;
  }
  return std::nullopt;
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

std::optional<RowAllocator::Placement> RowAllocator::place(const Table& t, const Tables& loading) {
  if (auto it = placed_.find(t.get()); it != placed_.end())
    return Placement{it->second.first, false};
  const size_t n = t->rows.size();
  if (n > max_rows_) {
    ++counts_.rows_full;
    return std::nullopt;
  }
  std::optional<uint32_t> first = take_rows(static_cast<uint32_t>(n));
  // Tried again whatever reclaim freed: freed rows join the free runs
  // around them, a run that may hold n where neither did alone.
  if (!first) {
    reclaim(loading);
    first = take_rows(static_cast<uint32_t>(n));
  }
  if (!first) {
    ++counts_.rows_full;
    return std::nullopt;
  }
  counts_.rows += n;
  ++counts_.tables;
  placed_.emplace(t.get(), Placed{t, *first, 0});
  return Placement{*first, true};
}

void RowAllocator::set_users(uint32_t pid, Tables used) {
  // Counted before the old list is let go: a table in both keeps its place.
  for (const auto& t : used) ++placed_.at(t.get()).users;
  auto it = users_.find(pid);
  if (it != users_.end()) {
    for (const auto& t : it->second) --placed_.at(t.get()).users;
    users_.erase(it);
  }
  if (!used.empty()) users_.emplace(pid, std::move(used));
}

void RowAllocator::reclaim(const Tables& loading) {
  std::vector<uint32_t> gone;
  for (const auto& [pid, tables] : users_)
    if (gone_(pid)) gone.push_back(pid);
  for (const uint32_t pid : gone) {
    set_users(pid, {});
    gone_pids_.push_back(pid);
  }
  for (auto it = placed_.begin(); it != placed_.end();) {
    if (it->second.users || std::any_of(loading.begin(), loading.end(),
                                        [&](const auto& t) { return t.get() == it->first; })) {
      ++it;
      continue;
    }
    const auto n = static_cast<uint32_t>(it->first->rows.size());
    give_back(it->second.first, n);
    counts_.rows -= n;
    --counts_.tables;
    ++counts_.tables_freed;
    it = placed_.erase(it);
  }
}

}  // namespace stackmapd
