// SPDX-License-Identifier: GPL-2.0
// The model stage, between the event sources (daemon/bpf/) and the exports
// (daemon/export/): the daemon's copy of the unique stacks and their event
// counts, split by the user's --by key (attribution.h), filled by the
// ring-buffer consumer and read out as a Snapshot (snapshot.h). Indexed by
// stack_id (the BPF table's slot index) so that counting an event is one
// array access for the stack and at most one hash lookup for its key.
//
// Memory is bounded: past max_key_pairs distinct (stack, key) pairs over the
// whole store, an event of a new pair counts in its stack's `other` entry
// (and in key_overflow). A key naming a process (--by pid or tid) is folded
// once the process exited (fold_exited), so the pairs recycle. Every stack's
// keys and `other` sum to its count and weight at every moment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/model/attribution.h"
#include "daemon/model/key_pairs.h"
#include "daemon/model/stack_record.h"
#include "daemon/model/table_stats.h"
#include "stackmapd/abi.h"

namespace stackmapd {

class StackStore {
 public:
  // A pair is a 48-byte slot in a table kept at most 3/4 full, so the default
  // fills 65536 slots: 3 MiB. Measured by the allocator (stack_store_test.cpp,
  // MemoryPerKeyPair): 64.1 bytes a pair at the cap; 128 just after a doubling.
  static constexpr uint32_t kDefaultMaxKeyPairs = 49152;

  // user_stacks: every pair is also split by its user stack (EventKey::ustack).
  explicit StackStore(uint32_t table_size, KeySpec keys = KeySpec{{KeyField::pid, KeyField::comm}},
                      uint32_t max_key_pairs = kDefaultMaxKeyPairs, bool user_stacks = false);
  // A copy to count more into without touching this one (a snapshot's).
  StackStore(const StackStore& o);
  StackStore& operator=(const StackStore&) = delete;

  // Ids below table_size, and SMT_NO_KERNEL_STACK (abi.h).
  bool valid_id(uint32_t id) const { return at(id) < index_.size(); }

  // Counts n events of a known id weighing `weight` together (the consumer's
  // hot path); false when `id` is new (or invalid) and must be added with
  // insert(). Runs of one pair (the same stack and masked key) cost no hash lookup.
  bool count(uint32_t id, const EventKey& key, uint64_t weight, uint64_t n = 1) {
    const uint32_t a = at(id);
    if (a >= index_.size() || index_[a] == 0) return false;
    uint32_t pos = index_[a] - 1;
    stacks_[pos].ref_count += n;
    stacks_[pos].weight += weight;
    if (key.source >= source_events_.size()) source_events_.resize(size_t{key.source} + 1);
    source_events_[key.source] += n;
    PairKey k{pos, masked(key)};
    if (!last_ || !(k == last_key_)) look_up(k);
    last_->count += n;
    last_->weight += weight;
    key_overflow_ += last_overflow_ * n;
    return true;
  }

  // A stack's first events.
  void insert(uint32_t id, std::vector<uint64_t> ips, const EventKey& key, uint64_t weight,
              uint64_t n = 1);
  // A stack of a table taken over after a restart: its count predates
  // attribution and goes to `other`, weight = ref_count.
  void insert(uint32_t id, std::vector<uint64_t> ips, uint64_t ref_count);

  // The consumer interns thread names, cgroup paths and units here.
  StringTable& strings() { return strings_; }
  const KeySpec& keys() const { return keys_; }

  // A stack's frames, count and weight; its `by` is left empty (snapshot() fills it).
  const StackRecord* find(uint32_t id) const {
    const uint32_t a = at(id);
    return a < index_.size() && index_[a] ? &stacks_[index_[a] - 1] : nullptr;
  }

  // Stacks ordered by stack_id, as the kernel's exports walk the table, with
  // `by` filled; `sources` names the source indexes ("source N" past its end).
  std::vector<StackRecord> snapshot(const std::vector<std::string>& sources) const;
  uint64_t total_events() const;
  size_t size() const { return stacks_.size(); }
  // Forgets every stack and pair; interned strings stay.
  void clear();
  // The processes (or threads) the pairs' keys name (KeySpec::process_field),
  // sorted, 0 (the idle task, and folded keys) left out; none when the keys
  // name no process.
  std::vector<uint32_t> process_ids() const;
  // Folds every pair whose process is in `gone` (sorted), counts and weights
  // whole, into its key without the per-process fields, or into its stack's
  // `other` (KeySpec::folds_to_other). Returns the pairs folded.
  size_t fold_exited(const std::vector<uint32_t>& gone);
  // Fills key_pairs, max_key_pairs, key_overflow and key_pairs_folded.
  void add_counts(TableStats& s) const;
  // Events counted per source index (whatever the keys), since the store was
  // made: a clear() keeps them, so they only grow (Prometheus counters).
  const std::vector<uint64_t>& source_events() const { return source_events_; }

 private:
  // id's place in index_: SMT_NO_KERNEL_STACK has the last; past the end if invalid.
  uint32_t at(uint32_t id) const {
    const uint32_t ids = static_cast<uint32_t>(index_.size()) - 1;
    return id < ids ? id : id == SMT_NO_KERNEL_STACK ? ids : UINT32_MAX;
  }
  EventKey masked(const EventKey& k) const {
    return EventKey{k.pid & mask_.pid,
                    uint32_t(k.tid & mask_.tid),
                    uint32_t(k.bucket & mask_.bucket),
                    k.comm & mask_.comm,
                    k.cgroup & mask_.cgroup,
                    k.unit & mask_.unit,
                    uint16_t(k.source & mask_.source),
                    uint16_t(k.cpu & mask_.cpu),
                    k.ustack & mask_.ustack};
  }
  void look_up(const PairKey& k);  // points last_ at k's counts, or its stack's `other`
  KeyValues values(const EventKey& k, const std::vector<std::string>& sources) const;

  KeySpec keys_;
  EventKey mask_;                    // all ones in the fields of keys_, zeros elsewhere
  std::vector<uint32_t> index_;      // at(stack_id) -> 1 + position in stacks_, 0 if unseen
  std::vector<StackRecord> stacks_;  // `by` empty
  std::vector<Counts> other_;        // by position, as stacks_
  KeyPairs pairs_;
  StringTable strings_;
  uint64_t key_overflow_ = 0;
  uint64_t key_pairs_folded_ = 0;  // since the last clear(), as key_overflow_
  bool folds_to_other_;            // KeySpec::folds_to_other
  std::vector<uint64_t> source_events_;
  // The last pair counted; last_ is null after anything that may move counts.
  PairKey last_key_;
  Counts* last_ = nullptr;
  uint64_t last_overflow_ = 0;  // 1 if last_ is its stack's `other` because of the cap
};

}  // namespace stackmapd
