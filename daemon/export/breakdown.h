// SPDX-License-Identifier: GPL-2.0
// Who caused a stack and how much (--by, --sum, --offcpu), as people read it:
// a key's label (`bash[1234]`, `/system.slice/ssh.service`), weights in
// their unit, the --top view with each stack's top keys under it, and flame
// graphs whose root frames are the keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/export/flamegraph.h"
#include "daemon/export/frame_names.h"
#include "daemon/export/weight_unit.h"
#include "daemon/model/snapshot.h"

namespace stackmapd {

// A key's values as frames, in the order of `keys`; comm and pid together
// read `comm[pid]`, as ps and perf print them. The overflow entry is "[other]".
std::vector<std::string> key_frames(const KeySpec& keys, const KeyCount& k);
// The same, space-separated, for one line.
std::string key_label(const KeySpec& keys, const KeyCount& k);

// The `n` heaviest callstacks (by weight when weighted, else by count; 0:
// all), each with its share and its top keys (top 3 processes without --by).
std::string format_top(const Snapshot& snap, size_t n, const FrameNames& names);

// Stacks for --folded and --svg: one per (callstack, key) with the key frames
// as roots when --by was given, counted by weight when weighted.
std::vector<SymbolizedStack> flame_stacks(const Snapshot& snap, const FrameNames& names);

}  // namespace stackmapd
