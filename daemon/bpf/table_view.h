// SPDX-License-Identifier: GPL-2.0
// The daemon's view of the BPF table: the slots and pool arrays mmapped (no
// syscall per read; the pool as far as it is handed out, pool_window.h), the table-wide state and
// the daemon's bookkeeping kept beside it (smt_globals). The daemon keeps each stack's ref_count in
// the pool: the events it has counted.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "daemon/bpf/bpf_object.h"
#include "daemon/bpf/pool_window.h"
#include "daemon/model/stack_record.h"
#include "daemon/model/table_stats.h"
#include "daemon/sys/mapping.h"
#include "stackmapd/abi.h"

namespace stackmapd {

class TableView {
 public:
  explicit TableView(const BpfObject& object);  // throws Error

  uint32_t bits() const { return bits_; }
  uint32_t table_size() const { return 2u << bits_; }
  uint32_t pool_size() const { return 1u << bits_; }

  // The element slot `id` publishes (stack_table.h's smt_published_elt);
  // for SMT_NO_KERNEL_STACK an empty one, its count kept in book().
  const smt_elt* published_elt(uint32_t id) const;
  // The id of the published stack with these frames, or SMT_NO_STACK_ID.
  uint32_t find(const std::vector<uint64_t>& ips) const;
  // Adds events the daemon counted to a published stack's ref_count.
  void add_ref(uint32_t id, uint64_t n) const;
  // The table's own view of a stack: its frames and ref_count.
  // Empty frames when the slot holds no published element.
  StackRecord stack(uint32_t id) const;
  // Every stack the table holds, by slot order, then SMT_NO_KERNEL_STACK's
  // if it counted events.
  std::vector<StackRecord> stacks() const;

  smt_shared& shared() const { return globals_->shared; }
  smt_daemon_state& book() const { return globals_->daemon_state; }

  // Outcome counters of one epoch parity, summed over CPUs, since load.
  static std::array<uint64_t, SMC_NR> sum_counters(const std::vector<smt_cpu_counters>& counters,
                                                   uint32_t parity);
  // The table's statistics for the epoch of that parity, from every CPU's
  // counters (the consumer's own counts are the caller's to add).
  TableStats stats_of(const std::vector<smt_cpu_counters>& counters, uint32_t parity) const;

  // Empties the slots and the pool's allocation counter. Only while no
  // program can run on the table (the reset protocol, a take-over).
  void clear();

 private:
  uint32_t bits_;
  smt_globals* globals_;
  Mapping slots_;  // read-write: written only by clear()
  // Read-write: the daemon writes ref_counts only. Mutable: reading maps
  // more of the same array, which changes nothing a reader sees.
  mutable PoolWindow pool_;
};

}  // namespace stackmapd
