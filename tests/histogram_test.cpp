// SPDX-License-Identifier: GPL-2.0
// --hist's buckets: the function the BPF side keys counts by
// (stackmapd/hist.h, compiled here as it is there), the daemon's recovery of
// a count's bucket from its mean, and bpftrace's names for them.
#include "daemon/model/histogram.h"

#include <gtest/gtest.h>

#include <random>

#include "daemon/model/stack_store.h"
#include "daemon/resolve/resolver.h"
#include "daemon/sys/error.h"
#include "stackmapd/hist.h"

namespace stackmapd {
namespace {

// The reference: bpftrace's log2 index less its negative bucket, by a loop.
uint32_t slow_bucket(uint64_t v) {
  uint32_t b = 0;
  while (v) {
    ++b;
    v >>= 1;
  }
  return b;
}

TEST(Histogram, BucketIsTheValuesBitWidthAtEveryPowerOfTwoAndAroundIt) {
  EXPECT_EQ(smt_hist_bucket(0), 0u);
  EXPECT_EQ(smt_hist_bucket(1), 1u);
  EXPECT_EQ(smt_hist_bucket(~0ull), 64u);
  for (uint32_t p = 0; p < 64; ++p) {
    const uint64_t v = uint64_t{1} << p;
    for (uint64_t x : {v - 1, v, v + 1, v | (v - 1)}) {
      EXPECT_EQ(smt_hist_bucket(x), slow_bucket(x)) << x;
      EXPECT_LE(smt_hist_lower(smt_hist_bucket(x)), x) << x;
    }
    EXPECT_EQ(smt_hist_lower(p + 1), v);
  }
  std::mt19937_64 rng(29);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t x = rng() >> (rng() % 64);
    ASSERT_EQ(smt_hist_bucket(x), slow_bucket(x)) << x;
  }
}

TEST(Histogram, TheMeanOfACountIsInItsEventsBucket) {
  std::mt19937_64 rng(7);
  for (uint32_t b = 0; b < SMT_HIST_BUCKETS; ++b) {
    const uint64_t lo = smt_hist_lower(b), width = b < 2 ? 1 : lo;
    uint64_t sum = 0, n = 0;
    for (int i = 0; i < 50; ++i) {
      const uint64_t v = lo + rng() % width;
      if (sum + v < sum) break;  // the BPF side starts a new count here
      sum += v;
      ++n;
    }
    EXPECT_EQ(smt_hist_bucket(sum / n), b) << n << " events of bucket " << b;
  }
}

TEST(Histogram, ResolverKeysACountByTheBucketOfItsMean) {
  StringTable strings;
  Resolver r(strings, KeySpec{{KeyField::bucket}});
  smt_event_record e{};
  e.weight = 3 * 1500;  // three events of [1K, 2K)
  EXPECT_EQ(r.key_of(e, 3).bucket, smt_hist_bucket(1500));
  Resolver off(strings, KeySpec{{KeyField::pid}});
  EXPECT_EQ(off.key_of(e, 3).bucket, 0u) << "no bucket without --hist";
}

TEST(Histogram, StoreSplitsAStackByBucket) {
  StackStore s(16, KeySpec{{KeyField::comm, KeyField::bucket}});
  EventKey a, b;
  a.comm = b.comm = s.strings().intern("dd");
  a.bucket = 3;
  b.bucket = 12;
  s.insert(1, {0x10}, a, 5);
  s.count(1, b, 2048);
  s.count(1, a, 6);
  const std::vector<StackRecord> snap = s.snapshot({});
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].by.size(), 2u);
  EXPECT_EQ(snap[0].by[0].key.bucket, 12u);
  EXPECT_EQ(snap[0].by[1].key.bucket, 3u);
  EXPECT_EQ(snap[0].by[1].count, 2u);
  EXPECT_EQ(snap[0].by[1].key.comm, "dd");
}

TEST(Histogram, NamesBucketsAsBpftraceDoes) {
  EXPECT_EQ(hist_range(0), "[0]");
  EXPECT_EQ(hist_range(1), "[1]");
  EXPECT_EQ(hist_range(2), "[2, 4)");
  EXPECT_EQ(hist_range(3), "[4, 8)");
  EXPECT_EQ(hist_range(10), "[512, 1K)");
  EXPECT_EQ(hist_range(11), "[1K, 2K)");
  EXPECT_EQ(hist_range(21), "[1M, 2M)");
  EXPECT_EQ(hist_range(64), "[8E, 16E)");
}

TEST(Histogram, ByBucketIsRefused) {
  try {
    KeySpec::parse("comm,bucket");
    FAIL() << "--by bucket accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--by bucket: the buckets come with --hist [FIELD]; drop bucket from --by");
  }
}

}  // namespace
}  // namespace stackmapd
