// SPDX-License-Identifier: GPL-2.0
// The tracefs backend's parsers and Snapshot assembly, without a kernel: the
// guest run of scripts/kernel-test.sh covers the live path.
#include "daemon/tracefs/tracefs_session.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "daemon/export/exports.h"
#include "daemon/model/fsmb.h"
#include "daemon/sys/error.h"
#include "tests/snapshot_outputs.h"

namespace stackmapd {
namespace {

// What the kernel series prints (kernel/trace/trace_stackmap.c).
constexpr const char* kKernelStat =
    "entries:    3 / 1024\n"
    "table_size: 2048\n"
    "hits:       120\n"
    "drops:      7\n"
    "hit_rate:   94%\n"
    "truncated:  2\n"
    "inserts:    3\n"
    "drop_pool_full:   4\n"
    "drop_probe_limit: 1\n"
    "drop_busy:        2\n"
    "max_depth:  64\n"
    "bits:       10\n"
    "resets:     5\n"
    "memory_kb:  536\n";

// What the RFC's kernel printed: five lines, no bits.
constexpr const char* kRfcStat =
    "entries:    774 / 16384\n"
    "table_size: 32768\n"
    "hits:       8264\n"
    "drops:      0\n"
    "hit_rate:   100%\n";

TEST(TracefsStat, ParsesKernelSeries) {
  TracefsStat st = parse_stack_map_stat(kKernelStat);
  EXPECT_EQ(st.entries, 3u);
  EXPECT_EQ(st.pool_size, 1024u);
  EXPECT_EQ(st.table_size, 2048u);
  EXPECT_EQ(st.bits, 10u);
  EXPECT_EQ(st.hits, 120u);
  EXPECT_EQ(st.drops, 7u);
  EXPECT_EQ(st.inserts, 3u);
  EXPECT_EQ(st.truncated, 2u);
  EXPECT_EQ(st.drop_pool_full, 4u);
  EXPECT_EQ(st.drop_probe_limit, 1u);
  EXPECT_EQ(st.drop_busy, 2u);
  EXPECT_EQ(st.resets, 5u);
  EXPECT_TRUE(st.has_breakdown);
}

TEST(TracefsStat, ParsesRfcAndDerivesBits) {
  TracefsStat st = parse_stack_map_stat(kRfcStat);
  EXPECT_EQ(st.entries, 774u);
  EXPECT_EQ(st.pool_size, 16384u);
  EXPECT_EQ(st.bits, 14u);
  EXPECT_EQ(st.hits, 8264u);
  EXPECT_FALSE(st.has_breakdown);
}

TEST(TracefsStat, RejectsForeignText) {
  EXPECT_THROW(parse_stack_map_stat(""), Error);
  EXPECT_THROW(parse_stack_map_stat("hits: 3\n"), Error);
  EXPECT_THROW(parse_stack_map_stat("entries: lots\n"), Error);
  try {
    parse_stack_map_stat("entries: 3\n");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("entries: N / MAX"), std::string::npos) << e.what();
  }
}

TEST(TracePipe, ParsesStackIdLines) {
  uint32_t id = 0;
  EXPECT_TRUE(
      parse_stack_id_line("            sh-42      [001] d..1.   7.501: <stack_id 1234>", &id));
  EXPECT_EQ(id, 1234u);
  EXPECT_TRUE(parse_stack_id_line("<stack_id 0>", &id));
  EXPECT_EQ(id, 0u);
  EXPECT_FALSE(parse_stack_id_line("  sh-42 [001] 7.5: kmem_cache_alloc: call_site=x", &id));
  EXPECT_FALSE(parse_stack_id_line("<stack_id >", &id));
  EXPECT_FALSE(parse_stack_id_line("<stack_id 12", &id));
  EXPECT_FALSE(parse_stack_id_line("<stack_id -3>", &id));
  EXPECT_FALSE(parse_stack_id_line("<stack_id 99999999999>", &id));
}

TEST(TracePipe, CountsAcrossChunkBoundaries) {
  TracePipeParser p;
  std::string text =
      "  sh-1 [000] ..... 1.0: kmem_cache_alloc: call_site=a\n"
      "  sh-1 [000] ..... 1.0: <stack_id 7>\n"
      "  sh-1 [001] ..... 1.1: kmem_cache_alloc: call_site=b\n"
      "  sh-1 [001] ..... 1.1: <stack_id 9>\n"
      "  sh-1 [001] ..... 1.2: <stack_id 7>\n"
      "  sh-1 [001] ..... 1.3: <stack trace>\n"
      " => kernel_clone\n";
  size_t total = 0;
  // Feed in awkward pieces: every line split somewhere.
  for (size_t i = 0; i < text.size(); i += 13)
    total += p.feed(std::string_view(text).substr(i, 13));
  EXPECT_EQ(total, 3u);
  EXPECT_EQ(p.ids(), 3u);
  EXPECT_EQ(p.full_stacks(), 1u);
  ASSERT_EQ(p.id_counts().size(), 2u);
  EXPECT_EQ(p.id_counts().at(7), 2u);
  EXPECT_EQ(p.id_counts().at(9), 1u);
  // A line without its newline yet is not counted.
  EXPECT_EQ(p.feed("  sh-1 [000] 2.0: <stack_id 5>"), 0u);
  EXPECT_EQ(p.feed("\n"), 1u);
}

FsmbFile sample_map() {
  std::vector<StackRecord> stacks = {
      {7, 2, {0xffffffff81000010ull, 0xffffffff81000020ull}},
      {9, 1, {0xffffffff81000030ull}},
      {1500, 117, {0xffffffff81000040ull, 0xffffffff81000050ull, 0xffffffff81000060ull}},
  };
  // Through the encoder and decoder: the bytes the kernel writes.
  return fsmb_decode(fsmb_encode(stacks), "sample");
}

TEST(TracefsSnapshot, MapsKernelCountersAndStacks) {
  TracePipeParser p;
  p.feed("a: <stack_id 7>\nb: <stack_id 7>\nc: <stack_id 9>\nd: <stack trace>\n");
  Snapshot snap = make_tracefs_snapshot(sample_map(), parse_stack_map_stat(kKernelStat), p);
  EXPECT_EQ(snap.bits, 10u);
  EXPECT_EQ(snap.hash_seed, 0u);
  ASSERT_EQ(snap.stacks.size(), 3u);
  EXPECT_EQ(snap.stacks[2].stack_id, 1500u);
  EXPECT_EQ(snap.stacks[2].ref_count, 117u);
  const TableStats& st = snap.stats;
  EXPECT_EQ(st.entries, 3u);
  EXPECT_EQ(st.pool_size, 1024u);
  EXPECT_EQ(st.table_size, 2048u);
  EXPECT_EQ(st.get(SMC_HITS), 120u);
  EXPECT_EQ(st.get(SMC_INSERTS), 3u);
  EXPECT_EQ(st.get(SMC_DROP_POOL_FULL), 4u);
  EXPECT_EQ(st.get(SMC_DROP_PROBE_LIMIT), 1u);
  EXPECT_EQ(st.get(SMC_DROP_BUSY), 2u);
  EXPECT_EQ(st.get(SMC_DROP_STACK_ERROR), 0u);  // deep stacks are truncated
  EXPECT_EQ(st.get(SMC_TRUNCATED), 2u);         // and counted, as on the BPF path
  EXPECT_EQ(st.drops(), 7u);                    // the kernel's drops line, exactly
  EXPECT_EQ(st.resets, 5u);
  EXPECT_EQ(st.events_total, 4u);
  EXPECT_EQ(st.bad_records, 0u);

  // The exporters take it as they take the BPF path's Snapshot.
  std::string stat = format_stat(st);
  EXPECT_EQ(stat.rfind("entries:    3 / 1024\n", 0), 0u) << stat;
  // The RFC's 120 * 100 / (120 + 7), and our (120 - 3) * 100 / (120 + 7) on its own line
  EXPECT_NE(stat.find("hit_rate:   94%\nreuse_rate: 92%\n"), std::string::npos) << stat;
  std::string map = stack_map_of(snap.stacks, nullptr);
  EXPECT_NE(map.find("stack_id 1500 [ref 117, depth 3]\n"), std::string::npos) << map;
}

TEST(TracefsSnapshot, CountsIdsMissingFromTheMap) {
  TracePipeParser p;
  p.feed("x: <stack_id 7>\nx: <stack_id 8>\nx: <stack_id 8>\nx: <stack_id 4000>\n");
  Snapshot snap = make_tracefs_snapshot(sample_map(), parse_stack_map_stat(kRfcStat), p);
  EXPECT_EQ(snap.stats.bad_records, 3u);
  // RFC kernel: first inserts are counted among the hits.
  EXPECT_EQ(snap.stats.get(SMC_INSERTS), 774u);
  EXPECT_EQ(snap.stats.get(SMC_HITS), 8264u);
}

class FakeTracefs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("stackmapd-tracefs-" + std::to_string(::getpid()));
    std::filesystem::create_directories(root_ / "instances");
    std::filesystem::create_directories(root_ / "events/kmem/kmem_cache_alloc");
    std::ofstream(root_ / "events/kmem/kmem_cache_alloc/enable") << "0\n";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::filesystem::path root_;
};

TEST_F(FakeTracefs, RefusesKernelWithoutTheSeries) {
  try {
    TracefsSession s({{"kmem", "kmem_cache_alloc"}}, root_.string());
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("options/stackmap"), std::string::npos) << e.what();
  }
}

TEST_F(FakeTracefs, NamesMissingTracepoint) {
  std::filesystem::create_directories(root_ / "options");
  std::ofstream(root_ / "options/stackmap") << "0\n";
  try {
    TracefsSession s({{"kmem", "no_such_event"}}, root_.string());
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kmem:no_such_event"), std::string::npos) << e.what();
  }
  // Nothing was created for the failed session.
  EXPECT_FALSE(std::filesystem::exists(root_ / "instances/stackmapd"));
}

}  // namespace
}  // namespace stackmapd
