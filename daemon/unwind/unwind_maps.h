// SPDX-License-Identifier: GPL-2.0
// The BPF walker's maps (stackmapd/abi/unwind.h), read and written: rows,
// file entries, process entries and the files asked for. Where rows go and
// which files leave is RowAllocator's to say; this is the kernel-facing part
// of UnwindLoader.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "stackmapd/abi.h"

namespace stackmapd {

// The maps' fds, owned by the BPF object; -1 where absent.
struct UnwindMapFds {
  int rows = -1;    // array of smt_unwind_row
  int files = -1;   // hash: smt_unwind_file_key -> smt_unwind_file
  int procs = -1;   // LRU hash: tgid -> smt_unwind_process
  int asked = -1;   // LRU hash: the files asked for
  int wanted = -1;  // ring of smt_unwind_wanted
};

class UnwindMaps {
 public:
  explicit UnwindMaps(const UnwindMapFds& fds) : fds_(fds) {}

  // Copies `rows` to the array from row `first` on; false when the kernel refused.
  bool write_rows(uint32_t first, const std::vector<smt_unwind_row>& rows);
  bool write_file(const smt_unwind_file_key& key, const smt_unwind_file& f);
  // When a walk last used the file's rows (smt_unwind_file::used); 0 for none.
  uint64_t file_used(const smt_unwind_file_key& key) const;
  // The file's entry and its asked mark deleted: walks stop using its rows,
  // and the kernel side asks for it again when it next meets it.
  void forget_file(const smt_unwind_file_key& key);
  // Returns once every walk that may have read a forgotten file's entry has
  // ended (an RCU grace period: membarrier), so its rows can be written over.
  void wait_for_walks();

  std::optional<smt_unwind_process> read_process(uint32_t pid) const;
  bool write_process(uint32_t pid, const smt_unwind_process& p);

 private:
  UnwindMapFds fds_;
};

// CLOCK_MONOTONIC in smt_unwind_file::used's unit (ns >> 30).
uint64_t unwind_clock_now();

}  // namespace stackmapd
