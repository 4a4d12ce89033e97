// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/flamegraph.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "daemon/export/breakdown.h"
#include "daemon/export/json_snapshot.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

Kallsyms fixture_symbols() {
  return Kallsyms::parse(
      "ffffffff81000000 T entry_SYSCALL_64\n"
      "ffffffff81000100 T do_syscall_64\n"
      "ffffffff81000200 T vfs_read\n"
      "ffffffff81000300 T kmem_cache_alloc\n"
      "ffffffff81000400 T vfs_write\n"
      "ffffffff81000500 T vfs_end\n"
      "ffffffffc0001000 t ext4_file_read_iter\t[ext4]\n"
      "ffffffffc0002000 t ext4_end\t[ext4]\n");
}

// Innermost first. 1 and 2 differ only in return offsets: one path in a flame graph.
std::vector<StackRecord> fixture_stacks() {
  return {
      {1, 10, {0xffffffff81000310, 0xffffffff81000220, 0xffffffff81000130, 0xffffffff81000010}},
      {2, 5, {0xffffffff81000340, 0xffffffff81000250, 0xffffffff81000160, 0xffffffff81000020}},
      {3,
       7,
       {0xffffffff81000308, 0xffffffffc0001010, 0xffffffff81000210, 0xffffffff81000110,
        0xffffffff81000010}},
      {4, 2, {0xdead, 0xffffffff81000410, 0xffffffff81000110, 0xffffffff81000010}},
      {5, 0, {0xffffffff81000410}},  // no events: left out
  };
}

// The flame graph's stacks of a table's stacks, as an output context makes them.
std::vector<SymbolizedStack> flames(std::vector<StackRecord> stacks, const Kallsyms* ksyms) {
  Snapshot snap;
  snap.stacks = std::move(stacks);
  intern_callstacks(snap);
  return flame_stacks(snap, FrameNames(snap, ksyms));
}

// Those of a stack_map.json, as decode makes them.
std::vector<SymbolizedStack> json_flames(std::string_view text,
                                         const std::string& source = "stack_map.json") {
  const JsonExport doc = read_json_export(text, source);
  return flame_stacks(doc.snap, FrameNames(doc.snap, nullptr, &doc.functions));
}

TEST(FlameGraph, FoldedMergesPathsRootFirstSorted) {
  const Kallsyms ksyms = fixture_symbols();
  EXPECT_EQ(format_folded(flames(fixture_stacks(), &ksyms)),
            "entry_SYSCALL_64;do_syscall_64;vfs_read;ext4_file_read_iter_[ext4];"
            "kmem_cache_alloc 7\n"
            "entry_SYSCALL_64;do_syscall_64;vfs_read;kmem_cache_alloc 15\n"
            "entry_SYSCALL_64;do_syscall_64;vfs_write;0xdead 2\n");
}

TEST(FlameGraph, FoldedWithoutSymbolsUsesAddresses) {
  const std::vector<StackRecord> stacks = {{1, 3, {0xffffffff81000310, 0xffffffff81000010}}};
  EXPECT_EQ(format_folded(flames(stacks, nullptr)), "0xffffffff81000010;0xffffffff81000310 3\n");
}

TEST(FlameGraph, FoldedKeepsFormatForAnyName) {
  const std::vector<SymbolizedStack> stacks = {
      {4, {"leaf with space", "a;b", "tab\there"}},
      {3, {}},
      {2, {"leaf", ""}},  // a thread that named itself ""
  };
  EXPECT_EQ(format_folded(stacks), "[unknown] 3\n_;leaf 2\ntab_here;a:b;leaf_with_space 4\n");
}

TEST(FlameGraph, SymbolizeStacksNamesModulesAndAddresses) {
  const Kallsyms ksyms = fixture_symbols();
  const auto out = flames({{9, 4, {0xffffffffc0001010, 0xbeef, 0xffffffff81000210}}}, &ksyms);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].count, 4u);
  EXPECT_EQ(out[0].frames,
            (std::vector<std::string>{"ext4_file_read_iter_[ext4]", "0xbeef", "vfs_read"}));
}

// --- SVG ---

