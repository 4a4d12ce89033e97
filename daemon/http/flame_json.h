// SPDX-License-Identifier: GPL-2.0
// The live page's data (GET /flame.json): one snapshot (or a window's delta)
// as the merged call tree the page draws, small enough to fetch every few
// seconds: frame names once in a table, each node [name, value, children];
// and the same view as a profile (filtered_snapshot, for a pprof).
//   {"unit": "events", "total": N, "window": "...", "seconds": S,
//    "keys": {"comm": [["bash", 812], ...], ...},   the --by values present
//      (counted by comm too, a pid's or tid's third: its comm, ["pid 9", 5, "nginx"])
//    "counters": [["entries", "12 / 16384"], ...],  stack_map_stat's lines
//    "names": ["all", "schedule", ...], "tree": [0, N, [[1, 7, []], ...]]}
// Children are ordered by name, so a frame keeps its place across updates.
// Compared with a base (the page's "compare with"), the differential tree of
// flame_diff.h: each node [name, value, children, base value], nodes of the
// base alone included (value 0), and
//    "base": {"window": "...", "seconds": S, "total": N}, "max_delta": D
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/export/frame_names.h"
#include "daemon/model/snapshot.h"

namespace stackmapd::http {

// Only the events of one --by value, or all but them (exclude): `field`'s
// value as a flame graph frame reads it ("bash", "pid 812", "/system.slice/ssh.service").
struct FlameFilter {
  std::optional<KeyField> field;
  std::string value;
  bool exclude = false;
};

// The filter a query asks for (key=FIELD&value=V, and exclude=1 for all but
// V), or why it cannot be had in one line: an unknown field, one the daemon
// was not started --by, an exclude= other than 0 or 1 or without a value.
std::optional<std::string> parse_flame_filter(std::string_view query, const KeySpec& keys,
                                              FlameFilter& out);

// Whether a stack's `by` entry is among the filter's events. Excluding, the
// `other` entry stays: no value of its events is known.
bool passes(const FlameFilter& filter, const KeyCount& key);

// The page's view as a profile (GET /flame.pprof): `snap` with only the
// filter's events, each stack's counts the sums of its entries that pass,
// the stacks left with none dropped; `snap` itself with no filter.
Snapshot filtered_snapshot(const Snapshot& snap, const FlameFilter& filter);

struct FlameJsonOptions {
  FlameFilter filter;
  bool addresses = true;  // false: an unresolved frame reads "[unknown]"
  std::string window = "since start";
  double seconds = 0;      // the window's length as measured; 0: unknown
  size_t key_values = 50;  // per --by field, the most frequent
};

// The profile a differential tree compares with, filtered as the tree is.
struct FlameJsonBase {
  const Snapshot& snap;
  const FrameNames& names;
  std::string window;  // as the page says it: "the minute before"
  double seconds = 0;  // its length as measured; 0: since start
};

std::string flame_json(const Snapshot& snap, const FrameNames& names, const FlameJsonOptions& opt,
                       const FlameJsonBase* base = nullptr);

// `s` as a JSON string literal, quoted, any bytes made valid UTF-8 first.
void append_json_string(std::string& out, std::string_view s);

}  // namespace stackmapd::http
