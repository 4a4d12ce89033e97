// SPDX-License-Identifier: GPL-2.0
// The parsing of traced users' ELF files, in a parser sandbox (sys/sandbox.h):
// their build ids, unwind tables (unwind/cfi_table.h) and frames' names
// (symbols/user_symbolizer.h). The daemon opens each file (a /proc link, or
// a descriptor it holds) and sends the descriptor; the helper parses it with
// the same code as ever, in a process that can crash, hang or be exploited
// without the daemon. A file whose parse crashed or overran is not sent
// again: it costs its own tables or names (counted in failures(), said once).
//
// Each instance has its own helper and serves one thread at a time (the
// capture, the unwind tables and the symbolizing threads have one each).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/symbols/user_maps.h"
#include "daemon/symbols/user_symbolizer.h"
#include "daemon/sys/sandbox.h"
#include "daemon/unwind/cfi_cache.h"

namespace stackmapd {

class SandboxedParser {
 public:
  explicit SandboxedParser(std::string name, Sandbox::Limits limits = {});

  // The GNU build id of the open file, in hex; "" when none or lost.
  std::string build_id(int fd);
  // The unwind table of the file at `path` (opened here); throws Error.
  CfiTable cfi_table(const std::string& path);

  // Symbolizes as UserSymbolizer does, the binary kept open by the helper
  // under `key`, a stack's frames of one binary in one call; `fd`
  // (borrowed, -1: none) is sent when the helper does not hold the binary
  // yet. nullopt when it needs the file and none was given; frames unnamed
  // when the parse was lost.
  struct Frame {
    uint64_t file_offset = 0;
    bool is_return = false;
  };
  std::optional<std::vector<UserSymbolizer::Result>> symbolize(const std::string& key, int fd,
                                                               const std::vector<Frame>& frames);
  // Whether the helper holds `key`'s binary: symbolize() then needs no file.
  bool holds(const std::string& key) const {
    return lost_.count(key) || (sent_generation_ == sandbox_.generation() && sent_.count(key));
  }
  // The helper's idle libdwfl sessions closed (UserSymbolizer::close_idle).
  void close_idle();

  uint64_t failures() const { return failures_; }  // any thread
  uint64_t let_go() const { return let_go_; }      // binaries the helper let go (its cap)

 private:
  // The reply to `request`, or nullopt with the failure said (once) and counted.
  std::optional<std::string> call(const std::string& request, int fd, const std::string& file);

  Sandbox sandbox_;
  std::atomic<uint64_t> failures_ = 0, let_go_ = 0;
  std::set<std::string> lost_;  // symbolize() keys whose parse crashed or overran
  // The keys sent to the helper now running (Sandbox::generation).
  std::set<std::string> sent_;
  uint64_t sent_generation_ = 0;
};

// The helper's main: `stackmapd --sandboxed-parser ...` (cmd/main.cpp).
int run_sandboxed_parser(int argc, char** argv);

// A build id reader for ProcessMaps::read through `parser` (symbols/user_maps.h).
BuildIdParser sandboxed_build_ids(SandboxedParser& parser);
// An unwind table builder through `parser` (unwind/cfi_cache.h), which it keeps.
CfiBuilder sandboxed_tables(std::shared_ptr<SandboxedParser> parser);

}  // namespace stackmapd
