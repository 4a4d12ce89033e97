// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/flame_diff.h"

#include <algorithm>
#include <cmath>

namespace stackmapd {

namespace {

double share(uint64_t part, uint64_t total) {
  return total ? static_cast<double>(part) / static_cast<double>(total) : 0;
}

}  // namespace

FlameTree::FlameTree() { nodes_.push_back(Node{"all", 0, 0, {}}); }

void FlameTree::add(const std::vector<std::string>& frames, uint64_t base, uint64_t value) {
  if (!base && !value) return;
  static const std::vector<std::string> unknown = {"[unknown]"};
  const std::vector<std::string>& path = frames.empty() ? unknown : frames;
  uint32_t at = 0;
  nodes_[0].base += base;
  nodes_[0].value += value;
  for (auto f = path.rbegin(); f != path.rend(); ++f) {
    auto it = nodes_[at].children.find(*f);
    if (it == nodes_[at].children.end()) {
      const auto id = static_cast<uint32_t>(nodes_.size());
      nodes_.push_back(Node{*f, 0, 0, {}});
      it = nodes_[at].children.emplace(nodes_.back().name, id).first;
    }
    at = it->second;
    nodes_[at].base += base;
    nodes_[at].value += value;
  }
}

double FlameTree::delta(const Node& n) const {
  return share(n.value, nodes_[0].value) - share(n.base, nodes_[0].base);
}

double FlameTree::max_delta() const {
  double max = 0;
  for (const Node& n : nodes_) max = std::max(max, std::abs(delta(n)));
  return max;
}

FlameTree flame_tree(const std::vector<SymbolizedStack>& base,
                     const std::vector<SymbolizedStack>& stacks) {
  FlameTree tree;
  for (const SymbolizedStack& s : base) tree.add(s.frames, s.count, 0);
  for (const SymbolizedStack& s : stacks) tree.add(s.frames, 0, s.count);
  return tree;
}

std::string diff_color(double delta, double max_delta) {
  int r = 255, g = 255, b = 255;
  if (max_delta > 0 && delta != 0) {
    const double d = std::min(std::abs(delta), max_delta);
    const int fade = static_cast<int>(210 * (max_delta - d) / max_delta);
    if (delta > 0) g = b = fade;
    else r = g = fade;
  }
  return "rgb(" + std::to_string(r) + "," + std::to_string(g) + "," + std::to_string(b) + ")";
}

std::string format_diff_folded(const std::vector<SymbolizedStack>& base,
                               const std::vector<SymbolizedStack>& stacks) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> paths;
  for (const SymbolizedStack& s : base)
    if (s.count) paths[folded_path(s)].first += s.count;
  for (const SymbolizedStack& s : stacks)
    if (s.count) paths[folded_path(s)].second += s.count;
  std::string out;
  for (const auto& [path, counts] : paths)
    out += path + " " + std::to_string(counts.first) + " " + std::to_string(counts.second) + "\n";
  return out;
}

}  // namespace stackmapd
