// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/breakdown.h"

#include <algorithm>
#include <cstdio>

#include "daemon/export/exports.h"

namespace stackmapd {

namespace {

constexpr size_t kTopKeysRequested = 5;
constexpr size_t kTopKeysDefault = 3;

bool weighted(const Snapshot& snap) { return !snap.weight_unit.empty(); }

uint64_t rank_of(const Snapshot& snap, const StackRecord& s) {
  return weighted(snap) ? s.weight : s.ref_count;
}

double share(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

std::string percent(double p) {
  char buf[16];
  snprintf(buf, sizeof(buf), "%.2f%%", p);
  return buf;
}

}  // namespace

std::vector<std::string> key_frames(const KeySpec& keys, const KeyCount& k) {
  if (k.other) return {"[other]"};
  std::vector<std::string> frames;
  const bool merge = keys.has(KeyField::comm) && keys.has(KeyField::pid);
  for (KeyField f : keys.fields) {
    switch (f) {
      case KeyField::pid:
        frames.push_back(merge ? k.key.comm + "[" + std::to_string(k.key.pid) + "]"
                               : "pid " + std::to_string(k.key.pid));
        break;
      case KeyField::comm:
        if (!merge) frames.push_back(k.key.comm);
        break;
      case KeyField::tid: frames.push_back("tid " + std::to_string(k.key.tid)); break;
      case KeyField::cgroup: frames.push_back(k.key.cgroup); break;
      case KeyField::unit: frames.push_back(k.key.unit.empty() ? "[no unit]" : k.key.unit); break;
      case KeyField::source: frames.push_back(k.key.source); break;
      case KeyField::cpu: frames.push_back("cpu " + std::to_string(k.key.cpu)); break;
    }
  }
  return frames;
}

std::string key_label(const KeySpec& keys, const KeyCount& k) {
  std::string label;
  for (const auto& f : key_frames(keys, k)) label += (label.empty() ? "" : " ") + f;
  return label;
}

std::string format_weight(uint64_t w, const std::string& unit) {
  if (unit == "ns") {
    char buf[48];
    snprintf(buf, sizeof(buf), "%.3f ms off-CPU", static_cast<double>(w) / 1e6);
    return buf;
  }
  return std::to_string(w) + " " + unit;
}

std::string format_top(const Snapshot& snap, size_t n, const Kallsyms* ksyms) {
  const std::vector<StackRecord>& stacks = snap.stacks;
  std::vector<const StackRecord*> order;
  uint64_t total = 0, total_weight = 0;
  for (const auto& s : stacks) {
    order.push_back(&s);
    total += s.ref_count;
    total_weight += s.weight;
  }
  n = n == 0 ? order.size() : std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [&](const StackRecord* a, const StackRecord* b) {
                      const uint64_t ra = rank_of(snap, *a), rb = rank_of(snap, *b);
                      return ra != rb ? ra > rb : a->stack_id < b->stack_id;
                    });
  std::string out = std::to_string(total) + " events";
  if (weighted(snap)) out += " (" + format_weight(total_weight, snap.weight_unit) + ")";
  out += ", " + std::to_string(stacks.size()) + " unique stacks; top " + std::to_string(n) + ":\n";
  const size_t max_keys = snap.keys_requested ? kTopKeysRequested : kTopKeysDefault;
  for (size_t i = 0; i < n; ++i) {
    const StackRecord& s = *order[i];
    out += "\n#" + std::to_string(i + 1) + " stack_id " + std::to_string(s.stack_id) + ": " +
           std::to_string(s.ref_count) + " events (" + percent(share(s.ref_count, total)) + ")";
    if (weighted(snap))
      out += ", " + format_weight(s.weight, snap.weight_unit) + " (" +
             percent(share(s.weight, total_weight)) + ")";
    out += ", depth " + std::to_string(s.ips.size()) + "\n";
    for (uint64_t ip : s.ips) out += "    " + symbolize(ip, ksyms) + "\n";
    if (s.by.empty()) continue;
    out += "  by " + snap.keys.str() + ":\n";
    const size_t shown = std::min(s.by.size(), max_keys);
    std::vector<std::string> labels;
    size_t width = 0;
    for (size_t k = 0; k < shown; ++k) {
      labels.push_back(key_label(snap.keys, s.by[k]));
      width = std::max(width, labels.back().size());
    }
    for (size_t k = 0; k < shown; ++k) {
      const KeyCount& key = s.by[k];
      char line[64];
      snprintf(line, sizeof(line), " %12llu events", static_cast<unsigned long long>(key.count));
      out += "    " + labels[k] + std::string(width - labels[k].size(), ' ') + line;
      if (weighted(snap)) out += ", " + format_weight(key.weight, snap.weight_unit);
      out += "\n";
    }
    if (s.by.size() > max_keys)
      out += "    ... " + std::to_string(s.by.size() - max_keys) + " more\n";
  }
  return out;
}

std::vector<SymbolizedStack> flame_stacks(const Snapshot& snap, const Kallsyms* ksyms) {
  std::vector<SymbolizedStack> plain = symbolize_stacks(snap.stacks, ksyms);
  const bool weights = weighted(snap);
  if (!snap.keys_requested) {
    if (weights)
      for (size_t i = 0; i < plain.size(); ++i) plain[i].count = snap.stacks[i].weight;
    return plain;
  }
  std::vector<SymbolizedStack> out;
  for (size_t i = 0; i < plain.size(); ++i)
    for (const KeyCount& k : snap.stacks[i].by) {
      SymbolizedStack s{weights ? k.weight : k.count, plain[i].frames};
      // Frames run innermost first: the keys go last, as the roots.
      std::vector<std::string> roots = key_frames(snap.keys, k);
      s.frames.insert(s.frames.end(), roots.rbegin(), roots.rend());
      out.push_back(std::move(s));
    }
  return out;
}

}  // namespace stackmapd
