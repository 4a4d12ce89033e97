// SPDX-License-Identifier: GPL-2.0
// The BPF walker's two maps (stackmapd/abi/unwind.h), written: rows into the
// mmapped array of rows, process entries into the per-process hash. Where
// rows go and when an entry goes is RowAllocator's to say; this is the
// kernel-facing part of UnwindLoader.
#pragma once

#include <cstdint>
#include <vector>

#include "daemon/sys/mapping.h"
#include "stackmapd/abi.h"

namespace stackmapd {

class UnwindMaps {
 public:
  // `rows_fd` an mmapable array of `max_rows` rows, `procs_fd` the
  // per-process hash (owned by the BPF object).
  UnwindMaps(int rows_fd, uint32_t max_rows, int procs_fd);

  // Copies `rows` to the array from row `first` on (within max_rows).
  void write_rows(uint32_t first, const std::vector<smt_unwind_row>& rows);
  // False when the kernel refused the entry.
  bool write_process(uint32_t pid, const smt_unwind_process& p);
  // Deletes the entry of `pid`; one already evicted is gone all the same.
  void delete_process(uint32_t pid);

 private:
  Mapping rows_;  // the rows map, mmapped writable
  int procs_fd_;
};

}  // namespace stackmapd
