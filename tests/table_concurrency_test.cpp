// SPDX-License-Identifier: GPL-2.0
// The shared table algorithm run by many threads at once, built with
// ThreadSanitizer: one id per distinct stack, holding that stack's frames,
// and every attempt either found, inserted or dropped.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "tests/host_table.h"

namespace {

constexpr __u32 kBits = SMT_MIN_BITS;
constexpr int kThreads = 8;

std::vector<__u64> stack_of(__u64 n, __u32 depth = 12) {
  std::vector<__u64> ips;
  for (__u32 i = 0; i < depth; ++i) ips.push_back(0xffffffff81000000ull + n * 0x1000 + i * 8);
  return ips;
}

// A lookup with its hash forced to `key`, to craft stacks whose hashes collide.
smt_probe lookup(smt_table& t, const std::vector<__u64>& ips, __u32 key = 0) {
  smt_probe p;
  smt_probe_init(&p, &t.shared, ips.data(), static_cast<__u32>(ips.size()), kBits, 99);
  if (key) {
    p.key = key;
    p.home = p.idx = key >> (32 - (kBits + 1));
  }
  smt_find_or_insert(&t, &p);
  return p;
}

// The frames of every published stack, by slot, read after the threads joined.
std::map<__u32, std::vector<__u64>> published(smt_table& t) {
  std::map<__u32, std::vector<__u64>> refs;
  for (__u32 i = 0; i < t.slots.size(); ++i) {
    __u32 elt = t.slots[i].elt;
    if (elt != SMT_ELT_NONE && elt != SMT_ELT_DEAD) {
      const smt_elt& e = t.pool[elt - 1];
      refs[i].assign(e.ips, e.ips + e.nr);
    }
  }
  return refs;
}

struct Tally {
  std::atomic<__u64> ok{0}, busy{0}, other{0};
};

void start_together(std::vector<std::thread>& threads, std::atomic<bool>& go) {
  go = true;
  for (auto& th : threads) th.join();
}

TEST(TableConcurrency, SameStackFromEveryThreadGetsOneId) {
  smt_table t(kBits);
  auto s = stack_of(1);
  Tally tally;
  std::atomic<__u32> first_id{~0u};
  std::atomic<bool> go{false}, disagreed{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&] {
      while (!go) std::this_thread::yield();
      for (int k = 0; k < 2000; ++k) {
        smt_probe p = lookup(t, s);
        if (p.status == SMT_FOUND || p.status == SMT_INSERTED) {
          ++tally.ok;
          __u32 expected = ~0u;
          if (!first_id.compare_exchange_strong(expected, p.idx) && expected != p.idx)
            disagreed = true;
        } else if (p.status == SMT_BUSY) {
          ++tally.busy;
        } else {
          ++tally.other;
        }
      }
    });
  start_together(threads, go);
  EXPECT_FALSE(disagreed) << "one stack got two ids";
  EXPECT_EQ(tally.other, 0u);
  auto refs = published(t);
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs.begin()->first, first_id.load());
  EXPECT_EQ(refs.begin()->second, s) << "the one element holds the stack's frames";
  EXPECT_EQ(tally.ok + tally.busy, static_cast<__u64>(kThreads) * 2000);
}

TEST(TableConcurrency, EqualHashesDifferentFramesNeverShareAnId) {
  smt_table t(kBits);
  constexpr int kStacks = 16;
  const __u32 key = 0x9e3779b9;  // one hash, one home slot for all of them
  std::vector<std::vector<__u64>> stacks;
  for (int i = 0; i < kStacks; ++i) stacks.push_back(stack_of(100 + i));
  std::vector<std::atomic<__u64>> ok(kStacks);
  std::vector<std::atomic<__u32>> id_of(kStacks);
  for (auto& id : id_of) id = ~0u;
  std::atomic<bool> go{false}, disagreed{false};
  std::atomic<__u64> busy{0}, other{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th)
    threads.emplace_back([&, th] {
      while (!go) std::this_thread::yield();
      for (int k = 0; k < 300; ++k)
        for (int j = 0; j < kStacks; ++j) {
          int i = (j * 7 + th * 3 + k) % kStacks;  // a different order on every thread
          smt_probe p = lookup(t, stacks[i], key);
          if (p.status == SMT_FOUND || p.status == SMT_INSERTED) {
            ++ok[i];
            __u32 expected = ~0u;
            if (!id_of[i].compare_exchange_strong(expected, p.idx) && expected != p.idx)
              disagreed = true;
          } else if (p.status == SMT_BUSY) {
            ++busy;
          } else {
            ++other;
          }
        }
    });
  start_together(threads, go);
  EXPECT_FALSE(disagreed) << "a stack got two ids";
  EXPECT_EQ(other, 0u);
  auto refs = published(t);
  ASSERT_EQ(refs.size(), static_cast<size_t>(kStacks)) << "one slot per distinct stack";
  __u64 total_ok = 0;
  for (int i = 0; i < kStacks; ++i) {
    ASSERT_TRUE(refs.count(id_of[i])) << "stack " << i;
    EXPECT_EQ(refs[id_of[i]], stacks[i]) << "stack " << i << "'s id holds its frames";
    total_ok += ok[i];
  }
  EXPECT_EQ(total_ok + busy, static_cast<__u64>(kThreads) * 300 * kStacks);
}

TEST(TableConcurrency, ExhaustionUnderContentionFillsThePoolExactly) {
  smt_table t(kBits);
  const __u32 pool = 1u << kBits;
  constexpr int kPerThread = 600;  // 8 x 600 distinct stacks > 1024 pool elements
  std::atomic<bool> go{false};
  std::atomic<__u64> ok{0}, pool_full{0}, busy{0}, other{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th)
    threads.emplace_back([&, th] {
      while (!go) std::this_thread::yield();
      for (int round = 0; round < 2; ++round)
        for (int k = 0; k < kPerThread; ++k) {
          smt_probe p = lookup(t, stack_of(th * kPerThread + k));
          if (p.status == SMT_FOUND || p.status == SMT_INSERTED) ++ok;
          else if (p.status == SMT_POOL_FULL) ++pool_full;
          else if (p.status == SMT_BUSY) ++busy;
          else ++other;
        }
    });
  start_together(threads, go);
  auto refs = published(t);
  EXPECT_EQ(refs.size(), pool) << "every pool element went to exactly one stack";
  EXPECT_GT(pool_full, 0u);
  EXPECT_EQ(ok + pool_full + busy + other, static_cast<__u64>(kThreads) * kPerThread * 2);
  EXPECT_EQ(other, 0u) << "a 2x table never runs out of probes at this load";
}

}  // namespace
