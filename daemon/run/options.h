// SPDX-License-Identifier: GPL-2.0
// The options of a tracing session, declared once for both commands that
// start one: the foreground `stackmapd` and `stackmapd daemon`, whose options
// are also the keys of its config file (CLI11's format, `bits = 14`). Same
// names, defaults and checks for both; each command adds its own beside them
// (cmd/main.cpp, daemon/run/config.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/bpf/bpf_session.h"
#include "daemon/run/option_table.h"

namespace stackmapd {

struct SessionOptions {
  std::vector<std::string> events;       // CATEGORY:NAME
  std::vector<std::string> functions;    // -f globs, resolved later: foreground only
  std::string probe_mechanism = "auto";  // -f through auto|fentry|kprobe: foreground only
  uint32_t profile_hz = 0;               // foreground only
  std::vector<std::string> uprobes;      // -u specs (uprobe_sources.h): foreground only
  std::vector<std::string> pids;         // --pid as given (lists): foreground only
  std::vector<std::string> comms;        // --comm as given (lists): foreground only
  std::vector<std::string> cgroups;      // --cgroup paths: foreground only
  std::optional<uint32_t> cpu;           // foreground only
  long bits = SMT_DEFAULT_BITS;
  uint32_t ringbuf_kb = 1024;
  uint32_t verify = 0;
  std::string pinned;  // a loader's pins (Android's bpfloader)
  std::string by;      // --by KEYS
  std::string sum;     // --sum FIELD
  // --hist [FIELD]: "" for --offcpu's time, unset: no histogram
  std::optional<std::string> hist;
  std::string filter;  // --filter EXPR
  bool offcpu = false;
  bool user_stacks = false;
  std::string user_unwind;  // --user-unwind tables|fp; empty: tables where built for (x86_64)
  std::optional<uint32_t> min_block_us;
  std::optional<uint32_t> unwind_memory_mib;  // --unwind-memory
  uint32_t max_keys = StackStore::kDefaultMaxKeyPairs;

  // Every check of these values, for both commands; `functions` stay
  // patterns. Throws Error with one line naming the bad value and the fix.
  SessionConfig session_config() const;
};

enum class Command { foreground, daemon };

// Adds -e, --bits, --ringbuf-kb, --verify, --pinned, --by, --sum, --hist, --filter, --offcpu,
// --user-stacks, --user-unwind, --unwind-memory, --min-block-us, --max-keys, and for the foreground
// -f,
// --probe-mechanism, -u, --profile, --pid, --comm, --cgroup, --cpu, each with its traits, to
// table.app(), bound to `options`; their defaults are what `options` holds now.
void add_session_options(OptionTable& table, SessionOptions& options, Command command);

}  // namespace stackmapd
