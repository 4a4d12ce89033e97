// SPDX-License-Identifier: GPL-2.0
#include "daemon/http/flame_json.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "daemon/export/exports.h"
#include "daemon/export/flame_diff.h"
#include "daemon/export/utf8_text.h"
#include "daemon/http/request.h"
#include "daemon/model/callstack.h"
#include "daemon/sys/error.h"

namespace stackmapd::http {

namespace {

// The tree's names once each, in the order a walk meets them, and its nodes
// as [name, value, children] (with the base value last in a diff).
class TreeWriter {
 public:
  TreeWriter(const FlameTree& tree, bool diff) : tree_(tree), diff_(diff) {}
  void write(std::string& out) {
    std::string nodes;
    write_node(nodes, tree_.root());
    out += "\"names\":[";
    for (size_t i = 0; i < names_.size(); ++i) {
      if (i) out += ',';
      append_json_string(out, names_[i]);
    }
    out += "],\"tree\":" + nodes;
  }

 private:
  // Depth is a stack's (kernel and user frames): recursion stays shallow.
  void write_node(std::string& out, const FlameTree::Node& n) {
    auto [it, added] = ids_.try_emplace(n.name, static_cast<uint32_t>(names_.size()));
    if (added) names_.push_back(n.name);
    out += '[' + std::to_string(it->second) + ',' + std::to_string(n.value) + ",[";
    bool first = true;
    for (const auto& [name, child] : n.children) {
      if (!first) out += ',';
      first = false;
      write_node(out, tree_.node(child));
    }
    out += ']';
    if (diff_) out += ',' + std::to_string(n.base);
    out += ']';
  }

