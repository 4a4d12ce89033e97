// SPDX-License-Identifier: GPL-2.0
// Differential flame graphs (daemon/export/flame_diff.h): the merged tree of
// two profiles with both values, the change of shares that colours it,
// flamegraph.pl's red/blue scale, difffolded.pl's three columns, and the
// SVG drawn from them.
#include "daemon/export/flame_diff.h"

#include <gtest/gtest.h>

#include <regex>

namespace stackmapd {
namespace {

// Innermost first, as SymbolizedStack holds them.
SymbolizedStack stack(uint64_t count, std::vector<std::string> frames) {
  return {count, std::move(frames)};
}

// A: read 60 of 100, write 40. B: read 30 of 100, write 50, open 20 (new).
const std::vector<SymbolizedStack> kBase = {stack(60, {"vfs_read", "entry"}),
                                            stack(40, {"vfs_write", "entry"})};
const std::vector<SymbolizedStack> kNow = {stack(30, {"vfs_read", "entry"}),
                                           stack(50, {"vfs_write", "entry"}),
                                           stack(20, {"do_open", "entry"})};

const FlameTree::Node& child(const FlameTree& t, const FlameTree::Node& n,
                             const std::string& name) {
  return t.node(n.children.at(name));
}

TEST(FlameDiff, TreeHoldsBothValuesAndTheChangeOfShares) {
  const FlameTree t = flame_tree(kBase, kNow);
  EXPECT_EQ(t.root().base, 100u);
  EXPECT_EQ(t.root().value, 100u);
  const FlameTree::Node& entry = child(t, t.root(), "entry");
  const FlameTree::Node& read = child(t, entry, "vfs_read");
  const FlameTree::Node& open = child(t, entry, "do_open");
  EXPECT_EQ(read.base, 60u);
  EXPECT_EQ(read.value, 30u);
  EXPECT_EQ(open.base, 0u);
  EXPECT_DOUBLE_EQ(t.delta(read), -0.3);
  EXPECT_DOUBLE_EQ(t.delta(open), 0.2);
  EXPECT_DOUBLE_EQ(t.delta(entry), 0);
  EXPECT_DOUBLE_EQ(t.max_delta(), 0.3);
  // Children by name: the graph's order.
  std::vector<std::string> names;
  for (const auto& [name, id] : entry.children) names.emplace_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"do_open", "vfs_read", "vfs_write"}));
}

TEST(FlameDiff, SharesNotCountsAcrossProfilesOfDifferentSizes) {
  // B is ten times A, every share the same: nothing changed.
  std::vector<SymbolizedStack> big;
  for (const SymbolizedStack& s : kBase) big.push_back(stack(s.count * 10, s.frames));
  const FlameTree t = flame_tree(kBase, big);
  EXPECT_DOUBLE_EQ(t.max_delta(), 0);
  EXPECT_EQ(diff_color(t.delta(child(t, t.root(), "entry")), t.max_delta()), "rgb(255,255,255)");
}

TEST(FlameDiff, AnEmptyBaseHasNoShares) {
  const FlameTree t = flame_tree({}, kNow);
  EXPECT_DOUBLE_EQ(t.delta(t.root()), 1);
  EXPECT_EQ(t.root().base, 0u);
}

TEST(FlameDiff, ColoursAreFlamegraphPlsScale) {
  EXPECT_EQ(diff_color(0.3, 0.3), "rgb(255,0,0)");
  EXPECT_EQ(diff_color(-0.3, 0.3), "rgb(0,0,255)");
  EXPECT_EQ(diff_color(0.15, 0.3), "rgb(255,105,105)");
  EXPECT_EQ(diff_color(-0.15, 0.3), "rgb(105,105,255)");
  EXPECT_EQ(diff_color(0, 0.3), "rgb(255,255,255)");
  EXPECT_EQ(diff_color(0.1, 0), "rgb(255,255,255)");
}

TEST(FlameDiff, FoldedHasBothCountsOnEveryPathOfEither) {
  EXPECT_EQ(format_diff_folded(kBase, kNow),
            "entry;do_open 0 20\n"
            "entry;vfs_read 60 30\n"
            "entry;vfs_write 40 50\n");
  // Paths merge as in --folded: the same path twice sums.
  EXPECT_EQ(format_diff_folded({stack(1, {"a b"}), stack(2, {"a b"})}, {}), "a_b 3 0\n");
}

// Each frame of the SVG: its title and its fill.
std::map<std::string, std::pair<std::string, std::string>> svg_frames(const std::string& svg) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  static const std::regex frame(
      R"re(<g class="f"><title>([^ ]+) \(([^<]*)\)</title><rect[^>]* fill="([^"]+)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), frame); it != std::sregex_iterator();
       ++it)
    out[(*it)[1]] = {(*it)[2], (*it)[3]};
  return out;
}

TEST(FlameDiff, SvgIsRedWhereAShareGrewBlueWhereItShrank) {
  const auto frames = svg_frames(render_diff_flamegraph_svg(kBase, kNow));
  ASSERT_EQ(frames.size(), 5u);  // all, entry, and the three functions
  EXPECT_EQ(frames.at("vfs_read").second, "rgb(0,0,255)");
  // +0.2 of 0.3: 210 * (0.3 - 0.2) / 0.3 is 69.99... in doubles, as in flamegraph.pl's Perl.
  EXPECT_EQ(frames.at("do_open").second, "rgb(255,69,69)");
  EXPECT_EQ(frames.at("vfs_write").second, "rgb(255,140,140)");
  EXPECT_EQ(frames.at("entry").second, "rgb(255,255,255)");
  EXPECT_EQ(frames.at("vfs_read").first,
            "60 events \u2192 30 events, 60.00% \u2192 30.00%, -30.00%");
  EXPECT_EQ(frames.at("do_open").first, "0 events \u2192 20 events, 0.00% \u2192 20.00%, +20.00%");
}

TEST(FlameDiff, SvgWidthsAreTheProfilesNotTheBases) {
  // vfs_read only in A: no width in B, so not drawn (as flamegraph.pl).
  const auto frames =
      svg_frames(render_diff_flamegraph_svg({stack(5, {"vfs_read"})}, {stack(5, {"vfs_write"})}));
  EXPECT_EQ(frames.count("vfs_read"), 0u);
  EXPECT_EQ(frames.at("vfs_write").second, "rgb(255,0,0)");
}

}  // namespace
}  // namespace stackmapd
