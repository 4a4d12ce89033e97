// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/breakdown.h"

#include <algorithm>
#include <cstdio>

#include "daemon/export/exports.h"
#include "daemon/export/utf8_text.h"
#include "daemon/model/user_stack.h"
#include "stackmapd/abi.h"

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

// --top's user frames of one record, outermost last, then the mark of a
// stack the unwinder could not finish.
void append_user_frames(const Snapshot& snap, uint32_t ustack, std::string& out) {
  if (ustack == kNoUserStack) {
    out += "    [no user stack]\n";
    return;
  }
  auto it = snap.user.stacks.find(ustack);
  if (it == snap.user.stacks.end()) {
    out += "    [user stack not stored]\n";
    return;
  }
  for (const UserFrame& f : it->second.frames)
    for (const std::string& name : user_frame_names(snap.user, f, true)) {
      out += "    " + utf8_text(name);
      if (!f.srcline.empty()) out += " " + utf8_text(f.srcline);
      out += "\n";
    }
  if (it->second.truncated)
    out += "    [truncated: the unwinder stopped here (no frame pointers?)]\n";
}

}  // namespace

std::vector<StackRecord> split_by_user_stack(const std::vector<StackRecord>& stacks) {
  std::vector<StackRecord> out;
  for (const StackRecord& s : stacks) {
    const size_t first = out.size();
    for (const KeyCount& k : s.by) {
      const uint32_t u = k.other ? kNoUserStack : k.key.ustack;
      size_t i = first;
      while (i < out.size() && out[i].ustack != u) ++i;
      if (i == out.size()) {
        StackRecord r{s.stack_id, 0, s.ips, 0};
        r.ustack = u;
        out.push_back(std::move(r));
      }
      out[i].ref_count += k.count;
      out[i].weight += k.weight;
      out[i].by.push_back(k);
    }
  }
  return out;
}

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

std::string format_weight(uint64_t w, const std::string& unit) {
  if (unit == "ns") {
    char buf[48];
    snprintf(buf, sizeof(buf), "%.3f ms off-CPU", static_cast<double>(w) / 1e6);
    return buf;
  }
  return std::to_string(w) + " " + unit;
}

std::string format_top(const Snapshot& snap, size_t n, const Kallsyms* ksyms,
                       const FunctionNames* names) {
  const auto kernel_name = [&](uint64_t ip) {
    if (!ksyms && names)
      if (auto it = names->find(ip); it != names->end()) return it->second;
    return symbolize(ip, ksyms);
  };
  const std::vector<StackRecord> split =
      snap.user.enabled ? split_by_user_stack(snap.stacks) : std::vector<StackRecord>{};
  const std::vector<StackRecord>& stacks = snap.user.enabled ? split : snap.stacks;
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
    out += "\n#" + std::to_string(i + 1) + " stack_id " + std::to_string(s.stack_id);
    if (snap.user.enabled)
      out += s.ustack == kNoUserStack ? " user_stack_id -"
                                      : " user_stack_id " + std::to_string(s.ustack);
    out +=
        ": " + std::to_string(s.ref_count) + " events (" + percent(share(s.ref_count, total)) + ")";
    if (weighted(snap))
      out += ", " + format_weight(s.weight, snap.weight_unit) + " (" +
             percent(share(s.weight, total_weight)) + ")";
    out += ", depth " + std::to_string(s.ips.size()) + "\n";
    for (uint64_t ip : s.ips) out += "    " + utf8_text(kernel_name(ip)) + "\n";
    if (s.stack_id == SMT_NO_KERNEL_STACK) out += "    [no kernel frames: sampled in user mode]\n";
    if (snap.user.enabled) append_user_frames(snap, s.ustack, out);
    if (s.by.empty()) continue;
    out += "  by " + snap.keys.str() + ":\n";
    const size_t shown = std::min(s.by.size(), max_keys);
    std::vector<std::string> labels;
    size_t width = 0;
    for (size_t k = 0; k < shown; ++k) {
      labels.push_back(utf8_text(key_label(snap.keys, s.by[k])));
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

std::vector<SymbolizedStack> flame_stacks(const Snapshot& snap, const Kallsyms* ksyms,
                                          const FunctionNames* names) {
  const bool weights = weighted(snap);
  if (snap.user.enabled) {
    // Root first: the keys, the user frames, then the kernel frames.
    const std::vector<StackRecord> split = split_by_user_stack(snap.stacks);
    std::vector<SymbolizedStack> kernel = symbolize_stacks(split, ksyms);
    if (!ksyms && names)
      for (size_t i = 0; i < split.size(); ++i)
        for (size_t k = 0; k < split[i].ips.size(); ++k)
          if (auto it = names->find(split[i].ips[k]); it != names->end())
            kernel[i].frames[k] = it->second;
    std::vector<SymbolizedStack> out;
    for (size_t i = 0; i < split.size(); ++i) {
      std::vector<std::string> user;
      auto it = snap.user.stacks.find(split[i].ustack);
      if (it != snap.user.stacks.end())
        for (const UserFrame& f : it->second.frames)
          for (std::string& name : user_frame_names(snap.user, f, false))
            user.push_back(std::move(name));
      const auto add = [&](uint64_t count, const std::vector<std::string>& roots) {
        SymbolizedStack s{count, kernel[i].frames};
        s.frames.insert(s.frames.end(), user.begin(), user.end());
        s.frames.insert(s.frames.end(), roots.rbegin(), roots.rend());
        out.push_back(std::move(s));
      };
      if (!snap.keys_requested) {
        add(weights ? split[i].weight : split[i].ref_count, {});
        continue;
      }
      for (const KeyCount& k : split[i].by)
        add(weights ? k.weight : k.count, key_frames(snap.keys, k));
    }
    return out;
  }
  std::vector<SymbolizedStack> plain = symbolize_stacks(snap.stacks, ksyms);
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
