// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/options.h"

#include <bpf/libbpf.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "daemon/sys/error.h"
#include "daemon/sys/preflight.h"

namespace stackmapd {

namespace {

constexpr uint32_t kPidMax = 4194304;  // PID_MAX_LIMIT: no pid is higher on any kernel

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// One word of --pid: a process id, or one line naming what it is not.
uint32_t parse_pid(const std::string& word) {
  uint32_t pid = 0;
  const char* end = word.data() + word.size();
  auto [at, ec] = std::from_chars(word.data(), end, pid);
  if (ec != std::errc() || at != end || pid == 0 || pid > kPidMax)
    throw Error("--pid " + quoted(word) +
                " is not a process id: give numbers, as in --pid 1234,1235 or --pid \"$(pidof "
                "NAME)\"");
  return pid;
}

// The process a pid names, when it is one of its threads but not the process itself.
std::optional<uint32_t> owning_process(uint32_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("Tgid:")) {
      const uint32_t tgid = static_cast<uint32_t>(std::strtoul(line.c_str() + 5, nullptr, 10));
      if (tgid && tgid != pid) return tgid;
      break;
    }
  return std::nullopt;
}

// --pid's words (repeated, comma and whitespace lists) as the running
// processes they name, each once. A pid of no process would trace nothing,
// silently; the event path keeps processes (tgids), so a thread's id would too.
std::vector<uint32_t> running_processes(const std::vector<std::string>& args) {
  std::vector<uint32_t> pids;
  for (std::string arg : args) {
    std::replace(arg.begin(), arg.end(), ',', ' ');
    std::istringstream words(arg);
    for (std::string word; words >> word;) pids.push_back(parse_pid(word));
  }
  if (!args.empty() && pids.empty())
    throw Error(
        "--pid '' names no process: give the pid of a running process (pidof NAME found none?)");
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  if (pids.size() > SMT_MAX_PIDS)
    throw Error("--pid: " + std::to_string(pids.size()) + " processes, at most " +
                std::to_string(SMT_MAX_PIDS) +
                " at once: trace fewer, or all without --pid and split by --by pid");
  for (uint32_t pid : pids) {
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      throw Error("--pid " + std::to_string(pid) +
                  ": no such process: give the pid of a running process (pgrep NAME)");
    if (auto tgid = owning_process(pid))
      throw Error("--pid " + std::to_string(pid) + " is a thread of process " +
                  std::to_string(*tgid) + ": give " + std::to_string(*tgid) +
                  " (--pid keeps all threads of a process)");
  }
  return pids;
}

}  // namespace

void add_session_options(CLI::App& app, SessionOptions& o, Command command) {
  const bool fg = command == Command::foreground;
  // The daemon's help shows every default, as its config file sample does.
  auto shown = [&](CLI::Option* opt, bool always = false) {
    if (always || !fg) opt->capture_default_str();
    return opt;
  };
  shown(app.add_option("-e,--event", o.events,
                       fg ? "Tracepoint CATEGORY:NAME to record stacks on (repeatable, globs like "
                            "'kmem:*'; default kmem:kmem_cache_alloc)"
                          : "Tracepoints CATEGORY:NAME (repeatable, globs like 'kmem:*')"));
  if (fg) {
    app.add_option(
        "-f,--function", o.functions,
        "Kernel function to record stacks on through fentry (repeatable, globs like 'vfs_*')");
    app.add_option("--profile", o.profile_hz,
                   "Sample kernel stacks on every online CPU at HZ (like perf record -g -F HZ)")
        ->check(CLI::Range(1u, 100000u));
    app.add_option("--pid", o.pids,
                   "Only events of these processes (all their threads): repeatable, or a list "
                   "by commas or spaces, as $(pidof NAME) gives it; at most " +
                       std::to_string(SMT_MAX_PIDS));
    app.add_option("--cpu", o.cpu, "Only events on this CPU");
  }
  shown(app.add_option("--bits", o.bits, "Table size: 2^bits unique stacks, 10..20"), true);
  shown(app.add_option("--ringbuf-kb", o.ringbuf_kb,
                       fg ? "Ring buffer size in KiB, a power of two (--trace: ~12 B and the "
                            "event's fields per event; "
                            "counts need a record per batch entry that makes room)"
                          : "Ring buffer size in KiB, a power of two"),
        true);
  shown(app.add_option("--verify", o.verify,
                       fg ? "Also send the captured frames of 1 in N events and check them against "
                            "the stored stack (verify_ok/verify_mismatch in stack_map_stat)"
                          : "Check 1 in N events' frames against the table (0: off)"));
  shown(app.add_option("--by", o.by,
                       "Keep counts per stack and KEYS, a comma list of pid, tid, comm, cgroup, "
                       "unit (systemd), source, cpu (stack_map.json \"by\", --top, --folded)"));
  shown(app.add_option("--sum", o.sum,
                       "Weigh each event by this numeric field of its tracepoint (e.g. "
                       "bytes_alloc); stacks are then ranked by the sum"));
  shown(app.add_flag("--offcpu", o.offcpu,
                     "Record the kernel stack where threads block (sched_switch), weighted by "
                     "the time until they run again, like offcputime"));
  shown(app.add_flag("--user-stacks", o.user_stacks,
                     "Record each event's user stack too (frame pointers; most of Debian's "
                     "libraries have none, so stacks stop there), symbolized per process"));
  app.add_option("--min-block-us", o.min_block_us,
                 "With --offcpu: leave out blocks shorter than this (default 1)");
  shown(app.add_option("--max-keys", o.max_keys,
                       "Cap on distinct (stack, key) pairs; past it counts go to the stack's "
                       "\"other\" entry (key_overflow in stack_map_stat)"),
        true);
  app.add_option(
      "--pinned", o.pinned,
      fg ? "Use the programs and maps another loader (Android's bpfloader) pinned in DIR "
           "from stackmapd.o (share/stackmapd/bpfloader/) instead of loading our own"
         : "Use the programs and maps another loader (Android's bpfloader) pinned in DIR "
           "from stackmapd.o, instead of loading our own; pin-dir then does not apply");
}

SessionConfig SessionOptions::session_config() const {
  SessionConfig s;
  check_bits(bits);
  s.bits = static_cast<uint32_t>(bits);
  for (const auto& e : events) s.events.push_back(Tracepoint::parse(e));
  s.profile_hz = profile_hz;
  s.filter_pids = running_processes(pids);
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
  s.user_stacks = user_stacks;
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
    s.offcpu = OffcpuConfig{uint64_t{min_block_us.value_or(1)} * 1000, 0, 0};
  } else if (min_block_us) {
    throw Error("--min-block-us applies to --offcpu only: add --offcpu or drop it");
  }
  return s;
}

}  // namespace stackmapd
