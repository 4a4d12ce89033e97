// SPDX-License-Identifier: GPL-2.0
#include "daemon/unwind/unwind_maps.h"

#include <bpf/bpf.h>
#include <sys/mman.h>

#include <cstring>

namespace stackmapd {

UnwindMaps::UnwindMaps(int rows_fd, uint32_t max_rows, int procs_fd)
    : rows_(rows_fd, size_t{max_rows} * sizeof(smt_unwind_row), PROT_READ | PROT_WRITE, 0,
            "the unwind rows map (BPF_F_MMAPABLE arrays need Linux 5.5)"),
      procs_fd_(procs_fd) {}

void UnwindMaps::write_rows(uint32_t first, const std::vector<smt_unwind_row>& rows) {
  std::memcpy(rows_.as<smt_unwind_row>() + first, rows.data(),
              rows.size() * sizeof(smt_unwind_row));
}

bool UnwindMaps::write_process(uint32_t pid, const smt_unwind_process& p) {
  return bpf_map_update_elem(procs_fd_, &pid, &p, BPF_ANY) == 0;
}

void UnwindMaps::delete_process(uint32_t pid) { bpf_map_delete_elem(procs_fd_, &pid); }

}  // namespace stackmapd
