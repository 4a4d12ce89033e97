// SPDX-License-Identifier: GPL-2.0
// --user-stacks on x86_64: fills the BPF walker's maps (stackmapd/abi/unwind.h).
// Tables are per file: a file's table is built once, the first time the
// kernel side asks for it (a process mapped it, or a walk met it) or a
// process's maps name it, and serves every process that maps it, from its
// first event. Copies of one binary (one build id) share their rows. Rows
// live in a fixed budget; when a table does not fit, the tables walks used
// least recently make room (RowAllocator), and a budget full of tables in
// use refuses the newcomer, said once with the fix.
//
// The kernel side writes process entries itself as processes exec, fork and
// map code (bpf/unwind_fill.bpf.h); the daemon writes them for processes
// that ran before the session, from /proc/PID/maps, and adds what only maps
// show (the vdso of a process that ran before, JIT code). Composed of the
// rows' bookkeeping (RowAllocator) and the maps' reader and writer
// (UnwindMaps). One thread uses an instance (UnwindThread's).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "daemon/symbols/user_maps.h"
#include "daemon/unwind/cfi_cache.h"
#include "daemon/unwind/row_allocator.h"
#include "daemon/unwind/unwind_maps.h"
#include "stackmapd/abi.h"

namespace stackmapd {

struct UnwindCounts {
  uint64_t processes = 0;   // process entries the daemon wrote (from /proc/PID/maps)
  uint64_t asked = 0;       // files the kernel side asked for
  uint64_t asked_gone = 0;  // ... by a process gone before the file was opened: asked again
  uint64_t tables = 0;      // tables whose rows are loaded
  uint64_t rows = 0;        // rows in use, of max_rows
  uint64_t max_rows = 0;
  uint64_t no_table = 0;        // files left to frame pointers: no CFI, unreadable, gone
  uint64_t rows_full = 0;       // tables refused: the budget is full of tables in use
  uint64_t tables_evicted = 0;  // tables whose rows went to others: used least recently
  uint64_t mappings_over = 0;   // processes with more code mappings than an entry lists
};

class UnwindLoader {
 public:
  // The maps of the daemon's own object (BpfObject), `max_rows` the rows
  // map's size; `build` makes a file's table (the daemon's parses in its
  // sandbox). `proc` is the proc filesystem's root, `clock` what
  // smt_unwind_file::used counts in (tests pass others).
  UnwindLoader(const UnwindMapFds& fds, uint32_t max_rows, CfiBuilder build,
               std::string proc = "/proc", std::function<uint64_t()> clock = unwind_clock_now);

  static constexpr uint32_t kAnyExec = UINT32_MAX;  // not known yet (SMT_UNWIND_ANY_EXEC)

  // The kernel side asked for the table of a file a process maps: built and
  // loaded, once per file (a file that has none is not tried again).
  void want(const smt_unwind_wanted& w);
  // Writes the entry of process `pid` in exec `exec_id` from its `maps`,
  // keeping the code the kernel side listed since that the maps do not show;
  // false when the kernel refused it (counted nowhere else: the walker then
  // gives that process's stacks their leaf only, SMC_USER_NOT_LOADED).
  bool load(uint32_t pid, uint32_t exec_id, const ProcessMaps& maps);
  UnwindCounts counts() const;
  // The ring the kernel side asks for files on (struct smt_unwind_wanted).
  int wanted_fd() const { return wanted_fd_; }

 private:
  using Key = std::pair<uint64_t, uint32_t>;  // (inode, device)
  using Table = RowAllocator::Table;
  // The table of file `key`, mapped from file offset `pgoff`, loaded from
  // `open_path` unless it is already; false when the file has none.
  bool load_file(const Key& key, const std::string& open_path, uint64_t pgoff);
  // The vdso's table under SMT_UNWIND_VDSO_INO, built from our own at first need.
  bool load_vdso();
  // Writes the file entry of `key` for table `t`, placed (evicting) first.
  bool place(const Key& key, const Table& t, uint64_t pc_off);
  uint64_t last_use(const Table& t) const;

  UnwindMaps maps_;
  int wanted_fd_;
  RowAllocator rows_;
  CfiCache tables_;
  std::string proc_;
  std::function<uint64_t()> clock_;
  std::map<Key, Table> files_;           // loaded, by file
  std::map<Key, std::string> no_table_;  // files that have none: why
  std::optional<bool> vdso_;             // whether the vdso's table is in, once tried
  bool said_full_ = false;               // the budget's one line said
  UnwindCounts counts_;  // processes, asked, no_table, mappings_over: the rest are rows_'
};

}  // namespace stackmapd
