// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/stack_store.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <iostream>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

const KeySpec kPidComm = KeySpec::parse("pid,comm");

EventKey key_of(uint32_t pid, uint32_t comm = 0) {
  EventKey k;
  k.pid = pid;
  k.tid = pid;
  k.comm = comm;
  return k;
}

TEST(StackStore, CountsKnownIdsAndAsksForNewOnes) {
  StackStore s(64);
  EXPECT_FALSE(s.count(40, {}, 1));
  s.insert(40, {1, 2, 3}, {}, 1);
  EXPECT_TRUE(s.count(40, {}, 1));
  EXPECT_TRUE(s.count(40, {}, 1));
  s.insert(3, {4}, {}, 1);
  auto snap = s.snapshot({});
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].stack_id, 3u) << "ordered by stack_id";
  EXPECT_EQ(snap[1].ref_count, 3u);
  EXPECT_EQ(snap[1].weight, 3u);
  EXPECT_EQ(snap[1].ips, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(s.total_events(), 4u);
  EXPECT_EQ(s.keys(), kPidComm) << "keyed by pid and comm by default";
}

TEST(StackStore, CountsEventsPerSourceWhateverTheKeysAndAcrossClear) {
  StackStore s(64);  // keyed by pid and comm: source is not a key
  EventKey a = key_of(1), b = key_of(1);
  b.source = 2;
  s.insert(40, {1}, a, 1);
  s.count(40, b, 1);
  s.count(40, b, 1);
  EXPECT_EQ(s.source_events(), (std::vector<uint64_t>{1, 0, 2}));
  s.clear();
  s.insert(40, {1}, a, 1);
  EXPECT_EQ(s.source_events(), (std::vector<uint64_t>{2, 0, 2})) << "they only grow";
}

// A batch's record counts n events at once: each source counts all n, so the
// sources sum to the events counted (Prometheus' per-source series to the total).
TEST(StackStore, SourceEventsCountEveryEventOfABatch) {
  StackStore s(64);
  EventKey a = key_of(1), b = key_of(2);
  b.source = 1;
  s.insert(40, {1}, a, 7, 7);
  s.count(40, a, 5, 5);
  s.count(40, b, 300, 300);
  s.insert(41, {2}, b, 2, 2);
  EXPECT_EQ(s.source_events(), (std::vector<uint64_t>{12, 302}));
  uint64_t sum = 0;
  for (uint64_t n : s.source_events()) sum += n;
  EXPECT_EQ(sum, s.total_events());
}

TEST(StackStore, RejectsOutOfRangeAndDuplicateIds) {
  StackStore s(8);
  EXPECT_FALSE(s.count(8, {}, 1));
  EXPECT_FALSE(s.valid_id(8));
  EXPECT_THROW(s.insert(8, {1}, {}, 1), Error);
  EXPECT_THROW(s.insert(8, {1}, 1), Error);
  s.insert(2, {1}, {}, 1);
  EXPECT_THROW(s.insert(2, {1}, {}, 1), Error);
  EXPECT_THROW(s.insert(2, {1}, 5), Error);
}

// A --profile sample taken in user mode (abi.h): an empty stack under an
// id past every slot and overflow id, kept apart from id table_size.
TEST(StackStore, KeepsTheNoKernelStackIdApart) {
  StackStore s(64);
  EXPECT_TRUE(s.valid_id(SMT_NO_KERNEL_STACK));
  EXPECT_FALSE(s.valid_id(64));
  EXPECT_FALSE(s.count(SMT_NO_KERNEL_STACK, {}, 1));
  s.insert(SMT_NO_KERNEL_STACK, {}, key_of(7), 1);
  EXPECT_TRUE(s.count(SMT_NO_KERNEL_STACK, key_of(7), 1));
  EXPECT_THROW(s.insert(64, {1}, {}, 1), Error);
  s.insert(63, {1}, {}, 1);
  ASSERT_NE(s.find(SMT_NO_KERNEL_STACK), nullptr);
  EXPECT_EQ(s.find(SMT_NO_KERNEL_STACK)->ref_count, 2u);
  EXPECT_EQ(s.find(63)->ref_count, 1u);
  auto snap = s.snapshot({});
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[1].stack_id, SMT_NO_KERNEL_STACK) << "last, by stack_id";
  EXPECT_TRUE(snap[1].ips.empty());
  EXPECT_EQ(s.total_events(), 3u);
}

