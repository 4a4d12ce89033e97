// SPDX-License-Identifier: GPL-2.0
// The event sources a session attaches to, and what each needs from the
// system first: tracepoints by name, kernel functions for fentry (globs
// expanded against tracefs), and the online CPUs for sampling.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace stackmapd {

struct Tracepoint {
  std::string category;
  std::string name;
  // Where --sum reads an event's weight: SMT_WEIGHT_FIELD(offset, size,
  // signed) of its format file, carried in the link's cookie; 0: weight 1.
  uint32_t weight_field = 0;
  // --trace: bytes of the raw record the event sends (SMT_COOKIE_RAW_LEN).
  uint32_t raw_len = 0;

  // "CATEGORY:NAME"; throws Error naming the expected form.
  static Tracepoint parse(std::string_view spec);
  std::string str() const { return category + ":" + name; }
};

struct FunctionTarget {
  std::string name;
  bool required;  // named exactly: failing to attach is an error; from a glob: skipped
  bool operator==(const FunctionTarget&) const = default;
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
