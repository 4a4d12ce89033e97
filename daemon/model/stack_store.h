// SPDX-License-Identifier: GPL-2.0
// The model stage, between the event sources (daemon/bpf/) and the exports
// (daemon/export/): the daemon's copy of the unique stacks and their event
// counts, filled by the ring-buffer consumer and read out as a Snapshot
// (snapshot.h). Indexed by stack_id (the BPF table's slot index) so that
// counting an event is one array access on the consumer's hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/model/stack_record.h"

namespace stackmapd {

class StackStore {
 public:
  explicit StackStore(uint32_t table_size) : index_(table_size, 0) {}

  bool valid_id(uint32_t id) const { return id < index_.size(); }

  // Counts one event for a known id; false when `id` is new (or invalid) and
  // must be added with insert().
  bool count(uint32_t id) {
    if (id >= index_.size() || index_[id] == 0) return false;
    ++stacks_[index_[id] - 1].ref_count;
    return true;
  }

  void insert(uint32_t id, std::vector<uint64_t> ips, uint64_t ref_count = 1);
  const StackRecord* find(uint32_t id) const {
    return id < index_.size() && index_[id] ? &stacks_[index_[id] - 1] : nullptr;
  }

  // Stacks ordered by stack_id, as the kernel's exports walk the table.
  std::vector<StackRecord> snapshot() const;
  uint64_t total_events() const;
  size_t size() const { return stacks_.size(); }
  void clear();

 private:
  std::vector<uint32_t> index_;  // stack_id -> 1 + position in stacks_, 0 if unseen
  std::vector<StackRecord> stacks_;
};

}  // namespace stackmapd
