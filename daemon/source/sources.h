// SPDX-License-Identifier: GPL-2.0
// The event sources a session attaches to, and what each needs from the
// system first: tracepoints by name, kernel functions for fentry or kprobes
// (globs expanded against tracefs), and the online CPUs for sampling.
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

// How -f attaches to a function: fentry (a BPF trampoline; one program copy
// per function) or a kprobe (one program, the function's source in its
// link's cookie). automatic: fentry where the kernel allows it and the
// function is in its BTF, kprobes elsewhere (--probe-mechanism).
enum class ProbeMechanism { automatic, fentry, kprobe };
// "auto", "fentry" or "kprobe"; throws Error naming the three.
ProbeMechanism parse_probe_mechanism(const std::string& name);

// What this kernel offers -f: each empty when available, else why not.
struct ProbeSupport {
  std::string no_fentry;
  std::string no_kprobes;
  static ProbeSupport probe(const std::string& tracefs_dir);
};

struct FunctionTarget {
  std::string name;
  bool required;  // named exactly: failing to attach is an error; from a glob: skipped
  // Why a kprobe attaches it instead of fentry ("not in the kernel's BTF",
  // ...); empty: fentry.
  std::string kprobe_because;
  bool kprobe() const { return !kprobe_because.empty(); }
  bool operator==(const FunctionTarget&) const = default;
};

struct FunctionPlan {
  std::vector<FunctionTarget> targets;
  // automatic on a kernel with kprobes: an fentry that fails to load or
  // attach is tried as a kprobe.
  bool kprobe_fallback = false;
};

// Expands `patterns` (names or globs like vfs_*) against the traceable
// functions listed in <tracefs>/available_filter_functions (without that
// list: the kernel's BTF for fentry, /proc/kallsyms for kprobes) and picks
// each one's mechanism. Throws Error, in one line, for a kernel with
// neither mechanism (or without the one `mechanism` forces), a name or glob
// that matches nothing, or a glob that matches too many.
FunctionPlan resolve_functions(const std::vector<std::string>& patterns,
                               const std::string& tracefs_dir, ProbeMechanism mechanism,
                               const ProbeSupport& support);

// The CPUs in a kernel CPU list such as "0-3,6" (/sys/devices/system/cpu/online).
std::vector<int> parse_cpu_list(const std::string& list);
std::vector<int> online_cpus();

}  // namespace stackmapd
