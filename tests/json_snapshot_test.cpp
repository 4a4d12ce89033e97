// SPDX-License-Identifier: GPL-2.0
// stack_map.json read back (daemon/export/json_snapshot.h): what format_json
// writes, with keys, weights and the kernel's build id, comes back the same.
#include "daemon/export/json_snapshot.h"

#include <gtest/gtest.h>

#include "daemon/export/exports.h"
#include "daemon/sys/error.h"
#include "tests/snapshot_outputs.h"

namespace stackmapd {
namespace {

TEST(JsonSnapshotTest, ReadsBackWhatFormatJsonWrites) {
  Snapshot snap;
  snap.keys = KeySpec::parse("comm,pid");
  snap.keys_requested = true;
  snap.weight_unit = "bytes_alloc";
  snap.kernel.release = "6.1.0";
  snap.kernel.build_id = "abcd";
  snap.stats.counters[SMC_HITS] = 5;
  KeyCount a, other;
  a.key.comm = "nginx";
  a.key.pid = 812;
  a.count = 3;
  a.weight = 300;
  other.other = true;
  other.count = 2;
  other.weight = 20;
  snap.stacks.push_back({7, 5, {0xffffffff81000010, 0xffffffffc0000000}, 320, {a, other}});
  JsonExport back = read_json_export(json_of(snap, nullptr), "test.json");
  ASSERT_EQ(back.snap.stacks.size(), 1u);
  const StackRecord& s = back.snap.stacks[0];
  EXPECT_EQ(s.stack_id, 7u);
  EXPECT_EQ(s.ref_count, 5u);
  EXPECT_EQ(s.weight, 320u);
  EXPECT_EQ(s.ips, snap.stacks[0].ips);
  ASSERT_EQ(s.by.size(), 2u);
  EXPECT_EQ(s.by[0].key, a.key);
  EXPECT_EQ(s.by[0].weight, 300u);
  EXPECT_TRUE(s.by[1].other);
  EXPECT_EQ(back.snap.keys, snap.keys);
  EXPECT_TRUE(back.snap.keys_requested);
  EXPECT_EQ(back.snap.weight_unit, "bytes_alloc");
  EXPECT_EQ(back.snap.kernel.build_id, "abcd");
  EXPECT_EQ(back.snap.stats.get(SMC_HITS), 5u);
  EXPECT_TRUE(back.functions.empty());  // no symbols: every frame "0x..."
}

TEST(JsonSnapshotTest, FunctionsComeFromTheSymbols) {
  const std::string doc = R"({"stacks": [{"stack_id": 1, "ref_count": 2,
    "ips": ["0xffffffff81000010", "0xffffffffc0000040", "0xffffffff81000100"],
    "symbols": ["schedule+0x10/0x80", "nf_hook_slow+0x40/0x100 [nf_tables]", "0xffffffff81000100"]}]})";
  JsonExport back = read_json_export(doc, "test.json");
  EXPECT_EQ(back.functions.at(0xffffffff81000010), (FunctionName{"schedule", ""}));
  EXPECT_EQ(back.functions.at(0xffffffffc0000040), (FunctionName{"nf_hook_slow", "nf_tables"}));
  EXPECT_FALSE(back.functions.count(0xffffffff81000100));
  EXPECT_FALSE(back.snap.keys_requested);
}

TEST(JsonSnapshotTest, BrokenFilesNameTheField) {
  EXPECT_THROW(read_json_export("{", "t.json"), Error);
  EXPECT_THROW(read_json_export(R"({"stacks": [{"stack_id": 1}]})", "t.json"), Error);
  EXPECT_THROW(
      read_json_export(R"({"stacks": [{"stack_id": 1, "ref_count": 1, "ips": [7]}]})", "t.json"),
      Error);
  try {
    read_json_export(R"({"stacks": [{"stack_id": 1, "ref_count": -1, "ips": []}]})", "t.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stacks[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ref_count"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stackmapd
