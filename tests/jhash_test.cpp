// SPDX-License-Identifier: GPL-2.0
#include "stackmapd/jhash.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace {

TEST(Jhash2, MatchesKernelKnownValue) {
  // jhash2({1, 2, 3}, 3, 0) as include/linux/jhash.h computes it.
  const __u32 k[] = {1, 2, 3};
  EXPECT_EQ(smt_jhash2(k, 3, 0), 0xa46158f5u);
}

TEST(Jhash2, EmptyInputIsInitvalPlusSeed) {
  // With len 0 the kernel returns c untouched: JHASH_INITVAL + seed.
  EXPECT_EQ(smt_jhash2(nullptr, 0, 0), 0xdeadbeefu);
  EXPECT_EQ(smt_jhash2(nullptr, 0, 5), 0xdeadbeefu + 5);
}

TEST(Jhash2, SeedAndEveryWordMatter) {
  const __u32 k[] = {1, 2, 3, 4, 5, 6, 7};
  __u32 base = smt_jhash2(k, 7, 0);
  EXPECT_NE(base, smt_jhash2(k, 7, 1));
  for (int i = 0; i < 7; ++i) {
    __u32 copy[7];
    std::memcpy(copy, k, sizeof(copy));
    copy[i] ^= 1;
    EXPECT_NE(base, smt_jhash2(copy, 7, 0)) << "word " << i;
  }
}

// The frames hashed as u64 must give what the kernel gets by casting the same
// memory to u32 words (little-endian): every length, every tail case.
TEST(Jhash2, FramesEqualTheirLittleEndianWordView) {
  std::mt19937_64 rng(42);
  for (__u32 nr = 1; nr <= SMT_MAX_DEPTH; ++nr) {
    __u64 ips[SMT_MAX_DEPTH];
    for (auto& ip : ips) ip = rng() | 0xffffffff80000000ull;
    __u32 words[2 * SMT_MAX_DEPTH];
    std::memcpy(words, ips, sizeof(words));
    __u32 seed = static_cast<__u32>(rng());
    EXPECT_EQ(smt_jhash2_ips(ips, nr, seed), smt_jhash2(words, nr * 2, seed)) << "nr " << nr;
  }
}

}  // namespace
