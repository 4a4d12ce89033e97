// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/breakdown.h"

#include <algorithm>
#include <array>
#include <cstdio>

#include "daemon/export/exports.h"
#include "daemon/export/utf8_text.h"
#include "daemon/model/histogram.h"
#include "daemon/model/user_stack.h"
#include "stackmapd/abi.h"
#include "stackmapd/hist.h"

namespace stackmapd {

namespace {

constexpr size_t kTopKeysRequested = 5;
constexpr size_t kTopKeysDefault = 3;

bool weighted(const Snapshot& snap) { return !snap.weight_unit.empty(); }

double share(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

std::string percent(double p) {
  char buf[16];
  snprintf(buf, sizeof(buf), "%.2f%%", p);
  return buf;
}

// --top's user frames of one callstack, outermost last, then the mark of a
// stack the unwinder could not finish.
void append_user_frames(const Snapshot& snap, const FrameNames& names, const Callstack& c,
                        std::string& out) {
  if (c.ustack == kNoUserStack) {
    out += "    [no user stack]\n";
    return;
  }
  auto it = snap.user.stacks.find(c.ustack);
  if (it == snap.user.stacks.end()) {
    out += "    [user stack not stored]\n";
    return;
  }
  for (size_t i = c.kernel_depth; i < c.frames.size(); ++i) {
    const std::string& srcline = names.user(c.frames[i]).srcline;
    for (const std::string& name : names.text(c.frames[i])) {
      out += "    " + line_text(name);
      if (!srcline.empty()) out += " " + line_text(srcline);
      out += "\n";
    }
  }
  if (it->second.truncated)
    out += "    [truncated: the unwinder stopped here (no frame pointers?)]\n";
}

// bpftrace's hist() lines (src/output/text.cpp): the interval in 16
// columns, the count in 8, a bar of up to 52 @s; every bucket from the
// lowest to the highest counted one.
std::string hist_lines(const std::array<uint64_t, SMT_HIST_BUCKETS>& counts) {
  size_t lo = 0, hi = counts.size();
  while (lo < hi && !counts[lo]) ++lo;
  while (hi > lo && !counts[hi - 1]) --hi;
  const uint64_t max = lo < hi ? *std::max_element(counts.begin() + lo, counts.begin() + hi) : 0;
  std::string out;
  for (size_t b = lo; b < hi; ++b) {
    constexpr int kBar = 52;
    const int bar =
        static_cast<int>(static_cast<float>(counts[b]) / static_cast<float>(max) * kBar);
    char line[128];
    snprintf(line, sizeof(line), "    %-16s%8llu |%-52s|\n", hist_range(b).c_str(),
             static_cast<unsigned long long>(counts[b]), std::string(bar, '@').c_str());
    out += line;
  }
  return out;
}

// The field of `keys` whose values are --hist's buckets; null: none.
const KeyFieldInfo* hist_field(const KeySpec& keys) {
  for (KeyField f : keys.fields)
    if (key_field(f).hist_buckets) return &key_field(f);
  return nullptr;
}

// --hist: one histogram along `buckets` per key of the stack (the key
// without it), the most frequent keys first.
void append_hists(const Snapshot& snap, const KeyFieldInfo& buckets, const Callstack& c,
                  size_t max_keys, std::string& out) {
  KeySpec rest = snap.keys;
  std::erase(rest.fields, buckets.field);
  struct Hist {
    std::string label;
    uint64_t count = 0;
    std::array<uint64_t, SMT_HIST_BUCKETS> counts{};
  };
  std::vector<Hist> hists;
  for (uint32_t k : c.keys) {
    const KeyCount& key = snap.stacks[c.stack].by[k];
    std::string label = key.other ? "[other]" : key_label(rest, key);
    auto it =
        std::find_if(hists.begin(), hists.end(), [&](const Hist& h) { return h.label == label; });
    if (it == hists.end()) it = hists.insert(hists.end(), Hist{label});
    it->count += key.count;
    // `other` has no bucket: its events count under [0] and the label says so.
    it->counts[key.other ? 0 : std::min<uint32_t>(key.key.*buckets.number, SMT_HIST_BUCKETS - 1)] +=
        key.count;
  }
  std::stable_sort(hists.begin(), hists.end(),
                   [](const Hist& a, const Hist& b) { return a.count > b.count; });
  const std::string what = weight_kind(snap.weight_unit) == WeightKind::nanoseconds
                               ? "ns off the CPU"
                               : snap.weight_unit;
  for (size_t h = 0; h < hists.size() && h < max_keys; ++h) {
    out += "  " + what;
    if (!hists[h].label.empty()) out += ", " + line_text(hists[h].label);
    out += ":\n" + hist_lines(hists[h].counts);
  }
  if (hists.size() > max_keys)
    out += "  ... " + std::to_string(hists.size() - max_keys) + " more\n";
}

}  // namespace

std::vector<std::string> key_frames(const KeySpec& keys, const KeyCount& k) {
  if (k.other) return {"[other]"};
  std::vector<std::string> frames;
  const bool merge = keys.has(KeyField::comm) && keys.has(KeyField::pid);
  for (KeyField f : keys.fields) {
    if (merge && f == KeyField::pid)
      frames.push_back(k.key.comm + "[" + std::to_string(k.key.pid) + "]");
    else if (!(merge && f == KeyField::comm)) frames.push_back(key_field(f).frame(k.key));
  }
  return frames;
}

std::string key_label(const KeySpec& keys, const KeyCount& k) {
  std::string label;
  for (const auto& f : key_frames(keys, k)) label += (label.empty() ? "" : " ") + f;
  return label;
}

std::string format_top(const Snapshot& snap, size_t n, const FrameNames& names) {
  const std::vector<Callstack>& stacks = callstacks(snap);
  std::vector<const Callstack*> order;
  uint64_t total = 0, total_weight = 0;
  for (const Callstack& c : stacks) {
    order.push_back(&c);
    total += c.count;
    total_weight += c.weight;
  }
  const auto rank = [&](const Callstack& c) { return weighted(snap) ? c.weight : c.count; };
  n = n == 0 ? order.size() : std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [&](const Callstack* a, const Callstack* b) {
                      const uint64_t ra = rank(*a), rb = rank(*b);
                      return ra != rb ? ra > rb : a->stack_id < b->stack_id;
                    });
  std::string out = std::to_string(total) + " events";
  if (weighted(snap)) out += " (" + format_weight(total_weight, snap.weight_unit) + ")";
  out += ", " + std::to_string(stacks.size()) + " unique stacks; top " + std::to_string(n) + ":\n";
  const size_t max_keys = snap.keys_requested ? kTopKeysRequested : kTopKeysDefault;
  const KeyFieldInfo* buckets = hist_field(snap.keys);
  for (size_t i = 0; i < n; ++i) {
    const Callstack& c = *order[i];
    const std::vector<KeyCount>& by = snap.stacks[c.stack].by;
    out += "\n#" + std::to_string(i + 1) + " stack_id " + std::to_string(c.stack_id);
    if (snap.user.enabled)
      out += c.ustack == kNoUserStack ? " user_stack_id -"
                                      : " user_stack_id " + std::to_string(c.ustack);
    out += ": " + std::to_string(c.count) + " events (" + percent(share(c.count, total)) + ")";
    if (weighted(snap))
      out += ", " + format_weight(c.weight, snap.weight_unit) + " (" +
             percent(share(c.weight, total_weight)) + ")";
    out += ", depth " + std::to_string(c.kernel_depth) + "\n";
    for (uint32_t k = 0; k < c.kernel_depth; ++k)
      out += "    " + line_text(names.text(c.frames[k]).front()) + "\n";
    if (c.stack_id == SMT_NO_KERNEL_STACK) out += "    [no kernel frames: sampled in user mode]\n";
    if (snap.user.enabled) append_user_frames(snap, names, c, out);
    if (c.keys.empty()) continue;
    if (buckets) {
      append_hists(snap, *buckets, c, max_keys, out);
      continue;
    }
    out += "  by " + snap.keys.str() + ":\n";
    const size_t shown = std::min(c.keys.size(), max_keys);
    std::vector<std::string> labels;
    size_t width = 0;
    for (size_t k = 0; k < shown; ++k) {
      labels.push_back(line_text(key_label(snap.keys, by[c.keys[k]])));
      width = std::max(width, labels.back().size());
    }
    for (size_t k = 0; k < shown; ++k) {
      const KeyCount& key = by[c.keys[k]];
      char line[64];
      snprintf(line, sizeof(line), " %12llu events", static_cast<unsigned long long>(key.count));
      out += "    " + labels[k] + std::string(width - labels[k].size(), ' ') + line;
      if (weighted(snap)) out += ", " + format_weight(key.weight, snap.weight_unit);
      out += "\n";
    }
    if (c.keys.size() > max_keys)
      out += "    ... " + std::to_string(c.keys.size() - max_keys) + " more\n";
  }
  return out;
}

std::vector<SymbolizedStack> flame_stacks(const Snapshot& snap, const FrameNames& names) {
  const bool weights = weighted(snap);
  std::vector<SymbolizedStack> out;
  for (const Callstack& c : callstacks(snap)) {
    // Innermost first: the kernel frames, the user frames, then the keys as the roots.
    std::vector<std::string> frames;
    for (uint32_t f : c.frames)
      for (std::string& name : names.flame(f)) frames.push_back(std::move(name));
    if (!snap.keys_requested) {
      out.push_back({weights ? c.weight : c.count, std::move(frames)});
      continue;
    }
    for (uint32_t k : c.keys) {
      const KeyCount& key = snap.stacks[c.stack].by[k];
      SymbolizedStack s{weights ? key.weight : key.count, frames};
      std::vector<std::string> roots = key_frames(snap.keys, key);
      s.frames.insert(s.frames.end(), roots.rbegin(), roots.rend());
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace stackmapd
