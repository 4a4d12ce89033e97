// SPDX-License-Identifier: GPL-2.0
// Where the files' unwind rows sit in the walker's array of rows
// (stackmapd/abi/unwind.h), within its fixed budget: the bookkeeping of
// UnwindLoader, apart from the maps it writes (UnwindMaps), so that placement
// and eviction are tested without the kernel. A table's rows are placed once,
// in one run of free rows, however many files (copies with one build id) and
// processes use them. When a table does not fit, the tables used least
// recently are evicted first, but never one a walk used in the last
// kInUseTicks: a binary in use keeps its rows, and the newcomer is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "daemon/unwind/cfi_table.h"

namespace stackmapd {

struct RowCounts {
  uint64_t tables = 0;  // tables whose rows are placed
  uint64_t rows = 0;    // rows in use, of max_rows
  uint64_t max_rows = 0;
  uint64_t rows_full = 0;       // tables refused: the budget is full of tables in use
  uint64_t tables_evicted = 0;  // tables whose rows went to others: used least recently
};

class RowAllocator {
 public:
  using Table = std::shared_ptr<const CfiTable>;
  // Time in smt_unwind_file::used's unit (about a second, unwind_maps.h).
  using LastUse = std::function<uint64_t(const Table&)>;
  static constexpr uint64_t kInUseTicks = 30;

  explicit RowAllocator(uint32_t max_rows);

  struct Placement {
    uint32_t first = 0;  // the table's first row
    bool fresh = false;  // placed by this call: its rows are to be written there
  };
  // The rows of `t`, placed the first time; nullopt (counted) when they do
  // not fit. `now` and `last_use(table)`, when a walk last used a placed
  // table, decide what is evicted; a table counts as used when placed.
  std::optional<Placement> place(const Table& t, uint64_t now, const LastUse& last_use);
  // The tables evicted since the last call: their files' entries are to be
  // deleted, and walks waited out, before the new rows are written.
  std::vector<Table> take_evicted() { return std::exchange(evicted_, {}); }
  RowCounts counts() const { return counts_; }

 private:
  // A run of n free rows, taken (its first in `first`); false when none is that long.
  bool take_rows(uint32_t n, uint32_t& first);
  void give_back(uint32_t first, uint32_t n);
  // Evicts the least recently used table not in use; false when none is left.
  bool evict_one(uint64_t now, const LastUse& last_use);

  struct Placed {
    uint32_t first;
    uint64_t placed_at;
  };

  uint32_t max_rows_;
  std::map<Table, Placed> placed_;
  std::map<uint32_t, uint32_t> free_;  // runs of free rows: first -> count
  std::vector<Table> evicted_;         // not yet taken
  RowCounts counts_;
};

}  // namespace stackmapd
