// SPDX-License-Identifier: GPL-2.0
// The per-key breakdown as people and tools read it: --top, flame graphs, JSON.
#include "daemon/export/breakdown.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "daemon/export/exports.h"
#include "tests/snapshot_outputs.h"

namespace stackmapd {
namespace {

KeyCount key(uint32_t pid, const std::string& comm, uint64_t count, uint64_t weight) {
  KeyCount k;
  k.key.pid = pid;
  k.key.comm = comm;
  k.count = count;
  k.weight = weight;
  return k;
}

// Two stacks: the lighter in events is the heavier in bytes.
Snapshot weighted_snapshot() {
  Snapshot snap;
  snap.keys = KeySpec::parse("comm,pid");
  snap.keys_requested = true;
  snap.weight_unit = "bytes_alloc";
  snap.sources = {"kmem:kmem_cache_alloc"};
  StackRecord a{3, 10, {0xffffffff81000010}};
  a.weight = 80;
  a.by = {key(100, "wl", 6, 48), key(200, "cat", 4, 32)};
  StackRecord b{9, 2, {0xffffffff81000020, 0xffffffff81000030}};
  b.weight = 8192;
  KeyCount other;
  other.other = true;
  other.count = 2;
  other.weight = 8192;
  b.by = {other};
  snap.stacks = {a, b};
  intern_callstacks(snap);
  return snap;
}

// --top and the flame graphs of `snap`, its frames unresolved.
std::string top_of(const Snapshot& snap, size_t n) {
  return format_top(snap, n, FrameNames(snap, nullptr));
}
std::vector<SymbolizedStack> flames_of(const Snapshot& snap) {
  return flame_stacks(snap, FrameNames(snap, nullptr));
}

TEST(Breakdown, KeyFramesMergeCommAndPidAsPsPrintsThem) {
  const KeySpec keys = KeySpec::parse("pid,comm,cpu");
  KeyCount k = key(812, "nginx", 1, 1);
  k.key.cpu = 3;
  EXPECT_EQ(key_frames(keys, k), (std::vector<std::string>{"nginx[812]", "cpu 3"}));
  EXPECT_EQ(key_label(KeySpec::parse("comm"), k), "nginx");
  EXPECT_EQ(key_label(KeySpec::parse("pid"), k), "pid 812");
  KeyCount other;
  other.other = true;
  EXPECT_EQ(key_label(keys, other), "[other]");
}

TEST(Breakdown, WeightedTopRanksBySumAndShowsCountsAndKeys) {
  const std::string top = top_of(weighted_snapshot(), 2);
  EXPECT_NE(top.find("12 events (8.1 KiB bytes_alloc), 2 unique stacks; top 2:"), std::string::npos)
      << top;
  const size_t first = top.find("#1 stack_id 9: 2 events (16.67%), 8.0 KiB bytes_alloc (99.03%)");
  const size_t second = top.find("#2 stack_id 3: 10 events (83.33%), 80 bytes_alloc");
  ASSERT_NE(first, std::string::npos) << top;
  ASSERT_NE(second, std::string::npos) << top;
  EXPECT_LT(first, second);
  EXPECT_NE(top.find("    wl[100]             6 events, 48 bytes_alloc\n"), std::string::npos)
      << top;
  EXPECT_NE(top.find("    cat[200]            4 events, 32 bytes_alloc\n"), std::string::npos)
      << top;
  EXPECT_NE(top.find("    [other]            2 events, 8.0 KiB bytes_alloc\n"), std::string::npos)
      << top;
}

TEST(Breakdown, TopZeroMeansEveryStack) {
  const std::string top = top_of(weighted_snapshot(), 0);
  EXPECT_NE(top.find("top 2:"), std::string::npos) << top;
}

TEST(Breakdown, OffCpuNanosecondsReadAsMilliseconds) {
  EXPECT_EQ(format_weight(1500000, "ns"), "1.500 ms off-CPU");
  EXPECT_EQ(weight_kind("ns"), WeightKind::nanoseconds);
}

// One rule (weight_unit.h) for --top, the SVG and pprof's sample type.
TEST(Breakdown, BytesReadInBinaryUnitsWithTheirFieldsName) {
  EXPECT_EQ(format_weight(512, "bytes_alloc"), "512 bytes_alloc");
  EXPECT_EQ(format_weight(4096, "bytes_alloc"), "4.0 KiB bytes_alloc");
  EXPECT_EQ(format_weight(12897485, "bytes_alloc"), "12.3 MiB bytes_alloc");
  EXPECT_EQ(format_weight(3ull << 30, "len"), "3.0 GiB len");
  EXPECT_EQ(format_weight(1536, "size"), "1.5 KiB size");
  EXPECT_EQ(weight_kind("bytes_req"), WeightKind::bytes);
  EXPECT_EQ(format_weight(4096, "nr_pages"), "4096 nr_pages");  // a count stays whole
  EXPECT_EQ(weight_kind("nr_pages"), WeightKind::count);
}

TEST(Breakdown, FlameStacksRootAtTheKeysAndCountByWeight) {
  const std::vector<SymbolizedStack> flames = flames_of(weighted_snapshot());
  ASSERT_EQ(flames.size(), 3u);
  EXPECT_EQ(flames[0].count, 48u);
  EXPECT_EQ(flames[0].frames.back(), "wl[100]");
  EXPECT_EQ(flames[0].frames.front(), "0xffffffff81000010");
  EXPECT_EQ(flames[2].frames.back(), "[other]");
  const std::string folded = format_folded(flames);
  EXPECT_NE(folded.find("wl[100];0xffffffff81000010 48\n"), std::string::npos) << folded;
}

TEST(Breakdown, FlameStacksWithoutByKeepOneStackEach) {
  Snapshot snap = weighted_snapshot();
  snap.keys_requested = false;
  const std::vector<SymbolizedStack> flames = flames_of(snap);
  ASSERT_EQ(flames.size(), 2u);
  EXPECT_EQ(flames[1].count, 8192u);
  snap.weight_unit.clear();
  EXPECT_EQ(flames_of(snap)[1].count, 2u);
}

TEST(Breakdown, JsonHasTheRequestedKeysSumsAndSources) {
  const nlohmann::json doc = nlohmann::json::parse(json_of(weighted_snapshot(), nullptr));
  EXPECT_EQ(doc["sources"], nlohmann::json::array({"kmem:kmem_cache_alloc"}));
  EXPECT_EQ(doc["keys"], nlohmann::json::array({"comm", "pid"}));
  EXPECT_EQ(doc["weight"], "bytes_alloc");
  const auto& a = doc["stacks"][0];
  EXPECT_EQ(a["sum"], 80);
  ASSERT_EQ(a["by"].size(), 2u);
  EXPECT_EQ(a["by"][0], nlohmann::json({{"comm", "wl"}, {"pid", 100}, {"count", 6}, {"sum", 48}}));
  EXPECT_EQ(doc["stacks"][1]["by"][0],
            nlohmann::json({{"other", true}, {"count", 2}, {"sum", 8192}}));
}

TEST(Breakdown, JsonWithoutByHasNoBreakdown) {
  Snapshot snap = weighted_snapshot();
  snap.keys_requested = false;
  snap.weight_unit.clear();
  const nlohmann::json doc = nlohmann::json::parse(json_of(snap, nullptr));
  EXPECT_FALSE(doc["stacks"][0].contains("by"));
  EXPECT_FALSE(doc["stacks"][0].contains("sum"));
  EXPECT_FALSE(doc.contains("keys"));
  EXPECT_FALSE(doc.contains("weight"));
}

}  // namespace
}  // namespace stackmapd
