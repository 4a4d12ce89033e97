// SPDX-License-Identifier: GPL-2.0
// delta_snapshot (pprof.h): the "last N seconds" of a profile endpoint.
#include <algorithm>
#include <unordered_map>

#include "daemon/export/pprof.h"

namespace stackmapd {

namespace {

uint64_t less(uint64_t after, uint64_t before) { return after > before ? after - before : 0; }

bool holds(const std::vector<KeyCount>& by, const KeyCount& k) {
  return std::any_of(by.begin(), by.end(),
                     [&](const KeyCount& x) { return x.other == k.other && x.key == k.key; });
}

// `before`'s keys of a stack as `after` holds them: a key of a process that
// exited in between was folded (StackStore::fold_exited), its counts now
// under the key without its per-process fields, or in `other`.
std::vector<KeyCount> as_after(std::vector<KeyCount> before, const std::vector<KeyCount>& after,
                               const Snapshot& snap) {
  if (!snap.keys.process_field()) return before;
  for (KeyCount& k : before) {
    if (k.other || holds(after, k)) continue;
    k.other = snap.keys.folds_to_other(snap.user.enabled);
    k.key = k.other ? KeyValues{} : snap.keys.folded(k.key);
  }
  return before;
}

}  // namespace

Snapshot delta_snapshot(const Snapshot& before, const Snapshot& after) {
  std::unordered_map<uint32_t, const StackRecord*> old;
  for (const StackRecord& s : before.stacks) old[s.stack_id] = &s;
  Snapshot delta = after;
  delta.stacks.clear();
  for (const StackRecord& s : after.stacks) {
    auto it = old.find(s.stack_id);
    const StackRecord* b = it == old.end() ? nullptr : it->second;
    if (b && (b->ips != s.ips || b->ref_count > s.ref_count)) b = nullptr;
    if (!b) {
      delta.stacks.push_back(s);
      continue;
    }
    StackRecord d = s;
    d.ref_count = s.ref_count - b->ref_count;
    d.weight = less(s.weight, b->weight);
    if (d.ref_count == 0) continue;
    d.by.clear();
    const std::vector<KeyCount> base = as_after(b->by, s.by, after);
    for (const KeyCount& k : s.by) {
      KeyCount dk = k;
      for (const KeyCount& bk : base)  // folded keys: several may make one
        if (bk.other == k.other && bk.key == k.key) {
          dk.count = less(dk.count, bk.count);
          dk.weight = less(dk.weight, bk.weight);
        }
      if (dk.count) d.by.push_back(std::move(dk));
    }
    // StackRecord's order: by weight, then count, the `other` entry last.
    std::stable_sort(d.by.begin(), d.by.end(), [](const KeyCount& x, const KeyCount& y) {
      if (x.other != y.other) return y.other;
      return x.weight != y.weight ? x.weight > y.weight : x.count > y.count;
    });
    delta.stacks.push_back(std::move(d));
  }
  if (before.stats.resets == after.stats.resets)
    for (int c = 0; c < SMC_NR; ++c)
      delta.stats.counters[c] = less(after.stats.counters[c], before.stats.counters[c]);
  intern_callstacks(delta);
  return delta;
}

}  // namespace stackmapd
