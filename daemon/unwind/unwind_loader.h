// SPDX-License-Identifier: GPL-2.0
// --user-stacks on x86_64: fills the BPF walker's maps (stackmapd/abi/unwind.h)
// as the resolver's worker first sees each process, while it lives: every
// code mapping of the process, with its file's rows (one copy per file,
// however many processes map it), written before the process's entry, so the
// walker never follows an entry to rows not there yet. Code without a table
// (JIT code, a file without CFI) is listed without rows: the walker follows
// frame pointers there. A file's rows stay while any process listed with
// them lives; when a file does not fit, the rows of files only exited
// processes used are given back first. Composed of the rows' bookkeeping
// (RowAllocator) and the maps' writer (UnwindMaps). One thread uses an
// instance (UnwindThread's).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/symbols/user_maps.h"
#include "daemon/unwind/cfi_cache.h"
#include "daemon/unwind/row_allocator.h"
#include "daemon/unwind/unwind_maps.h"
#include "stackmapd/abi.h"

namespace stackmapd {

struct UnwindCounts {
  uint64_t processes = 0;  // process entries written (an exec or dlopen: again)
  uint64_t tables = 0;     // files whose rows are loaded
  uint64_t rows = 0;       // rows in use, of max_rows
  uint64_t max_rows = 0;
  uint64_t no_table = 0;       // code mappings left to frame pointers: no CFI, unreadable
  uint64_t rows_full = 0;      // files not loaded: no room left for their rows
  uint64_t tables_freed = 0;   // files whose rows were given back: their processes exited
  uint64_t mappings_over = 0;  // processes with more code mappings than an entry lists
};

class UnwindLoader {
 public:
  // The maps of the daemon's own object: `rows_fd` an mmapable array of
  // `max_rows` rows, `procs_fd` the per-process hash (BpfObject); `build`
  // makes a file's table (the daemon's parses in its sandbox).
  UnwindLoader(int rows_fd, uint32_t max_rows, int procs_fd, CfiBuilder build);

  static constexpr uint32_t kAnyExec = UINT32_MAX;  // not known yet (SMT_UNWIND_ANY_EXEC)

  // Writes the entry of process `pid` in exec `exec_id` from its `maps`;
  // false when the kernel refused it (counted nowhere else: the walker then
  // gives that process's stacks their leaf only, SMC_USER_NOT_LOADED).
  bool load(uint32_t pid, uint32_t exec_id, const ProcessMaps& maps);
  UnwindCounts counts() const;

 private:
  using Tables = RowAllocator::Tables;
  smt_unwind_mapping file_mapping(const MappedFile& f, Tables& used);
  smt_unwind_mapping vdso_mapping(const CodeRange& r, Tables& used);
  // The rows of `t` in the map, placed and written the first time; nullopt
  // when full. `loading`: the tables the entry being built lists so far, kept.
  std::optional<uint32_t> place(const std::shared_ptr<const CfiTable>& t, const Tables& loading);

  UnwindMaps maps_;
  RowAllocator rows_;
  CfiCache tables_;
  std::set<std::string> failed_;          // files whose table failed, by key
  std::shared_ptr<const CfiTable> vdso_;  // this kernel's vdso, built at first need
  bool vdso_tried_ = false;
  UnwindCounts counts_;  // processes, no_table, mappings_over: the rest are rows_'
};

}  // namespace stackmapd
