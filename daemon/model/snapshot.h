// SPDX-License-Identifier: GPL-2.0
// The state of a table at one moment, as a backend (BPF session or tracefs)
// hands it to the exports: its geometry, counters and stacks, and what is
// needed to symbolize them off the machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/model/attribution.h"
#include "daemon/model/callstack.h"
#include "daemon/model/kernel_info.h"
#include "daemon/model/stack_record.h"
#include "daemon/model/table_stats.h"
#include "daemon/model/user_stack.h"

namespace stackmapd {

struct Snapshot {
  uint32_t bits = 0;
  uint32_t hash_seed = 0;
  TableStats stats;
  std::vector<StackRecord> stacks;  // by stack_id
  KernelInfo kernel;                // for symbolizing elsewhere; empty: not written
  KeySpec keys;                     // what each stack's `by` is split by
  std::string weight_unit;      // of StackRecord::weight ("bytes_alloc", "ns"); empty: unweighted
  bool keys_requested = false;  // --by given: the exports show each stack's keys
  std::vector<std::string> sources;  // event sources by index (KeyValues::source names them)
  UserStackSet user;                 // --user-stacks: the stacks KeyValues::ustack names
  // The model's ids (callstack.h): what the exports walk. intern_callstacks()
  // fills them from the above; empty until it has.
  std::vector<Frame> frames;
  std::vector<Callstack> callstacks;
};

}  // namespace stackmapd
