// SPDX-License-Identifier: GPL-2.0
// The export stage, last in the data flow: a Snapshot (daemon/model/snapshot.h,
// from the BPF session or the tracefs backend) and, when there are symbols,
// a Kallsyms (daemon/symbols/) become the exports (docs/usage.md, `--output
// DIR`): stack_map (text), stack_map_stat, stack_map_bin (FSMB v2,
// daemon/model/fsmb.h) and stack_map.json, flame graphs (flamegraph.h); the
// --top view and the per-key breakdown are in breakdown.h; which of them a run
// writes, output_plan.h. decode.h reads them back. Files are replaced
// atomically (daemon/sys/file_io.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/export/frame_names.h"
#include "daemon/model/snapshot.h"
#include "daemon/model/stack_record.h"
#include "daemon/model/table_stats.h"
#include "daemon/sys/file_io.h"

namespace stackmapd {

class Kallsyms;

// `ksyms` may be null: frames then print as raw addresses.
std::string symbolize(uint64_t ip, const Kallsyms* ksyms);
// The RFC's text export, its frames named by `names` (the snapshot's).
std::string format_stack_map(const std::vector<StackRecord>& stacks, const FrameNames& names);
std::string format_stat(const TableStats& stats);
struct JsonOptions {
  // false: no raw address at all (kernel or user), for readers that may not
  // learn the layout (HTTP over TCP): no "ips", no kernel "text", no user
  // frame "address"; an unresolved kernel frame is "[unknown]". User frames
  // keep build id + file offset and their symbols, which reveal no layout.
  bool addresses = true;
};
std::string format_json(const Snapshot& snap, const FrameNames& names, JsonOptions opt = {});
// Stacks as JSON objects {stack_id, ref_count, depth, ips, symbols}.
std::string format_stacks_json(const std::vector<StackRecord>& stacks, const FrameNames& names);

// All four exports, and stack_map.kernel when the snapshot has kernel info;
// mode 0640: raw kernel addresses defeat KASLR.
void write_exports(const std::string& dir, const Snapshot& snap, const Kallsyms* ksyms,
                   gid_t group = kNoGroup);

}  // namespace stackmapd
