// SPDX-License-Identifier: GPL-2.0
#include "daemon/http/flame_json.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <unordered_map>

#include "daemon/export/exports.h"
#include "daemon/export/utf8_text.h"
#include "daemon/http/request.h"
#include "daemon/sys/error.h"

namespace stackmapd::http {

namespace {

struct Node {
  uint32_t name = 0;
  uint64_t value = 0;
  std::map<std::string_view, uint32_t> children;  // by name: a stable order
};

class Tree {
 public:
  Tree() {
    intern("all");
    nodes_.emplace_back();
  }
  // `frames` innermost first, as a stack holds them.
  void add(const std::vector<std::string>& frames, uint64_t value) {
    if (!value) return;
    uint32_t at = 0;
    nodes_[0].value += value;
    for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
      const uint32_t name = intern(*f);
      auto [it, added] = nodes_[at].children.try_emplace(names_[name], 0);
      if (added) {
        it->second = static_cast<uint32_t>(nodes_.size());
        nodes_.push_back(Node{name, 0, {}});
      }
      at = it->second;
      nodes_[at].value += value;
    }
  }
  void write(std::string& out) const {
    out += "\"names\":[";
    for (size_t i = 0; i < names_.size(); ++i) {
      if (i) out += ',';
      append_json_string(out, names_[i]);
    }
    out += "],\"tree\":";
    write_node(out, 0);
  }
  uint64_t total() const { return nodes_[0].value; }

 private:
  uint32_t intern(const std::string& s) {
    auto [it, added] = ids_.try_emplace(s, static_cast<uint32_t>(names_.size()));
    if (added) names_.push_back(s);
    return it->second;
  }
  // Depth is a stack's (kernel and user frames): recursion stays shallow.
  void write_node(std::string& out, uint32_t at) const {
    const Node& n = nodes_[at];
    out += '[' + std::to_string(n.name) + ',' + std::to_string(n.value) + ",[";
    bool first = true;
    for (const auto& [name, child] : n.children) {
      if (!first) out += ',';
      first = false;
      write_node(out, child);
    }
    out += "]]";
  }

  std::deque<std::string> names_;  // a deque: the children's views stay valid
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<Node> nodes_;
};

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

// Per --by field, its values by events, the most frequent first.
void write_keys(std::string& out, const Snapshot& snap, size_t n) {
  out += "\"keys\":{";
  for (size_t i = 0; i < snap.keys.fields.size(); ++i) {
    const KeyFieldInfo& info = key_field(snap.keys.fields[i]);
    std::unordered_map<std::string, uint64_t> counts;
    for (const StackRecord& s : snap.stacks)
      for (const KeyCount& k : s.by)
        if (!k.other) counts[info.frame(k.key)] += k.count;
    std::vector<std::pair<std::string, uint64_t>> order(counts.begin(), counts.end());
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    order.resize(std::min(order.size(), n));
    if (i) out += ',';
    append_json_string(out, info.name);
    out += ":[";
    for (size_t j = 0; j < order.size(); ++j) {
      out += j ? ",[" : "[";
      append_json_string(out, order[j].first);
      out += ',' + std::to_string(order[j].second) + ']';
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
  if (!key && !value) return std::nullopt;
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
  return std::nullopt;
}

std::string flame_json(const Snapshot& snap, const FrameNames& names, const FlameJsonOptions& opt) {
  const bool weighted = !snap.weight_unit.empty();
  const KeyFieldInfo* filter = opt.filter.field ? &key_field(*opt.filter.field) : nullptr;
  Tree tree;
  std::vector<std::string> frames;
  for (const Callstack& c : callstacks(snap)) {
    frames.clear();
    for (uint32_t f : c.frames)
      for (std::string& name : names.flame(f)) {
        if (!opt.addresses && name.rfind("0x", 0) == 0) name = "[unknown]";
        frames.push_back(std::move(name));
      }
    if (!filter) {
      tree.add(frames, weighted ? c.weight : c.count);
      continue;
    }
    for (uint32_t k : c.keys) {
      const KeyCount& key = snap.stacks[c.stack].by[k];
      if (!key.other && utf8_text(filter->frame(key.key)) == opt.filter.value)
        tree.add(frames, weighted ? key.weight : key.count);
    }
  }
  std::string out = "{\"unit\":";
  append_json_string(out, weighted ? snap.weight_unit : "events");
  out += ",\"total\":" + std::to_string(tree.total()) + ",\"window\":";
  append_json_string(out, opt.window);
  char secs[32];
  snprintf(secs, sizeof(secs), "%.1f", opt.seconds);
  out += ",\"seconds\":" + std::string(secs) + ',';
  write_keys(out, snap, opt.key_values);
  out += ',';
  write_counters(out, snap.stats);
  out += ',';
  tree.write(out);
  return out + "}\n";
}

}  // namespace stackmapd::http