TEST(StackStore, ClearForgetsEverythingButTheStrings) {
  StackStore s(8, kPidComm, 1);
  uint32_t bash = s.strings().intern("bash");
  s.insert(1, {1}, key_of(7, bash), 1);
  s.count(1, key_of(9, bash), 1);  // over the cap
  s.clear();
  EXPECT_EQ(s.size(), 0u);
  EXPECT_FALSE(s.count(1, key_of(7, bash), 1));
  TableStats st;
  s.add_counts(st);
  EXPECT_EQ(st.key_pairs, 0u);
  EXPECT_EQ(st.key_overflow, 0u);
  s.insert(1, {2}, key_of(9, bash), 1);  // the pair counted last before clear(), now under the cap
  auto snap = s.snapshot({});
  EXPECT_EQ(snap[0].ips[0], 2u);
  ASSERT_EQ(snap[0].by.size(), 1u);
  EXPECT_FALSE(snap[0].by[0].other) << "counted afresh";
  EXPECT_EQ(snap[0].by[0].count, 1u);
  EXPECT_EQ(s.strings().intern("bash"), bash);
}

TEST(StackStore, TheLastPairCountedSurvivesInserts) {
  StackStore s(4096, kPidComm, 1);
  s.insert(0, {1}, key_of(1), 1);
  s.count(0, key_of(2), 1);  // over the cap: the last pair is stack 0's `other`
  for (uint32_t id = 1; id < 4096; ++id) s.insert(id, {id}, 0);  // every stack moves
  s.count(0, key_of(2), 1);
  auto r = s.snapshot({})[0];
  ASSERT_EQ(r.by.size(), 2u);
  EXPECT_EQ(r.by[1].count, 2u);
  EXPECT_EQ(r.by[0].count + r.by[1].count, r.ref_count);
}

TEST(StackStore, SplitsByTheKeySpecOnly) {
  StackStore s(8, kPidComm);
  uint32_t bash = s.strings().intern("bash"), sshd = s.strings().intern("sshd");
  EventKey a = key_of(10, bash);
  a.cpu = 3;
  a.cgroup = sshd;
  s.insert(1, {1}, a, 1);
  a.tid = 11;  // other threads, CPUs, cgroups: not in the spec, so the same key
  a.cpu = 0;
  a.cgroup = 0;
  s.count(1, a, 1);
  s.count(1, key_of(20, sshd), 1);
  auto by = s.snapshot({})[0].by;
  ASSERT_EQ(by.size(), 2u);
  EXPECT_EQ(by[0].key.pid, 10u);
  EXPECT_EQ(by[0].key.comm, "bash");
  EXPECT_EQ(by[0].count, 2u);
  EXPECT_EQ(by[0].key.tid, 0u) << "fields outside the spec stay default";
  EXPECT_EQ(by[0].key.cpu, 0u);
  EXPECT_EQ(by[0].key.cgroup, "");
  EXPECT_EQ(by[1].key, (KeyValues{20, 0, 0, "sshd", "", "", ""}));
  EXPECT_FALSE(by[1].other);
}

TEST(StackStore, ResolvesEveryField) {
  StackStore s(8, KeySpec::parse("pid,tid,comm,cgroup,unit,source,cpu"));
  EventKey k{1,
             2,
             0,  // --hist's bucket
             s.strings().intern("sshd"),
             s.strings().intern("/system.slice/ssh.service"),
             s.strings().intern("ssh.service"),
             1,
             300};
  s.insert(0, {1}, k, 2);
  k.source = 2;
  s.count(0, k, 1);
  auto by = s.snapshot({"kmem:kmem_cache_alloc", "sched:sched_switch"})[0].by;
  ASSERT_EQ(by.size(), 2u);
  EXPECT_EQ(by[0].key, (KeyValues{1, 2, 300, "sshd", "/system.slice/ssh.service", "ssh.service",
                                  "sched:sched_switch"}));
  EXPECT_EQ(by[1].key.source, "source 2") << "an index past the sources' names";
}

