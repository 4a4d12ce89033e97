// SPDX-License-Identifier: GPL-2.0
// The StackStore's counts per (stack, --by key) pair: an open-addressing hash
// table (linear probing, power-of-two slots, at most 3/4 full) holding the
// counts inline, so that a lookup mostly touches one cache line. It never
// holds more than max_pairs pairs and never removes one (clear() empties it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/model/attribution.h"

namespace stackmapd {

struct Counts {
  uint64_t count = 0, weight = 0;
};

struct PairKey {
  uint32_t stack = 0;  // the stack's position in the StackStore
  EventKey key;        // masked by the store's KeySpec
  bool operator==(const PairKey&) const = default;
};

class KeyPairs {
 public:
  explicit KeyPairs(uint32_t max_pairs) : max_pairs_(max_pairs) {}

  // The pair's counts, added at zero if new; nullptr if it is new and the
  // table is full. Adding may grow the table, which moves every pair: a
  // pointer returned earlier is then invalid.
  Counts* find_or_add(const PairKey& k);
  template <class F>  // f(const PairKey&, const Counts&) for every pair, in no order
  void for_each(F f) const {
    for (const Slot& s : slots_)
      if (s.used()) f(s.key, s.counts);
  }
  size_t size() const { return size_; }
  uint32_t max_pairs() const { return max_pairs_; }
  size_t slots() const { return slots_.size(); }
  // Keeps the slots' memory: a table refills to about the same size.
  void clear();

 private:
  // A free slot's stack position: no store holds 2^32 - 1 stacks. Marking
  // it there rather than in a flag keeps a slot 48 bytes.
  static constexpr uint32_t kFree = ~0u;
  struct Slot {
    PairKey key = PairKey{kFree, {}};
    Counts counts;
    bool used() const { return key.stack != kFree; }
  };
  static_assert(sizeof(Slot) == 48);

  Slot& probe(const PairKey& k);  // k's slot, or the empty one where it would go
  void grow();

  std::vector<Slot> slots_;
  size_t size_ = 0;
  uint32_t max_pairs_;
};

}  // namespace stackmapd
