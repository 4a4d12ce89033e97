// SPDX-License-Identifier: GPL-2.0
// --user-stacks: turns the user table's stacks into UserStacks
// (daemon/model/user_stack.h) the first time an event names one, while its
// process most likely still runs: its mappings (/proc/PID/maps, cached per
// process and exec) give each frame a binary and file offset, libdwfl its
// symbol (user_symbolizer.h). A stack is resolved once; the exports copy it.
//
// Memory is bounded: at most the user table's stacks (its pool), kMaxProcesses
// processes' maps and UserSymbolizer's open binaries; each cap counted.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "daemon/bpf/user_table.h"
#include "daemon/model/user_stack.h"
#include "daemon/symbols/user_maps.h"
#include "daemon/symbols/user_symbolizer.h"

namespace stackmapd {

struct UserStackCounts {
  uint64_t processes_evicted = 0;  // maps dropped from the cache to make room
  uint64_t binaries_evicted = 0;   // symbol tables closed to make room
  uint64_t gone = 0;               // stacks whose process had exited: frames unresolved
  uint64_t truncated = 0;          // stacks that stop short of an entry point
};

class UserStackCollector {
 public:
  static constexpr size_t kMaxProcesses = 256;

  explicit UserStackCollector(const UserTable& table, std::string proc = "/proc");

  // The consumer's hot path: a known id costs one array access.
  void see(uint32_t id) {
    if (id < seen_.size() && !seen_[id]) capture(id);
  }
  const UserStackSet& stacks() const { return set_; }
  UserStackCounts counts() const;
  // Forgets the stacks (a reset emptied the table); cached maps stay.
  void clear();

 private:
  void capture(uint32_t id);
  const ProcessMaps* maps_of(uint32_t pid, uint32_t exec_id, bool reread);
  int32_t binary_index(const MappedFile& f);

  const UserTable& table_;
  std::string proc_;
  std::vector<uint8_t> seen_;  // by id
  UserStackSet set_;
  UserSymbolizer symbolizer_;
  // (pid, exec id) -> maps, most recently used first: an exec is a new key.
  std::list<std::pair<uint64_t, ProcessMaps>> maps_;
  std::map<std::pair<std::string, std::string>, int32_t> binary_ids_;  // (path, build id)
  std::map<int32_t, std::string> open_paths_;  // where a binary was last readable
  UserStackCounts counts_;
};

// The outermost frame is where a process or thread starts: the stack is whole.
bool reaches_entry_point(const UserStackSet& set, const UserStack& s);

}  // namespace stackmapd
