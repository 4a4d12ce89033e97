// SPDX-License-Identifier: GPL-2.0
// The walker's maps (stackmapd/abi/unwind.h), of their shapes, for the
// tests that fill them with the loader: real kernel maps (root).
#pragma once

#include <bpf/bpf.h>

#include <cstdint>

#include "daemon/sys/unique_fd.h"
#include "daemon/unwind/unwind_maps.h"

namespace stackmapd {

struct TestUnwindMaps {
  explicit TestUnwindMaps(uint32_t max_rows)
      : rows(bpf_map_create(BPF_MAP_TYPE_ARRAY, "t_unwind_rows", 4, sizeof(smt_unwind_row),
                            max_rows, nullptr)),
        files(bpf_map_create(BPF_MAP_TYPE_HASH, "t_unwind_files", sizeof(smt_unwind_file_key),
                             sizeof(smt_unwind_file), 64, nullptr)),
        procs(bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "t_unwind_procs", 4, sizeof(smt_unwind_process),
                             16, nullptr)),
        asked(bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "t_unwind_asked", sizeof(smt_unwind_file_key),
                             1, 64, nullptr)),
        wanted(bpf_map_create(BPF_MAP_TYPE_RINGBUF, "t_unwind_want", 0, 0, 4096, nullptr)) {}

  bool ok() const { return rows && files && procs && asked && wanted; }
  UnwindMapFds fds() const {
    return {rows.get(), files.get(), procs.get(), asked.get(), wanted.get()};
  }

  UniqueFd rows, files, procs, asked, wanted;
};

}  // namespace stackmapd
