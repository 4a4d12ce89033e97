// SPDX-License-Identifier: GPL-2.0
// The exports read back (`stackmapd decode`): an FSMB file (stack_map_bin,
// ours or the kernel's) printed as stack_map text or JSON, or as flame graphs
// or pprof; a stack_map.json export (symbols already resolved) as flame graphs
// or pprof. Raw
// frames are symbolized offline (daemon/symbols/symbol_sources.h). With
// --diff A B, the differential flame graph of B against A (flame_diff.h)
// from two exports of any of these kinds, or export directories.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "daemon/symbols/symbol_sources.h"

namespace stackmapd {

struct DecodeOptions {
  std::string file;           // stack_map_bin, or stack_map.json for --folded/--svg
  bool json = false;          // --json: format_stacks_json instead of the stack_map text
  std::string folded;         // --folded FILE, "-": to `out` instead of the text
  std::string svg;            // --svg FILE
  std::string pprof;          // --pprof FILE: labels and weights only from a JSON export
  std::string otlp;           // --otlp FILE: attributes and weights only from a JSON export
  std::optional<size_t> top;  // only the N stacks with the highest ref_count; 0: all
  OfflineSymbols symbols;     // --kallsyms, --vmlinux, --kernel-info
  // --user-symbols-from DIR: a JSON export's user frames symbolized again
  // from DIR/binaries (user_binaries.h) instead of the names it holds.
  std::string user_symbols_from;
  // --diff A B: --folded and --svg are B against A (each a stack_map.json,
  // a stack_map_bin, or a directory holding either); `file` stays empty.
  std::vector<std::string> diff;
};

// Writes what `options` asks for to `out` and to its --folded/--svg files.
// Throws Error with one line: unreadable or corrupt files, bad combinations;
// for a truncated or over-long FSMB file, after writing every complete record.
void decode(const DecodeOptions& options, std::ostream& out);

// A stack_map.json export (the first non-blank byte opens JSON) rather than FSMB.
bool is_json_export(const std::string& path);

}  // namespace stackmapd
