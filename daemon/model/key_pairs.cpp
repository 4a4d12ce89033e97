// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/key_pairs.h"

#include <algorithm>

namespace stackmapd {

namespace {

constexpr size_t kFirstSlots = 64;

uint64_t mix(uint64_t h, uint64_t word) {
  h = (h ^ word) * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 32);
}

uint64_t hash(const PairKey& k) {
  const EventKey& e = k.key;
  uint64_t h = mix(0, k.stack | uint64_t{e.pid} << 32);
  h = mix(h, e.tid | uint64_t{e.bucket} << 24 | uint64_t{e.comm} << 32);
  h = mix(h, e.cgroup | uint64_t{e.unit} << 32);
  return mix(h, e.source | uint64_t{e.cpu} << 16 | uint64_t{e.ustack} << 32);
}

}  // namespace

KeyPairs::Slot& KeyPairs::probe(const PairKey& k) {
  size_t mask = slots_.size() - 1;
  for (size_t i = hash(k) & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (!s.used() || s.key == k) return s;
  }
}

Counts* KeyPairs::find_or_add(const PairKey& k) {
  if (!slots_.empty()) {
    Slot& s = probe(k);
    if (s.used()) return &s.counts;
  }
  if (size_ >= max_pairs_) return nullptr;
  if ((size_ + 1) * 4 > slots_.size() * 3) grow();
  Slot& s = probe(k);
  s = Slot{k, {}};
  ++size_;
  return &s.counts;
}

void KeyPairs::grow() {
  std::vector<Slot> old(std::max(kFirstSlots, slots_.size() * 2));
  old.swap(slots_);
  for (const Slot& s : old)
    if (s.used()) probe(s.key) = s;
}

void KeyPairs::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  size_ = 0;
}

}  // namespace stackmapd