// The frames of an SVG: tooltip → rect width.
std::map<std::string, double> frame_widths(const std::string& svg) {
  static const std::regex frame(
      R"re(<g class="f"><title>([^<]*) \(\d+ events, [0-9.]+%\)</title>)re"
      R"re(<rect x="[0-9.]+" y="\d+" width="([0-9.]+)")re");
  std::map<std::string, double> out;
  for (std::sregex_iterator it(svg.begin(), svg.end(), frame), end; it != end; ++it)
    out[(*it)[1]] += std::stod((*it)[2]);
  return out;
}

// Well-formed enough for a browser: every tag closed in order, no stray '<' or '&'.
void expect_balanced(const std::string& svg) {
  std::vector<std::string> open;
  size_t i = 0;
  const size_t cdata_start = svg.find("<![CDATA[");
  const size_t cdata_end = svg.find("]]>");
  ASSERT_NE(cdata_start, std::string::npos);
  ASSERT_NE(cdata_end, std::string::npos);
  while ((i = svg.find_first_of("<&", i)) != std::string::npos) {
    if (i == cdata_start) {
      i = cdata_end + 3;
      continue;
    }
    if (svg[i] == '&') {
      static const std::regex entity("^&(lt|gt|amp|quot|apos);");
      EXPECT_TRUE(std::regex_search(svg.substr(i, 8), entity)) << "bare & at " << i;
      ++i;
      continue;
    }
    const size_t close = svg.find('>', i);
    ASSERT_NE(close, std::string::npos);
    const std::string tag = svg.substr(i + 1, close - i - 1);
    ASSERT_EQ(tag.find('<'), std::string::npos) << "'<' inside tag at " << i;
    i = close + 1;
    if (tag[0] == '?' || tag.back() == '/') continue;
    const size_t skip = tag[0] == '/';
    const std::string name = tag.substr(skip, tag.find_first_of(" \n", 1) - skip);
    if (tag[0] == '/') {
      ASSERT_FALSE(open.empty()) << "</" << name << "> closes nothing";
      ASSERT_EQ(open.back(), name);
      open.pop_back();
    } else {
      open.push_back(name);
    }
  }
  EXPECT_TRUE(open.empty());
}

TEST(FlameGraph, SvgIsWellFormedWithProportionalWidths) {
  const Kallsyms ksyms = fixture_symbols();
  FlameGraphOptions opt;
  opt.title = "kmem <test> & more";
  const std::string svg = render_flamegraph_svg(flames(fixture_stacks(), &ksyms), opt);
  expect_balanced(svg);
  EXPECT_NE(svg.find("kmem &lt;test&gt; &amp; more"), std::string::npos);
  EXPECT_EQ(svg.find("http://"), svg.find("http://www.w3.org/2000/svg"));  // nothing external
  EXPECT_EQ(svg.find("href"), std::string::npos);

  const auto widths = frame_widths(svg);
  const double full = opt.width - 20;  // 10 px padding either side
  EXPECT_NEAR(widths.at("all"), full, 0.01);
  EXPECT_NEAR(widths.at("entry_SYSCALL_64"), full, 0.01);
  EXPECT_NEAR(widths.at("vfs_read"), full * 22 / 24, 0.02);
  EXPECT_NEAR(widths.at("vfs_write"), full * 2 / 24, 0.02);
  EXPECT_NEAR(widths.at("0xdead"), full * 2 / 24, 0.02);
  // kmem_cache_alloc appears under vfs_read (15) and under ext4 (7).
  EXPECT_NEAR(widths.at("kmem_cache_alloc"), full * 22 / 24, 0.02);
  EXPECT_NE(svg.find("<title>vfs_read (22 events, 91.67%)</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>all (24 events, 100.00%)</title>"), std::string::npos);
}

TEST(FlameGraph, SvgRootAtBottomAndColorsWarmAndStable) {
  const Kallsyms ksyms = fixture_symbols();
  const std::string svg = render_flamegraph_svg(flames(fixture_stacks(), &ksyms));
  EXPECT_EQ(svg, render_flamegraph_svg(flames(fixture_stacks(), &ksyms)));

  static const std::regex frame(R"re(<title>([^ ]*) [^<]*</title><rect x="[0-9.]+" y="(\d+)" )re"
                                R"re([^>]* fill="rgb\((\d+),(\d+),(\d+)\)")re");
  std::map<std::string, std::pair<int, std::string>> seen;  // name → y, color
  for (std::sregex_iterator it(svg.begin(), svg.end(), frame), end; it != end; ++it) {
    const int r = std::stoi((*it)[3]), g = std::stoi((*it)[4]), b = std::stoi((*it)[5]);
    EXPECT_GE(r, 205);
    EXPECT_LE(g, 230);
    EXPECT_LE(b, 55);
    const std::string color = (*it)[3].str() + "," + (*it)[4].str() + "," + (*it)[5].str();
    auto [pos, fresh] = seen.emplace((*it)[1], std::make_pair(std::stoi((*it)[2]), color));
    if (!fresh) {
      EXPECT_EQ(pos->second.second, color) << "one color per name";
    }
  }
  ASSERT_EQ(seen.count("all"), 1u);
  EXPECT_GT(seen["all"].first, seen["entry_SYSCALL_64"].first);
  EXPECT_GT(seen["entry_SYSCALL_64"].first, seen["do_syscall_64"].first);
  EXPECT_EQ(seen["all"].first - seen["entry_SYSCALL_64"].first, 16);
}

