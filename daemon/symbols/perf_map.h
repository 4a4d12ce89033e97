// SPDX-License-Identifier: GPL-2.0
// --user-stacks: names of JIT code, which lives in anonymous memory and has
// no file to symbolize from, from the map a JIT writes for perf:
// /tmp/perf-PID.map, one "START SIZE name" line (hex, no 0x) per function,
// PID as the process sees itself (its own pid namespace). Read while the
// process lives (JITs remove it at exit), through /proc/PID/root so that a
// process in another mount namespace has its own /tmp.
//
// The file is the traced user's and the daemon is root: as perf does, only a
// regular file owned by the process's user or root is read, with no
// symbolic link on the way (a link could name a root-only file, whose lines
// would then be served as names) and without waiting on a FIFO; at most
// kMaxBytes of it, streamed, names cut at kMaxName bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stackmapd {

class PerfMap {
 public:
  static constexpr uint64_t kMaxBytes = 64ull << 20;
  static constexpr size_t kMaxName = 1024;
  static constexpr size_t kMaxFunctions = 1u << 20;

  // The map of `pid` (proc: the proc filesystem's root); nullopt when the
  // process has none, is gone, or its map is refused: then *refused says
  // why ("a FIFO, not a regular file", "owned by uid 1001, not ...").
  static std::optional<PerfMap> read(uint32_t pid, const std::string& proc = "/proc",
                                     std::string* refused = nullptr);
  // Lines that do not parse are skipped (a JIT may be writing the last one).
  static PerfMap parse(std::string_view text);

  // "name+0xoff" of the function holding addr (of two lines with one start,
  // the later: the code was replaced); nullopt when none does. A return
  // address is looked up at addr - 1, inside its call (the offset is addr's).
  std::optional<std::string> find(uint64_t addr, bool is_return = false) const;
  size_t size() const { return functions_.size(); }
  // What it holds in memory, about: the daemon bounds the maps it keeps.
  size_t bytes() const { return names_.size() + functions_.size() * sizeof(Function); }

 private:
  class Reader;
  struct Function {
    uint64_t start = 0, end = 0;
    uint32_t name_at = 0, name_size = 0;  // in names_
  };
  void add_line(std::string_view line);
  void finish();  // sorts: after the last add_line

  std::vector<Function> functions_;  // sorted by start after finish()
  std::string names_;
};

}  // namespace stackmapd
