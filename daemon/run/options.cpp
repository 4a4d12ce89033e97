// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/options.h"

#include <bpf/libbpf.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <utility>

#include "daemon/source/process_filters.h"
#include "daemon/sys/error.h"
#include "daemon/sys/preflight.h"
#include "stackmapd/abi.h"

namespace stackmapd {

void add_session_options(OptionTable& t, SessionOptions& o, Command command) {
  CLI::App& app = t.app();
  const bool fg = command == Command::foreground;
  auto option = [&](OptionTraits traits, auto&&... args) {
    return t.add(traits, app.add_option(std::forward<decltype(args)>(args)...));
  };
  auto flag = [&](OptionTraits traits, auto&&... args) {
    return t.add(traits, app.add_flag(std::forward<decltype(args)>(args)...));
  };
  // The daemon's help shows every default, as its config file sample does.
  auto shown = [&](CLI::Option* opt, bool always = false) {
    if (always || !fg) opt->capture_default_str();
    return opt;
  };
  shown(option(kShapes, "-e,--event", o.events,
               fg ? "Tracepoint CATEGORY:NAME to record stacks on (repeatable, globs like "
                    "'kmem:*'; default kmem:kmem_cache_alloc)"
                  : "Tracepoints CATEGORY:NAME (repeatable, globs like 'kmem:*')"));
  if (fg) {
    option(kShapesBpf, "-f,--function", o.functions,
           "Kernel function to record stacks on, through fentry, or kprobes where the "
           "kernel or the function has no fentry (repeatable, globs like 'vfs_*')");
    option(kShapesBpf, "--probe-mechanism", o.probe_mechanism,
           "How -f attaches: auto (fentry where it can, kprobes elsewhere), fentry or "
           "kprobe");
    option(kShapesBpf, "-u,--uprobe", o.uprobes,
           "User-space probe BINARY:SYMBOL[+OFF] (a function's entry; globs like "
           "'ngx_http_*') or BINARY:usdt:PROVIDER:NAME (a USDT probe), repeatable; "
           "BINARY a path, a program in PATH, or with --pid a library's soname; "
           "records user stacks (--user-stacks)");
    option(kShapesBpf, "--profile", o.profile_hz,
           "Sample kernel stacks on every online CPU at HZ (like perf record -g -F HZ)")
        ->check(CLI::Range(1u, 100000u));
    option(kShapesBpf, "--pid", o.pids,
           "Only events of these processes (all their threads): repeatable, or a list "
           "by commas or spaces, as $(pidof NAME) gives it; at most " +
               std::to_string(SMT_MAX_PIDS));
    option(kShapesBpf, "--comm", o.comms,
           "Only events of tasks of these names (as ps -o comm shows them, 15 bytes at "
           "most): repeatable, or a comma list; at most " +
               std::to_string(SMT_MAX_COMMS));
    option(kShapesBpf, "--cgroup", o.cgroups,
           "Only events of tasks in this cgroup v2 or below it, as /proc/PID/cgroup "
           "names it (/system.slice/nginx.service): repeatable; at most " +
               std::to_string(SMT_MAX_CGROUPS) +
               ". Filters of different kinds "
               "(--pid, --comm, --cgroup, --cpu) must all match");
    option(kShapesBpf, "--cpu", o.cpu, "Only events on this CPU");
  }
  shown(option(kShapes, "--bits", o.bits, "Table size: 2^bits unique stacks, 10..20"), true);
  shown(option(kShapesBpf, "--ringbuf-kb", o.ringbuf_kb,
               fg ? "Ring buffer size in KiB, a power of two (--trace: ~12 B and the "
                    "event's fields per event; "
                    "counts need a record per batch entry that makes room)"
                  : "Ring buffer size in KiB, a power of two"),
        true);
  shown(option(kShapesBpf, "--verify", o.verify,
               fg ? "Also send the captured frames of 1 in N events and check them against "
                    "the stored stack (verify_ok/verify_mismatch in stack_map_stat)"
                  : "Check 1 in N events' frames against the table (0: off)"));
  shown(option(kShapesBpf, "--by", o.by,
               "Keep counts per stack and KEYS, a comma list of pid, tid, comm, cgroup, "
               "unit (systemd), source, cpu (stack_map.json \"by\", --top, --folded)"));
  shown(option(kShapesBpf, "--sum", o.sum,
               "Weigh each event by this numeric field of its tracepoint (e.g. "
               "bytes_alloc), or with -u by its argument arg0..arg5; stacks are then "
               "ranked by the sum"));
  shown(option(kShapesBpf, "--hist", o.hist,
               "A log2 histogram per stack (and --by key) of this numeric field of its "
               "tracepoint (with -u: argument arg0..arg5), weighed by it as --sum; with "
               "--offcpu and no FIELD, of the time blocked")
            ->expected(0, 1));
  shown(option(kShapes, "--filter", o.filter,
               "Only events whose tracepoint record passes this ftrace event filter "
               "(events.rst: 'bytes_alloc >= 4096 && gfp_flags & 0x400', "
               "'prev_comm ~ \"kworker*\"'), checked before the stack is taken"));
  shown(flag(kShapesBpf, "--offcpu", o.offcpu,
             "Record the kernel stack where threads block (sched_switch), weighted by "
             "the time until they run again, like offcputime"));
  shown(flag(kShapesBpf, "--user-stacks", o.user_stacks,
             "Record each event's user stack too, walked with unwind tables built from "
             "each binary's .eh_frame (x86_64), symbolized per process"));
  option(kShapesBpf, "--user-unwind", o.user_unwind,
         "With --user-stacks: 'tables' (.eh_frame, the default on x86_64) or 'fp' "
         "(frame pointers only, as perf -g)");
  option(kShapesBpf, "--unwind-memory", o.unwind_memory_mib,
         "With --user-unwind tables: MiB of unwind rows for all binaries together "
         "(default 16); past it, the tables walked least recently make room");
  option(kShapesBpf, "--min-block-us", o.min_block_us,
         "With --offcpu: leave out blocks shorter than this (default 1)");
  shown(option(kShapesBpf, "--max-keys", o.max_keys,
               "Cap on distinct (stack, key) pairs; past it counts go to the stack's "
               "\"other\" entry (key_overflow in stack_map_stat)"),
        true);
  option(kShapesBpf, "--pinned", o.pinned,
         fg ? "Use the programs and maps another loader (Android's bpfloader) pinned in DIR "
              "from stackmapd.o (share/stackmapd/bpfloader/) instead of loading our own"
            : "Use the programs and maps another loader (Android's bpfloader) pinned in DIR "
              "from stackmapd.o, instead of loading our own; pin-dir then does not apply");
}

namespace {

// --user-unwind: whether --user-stacks walks unwind tables. They describe
// x86_64's registers only, so elsewhere frame pointers are the one way.
bool user_unwind_tables(bool user_stacks, const std::string& mode) {
#if defined(__x86_64__)
  constexpr bool kTablesHere = true;
#else
  constexpr bool kTablesHere = false;
#endif
  if (mode.empty()) return user_stacks && kTablesHere;
  if (!user_stacks) throw Error("--user-unwind " + mode + " applies to --user-stacks: add it");
  if (mode == "fp") return false;
  if (mode != "tables")
    throw Error("--user-unwind " + mode + ": use 'tables' (.eh_frame) or 'fp' (frame pointers)");
  if (!kTablesHere)
    throw Error("--user-unwind tables: unwind tables are built for x86_64 only for now; use fp");
  return true;
}

}  // namespace

SessionConfig SessionOptions::session_config() const {
  SessionConfig s;
  check_bits(bits);
  s.bits = static_cast<uint32_t>(bits);
  for (const auto& e : events) s.events.push_back(Tracepoint::parse(e));
  s.profile_hz = profile_hz;
  s.probe_mechanism = parse_probe_mechanism(probe_mechanism);
  if (s.probe_mechanism != ProbeMechanism::automatic && functions.empty())
    throw Error("--probe-mechanism " + probe_mechanism + " applies to -f: add -f FUNCTION");
  s.filter_pids = running_processes(pids);
  s.filter_comms = task_names(comms);
  s.filter_cgroups = cgroup_filters(cgroups);
  if (cpu) {
    const int cpus = libbpf_num_possible_cpus();
    if (*cpu >= static_cast<uint32_t>(cpus))
      throw Error("--cpu " + std::to_string(*cpu) + " does not exist: this machine has CPUs 0.." +
                  std::to_string(cpus - 1));
    s.filter_cpu = *cpu;
  }
  s.ringbuf_bytes = ringbuf_bytes(ringbuf_kb);
  s.verify_every = verify;
  s.pinned_dir = pinned;
  if (!by.empty()) s.keys = KeySpec::parse(by);
  if (max_keys == 0)
    throw Error(
        "--max-keys 0: the cap on distinct (stack, key) pairs must be at least 1 (default " +
        std::to_string(StackStore::kDefaultMaxKeyPairs) + ")");
  s.max_key_pairs = max_keys;
  s.sum_field = sum;
  if (hist) {
    if (!sum.empty())
      throw Error("--hist " + *hist + " and --sum " + sum +
                  " conflict: --hist weighs events by the field it counts, as --sum does; drop "
                  "--sum");
    if (hist->empty() && !offcpu)
      throw Error(
          "--hist needs a numeric FIELD of the -e tracepoints (--hist bytes_alloc), or --offcpu "
          "for a histogram of the time blocked");
    if (!hist->empty() && offcpu)
      throw Error("--offcpu --hist counts the time blocked, not a field: drop " + *hist);
    s.sum_field = *hist;
    s.keys.fields.push_back(KeyField::bucket);
  }
  s.filter = filter;
  // Before -f's mechanisms are probed: with --pinned there are none to choose.
  if (!functions.empty() && !pinned.empty())
    throw Error(
        "-f needs stackmapd's own BPF object (its fentry and kprobe programs); with --pinned "
        "use -e tracepoints or --profile");
  if (!filter.empty() && !pinned.empty())
    throw Error(
        "--filter needs stackmapd's own BPF object (the pinned one has no filter program); "
        "drop --pinned or --filter");
  // A uprobe fires in user mode: its user stack is its whole stack.
  s.uprobes = resolve_uprobes(uprobes, s.filter_pids);
  s.user_stacks = user_stacks || !uprobes.empty();
  s.user_unwind = user_unwind_tables(s.user_stacks, user_unwind);
  if (unwind_memory_mib) {
    if (!s.user_unwind)
      throw Error("--unwind-memory applies to --user-stacks with unwind tables: add --user-stacks");
    if (*unwind_memory_mib < 1 || *unwind_memory_mib > 2048)
      throw Error("--unwind-memory " + std::to_string(*unwind_memory_mib) +
                  ": give 1 to 2048 (MiB)");
    s.unwind_rows = *unwind_memory_mib * (1u << 20) / static_cast<uint32_t>(sizeof(smt_unwind_row));
  }
  if (user_stacks && !pinned.empty())
    throw Error(
        "--user-stacks needs stackmapd's own BPF object (the pinned one has no user stack "
        "table); drop --pinned or --user-stacks");
  if (offcpu) {
    if (profile_hz)
      throw Error(
          "--offcpu and --profile cannot be combined: a sampled stack has no time off the CPU; "
          "run them as two sessions");
    if (!sum.empty())
      throw Error("--offcpu weighs each block by its time off the CPU: drop --sum " + sum);
    if (!filter.empty())
      throw Error(
          "--filter applies to -e tracepoint records; --offcpu has none of its own: drop "
          "--filter or trace sched:sched_switch with -e");
    s.offcpu = OffcpuConfig{uint64_t{min_block_us.value_or(1)} * 1000, 0, 0};
  } else if (min_block_us) {
    throw Error("--min-block-us applies to --offcpu only: add --offcpu or drop it");
  }
  return s;
}

}  // namespace stackmapd
