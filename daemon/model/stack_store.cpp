// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/stack_store.h"

#include <algorithm>
#include <utility>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

EventKey mask_of(const KeySpec& keys) {
  EventKey m;
  for (KeyField f : keys.fields) key_field(f).write(m, ~0u);
  return m;
}

}  // namespace

StackStore::StackStore(uint32_t table_size, KeySpec keys, uint32_t max_key_pairs, bool user_stacks)
    : keys_(std::move(keys)),
      mask_(mask_of(keys_)),
      index_(size_t{table_size} + 1, 0),
      pairs_(max_key_pairs),
      folds_to_other_(keys_.folds_to_other(user_stacks)) {
  if (user_stacks) mask_.ustack = ~0u;
}

StackStore::StackStore(const StackStore& o)
    : keys_(o.keys_),
      mask_(o.mask_),
      index_(o.index_),
      stacks_(o.stacks_),
      other_(o.other_),
      pairs_(o.pairs_),
      strings_(o.strings_),
      key_overflow_(o.key_overflow_),
      key_pairs_folded_(o.key_pairs_folded_),
      folds_to_other_(o.folds_to_other_) {}  // last_ would point into o

void StackStore::look_up(const PairKey& k) {
  last_key_ = k;
  last_ = pairs_.find_or_add(k);
  last_overflow_ = last_ == nullptr;
  if (!last_) last_ = &other_[k.stack];
}

void StackStore::insert(uint32_t id, std::vector<uint64_t> ips, uint64_t ref_count) {
  if (!valid_id(id) || index_[at(id)] != 0)
    throw Error("internal: stack_id " + std::to_string(id) + " inserted twice or out of range");
  StackRecord r;
  r.stack_id = id;
  r.ref_count = ref_count;
  r.ips = std::move(ips);
  r.weight = ref_count;
  stacks_.push_back(std::move(r));
  other_.push_back(Counts{ref_count, ref_count});
  index_[at(id)] = static_cast<uint32_t>(stacks_.size());
  last_ = nullptr;  // other_ may have moved; and after clear(), every count starts here
}

void StackStore::insert(uint32_t id, std::vector<uint64_t> ips, const EventKey& key,
                        uint64_t weight, uint64_t n) {
  insert(id, std::move(ips), 0);
  count(id, key, weight, n);
}

KeyValues StackStore::values(const EventKey& k, const std::vector<std::string>& sources) const {
  KeyValues v;
  for (KeyField f : keys_.fields) {
    const KeyFieldInfo& info = key_field(f);
    const uint32_t value = info.read(k);
    switch (info.event) {
      case KeyFieldInfo::Event::number: v.*info.number = value; break;
      case KeyFieldInfo::Event::string_id: v.*info.text = strings_.str(value); break;
      case KeyFieldInfo::Event::source_index:
        v.*info.text = value < sources.size() ? sources[value] : "source " + std::to_string(value);
        break;
    }
  }
  if (mask_.ustack) v.ustack = k.ustack;
  return v;
}

std::vector<StackRecord> StackStore::snapshot(const std::vector<std::string>& sources) const {
  std::vector<StackRecord> out = stacks_;
  pairs_.for_each([&](const PairKey& k, const Counts& c) {
    out[k.stack].by.push_back(KeyCount{values(k.key, sources), false, c.count, c.weight});
  });
  auto before = [this](const KeyCount& a, const KeyCount& b) {
    if (a.weight != b.weight) return a.weight > b.weight;
    if (a.count != b.count) return a.count > b.count;
    for (KeyField f : keys_.fields)
      if (int c = key_field(f).compare(a.key, b.key)) return c < 0;
    return a.key.ustack < b.key.ustack;
  };
  for (size_t pos = 0; pos < out.size(); ++pos) {
    std::sort(out[pos].by.begin(), out[pos].by.end(), before);
    if (other_[pos].count)
      out[pos].by.push_back(KeyCount{{}, true, other_[pos].count, other_[pos].weight});
  }
  std::sort(out.begin(), out.end(),
            [](const StackRecord& a, const StackRecord& b) { return a.stack_id < b.stack_id; });
  return out;
}

uint64_t StackStore::total_events() const {
  uint64_t total = 0;
  for (const auto& s : stacks_) total += s.ref_count;
  return total;
}

std::vector<uint32_t> StackStore::process_ids() const {
  std::vector<uint32_t> ids;
  const std::optional<KeyField> f = keys_.process_field();
  if (!f) return ids;
  const KeyFieldInfo& field = key_field(*f);
  pairs_.for_each([&](const PairKey& k, const Counts&) {
    if (const uint32_t id = field.read(k.key)) ids.push_back(id);
  });
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

size_t StackStore::fold_exited(const std::vector<uint32_t>& gone) {
  const std::optional<KeyField> f = keys_.process_field();
  if (!f || gone.empty()) return 0;
  const KeyFieldInfo& field = key_field(*f);
  // Pairs are never removed from KeyPairs: the kept and folded ones fill a
  // new table, which folding never makes bigger than this one.
  KeyPairs kept(pairs_.max_pairs());
  size_t folded = 0;
  pairs_.for_each([&](const PairKey& k, const Counts& c) {
    PairKey to = k;
    const uint32_t id = field.read(k.key);
    if (id && std::binary_search(gone.begin(), gone.end(), id)) {
      ++folded;
      if (folds_to_other_) {
        other_[k.stack].count += c.count;
        other_[k.stack].weight += c.weight;
        return;
      }
      for (KeyField p : keys_.fields)
        if (key_field(p).per_process) key_field(p).write(to.key, 0);
    }
    Counts* into = kept.find_or_add(to);
    into->count += c.count;
    into->weight += c.weight;
  });
  if (folded == 0) return 0;
  pairs_ = std::move(kept);
  last_ = nullptr;
  key_pairs_folded_ += folded;
  return folded;
}

void StackStore::clear() {
  std::fill(index_.begin(), index_.end(), 0);
  stacks_.clear();
  other_.clear();
  pairs_.clear();
  key_overflow_ = 0;
  key_pairs_folded_ = 0;
}

void StackStore::add_counts(TableStats& s) const {
  s.key_pairs = pairs_.size();
  s.max_key_pairs = pairs_.max_pairs();
  s.key_overflow = key_overflow_;
  s.key_pairs_folded = key_pairs_folded_;
}

}  // namespace stackmapd
