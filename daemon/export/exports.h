// SPDX-License-Identifier: GPL-2.0
// The exports of DESIGN.md: stack_map (text), stack_map_stat, stack_map_bin
// (FSMB v2) and stack_map.json, and the --top view. Files are replaced
// atomically: written to a temporary file in the same directory, then renamed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/symbols/kernel_info.h"
#include "daemon/model/stack_record.h"
#include "daemon/model/table_stats.h"

namespace stackmapd {

class Kallsyms;

struct Snapshot {
  uint32_t bits = 0;
  uint32_t hash_seed = 0;
  TableStats stats;
  std::vector<StackRecord> stacks;  // by stack_id
  KernelInfo kernel;                // for symbolizing elsewhere; empty: not written
};

// `ksyms` may be null: frames then print as raw addresses.
std::string symbolize(uint64_t ip, const Kallsyms* ksyms);
std::string format_stack_map(const std::vector<StackRecord>& stacks, const Kallsyms* ksyms);
std::string format_stat(const TableStats& stats);
std::string format_json(const Snapshot& snap, const Kallsyms* ksyms);
// Stacks as JSON objects {stack_id, ref_count, depth, ips, symbols}.
std::string format_stacks_json(const std::vector<StackRecord>& stacks, const Kallsyms* ksyms);
// The `n` most frequent stacks with their share of all events.
std::string format_top(const std::vector<StackRecord>& stacks, size_t n, const Kallsyms* ksyms);

// Creates `dir` if missing and proves it writable; throws Error naming the fix.
void prepare_output_dir(const std::string& dir);
// `group`: owner group of the new file (kNoGroup keeps the creator's).
constexpr gid_t kNoGroup = static_cast<gid_t>(-1);
void write_file_atomic(const std::string& path, const std::string& content, mode_t mode,
                       gid_t group = kNoGroup);
// All four exports, and stack_map.kernel when the snapshot has kernel info;
// mode 0640: raw kernel addresses defeat KASLR.
void write_exports(const std::string& dir, const Snapshot& snap, const Kallsyms* ksyms,
                   gid_t group = kNoGroup);

}  // namespace stackmapd