TEST(StackStore, OrdersByWeightThenCountThenKeyWithOtherLast) {
  StackStore s(8, KeySpec::parse("cpu,pid"), 5);
  s.insert(0, {1}, 1);                                   // a restart's count: `other`
  s.count(0, key_of(5), 10);                             // weight 10, 1 event
  s.count(0, key_of(6), 3);                              // weight 3, 1 event
  for (int i = 0; i < 3; ++i) s.count(0, key_of(7), 1);  // weight 3, 3 events
  EventKey cpu1 = key_of(4);
  cpu1.cpu = 1;
  s.count(0, cpu1, 3);  // weight 3, 1 event: cpu (the spec's first key) puts it after pid 6
  auto by = s.snapshot({})[0].by;
  ASSERT_EQ(by.size(), 5u);
  EXPECT_EQ(by[0].key.pid, 5u);
  EXPECT_EQ(by[1].key.pid, 7u);
  EXPECT_EQ(by[2].key.pid, 6u);
  EXPECT_EQ(by[3].key.pid, 4u);
  EXPECT_TRUE(by[4].other);
  EXPECT_EQ(by[4].count, 1u);
}

TEST(StackStore, CountsFromBeforeAttributionGoToOther) {
  StackStore s(8);
  s.insert(3, {1, 2}, 41);
  s.count(3, key_of(1), 1);
  auto r = s.snapshot({})[0];
  EXPECT_EQ(r.ref_count, 42u);
  EXPECT_EQ(r.weight, 42u);
  ASSERT_EQ(r.by.size(), 2u);
  EXPECT_TRUE(r.by[1].other);
  EXPECT_EQ(r.by[1].count, 41u);
  EXPECT_EQ(r.by[1].weight, 41u);
  TableStats st;
  s.add_counts(st);
  EXPECT_EQ(st.key_overflow, 0u) << "not counted to `other` because of the cap";
  EXPECT_EQ(s.find(3)->ref_count, 42u);
}

TEST(StackStore, PastTheCapNewPairsCountInOther) {
  StackStore s(8, kPidComm, 2);
  s.insert(0, {1}, key_of(1), 5);
  s.insert(1, {2}, key_of(1), 5);
  s.count(0, key_of(2), 7);  // third pair: over the cap
  s.count(0, key_of(2), 7);  // the same pair again, from the one-entry cache
  s.count(1, key_of(1), 1);  // a pair that exists still counts
  TableStats st;
  s.add_counts(st);
  EXPECT_EQ(st.key_pairs, 2u);
  EXPECT_EQ(st.max_key_pairs, 2u);
  EXPECT_EQ(st.key_overflow, 2u);
  auto snap = s.snapshot({});
  ASSERT_EQ(snap[0].by.size(), 2u);
  EXPECT_TRUE(snap[0].by[1].other);
  EXPECT_EQ(snap[0].by[1].count, 2u);
  EXPECT_EQ(snap[0].by[1].weight, 14u);
  EXPECT_EQ(snap[1].by.size(), 1u);
  EXPECT_EQ(snap[1].by[0].count, 2u);
}

// A model of the store: a pair gets its own counts if it arrives while fewer
// than `cap` pairs exist; everything else is its stack's `other`.
struct Reference {
  explicit Reference(uint32_t c) : cap(c) {}
  uint32_t cap;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::pair<uint64_t, uint64_t>> pairs;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> other;
  uint64_t overflow = 0;
  void add(uint32_t id, uint32_t pid, uint32_t comm, uint64_t w) {
    auto it = pairs.find({id, pid, comm});
    if (it == pairs.end() && pairs.size() < cap) it = pairs.insert({{id, pid, comm}, {0, 0}}).first;
    auto& c = it != pairs.end() ? it->second : other[id];
    c.first += 1;
    c.second += w;
    overflow += it == pairs.end();
  }
};

