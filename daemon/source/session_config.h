// SPDX-License-Identifier: GPL-2.0
// What one BPF session traces and how its table is kept (daemon/bpf/bpf_session.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "daemon/model/attribution.h"
#include "daemon/model/stack_store.h"
#include "daemon/source/sources.h"
#include "daemon/source/uprobe_sources.h"
#include "stackmapd/abi.h"

namespace stackmapd {

// --offcpu: the kernel stack where a thread is switched out, weighted by the
// time until it runs again (sched:sched_switch).
struct OffcpuConfig {
  uint64_t min_block_ns = 0;  // shorter blocks are not counted
  // Where sched_switch's record holds them (its tracefs format file).
  uint16_t next_pid_offset = 0;
  uint16_t prev_state_offset = 0;
  bool operator==(const OffcpuConfig&) const = default;
};

// --filter's program (stackmapd/abi/filter.h), compared byte for byte.
struct FilterProgram {
  smt_filter prog{};
  bool operator==(const FilterProgram& o) const {
    return std::memcmp(&prog, &o.prog, sizeof(prog)) == 0;
  }
};

// --cgroup: a cgroup v2 directory and what the event path compares.
struct CgroupFilter {
  std::string path;    // as the cgroup2 mount names it: "/system.slice/nginx.service"
  uint64_t id = 0;     // its directory's inode, as bpf_get_current_cgroup_id() gives it
  uint32_t level = 0;  // components below the root: 2 for the example
  bool operator==(const CgroupFilter&) const = default;
};

// Everything a session fixes when it loads: the table's size and where it is
// pinned, the ring buffer, what each record carries and how events are counted
// and attributed, and the sources other than tracepoints. Two configs with
// equal TableConfigs can hand a running session over by re-attaching its
// tracepoints (the service's reload); any other difference needs a new
// session. A new option that fixes something at load belongs here, and so
// takes part in that comparison by construction.
// --user-unwind tables' rows, all files' together: 16 MiB of 8-byte rows
// (libc's 28 k, cc1plus's 472 k, libLLVM's 837 k).
inline constexpr uint32_t kDefaultUnwindRows = 2u << 20;

struct TableConfig {
  // -f: fentry (one program per function), or kprobes (FunctionTarget::kprobe_because).
  std::vector<FunctionTarget> functions;
  ProbeMechanism probe_mechanism = ProbeMechanism::automatic;  // --probe-mechanism
  bool kprobe_fallback = false;                                // FunctionPlan::kprobe_fallback
  uint32_t profile_hz = 0;  // CPU sampling on every online CPU; 0 = off
  bool trace = false;       // richer records for the per-event trace
  std::vector<uint32_t>
      filter_pids;  // only these processes (tgids), at most SMT_MAX_PIDS; none = all
  // Only tasks of these names (as task->comm keeps them), at most SMT_MAX_COMMS; none = all.
  std::vector<std::string> filter_comms;
  // Only tasks in these cgroups or below, at most SMT_MAX_CGROUPS; none = all.
  std::vector<CgroupFilter> filter_cgroups;
  uint32_t filter_cpu = SMT_ANY_CPU;
  uint32_t bits = SMT_DEFAULT_BITS;
  uint32_t ringbuf_bytes = 1u << 20;  // power of two
  uint32_t verify_every = 0;          // 1 in N events also sends its frames; 0 = off
  // --by: what counts are kept per; empty: pid and comm, for --top only.
  KeySpec keys;
  uint32_t max_key_pairs = StackStore::kDefaultMaxKeyPairs;
  // --sum: the field each tracepoint's weight comes from (Tracepoint::weight_field).
  std::string sum_field;
  // --filter: the expression, and its program for every -e tracepoint's record
  // (one program: the tracepoints must lay its fields out alike).
  std::string filter;
  FilterProgram filter_program;
  std::optional<OffcpuConfig> offcpu;
  // Pin the table's maps here and take over a compatible table found there
  // (same ids and counts after a restart). Empty: nothing pinned.
  std::string pin_dir;
  // Use the programs and maps another loader pinned here (daemon/bpf/loader_pins.h)
  // instead of loading our own; the table's size is then the object's.
  std::string pinned_dir;
  // --user-stacks: each event's user stack too, in a second table (abi.h).
  bool user_stacks = false;
  // ... walked with unwind tables (x86_64; --user-unwind tables, the
  // default there), else by frame pointers.
  bool user_unwind = false;
  // ... in this many rows of tables, all files' together (--unwind-memory).
  uint32_t unwind_rows = kDefaultUnwindRows;
  // -- CMD: only the processes in the `tracked` map (bpf/follow.bpf.h), kept
  // from the pid given to BpfObject::track() by fork and exit.
  bool follow_command = false;
  // -u: user-space probes, one link each to one program (--user-stacks on).
  std::vector<UprobeTarget> uprobes;

  bool operator==(const TableConfig&) const = default;
};

struct SessionConfig : TableConfig {
  // What a running session can change by re-attaching (BpfSession::reattach).
  std::vector<Tracepoint> events;
  // Code of the tracing machinery whose leading frames are cut (abi.h,
  // smt_text_range), sorted; past SMT_MAX_STRIP ranges the rest stay.
  // Found from the events (session_setup.h), so it follows them.
  std::vector<smt_text_range> machinery;

  const TableConfig& table() const { return *this; }
};

}  // namespace stackmapd
