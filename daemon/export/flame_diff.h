// SPDX-License-Identifier: GPL-2.0
// Differential flame graphs, as Brendan Gregg's difffolded.pl and
// flamegraph.pl make them: two profiles (a base A and a profile B) merged
// into one call tree whose nodes carry both values. Widths are B's; a
// frame's colour is the change of its share (value / its profile's total),
// red where it grew, blue where it shrank, white where it held, saturated by
// the change over the largest change in the tree. Shares, not counts: two
// windows of different lengths compare as they are. The SVG (decode --diff)
// and /flame.json (the live page's "compare with") both build this tree, so
// the page and decode agree; the page applies diff_color's rule in its
// script (page.js, diffColor) to the values and max_delta sent.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/export/flamegraph.h"

namespace stackmapd {

class FlameTree {
 public:
  struct Node {
    std::string name;
    uint64_t base = 0;                              // A's events (or weight) with this path
    uint64_t value = 0;                             // B's
    std::map<std::string_view, uint32_t> children;  // by name: the graph's order
  };

  FlameTree();
  // `frames` innermost first, as SymbolizedStack holds them; nothing for 0.
  void add(const std::vector<std::string>& frames, uint64_t base, uint64_t value);

  const Node& root() const { return nodes_[0]; }  // "all"
  const Node& node(uint32_t id) const { return nodes_[id]; }
  // The change of a node's share from A to B, in [-1, 1]: value / B's total
  // less base / A's total (a share of an empty profile is 0).
  double delta(const Node& n) const;
  // The largest |delta| of any node: what saturates the colours.
  double max_delta() const;

 private:
  std::deque<Node> nodes_;  // a deque: the children's views into names stay valid
};

// The merged tree of A (`base`) and B (`stacks`); a plain flame graph's tree
// with `base` empty.
FlameTree flame_tree(const std::vector<SymbolizedStack>& base,
                     const std::vector<SymbolizedStack>& stacks);

// flamegraph.pl's color_scale: "rgb(255,g,g)" for a growth, "rgb(b,b,255)"
// for a shrink, from 210 down to 0 as |delta| reaches max_delta; white for 0.
std::string diff_color(double delta, double max_delta);

// difffolded.pl's format, which flamegraph.pl reads: "root;...;leaf A B\n",
// one line per path of either profile, bytewise sorted, counts as recorded
// (difffolded.pl without -n; flamegraph.pl colours by B - A then).
std::string format_diff_folded(const std::vector<SymbolizedStack>& base,
                               const std::vector<SymbolizedStack>& stacks);

}  // namespace stackmapd
