// SPDX-License-Identifier: GPL-2.0
// Runs the real BPF program on this kernel: root required. These tests fail,
// never skip, unless STACKMAPD_SKIP_BPF_TESTS=1 says BPF is unavailable here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <cstring>

#include "daemon/bpf/bpf_session.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/bpf/preflight.h"
#include "tests/load.h"

namespace stackmapd {
namespace {

class BpfSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* skip = std::getenv("STACKMAPD_SKIP_BPF_TESTS");
    if (skip && std::strcmp(skip, "1") == 0) GTEST_SKIP() << "STACKMAPD_SKIP_BPF_TESTS=1";
    mount_tracefs_events();  // as the daemon does
  }
};

SessionConfig kmem_config(uint32_t bits = SMT_DEFAULT_BITS) {
  SessionConfig c;
  c.events.push_back({"kmem", "kmem_cache_alloc"});
  c.bits = bits;
  return c;
}

void run_load(BpfSession& s, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    generate_allocations(2000);
    s.drain(0);
  }
  s.detach();
  s.drain(0);
}

TEST_F(BpfSessionTest, EveryIdResolvesAndCountsAgree) {
  BpfSession s(kmem_config());
  run_load(s, 50);
  TableStats st = s.stats();
  ASSERT_GT(st.get(SMC_HITS), 100000u) << "the workload made too few events";
  EXPECT_EQ(st.events_total, st.events()) << "every event counted once, as a hit or a drop";
  EXPECT_EQ(st.drops(), 0u);
  EXPECT_EQ(st.bad_records, 0u) << "ids that did not resolve to a published stack";

  // The daemon's counts (from the ring buffer) against the table's own.
  EXPECT_EQ(s.store().total_events(), st.get(SMC_HITS));
  EXPECT_EQ(s.store().size(), st.entries);
  EXPECT_EQ(st.get(SMC_INSERTS), st.entries);
  uint64_t table_refs = 0;
  for (const StackRecord& t : s.table_stacks()) table_refs += t.ref_count;
  EXPECT_EQ(table_refs, st.get(SMC_HITS));
  for (const StackRecord& r : s.store().snapshot()) {
    StackRecord t = s.table_stack(r.stack_id);
    ASSERT_EQ(t.ips, r.ips) << "stack_id " << r.stack_id;
    EXPECT_EQ(t.ref_count, r.ref_count) << "stack_id " << r.stack_id;
    EXPECT_GE(r.ips.size(), 1u);
  }
}

TEST_F(BpfSessionTest, TopStackResolvesToTheAllocator) {
  BpfSession s(kmem_config());
  run_load(s, 20);
  auto stacks = s.store().snapshot();
  ASSERT_FALSE(stacks.empty());
  const StackRecord* top = &stacks[0];
  for (const auto& r : stacks)
    if (r.ref_count > top->ref_count) top = &r;
  Kallsyms ksyms = Kallsyms::load();
  ASSERT_FALSE(ksyms.addresses_hidden());
  bool in_allocator = false, in_syscall_path = false;
  for (uint64_t ip : top->ips) {
    auto m = ksyms.lookup(ip);
    ASSERT_TRUE(m.has_value()) << "frame 0x" << std::hex << ip << " does not resolve";
    in_allocator |= m->name.starts_with("kmem_cache_alloc");
    in_syscall_path |= m->name.find("sys_") != std::string_view::npos ||
                       m->name.starts_with("do_syscall") || m->name.starts_with("entry_SYSCALL");
  }
  EXPECT_TRUE(in_allocator) << ksyms.format(top->ips[0]);
  EXPECT_TRUE(in_syscall_path);
}

TEST_F(BpfSessionTest, SmallTableCountsPoolExhaustionExactly) {
  // Several busy tracepoints and a varied workload give more than the 1024
  // unique stacks of --bits 10.
  SessionConfig c = kmem_config(SMT_MIN_BITS);
  for (const char* name : {"kmalloc", "kfree", "kmem_cache_free", "mm_page_alloc", "mm_page_free"})
    c.events.push_back({"kmem", name});
  c.events.push_back({"sched", "sched_switch"});
  c.events.push_back({"sched", "sched_wakeup"});
  c.events.push_back({"timer", "hrtimer_start"});
  BpfSession s(c);
  for (int i = 0; i < 20 && s.stats().get(SMC_DROP_POOL_FULL) == 0; ++i) {
    generate_allocations(2000);
    int rc = system("find /usr/lib -maxdepth 3 2>/dev/null | head -2000 | xargs stat >/dev/null 2>&1;"
                    "tar cf - /usr/include 2>/dev/null | gzip -1 >/dev/null");
    ASSERT_EQ(rc, 0);
    s.drain(0);
  }
  s.detach();
  s.drain(0);
  TableStats st = s.stats();
  ASSERT_TRUE(st.pool_full()) << st.entries << " unique stacks only";
  EXPECT_GT(st.get(SMC_DROP_POOL_FULL), 0u);
  EXPECT_EQ(st.events_total, st.events()) << "every event counted once, as a hit or a drop";
  EXPECT_EQ(s.store().total_events(), st.get(SMC_HITS));
  EXPECT_EQ(st.entries, s.pool_size());
  EXPECT_EQ(s.store().size(), s.pool_size());
  EXPECT_EQ(st.bad_records, 0u);
}

