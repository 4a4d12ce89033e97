// SPDX-License-Identifier: GPL-2.0
// A stack_map.json export (exports.h, format_json) read back into a Snapshot,
// with the function names its "symbols" give each address, so that outputs
// which need the whole model (pprof: counts per key, weights, the kernel's
// build id) can be made from a file pulled off a device.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "daemon/model/snapshot.h"

namespace stackmapd {

struct JsonExport {
  Snapshot snap;  // stacks with ips and `by`; keys, weight, sources, kernel, hits
  // Per address the function its symbol names ("schedule", "nf_hook_slow
  // [nf_tables]"); unresolved addresses ("0x...") are not in it.
  std::unordered_map<uint64_t, std::string> functions;
};

// Throws Error naming `source` and the broken field.
JsonExport read_json_export(std::string_view json_text, const std::string& source);

}  // namespace stackmapd