void expect_matches(const StackStore& s, const Reference& ref) {
  uint64_t pairs = 0;
  for (const StackRecord& r : s.snapshot({})) {
    uint64_t count = 0, weight = 0;
    for (size_t i = 0; i < r.by.size(); ++i) {
      const KeyCount& k = r.by[i];
      count += k.count;
      weight += k.weight;
      if (k.other) {
        ASSERT_EQ(i + 1, r.by.size()) << "`other` last";
        auto it = ref.other.find(r.stack_id);
        ASSERT_NE(it, ref.other.end()) << "stack " << r.stack_id;
        ASSERT_EQ(k.count, it->second.first) << "stack " << r.stack_id;
        ASSERT_EQ(k.weight, it->second.second) << "stack " << r.stack_id;
        continue;
      }
      ++pairs;
      auto it = ref.pairs.find({r.stack_id, k.key.pid, std::stoul(k.key.comm.substr(1))});
      ASSERT_NE(it, ref.pairs.end()) << "stack " << r.stack_id << " pid " << k.key.pid;
      ASSERT_EQ(k.count, it->second.first) << "stack " << r.stack_id << " pid " << k.key.pid;
      ASSERT_EQ(k.weight, it->second.second) << "stack " << r.stack_id << " pid " << k.key.pid;
      if (i > 0 && !r.by[i - 1].other) {
        const KeyCount& p = r.by[i - 1];
        ASSERT_TRUE(p.weight > k.weight || (p.weight == k.weight && p.count >= k.count));
      }
    }
    ASSERT_EQ(count, r.ref_count) << "stack " << r.stack_id << ": keys sum to its count";
    ASSERT_EQ(weight, r.weight) << "stack " << r.stack_id << ": and to its weight";
  }
  TableStats st;
  s.add_counts(st);
  ASSERT_EQ(pairs, ref.pairs.size());
  ASSERT_EQ(st.key_pairs, ref.pairs.size());
  ASSERT_EQ(st.key_overflow, ref.overflow);
}

TEST(StackStore, KeysSumToEachStacksCountAtEveryMomentPastTheCap) {
  std::mt19937 rng(13);
  constexpr uint32_t kCap = 300, kIds = 512;
  StackStore s(kIds, kPidComm, kCap);
  std::vector<uint32_t> comms;
  for (int i = 0; i < 8; ++i) comms.push_back(s.strings().intern("c" + std::to_string(i)));
  Reference ref(kCap);
  std::set<uint32_t> known;
  for (int round = 0; round < 40; ++round) {
    for (int i = 0; i < 2000; ++i) {
      // Runs of one pair (the cache), hot stacks and keys, and a long tail.
      uint32_t id = rng() % 4 ? rng() % 16 : rng() % kIds;
      uint32_t pid = rng() % 3 ? rng() % 4 : rng() % 200;
      uint32_t comm = pid % comms.size();
      uint64_t w = rng() % 5 ? 1 : rng() % 100000;  // weights of 0 too
      EventKey k = key_of(pid, comms[comm]);
      k.tid = rng();  // not in the spec
      for (uint32_t run = rng() % 4; run-- > 0;) {
        if (!s.count(id, k, w)) {
          if (rng() % 8 == 0) {  // a taken-over table's stack, now and then
            uint64_t before = rng() % 50;
            s.insert(id, {id}, before);
            ref.other[id].first += before;
            ref.other[id].second += before;
            ASSERT_TRUE(s.count(id, k, w));
          } else {
            s.insert(id, {id}, k, w);
          }
          known.insert(id);
        }
        ref.add(id, pid, comm, w);
      }
    }
    ASSERT_NO_FATAL_FAILURE(expect_matches(s, ref)) << "round " << round;
  }
  TableStats st;
  s.add_counts(st);
  EXPECT_EQ(st.key_pairs, kCap) << "the workload reached the cap";
  EXPECT_GT(st.key_overflow, 1000u);
  EXPECT_EQ(s.size(), known.size());
}

size_t heap_bytes() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;  // in use from the arenas, and in mmapped blocks
}

// The default cap's cost: the pair table's bytes a pair, by the allocator.
TEST(StackStore, MemoryPerKeyPair) {
  constexpr uint32_t kStacks = 1024;
  StackStore s(1 << 16);
  for (uint32_t id = 0; id < kStacks; ++id) s.insert(id, {1, 2, 3, 4, 5, 6, 7, 8}, 1);
  size_t before = heap_bytes();
  TableStats st;
  for (uint32_t pid = 1; st.key_pairs < StackStore::kDefaultMaxKeyPairs; ++pid) {
    s.count(pid % kStacks, key_of(pid), 1);
    s.add_counts(st);
  }
  double per_pair = double(heap_bytes() - before) / StackStore::kDefaultMaxKeyPairs;
  std::cout << "[ figures  ] " << StackStore::kDefaultMaxKeyPairs
            << " pairs (the default cap): " << per_pair << " bytes a pair, "
            << (heap_bytes() - before) / 1024 << " KiB\n";
  EXPECT_LE(per_pair, 65.0) << "48-byte slots, 3/4 full, and the allocator's rounding";
  EXPECT_LE(heap_bytes() - before, 4u << 20) << "the default cap costs a few MB at most";
}

}  // namespace
}  // namespace stackmapd
