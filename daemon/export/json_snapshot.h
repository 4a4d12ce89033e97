// SPDX-License-Identifier: GPL-2.0
// A stack_map.json export (exports.h, format_json) read back into a Snapshot,
// with the function names its "symbols" give each address, so that outputs
// which need the whole model (pprof: counts per key, weights, the kernel's
// build id) can be made from a file pulled off a device.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/export/frame_names.h"
#include "daemon/model/snapshot.h"

namespace stackmapd {

struct JsonExport {
  Snapshot snap;  // stacks with ips and `by`, interned; keys, weight, sources, kernel, hits
  // Per address the function its symbol names ({"nf_hook_slow", "nf_tables"});
  // unresolved addresses ("0x...") are not in it.
  FunctionNames functions;
};

// The one reader of stack_map.json: the whole export, or the bare array of
// its stacks; a stack's frames from its "ips" (named by its "symbols"), or
// from its "symbols" alone in an export written without addresses (stand-in
// addresses below 0x1000 carry their names). Throws Error naming `source`
// and the broken field.
JsonExport read_json_export(std::string_view json_text, const std::string& source);

}  // namespace stackmapd
