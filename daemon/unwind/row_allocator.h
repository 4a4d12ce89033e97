// SPDX-License-Identifier: GPL-2.0
// Where the files' unwind rows sit in the walker's fixed array of rows
// (stackmapd/abi/unwind.h) and which processes are listed with them: the
// bookkeeping of UnwindLoader, apart from the maps it writes (UnwindMaps),
// so that placement is tested without the kernel. A file's rows are placed
// once, however many processes use them, in one run of free rows, and stay
// while a process listed with them lives. When a file does not fit, the
// processes that exited are forgotten and the rows only they used are given
// back first.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "daemon/sys/process_gone.h"
#include "daemon/unwind/cfi_table.h"

namespace stackmapd {

struct RowCounts {
  uint64_t tables = 0;  // files whose rows are placed
  uint64_t rows = 0;    // rows in use, of max_rows
  uint64_t max_rows = 0;
  uint64_t rows_full = 0;     // files not placed: no run of free rows long enough
  uint64_t tables_freed = 0;  // files whose rows were given back: their processes exited
};

class RowAllocator {
 public:
  using Table = std::shared_ptr<const CfiTable>;
  using Tables = std::vector<Table>;

  explicit RowAllocator(uint32_t max_rows, ProcessGone gone = process_gone);

  struct Placement {
    uint32_t first = 0;  // the table's first row
    bool fresh = false;  // placed by this call: its rows are to be written there
  };
  // The rows of `t`, placed the first time; nullopt (counted) when full.
  // `loading`: the tables the entry being built lists so far, kept though
  // no process is listed with them yet.
  std::optional<Placement> place(const Table& t, const Tables& loading);
  // Process `pid` is now listed with `used` (none: forgotten); the tables it
  // was listed with before are let go after `used` is counted.
  void set_users(uint32_t pid, Tables used);
  // The processes forgotten as gone since the last call: their entries are
  // to be deleted before the rows they used are written over.
  std::vector<uint32_t> take_gone() { return std::exchange(gone_pids_, {}); }
  RowCounts counts() const { return counts_; }

 private:
  // A run of n free rows, taken; nullopt when none is that long.
  std::optional<uint32_t> take_rows(uint32_t n);
  void give_back(uint32_t first, uint32_t n);
  // Forgets the processes that exited and gives back the rows no living
  // process is listed with, but `loading`'s.
  void reclaim(const Tables& loading);

  struct Placed {
    Table table;
    uint32_t first;
    uint32_t users;  // processes listed with these rows
  };

  uint32_t max_rows_;
  ProcessGone gone_;
  std::map<const CfiTable*, Placed> placed_;
  std::map<uint32_t, Tables> users_;   // by pid: the tables its entry lists
  std::map<uint32_t, uint32_t> free_;  // runs of free rows: first -> count
  std::vector<uint32_t> gone_pids_;    // forgotten, not yet taken
  RowCounts counts_;
};

}  // namespace stackmapd
