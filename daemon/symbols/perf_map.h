// SPDX-License-Identifier: GPL-2.0
// --user-stacks: names of JIT code, which lives in anonymous memory and has
// no file to symbolize from, from the map a JIT writes for perf:
// /tmp/perf-PID.map, one "START SIZE name" line (hex, no 0x) per function,
// PID as the process sees itself (its own pid namespace). Read while the
// process lives (JITs remove it at exit), through /proc/PID/root so that a
// process in another mount namespace has its own /tmp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stackmapd {

class PerfMap {
 public:
  // The map of `pid` (proc: the proc filesystem's root); nullopt when the
  // process has none or is gone.
  static std::optional<PerfMap> read(uint32_t pid, const std::string& proc = "/proc");
  // Lines that do not parse are skipped (a JIT may be writing the last one).
  static PerfMap parse(const std::string& text);

  // "name+0xoff" of the function holding addr (of two lines with one start,
  // the later: the code was replaced); nullopt when none does. A return
  // address is looked up at addr - 1, inside its call (the offset is addr's).
  std::optional<std::string> find(uint64_t addr, bool is_return = false) const;
  size_t size() const { return functions_.size(); }

 private:
  struct Function {
    uint64_t start = 0, end = 0;
    std::string name;
  };
  std::vector<Function> functions_;  // sorted by start
};

}  // namespace stackmapd