  const FlameTree& tree_;
  const bool diff_;
  std::vector<std::string_view> names_;
  std::unordered_map<std::string_view, uint32_t> ids_;
};

// The stacks of `snap` the graph shows: by weight when weighted, only the
// filter's value's events when filtered.
std::vector<SymbolizedStack> graph_stacks(const Snapshot& snap, const FrameNames& names,
                                          const FlameJsonOptions& opt) {
  const bool weighted = !snap.weight_unit.empty();
  std::vector<SymbolizedStack> out;
  for (const Callstack& c : callstacks(snap)) {
    SymbolizedStack s;
    for (uint32_t f : c.frames)
      for (std::string& name : names.flame(f)) {
        if (!opt.addresses && name.rfind("0x", 0) == 0) name = "[unknown]";
        s.frames.push_back(std::move(name));
      }
    if (!opt.filter.field) {
      s.count = weighted ? c.weight : c.count;
    } else {
      for (uint32_t k : c.keys) {
        const KeyCount& key = snap.stacks[c.stack].by[k];
        if (passes(opt.filter, key)) s.count += weighted ? key.weight : key.count;
      }
    }
    if (s.count) out.push_back(std::move(s));
  }
  return out;
}

std::string decimal(double v, const char* format) {
  char buf[32];
  snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// stack_map_stat's "name: value" lines, as the counters table shows them.
void write_counters(std::string& out, const TableStats& st) {
  out += "\"counters\":[";
  const std::string stat = format_stat(st);
  bool first = true;
  for (size_t pos = 0; pos < stat.size();) {
    size_t nl = stat.find('\n', pos);
    if (nl == std::string::npos) nl = stat.size();
    const std::string_view line(stat.data() + pos, nl - pos);
    pos = nl + 1;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    value.remove_prefix(std::min(value.find_first_not_of(' '), value.size()));
    out += first ? "[" : ",[";
    first = false;
    append_json_string(out, line.substr(0, colon));
    out += ',';
    append_json_string(out, value);
    out += ']';
  }
  out += ']';
}

struct KeyValueCount {
  uint64_t count = 0;
  std::unordered_map<std::string, uint64_t> comms;  // by events, when counted by comm too
};

// The comm most of a value's events had (a process can exec another program).
const std::string& top_comm(const KeyValueCount& v) {
  const auto top =
      std::min_element(v.comms.begin(), v.comms.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
      });
  return top->first;
}

// Per --by field, its values by events, the most frequent first; a pid or
// tid with its comm when the daemon counts by comm, so the page can say who it is.
void write_keys(std::string& out, const Snapshot& snap, size_t n) {
  out += "\"keys\":{";
  const KeyFieldInfo& comm = key_field(KeyField::comm);
  for (size_t i = 0; i < snap.keys.fields.size(); ++i) {
    const KeyFieldInfo& info = key_field(snap.keys.fields[i]);
    const bool with_comm = info.per_process && snap.keys.has(KeyField::comm);
    std::unordered_map<std::string, KeyValueCount> counts;
    for (const StackRecord& s : snap.stacks)
      for (const KeyCount& k : s.by)
        if (!k.other) {
          KeyValueCount& v = counts[info.frame(k.key)];
          v.count += k.count;
          if (with_comm) v.comms[comm.frame(k.key)] += k.count;
        }
    std::vector<std::pair<std::string, KeyValueCount>> order(counts.begin(), counts.end());
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.second.count != b.second.count ? a.second.count > b.second.count : a.first < b.first;
    });
    order.resize(std::min(order.size(), n));
    if (i) out += ',';
    append_json_string(out, info.name);
    out += ":[";
    for (size_t j = 0; j < order.size(); ++j) {
      out += j ? ",[" : "[";
      append_json_string(out, order[j].first);
      out += ',' + std::to_string(order[j].second.count);
      if (with_comm) {
        out += ',';
        append_json_string(out, top_comm(order[j].second));
      }
      out += ']';
    }
    out += ']';
  }
  out += '}';
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  const std::string text = utf8_text(s);
  out += '"';
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
      // Controls as JSON requires; <, >, & too, so that no reader takes it for markup.
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

std::optional<std::string> parse_flame_filter(std::string_view query, const KeySpec& keys,
                                              FlameFilter& out) {
  const std::optional<std::string> key = query_param(query, "key");
  const std::optional<std::string> value = query_param(query, "value");
  const std::optional<std::string> exclude = query_param(query, "exclude");
  if (exclude && *exclude != "0" && *exclude != "1")
    return "exclude=" + utf8_text(exclude->substr(0, 64)) +
           ": ask for 1 (all but the value's events) or 0";
  if (!key && !value) {
    if (exclude) return "exclude= needs a value to leave out: key=comm&value=bash&exclude=1";
    return std::nullopt;
  }
  if (!key || !value) return "key= and value= go together: key=comm&value=bash";
  KeySpec one;
  try {
    one = KeySpec::parse(*key);
  } catch (const Error& e) {
    return "key=" + utf8_text(*key) + ": " + e.what();
  }
  if (one.fields.size() != 1) return "key=" + utf8_text(*key) + ": one key at a time";
  if (!keys.has(one.fields[0]))
    return "key=" + utf8_text(*key) + ": the daemon does not count by it (--by " +
           (keys.empty() ? std::string("none") : keys.str()) + ")";
  out.field = one.fields[0];
  // As the JSON names it ("\\xff" for a byte that is not UTF-8), which is what the page sends back.
  out.value = utf8_text(*value);
  out.exclude = exclude == "1";
  return std::nullopt;
}

std::string flame_json(const Snapshot& snap, const FrameNames& names, const FlameJsonOptions& opt,
                       const FlameJsonBase* base) {
  const FlameTree tree =
      flame_tree(base ? graph_stacks(base->snap, base->names, opt) : std::vector<SymbolizedStack>{},
                 graph_stacks(snap, names, opt));
  std::string out = "{\"unit\":";
  append_json_string(out, snap.weight_unit.empty() ? "events" : snap.weight_unit);
  out += ",\"total\":" + std::to_string(tree.root().value) + ",\"window\":";
  append_json_string(out, opt.window);
  out += ",\"seconds\":" + decimal(opt.seconds, "%.1f") + ',';
  if (base) {
    out += "\"base\":{\"window\":";
    append_json_string(out, base->window);
    out += ",\"seconds\":" + decimal(base->seconds, "%.1f") +
           ",\"total\":" + std::to_string(tree.root().base) +
           "},\"max_delta\":" + decimal(tree.max_delta(), "%.9g") + ',';
  }
  write_keys(out, snap, opt.key_values);
  out += ',';
  write_counters(out, snap.stats);
  out += ',';
  TreeWriter(tree, base != nullptr).write(out);
  return out + "}\n";
}

bool passes(const FlameFilter& filter, const KeyCount& key) {
  if (!filter.field) return true;
  const bool match =
      !key.other && utf8_text(key_field(*filter.field).frame(key.key)) == filter.value;
  return match != filter.exclude;
}

Snapshot filtered_snapshot(const Snapshot& snap, const FlameFilter& filter) {
  if (!filter.field) return snap;
  Snapshot out = snap;
  out.stacks.clear();
  out.frames.clear();
  out.callstacks.clear();
  for (const StackRecord& r : snap.stacks) {
    StackRecord kept{r.stack_id, 0, r.ips, 0};
    for (const KeyCount& k : r.by)
      if (passes(filter, k)) {
        kept.by.push_back(k);
        kept.ref_count += k.count;
        kept.weight += k.weight;
      }
    if (kept.ref_count) out.stacks.push_back(std::move(kept));
  }
  intern_callstacks(out);
  return out;
}

}  // namespace stackmapd::http
