// SPDX-License-Identifier: GPL-2.0
// The model's own ids (daemon/model/callstack.h) and the one name table
// every output reads (daemon/export/frame_names.h).
#include "daemon/model/callstack.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>

#include "daemon/export/breakdown.h"
#include "daemon/export/exports.h"
#include "daemon/export/frame_names.h"
#include "daemon/export/json_snapshot.h"
#include "daemon/model/snapshot.h"
#include "daemon/model/stack_store.h"
#include "daemon/symbols/kallsyms.h"

namespace stackmapd {
namespace {

KeyCount keyed(uint32_t pid, uint32_t ustack, uint64_t count) {
  KeyCount k;
  k.key.pid = pid;
  k.key.ustack = ustack;
  k.count = k.weight = count;
  return k;
}

// Two kernel stacks sharing their outer frame; the first split over two user
// stacks of two processes running one binary, and over `other`.
Snapshot user_snapshot() {
  Snapshot s;
  s.keys = KeySpec::parse("pid");
  s.keys_requested = true;
  s.user.enabled = true;
  s.user.binaries = {{"/usr/bin/app", "ab"}};
  UserStack a{100, false, {}};
  a.frames.push_back({0x555500001234, 0, 0x1234, 0x1234, {"leaf+0x4"}, ""});
  a.frames.push_back({0x7f0000000010, -1, 0, 0, {}, ""});  // in no file
  UserStack b{200, true, {}};
  b.frames.push_back({0x566600001234, 0, 0x1234, 0x1234, {"leaf+0x4"}, ""});  // same place, ASLR
  s.user.stacks[3] = a;
  s.user.stacks[5] = b;
  StackRecord k1{7, 9, {0xffffffff81000010, 0xffffffff81000100}, 9};
  KeyCount other;
  other.other = true;
  other.count = other.weight = 2;
  k1.by = {keyed(100, 3, 4), keyed(200, 5, 2), keyed(101, 3, 1), other};
  StackRecord k2{42, 1, {0xffffffff81000020, 0xffffffff81000100}, 1};
  k2.by = {keyed(100, 3, 1)};
  s.stacks = {k1, k2};
  intern_callstacks(s);
  return s;
}

TEST(Callstacks, OnePerKernelAndUserStackWithItsKeys) {
  const Snapshot s = user_snapshot();
  ASSERT_EQ(s.callstacks.size(), 4u);
  const Callstack& a = s.callstacks[0];
  EXPECT_EQ(a.stack_id, 7u);
  EXPECT_EQ(a.ustack, 3u);
  EXPECT_EQ(a.count, 5u) << "pid 100 and pid 101 share user stack 3";
  EXPECT_EQ(a.keys, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(s.callstacks[1].ustack, 5u);
  EXPECT_EQ(s.callstacks[2].ustack, kNoUserStack) << "`other` has no user stack";
  EXPECT_EQ(s.callstacks[2].count, 2u);
  EXPECT_EQ(s.callstacks[3].stack, 1u);
  // Every event in exactly one callstack.
  uint64_t total = 0;
  for (const Callstack& c : s.callstacks) total += c.count;
  EXPECT_EQ(total, 10u);
}

TEST(Callstacks, FramesAreInternedByWhatNamesThem) {
  const Snapshot s = user_snapshot();
  const Callstack &a = s.callstacks[0], &b = s.callstacks[1], &k2 = s.callstacks[3];
  ASSERT_EQ(a.kernel_depth, 2u);
  ASSERT_EQ(a.frames.size(), 4u);
  ASSERT_EQ(b.frames.size(), 3u);
  EXPECT_EQ(a.frames[1], k2.frames[1]) << "one kernel address, one frame";
  EXPECT_NE(a.frames[0], k2.frames[0]);
  EXPECT_EQ(a.frames[2], b.frames[2]) << "one binary and offset: one frame in any process";
  const Frame& anon = s.frames[a.frames[3]];
  EXPECT_TRUE(anon.user);
  EXPECT_EQ(anon.binary, -1);
  EXPECT_EQ(anon.addr, 0x7f0000000010u);
  // Kernel 3 + user 2 (the shared leaf and the frame in no file).
  EXPECT_EQ(s.frames.size(), 5u);
}

TEST(Callstacks, WithoutUserStacksOnePerStackInItsOrder) {
  Snapshot s = user_snapshot();
  s.user = {};
  intern_callstacks(s);
  ASSERT_EQ(s.callstacks.size(), 2u);
  EXPECT_EQ(s.callstacks[0].count, 9u);
  EXPECT_EQ(s.callstacks[0].keys.size(), 4u);
  EXPECT_EQ(s.callstacks[0].frames.size(), 2u);
  EXPECT_EQ(s.callstacks[1].stack_id, 42u);
}

TEST(Callstacks, AStoreSnapshotInternsEveryEventOnce) {
  StackStore store(64, KeySpec::parse("pid"), StackStore::kDefaultMaxKeyPairs, true);
  EventKey k;
  for (uint32_t i = 0; i < 30; ++i) {
    k.pid = i % 3;
    k.ustack = i % 2 ? 11 : 12;
    if (!store.count(i % 5, k, 1)) store.insert(i % 5, {0x1000u + i % 5, 0x2000}, k, 1);
  }
  Snapshot s;
  s.user.enabled = true;
  s.stacks = store.snapshot({});
  intern_callstacks(s);
  uint64_t total = 0;
  for (const Callstack& c : s.callstacks) {
    total += c.count;
    for (uint32_t key : c.keys) EXPECT_EQ(s.stacks[c.stack].by[key].key.ustack, c.ustack);
  }
  EXPECT_EQ(total, store.total_events());
  EXPECT_EQ(s.callstacks.size(), 10u) << "5 stacks, each under both user stacks";
}

TEST(Callstacks, AnExportOfASnapshotNotInternedIsABug) {
  Snapshot s;
  s.stacks = {{7, 1, {0x10}}};
  EXPECT_THROW(callstacks(s), std::logic_error);
  EXPECT_THROW(FrameNames(s, nullptr), std::logic_error);
  intern_callstacks(s);
  EXPECT_EQ(callstacks(s).size(), 1u);
}

// A module's function reads the same in every output, whether the symbol
// table or a JSON export's own names name it.
TEST(FrameNamesTest, AFrameReadsTheSameFromSymbolsAndFromAJsonExport) {
  const Kallsyms ksyms = Kallsyms::parse(
      "ffffffff81000000 T schedule\nffffffff81000100 T schedule_end\n"
      "ffffffffc0000000 t nf_hook_slow\t[nf_tables]\nffffffffc0000100 t nf_end\t[nf_tables]\n");
  Snapshot s;
  s.stacks = {{7, 3, {0xffffffffc0000010, 0xffffffff81000020, 0xdead}}};
  intern_callstacks(s);
  const FrameNames live(s, &ksyms);
  EXPECT_EQ(live.flame(0), (std::vector<std::string>{"nf_hook_slow_[nf_tables]"}));
  EXPECT_EQ(live.function(0), "nf_hook_slow [nf_tables]");
  EXPECT_EQ(live.text(0), (std::vector<std::string>{"nf_hook_slow+0x10/0x100 [nf_tables]"}));
  EXPECT_EQ(live.function(2), "");
  EXPECT_EQ(live.text(2), (std::vector<std::string>{"0xdead"}));

  const JsonExport doc = read_json_export(format_json(s, live), "stack_map.json");
  const FrameNames read(doc.snap, nullptr, &doc.functions);
  for (uint32_t f = 0; f < 3; ++f) {
    EXPECT_EQ(read.flame(f), live.flame(f)) << f;
    EXPECT_EQ(read.function(f), live.function(f)) << f;
  }
  EXPECT_EQ(read.text(0), (std::vector<std::string>{"nf_hook_slow [nf_tables]"}))
      << "the offset is not in the export's names";
  EXPECT_EQ(format_folded(flame_stacks(doc.snap, read)), format_folded(flame_stacks(s, live)));

  // Written without addresses: the same flame graph from the names alone.
  const JsonExport bare =
      read_json_export(format_json(s, live, JsonOptions{false}), "stack_map.json");
  EXPECT_EQ(format_folded(flame_stacks(bare.snap, FrameNames(bare.snap, nullptr, &bare.functions))),
            "[unknown];schedule;nf_hook_slow_[nf_tables] 3\n");
}

}  // namespace
}  // namespace stackmapd