TEST_F(BpfSessionTest, VerifyModeFindsEverySampledStackStoredUnderItsId) {
  SessionConfig c = kmem_config();
  c.verify_every = 7;
  BpfSession s(c);
  run_load(s, 20);
  TableStats st = s.stats();
  EXPECT_GT(st.verify_ok, st.get(SMC_HITS) / 7 - 10);
  EXPECT_EQ(st.verify_mismatch, 0u);
  EXPECT_EQ(st.bad_records, 0u);
  EXPECT_EQ(s.store().total_events(), st.get(SMC_HITS)) << "a sample also counts its event, once";
}

// Resets while both CPUs insert: no stale or torn stack may ever be exported.
TEST_F(BpfSessionTest, ResetUnderLoadNeverExposesOldOrTornStacks) {
  SessionConfig c = kmem_config();
  for (const char* name : {"kmalloc", "kfree", "kmem_cache_free"}) c.events.push_back({"kmem", name});
  c.events.push_back({"sched", "sched_switch"});
  c.verify_every = 3;
  BpfSession s(c);
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  for (int t = 0; t < 2; ++t)
    load.emplace_back([&] {
      while (!stop) generate_allocations(200);
    });

  const int kResets = 60;
  uint64_t ended_hits = 0, ended_drops = 0, reset_drops = 0;
  for (int i = 0; i < kResets; ++i) {
    for (int d = 0; d < 5; ++d) s.drain(10);
    Snapshot ended = s.reset();
    uint64_t refs = 0;
    for (const auto& st : ended.stacks) refs += st.ref_count;
    ASSERT_EQ(refs, ended.stats.get(SMC_HITS)) << "reset " << i << ": the ended epoch is exact";
    ASSERT_EQ(ended.stacks.size(), ended.stats.get(SMC_INSERTS)) << "reset " << i;
    ended_hits += ended.stats.get(SMC_HITS);
    ended_drops += ended.stats.drops();
    reset_drops += ended.stats.get(SMC_DROP_RESETTING);
    ASSERT_EQ(s.epoch(), static_cast<uint32_t>(i + 1));
  }
  stop = true;
  for (auto& t : load) t.join();
  s.detach();
  s.drain(0);

  TableStats st = s.stats();
  EXPECT_EQ(st.resets, static_cast<uint64_t>(kResets));
  EXPECT_EQ(st.stale_records, 0u) << "records of an ended epoch reached the daemon";
  EXPECT_EQ(st.bad_records, 0u);
  EXPECT_EQ(st.verify_mismatch, 0u) << "an id named a stack other than the one captured";
  EXPECT_GT(st.verify_ok, 1000u);
  EXPECT_EQ(st.past_events, ended_hits + ended_drops);
  EXPECT_EQ(st.events_total, st.past_events + st.events()) << "every event of every epoch, once";
  // What the table holds now is exactly what the daemon exports.
  auto table = s.table_stacks();
  auto stored = s.store().snapshot();
  ASSERT_EQ(table.size(), stored.size());
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(table[i].stack_id, stored[i].stack_id);
    EXPECT_EQ(table[i].ips, stored[i].ips);
    EXPECT_EQ(table[i].ref_count, stored[i].ref_count);
  }
  std::printf("resets %d under load: %llu events checked by --verify, %llu mismatches, "
              "%llu dropped while resetting\n", kResets,
              static_cast<unsigned long long>(st.verify_ok + st.verify_mismatch),
              static_cast<unsigned long long>(st.verify_mismatch),
              static_cast<unsigned long long>(reset_drops));
}

// A daemon that dies leaves its table pinned; the next one continues it.
TEST_F(BpfSessionTest, PinnedTableSurvivesTheDaemon) {
  const std::string dir = "/sys/fs/bpf/stackmapd-test-" + std::to_string(getpid());
  SessionConfig c = kmem_config();
  c.pin_dir = dir;
  std::vector<StackRecord> before;
  uint32_t seed;
  {
    BpfSession s(c);
    EXPECT_FALSE(s.resumed());
    for (int i = 0; i < 5; ++i) {
      generate_allocations(2000);
      s.drain(0);
    }
    s.reset();  // epoch and reset count must survive too
    run_load(s, 5);
    before = s.store().snapshot();
    seed = s.hash_seed();
    ASSERT_FALSE(before.empty());
  }  // no unpin(): as after kill -9
  {
    BpfSession s(c);
    ASSERT_TRUE(s.resumed());
    EXPECT_EQ(s.hash_seed(), seed);
    EXPECT_EQ(s.epoch(), 1u);
    EXPECT_EQ(s.stats().resets, 1u);
    auto after = s.store().snapshot();
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_EQ(after[i].stack_id, before[i].stack_id);
      EXPECT_EQ(after[i].ref_count, before[i].ref_count);
      EXPECT_EQ(after[i].ips, before[i].ips);
    }
    run_load(s, 5);
    TableStats st = s.stats();
    EXPECT_EQ(s.store().total_events(), st.get(SMC_HITS)) << "counting goes on exactly";
    EXPECT_GT(st.get(SMC_HITS), before.empty() ? 0 : before[0].ref_count);
    for (const auto& r : before)  // the same stack keeps its id
      EXPECT_EQ(s.table_stack(r.stack_id).ips, r.ips);
  }
  {
    SessionConfig other = c;
    other.bits = SMT_MIN_BITS;  // another layout: start clean, say why
    BpfSession s(other);
    EXPECT_FALSE(s.resumed());
    EXPECT_EQ(s.store().size(), 0u);
    s.unpin();
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace stackmapd
