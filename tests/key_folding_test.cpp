// SPDX-License-Identifier: GPL-2.0
// The keys of exited processes fold (StackStore::fold_exited, ExitWatch):
// counts conserved, into the comm or `other`, the table no longer full, a
// live process never folded, and the deltas between snapshots still exact.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "daemon/export/pprof.h"
#include "daemon/model/stack_store.h"
#include "daemon/resolve/exit_watch.h"

namespace stackmapd {
namespace {

EventKey key_of(uint32_t pid, uint32_t comm = 0) {
  EventKey k;
  k.pid = pid;
  k.tid = pid;
  k.comm = comm;
  return k;
}

// Every stack's keys and `other` sum to its count and weight.
void expect_conserved(const std::vector<StackRecord>& stacks) {
  for (const StackRecord& r : stacks) {
    uint64_t count = 0, weight = 0;
    for (const KeyCount& k : r.by) {
      count += k.count;
      weight += k.weight;
    }
    EXPECT_EQ(count, r.ref_count) << "stack " << r.stack_id;
    EXPECT_EQ(weight, r.weight) << "stack " << r.stack_id;
  }
}

uint64_t folded_of(const StackStore& s) {
  TableStats st;
  s.add_counts(st);
  return st.key_pairs_folded;
}

TEST(KeyFolding, ExitedPidsFoldIntoTheirCommCountsWhole) {
  StackStore s(8, KeySpec::parse("pid,comm"));
  const uint32_t sh = s.strings().intern("sh"), make = s.strings().intern("make");
  s.insert(0, {1}, key_of(10, sh), 3);
  s.count(0, key_of(11, sh), 5);
  s.count(0, key_of(12, make), 7, 2);
  s.count(0, key_of(13, sh), 1);  // lives on
  s.insert(1, {2}, key_of(11, sh), 4);
  EXPECT_EQ(s.process_ids(), (std::vector<uint32_t>{10, 11, 12, 13}));
  const std::vector<StackRecord> before = s.snapshot({});

  EXPECT_EQ(s.fold_exited({10, 11, 12}), 4u);
  const std::vector<StackRecord> after = s.snapshot({});
  expect_conserved(before);
  expect_conserved(after);
  ASSERT_EQ(after.size(), 2u);
  ASSERT_EQ(after[0].by.size(), 3u);
  // By weight: "sh" of pids 10 and 11 folded into one (8), "make" (7), pid 13 (1).
  EXPECT_EQ(after[0].by[0].key.pid, 0u);
  EXPECT_EQ(after[0].by[0].key.comm, "sh");
  EXPECT_EQ(after[0].by[0].count, 2u);
  EXPECT_EQ(after[0].by[0].weight, 8u);
  EXPECT_EQ(after[0].by[1].key.pid, 0u);
  EXPECT_EQ(after[0].by[1].key.comm, "make");
  EXPECT_EQ(after[0].by[1].count, 2u);
  EXPECT_EQ(after[0].by[2].key.pid, 13u) << "a live process keeps its key";
  ASSERT_EQ(after[1].by.size(), 1u);
  EXPECT_EQ(after[1].by[0].key.comm, "sh");
  EXPECT_EQ(after[1].by[0].key.pid, 0u);
  EXPECT_EQ(folded_of(s), 4u);
  EXPECT_EQ(s.process_ids(), (std::vector<uint32_t>{13})) << "folded keys name no process";

  s.count(0, key_of(13, sh), 1);  // counting goes on, into the new table
  EXPECT_EQ(s.find(0)->ref_count, 6u);
  expect_conserved(s.snapshot({}));
  s.clear();
  EXPECT_EQ(folded_of(s), 0u) << "per epoch, as key_overflow";
}

TEST(KeyFolding, WithNoOtherFieldExitedPidsJoinOther) {
  StackStore s(8, KeySpec::parse("pid"));
  s.insert(0, {1}, key_of(10), 3);
  s.count(0, key_of(11), 5);
  s.count(0, key_of(12), 7);
  EXPECT_EQ(s.fold_exited({10, 12}), 2u);
  const std::vector<StackRecord> after = s.snapshot({});
  expect_conserved(after);
  ASSERT_EQ(after[0].by.size(), 2u);
  EXPECT_EQ(after[0].by[0].key.pid, 11u);
  EXPECT_TRUE(after[0].by[1].other);
  EXPECT_EQ(after[0].by[1].count, 2u);
  EXPECT_EQ(after[0].by[1].weight, 10u);
  TableStats st;
  s.add_counts(st);
  EXPECT_EQ(st.key_overflow, 0u) << "no event went past the cap";
  EXPECT_EQ(st.key_pairs, 1u);
}

// --user-stacks: the user stack is left to tell the folded key apart.
TEST(KeyFolding, WithUserStacksAFoldedPidKeepsItsUserStack) {
  StackStore s(8, KeySpec::parse("pid"), StackStore::kDefaultMaxKeyPairs, true);
  EventKey a = key_of(10), b = key_of(11);
  a.ustack = b.ustack = 5;
  s.insert(0, {1}, a, 1);
  s.count(0, b, 1);
  EXPECT_EQ(s.fold_exited({10, 11}), 2u);
  const std::vector<StackRecord> after = s.snapshot({});
  ASSERT_EQ(after[0].by.size(), 1u);
  EXPECT_FALSE(after[0].by[0].other);
  EXPECT_EQ(after[0].by[0].key.pid, 0u);
  EXPECT_EQ(after[0].by[0].key.ustack, 5u);
  EXPECT_EQ(after[0].by[0].count, 2u);
}

TEST(KeyFolding, TidKeysFoldByThreadAndKeysWithoutAProcessNever) {
  StackStore tids(8, KeySpec::parse("tid,comm"));
  tids.insert(0, {1}, key_of(7), 1);
  EXPECT_EQ(tids.process_ids(), (std::vector<uint32_t>{7}));
  EXPECT_EQ(tids.fold_exited({7}), 1u);
  EXPECT_EQ(tids.snapshot({})[0].by[0].key.tid, 0u);

  StackStore comms(8, KeySpec::parse("comm,cgroup"));
  comms.insert(0, {1}, key_of(7), 1);
  EXPECT_TRUE(comms.process_ids().empty());
  EXPECT_EQ(comms.fold_exited({7}), 0u);
}

TEST(KeyFolding, PidZeroIsNeverAProcessToCheck) {
  StackStore s(8, KeySpec::parse("pid"));
  s.insert(0, {1}, key_of(0), 1);  // the idle task
  s.count(0, key_of(3), 1);
  EXPECT_EQ(s.process_ids(), (std::vector<uint32_t>{3}));
  EXPECT_EQ(s.fold_exited({0}), 0u);
  EXPECT_EQ(s.snapshot({})[0].by.size(), 2u);
}

// The case: short processes fill the pairs; once they exited and
// folded, a program started next gets its own key again.
TEST(KeyFolding, FoldingFreesAFullTable) {
  constexpr uint32_t kCap = 1000;
  StackStore s(8, KeySpec::parse("pid,comm"), kCap);
  const uint32_t sh = s.strings().intern("sh"), late = s.strings().intern("late");
  s.insert(0, {1}, key_of(1, sh), 1);
  for (uint32_t pid = 2; pid <= 2 * kCap; ++pid) s.count(0, key_of(pid, sh), 1);
  TableStats st;
  s.add_counts(st);
  ASSERT_EQ(st.key_pairs, kCap);
  s.count(0, key_of(5000, late), 1);
  s.add_counts(st);
  EXPECT_EQ(st.key_overflow, kCap + 1) << "full: the late program's event went to other";

  std::vector<uint32_t> ids = s.process_ids();
  EXPECT_EQ(s.fold_exited(ids), kCap);
  s.count(0, key_of(5001, late), 1);
  s.add_counts(st);
  EXPECT_EQ(st.key_pairs, 2u) << "the folded \"sh\" and the late program";
  EXPECT_EQ(st.key_overflow, kCap + 1) << "the late program counted under its own key";
  const std::vector<StackRecord> after = s.snapshot({});
  expect_conserved(after);
  ASSERT_EQ(after[0].by.size(), 3u);
  EXPECT_EQ(after[0].by[1].key.pid, 5001u);
  EXPECT_EQ(after[0].by[1].key.comm, "late");
}

// The live page's windows and OTLP pushes subtract snapshots: a fold in
// between moves counts, and must not count them again.
TEST(KeyFolding, ADeltaAcrossAFoldCountsOnlyNewEvents) {
  for (const char* keys : {"pid,comm", "pid"}) {
    StackStore s(8, KeySpec::parse(keys));
    const uint32_t sh = s.strings().intern("sh");
    auto snap = [&] {
      Snapshot out;
      out.keys = s.keys();
      out.stacks = s.snapshot({});
      return out;
    };
    s.insert(0, {1}, key_of(10, sh), 1, 4);
    s.count(0, key_of(11, sh), 1, 2);
    const Snapshot before = snap();
    s.fold_exited({10, 11});
    s.count(0, key_of(12, sh), 1, 3);
    const Snapshot d = delta_snapshot(before, snap());
    ASSERT_EQ(d.stacks.size(), 1u) << keys;
    EXPECT_EQ(d.stacks[0].ref_count, 3u) << keys;
    ASSERT_EQ(d.stacks[0].by.size(), 1u) << keys << ": the folded pairs moved, nothing new";
    EXPECT_EQ(d.stacks[0].by[0].key.pid, 12u) << keys;
    EXPECT_EQ(d.stacks[0].by[0].count, 3u) << keys;
  }
}

TEST(ExitWatch, ReportsTheIdsFoundGoneOnce) {
  ExitWatch w([](uint32_t id) { return id % 2 == 1; });
  EXPECT_TRUE(w.take().empty());
  w.check({4, 5, 3, 8});
  w.wait_idle();
  EXPECT_EQ(w.take(), (std::vector<uint32_t>{3, 5}));
  EXPECT_TRUE(w.take().empty()) << "taken";
}

// The default check: this process lives; a child reaped is gone.
TEST(ExitWatch, ALiveProcessIsNeverGone) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  ExitWatch w;
  w.check({static_cast<uint32_t>(getpid()), static_cast<uint32_t>(child)});
  w.wait_idle();
  EXPECT_EQ(w.take(), (std::vector<uint32_t>{static_cast<uint32_t>(child)}));
}

}  // namespace
}  // namespace stackmapd