TEST(FlameGraph, SvgEscapesNamesAndClipsLabels) {
  const std::vector<SymbolizedStack> stacks = {
      {1, {"tiny"}},
      {1000, {"probe<T>&\"co\"", "a_function_name_far_too_long_for_the_little_frame_it_has"}},
      {5, {std::string("bad\xff\x01utf8")}},
  };
  FlameGraphOptions opt;
  opt.width = 220;
  const std::string svg = render_flamegraph_svg(stacks, opt);
  expect_balanced(svg);
  EXPECT_NE(svg.find("<title>probe&lt;T&gt;&amp;&quot;co&quot; (1000 events"), std::string::npos);
  EXPECT_EQ(svg.find("probe<"), std::string::npos);
  EXPECT_NE(svg.find(">a_function_name_far_too..</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>bad\\xff\\x01utf8 (5 events"), std::string::npos);
  // 1 of 1006 events on 200 px is 0.2 px: drawn over the default 0.1 px, not over 1 px.
  EXPECT_NE(svg.find("<title>tiny "), std::string::npos);
  opt.min_frame_px = 1;
  EXPECT_EQ(render_flamegraph_svg(stacks, opt).find("<title>tiny "), std::string::npos);
}

// The tooltips say what a count measures: off-CPU time, bytes, a field.
TEST(FlameGraph, SvgTooltipsSayTheUnit) {
  const std::vector<SymbolizedStack> stacks = {{3000000, {"schedule", "do_nanosleep"}},
                                               {1000000, {"io_schedule"}}};
  FlameGraphOptions opt;
  opt.unit = "ns";
  std::string svg = render_flamegraph_svg(stacks, opt);
  EXPECT_NE(svg.find("<title>all (4.000 ms off-CPU, 100.00%)</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<title>io_schedule (1.000 ms off-CPU, 25.00%)</title>"), std::string::npos);
  EXPECT_EQ(svg.find(" events"), std::string::npos);
  opt.unit = "bytes_alloc";
  svg = render_flamegraph_svg(stacks, opt);
  EXPECT_NE(svg.find("<title>all (3.8 MiB bytes_alloc, 100.00%)</title>"), std::string::npos);
  opt.unit = "nr_pages";
  svg = render_flamegraph_svg(stacks, opt);
  EXPECT_NE(svg.find("<title>all (4000000 nr_pages, 100.00%)</title>"), std::string::npos);
  opt.unit.clear();
  svg = render_flamegraph_svg(stacks, opt);
  EXPECT_NE(svg.find("<title>all (4000000 events, 100.00%)</title>"), std::string::npos);
}

TEST(FlameGraph, SvgOfNothingSaysSo) {
  const std::string svg = render_flamegraph_svg(std::vector<SymbolizedStack>{});
  expect_balanced(svg);
  EXPECT_NE(svg.find("No stacks recorded"), std::string::npos);
  EXPECT_EQ(svg.find("class=\"f\""), std::string::npos);
}

// --- stack_map.json ---

