// SPDX-License-Identifier: GPL-2.0
// --user-stacks: the daemon's view of the user stack table (abi.h,
// SMT_USER_MARKER), the kernel table's twin: the same layout and reader code
// (stack_table.h), its own slots and pool mmapped and its own smt_shared.
// Its stacks carry the process they belong to in their marker frame.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "daemon/bpf/bpf_object.h"
#include "daemon/bpf/pool_window.h"
#include "daemon/model/user_stack.h"
#include "daemon/sys/mapping.h"
#include "stackmapd/abi.h"

namespace stackmapd {

class UserTable {
 public:
  // Maps the user table of `object`; empty (enabled() false) without --user-stacks.
  explicit UserTable(const BpfObject& object);

  bool enabled() const { return enabled_; }
  // The published stack of slot `id` (its marker frame removed, its pid and
  // exec id read from it); nullopt while it has none.
  std::optional<UserStackIps> stack(uint32_t id) const;
  uint32_t table_size() const { return 2u << bits_; }
  // A clean table with a fresh seed: at session start, take-over and reset,
  // while no program can write it.
  void clear(uint32_t seed) const;
  uint32_t entries() const;
  // The ids of the stacks published in pool elements [from, now), in pool
  // order, to `f`; returns where the next call starts. A stack whose slot is
  // not written yet is left to the events that name it.
  template <class F>
  uint32_t scan(uint32_t from, F f) const {
    const uint32_t to = entries();
    for (uint32_t elt = from; elt < to; ++elt)
      if (const uint32_t id = slot_of(elt); id != SMT_NO_STACK_ID) f(id);
    return std::max(from, to);
  }

 private:
  uint32_t slot_of(uint32_t elt) const;  // pool element -> its slot, found by its hash

  bool enabled_;
  uint32_t bits_;
  smt_shared* shared_;
  Mapping slots_;            // read-write: written only by clear()
  mutable PoolWindow pool_;  // read only; mutable as TableView's
};

}  // namespace stackmapd
