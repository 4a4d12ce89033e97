// SPDX-License-Identifier: GPL-2.0
// Flame graphs of the recorded stacks: Brendan Gregg's collapsed ("folded") text, which
// flamegraph.pl, speedscope and inferno read, and a self-contained SVG drawn by us.
//
// Data flow: Snapshot + FrameNames → flame_stacks (breakdown.h) → SymbolizedStack (function
//   names, no offsets) → format_folded / render_flamegraph_svg.
// Stacks that differ only in return offsets merge into one path, as in every flame graph.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stackmapd {

// One stack as a flame graph sees it. A frame is the function name ("vfs_read"), a module
// function with its module appended ("nf_hook_slow_[nf_tables]": folded lines cannot hold a
// space), or the raw address ("0xffffffffc0a01234") when it did not resolve.
struct SymbolizedStack {
  uint64_t count = 0;               // events that recorded this stack
  std::vector<std::string> frames;  // innermost first, like StackRecord::ips
};

// One line per distinct path, root frame first: "entry_SYSCALL_64;do_syscall_64;... 42\n",
// sorted bytewise, counts of merged stacks summed. ';' in a frame becomes ':' and whitespace
// '_', so any name keeps the format. A stack without frames counts as "[unknown]"; stacks with
// count 0 are left out.
std::string format_folded(const std::vector<SymbolizedStack>& stacks);
// One stack's path in that format, without its count: "entry_SYSCALL_64;do_syscall_64;...".
std::string folded_path(const SymbolizedStack& s);

struct FlameGraphOptions {
  std::string title = "Kernel stacks";
  // What a stack's count measures: a snapshot's weight unit (weight_unit.h:
  // "ns", "bytes_alloc", a field's name), read in it; empty: events.
  std::string unit;
  int width = 1200;           // px, the whole image
  int frame_height = 16;      // px per stack level
  double min_frame_px = 0.1;  // frames narrower than this (and all above them) are not drawn
};

// A standalone SVG (no external resources): the merged call tree, root ("all") at the bottom,
// children ordered by name; a warm color per function name, its name clipped to the frame, and
// a tooltip "name (N events, P%)", or the count in opt.unit: "name (1.500 ms off-CPU, P%)". A small
// script zooms on click. Same input, same bytes.
std::string render_flamegraph_svg(const std::vector<SymbolizedStack>& stacks,
                                  const FlameGraphOptions& opt = {});

// The differential flame graph of `stacks` (B) against `base` (A), as flame_diff.h draws it:
// B's widths, red where a frame's share grew, blue where it shrank, and a tooltip with both
// amounts, both shares and the change: "name (12 → 30 events, 1.20% → 3.00%, +1.80%)".
std::string render_diff_flamegraph_svg(const std::vector<SymbolizedStack>& base,
                                       const std::vector<SymbolizedStack>& stacks,
                                       const FlameGraphOptions& opt = {});

}  // namespace stackmapd
