// SPDX-License-Identifier: GPL-2.0
// The shared table algorithm (include/stackmapd/stack_table.h) over plain host
// memory, so tests run the code the BPF program runs.
#pragma once

#include <vector>

#include "stackmapd/abi.h"

struct smt_table {
  std::vector<smt_slot> slots;
  std::vector<smt_elt> pool;
  smt_shared shared{};

  explicit smt_table(__u32 bits) : slots(1u << (bits + 1)), pool(1u << bits) {}
};

static inline smt_slot* smt_slot_at(smt_table* t, __u32 idx) {
  return idx < t->slots.size() ? &t->slots[idx] : nullptr;
}

static inline smt_elt* smt_elt_at(smt_table* t, __u32 idx) {
  return idx < t->pool.size() ? &t->pool[idx] : nullptr;
}

#include "stackmapd/stack_table.h"
