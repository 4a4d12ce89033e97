// SPDX-License-Identifier: GPL-2.0
// The per-CPU batches (abi.h, struct smt_batch), mmapped: the events each
// CPU counted and has not sent yet, and its outcome counters. Each copy is
// read between two equal even values of the batch's seqlock, so it is one
// moment of that batch: its counters and its entries agree.
#pragma once

#include <cstdint>
#include <vector>

#include "daemon/sys/mapping.h"
#include "stackmapd/abi.h"

namespace stackmapd {

class CpuBatches {
 public:
  CpuBatches(int fd, uint32_t count);  // throws Error

  uint32_t count() const { return count_; }
  // A consistent copy of every batch. Throws Error if a batch stays in its
  // writer's window for seconds (a writer cannot: it never sleeps there).
  std::vector<smt_batch> read() const;
  // Every batch's counters, each a consistent copy.
  std::vector<smt_cpu_counters> counters() const;
  // Empties every batch, counters included: only while no program runs on
  // them (a table started fresh).
  void clear();
  // Forgets the names the batches remember, whose ids meant something to
  // the daemon before: only while no program runs (a take-over).
  void forget_names();

 private:
  smt_batch* at(uint32_t i) const;

  Mapping map_;
  uint32_t count_;
};

}  // namespace stackmapd
