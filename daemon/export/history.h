// SPDX-License-Identifier: GPL-2.0
// Past snapshots for always-on use: each timed export also keeps a copy of
// stack_map_bin (and stack_map.kernel) under <export-dir>/history, named by
// time, and the oldest go first once they take more than a cap of disk.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace stackmapd {

// Copies the exports just written in `export_dir` into its history and prunes
// it to `max_bytes` (the newest copy is always kept). Throws Error.
void keep_history(const std::string& export_dir, uint64_t max_bytes, gid_t group);

}  // namespace stackmapd
