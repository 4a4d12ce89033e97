// SPDX-License-Identifier: GPL-2.0
// The table's counters as the stat export reports them.
#pragma once

#include <cstdint>

#include "stackmapd/abi.h"

namespace stackmapd {

struct TableStats {
  uint64_t counters[SMC_NR] = {};  // summed over CPUs
  uint32_t entries = 0;            // pool elements in use
  uint32_t pool_size = 0;
  uint32_t table_size = 0;
  uint64_t bad_records = 0;        // ring-buffer records the daemon could not use

  uint64_t get(smt_counter c) const { return counters[c]; }
  uint64_t drops() const {
    uint64_t d = 0;
    for (int c = SMC_DROP_POOL_FULL; c <= SMC_DROP_RINGBUF_FULL; ++c) d += counters[c];
    return d;
  }
  bool pool_full() const { return entries >= pool_size; }
  // Share of events whose stack was already stored. The RFC divided hits by
  // hits + drops, so a stack's first insert counted as a hit and a table of
  // all-new stacks showed 100%.
  uint32_t hit_rate_percent() const {
    uint64_t events = get(SMC_HITS) + drops();
    if (events == 0) return 0;
    return static_cast<uint32_t>((get(SMC_HITS) - get(SMC_INSERTS)) * 100 / events);
  }
};

}  // namespace stackmapd
