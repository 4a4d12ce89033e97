// SPDX-License-Identifier: GPL-2.0
// What an event source needs from the system before it can attach: kernel
// functions for fentry (globs expanded against tracefs), and the online CPUs
// for sampling.
#pragma once

#include <string>
#include <vector>

namespace stackmapd {

struct FunctionTarget {
  std::string name;
  bool required;  // named exactly: failing to attach is an error; from a glob: skipped
};

// Expands `patterns` (names or globs like vfs_*) against the traceable
// functions listed in <tracefs>/available_filter_functions. Throws Error for a
// name or glob that matches nothing, or a glob that matches too many.
std::vector<FunctionTarget> resolve_functions(const std::vector<std::string>& patterns,
                                              const std::string& tracefs_dir);

// The CPUs in a kernel CPU list such as "0-3,6" (/sys/devices/system/cpu/online).
std::vector<int> parse_cpu_list(const std::string& list);
std::vector<int> online_cpus();

}  // namespace stackmapd