constexpr const char* kJson = R"({
  "bits": 10, "hash_seed": 1, "table_size": 2048, "stats": {"hits": 9},
  "stacks": [
    {"stack_id": 3, "ref_count": 6, "depth": 3,
     "ips": ["0xffffffff81000310", "0xffffffffc0001010", "0xffffffff81000010"],
     "symbols": ["kmem_cache_alloc+0x10/0x100", "ext4_file_read_iter+0x10/0x1000 [ext4]",
                 "entry_SYSCALL_64+0x10/0x100"]},
    {"stack_id": 8, "ref_count": 2, "depth": 3,
     "ips": ["0xffffffff81000340", "0xffffffffc0001020", "0xffffffff81000020"],
     "symbols": ["kmem_cache_alloc+0x40/0x100", "ext4_file_read_iter+0x20/0x1000 [ext4]",
                 "entry_SYSCALL_64+0x20/0x100"]},
    {"stack_id": 9, "ref_count": 1, "depth": 2,
     "ips": ["0xbeef", "0xffffffff81000020"],
     "symbols": ["0xbeef", "entry_SYSCALL_64+0x20/0x100"]}
  ]
})";

TEST(FlameGraphJson, ReadsStackMapJson) {
  const auto stacks = json_flames(kJson);
  ASSERT_EQ(stacks.size(), 3u);
  EXPECT_EQ(stacks[0].count, 6u);
  EXPECT_EQ(stacks[0].frames,
            (std::vector<std::string>{"kmem_cache_alloc", "ext4_file_read_iter_[ext4]",
                                      "entry_SYSCALL_64"}));
  EXPECT_EQ(format_folded(stacks),
            "entry_SYSCALL_64;0xbeef 1\n"
            "entry_SYSCALL_64;ext4_file_read_iter_[ext4];kmem_cache_alloc 8\n");
}

TEST(FlameGraphJson, SameFoldedAsFromTheTable) {
  const Kallsyms ksyms = fixture_symbols();
  const std::vector<StackRecord> table = {
      {3, 6, {0xffffffff81000310, 0xffffffffc0001010, 0xffffffff81000010}},
      {9, 1, {0xbeef, 0xffffffff81000020}}};
  nlohmann::json doc{{"stacks", nlohmann::json::array()}};
  for (const auto& s : table) {
    nlohmann::json syms = nlohmann::json::array();
    for (uint64_t ip : s.ips) syms.push_back(ksyms.format(ip));
    doc["stacks"].push_back({{"ref_count", s.ref_count}, {"symbols", syms}});
  }
  EXPECT_EQ(format_folded(json_flames(doc.dump())), format_folded(flames(table, &ksyms)));
}

TEST(FlameGraphJson, BareArrayAndIpsOnly) {
  const auto stacks = json_flames(R"([{"ref_count": 4, "ips": ["0x1", "0x2"]}])");
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_EQ(format_folded(stacks), "0x2;0x1 4\n");
}

TEST(FlameGraphJson, FixtureLoads) {
  std::ifstream in(STACKMAPD_FIXTURES_DIR "/flame.json");
  std::stringstream text;
  text << in.rdbuf();
  const auto stacks = json_flames(text.str());
  uint64_t total = 0;
  for (const auto& s : stacks) total += s.count;
  EXPECT_EQ(stacks.size(), 43u);
  EXPECT_EQ(total, 223408u);
  EXPECT_NE(format_folded(stacks).find(";nft_do_chain_[nf_tables];"), std::string::npos);
}

void expect_error(std::string_view text, const std::string& needle) {
  try {
    json_flames(text, "/tmp/x/stack_map.json");
    ADD_FAILURE() << "no error for " << text;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("/tmp/x/stack_map.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_NE(msg.find("pass a stack_map.json written by stackmapd"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(FlameGraphJson, MalformedInputNamesTheProblem) {
  expect_error("", "is not valid JSON");
  expect_error(R"({"stacks": [)", "is not valid JSON");
  expect_error(R"({"bits": 10})", "no \"stacks\" array");
  expect_error(R"({"stacks": {}})", "\"stacks\" is not an array");
  expect_error(R"({"stacks": [7]})", "stacks[0] is not an object");
  expect_error(R"({"stacks": [{"symbols": []}]})", "stacks[0].ref_count");
  expect_error(R"({"stacks": [{"ref_count": -1, "symbols": []}]})", "stacks[0].ref_count");
  expect_error(R"({"stacks": [{"ref_count": 1}]})", "neither a \"symbols\" nor an \"ips\"");
  expect_error(R"([{"ref_count": 1, "symbols": ["a+0x1/0x2"]}, {"ref_count": 1, "symbols": [3]}])",
               "stacks[1].symbols[0] is not a non-empty string");
  expect_error(R"([{"ref_count": 1, "ips": [""]}])", "stacks[0].ips[0]");
}

}  // namespace
}  // namespace stackmapd
