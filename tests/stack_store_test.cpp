// SPDX-License-Identifier: GPL-2.0
#include "daemon/model/stack_store.h"

#include <gtest/gtest.h>

#include "daemon/sys/error.h"

namespace stackmapd {
namespace {

TEST(StackStore, CountsKnownIdsAndAsksForNewOnes) {
  StackStore s(64);
  EXPECT_FALSE(s.count(40));
  s.insert(40, {1, 2, 3});
  EXPECT_TRUE(s.count(40));
  EXPECT_TRUE(s.count(40));
  s.insert(3, {4});
  auto snap = s.snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].stack_id, 3u) << "ordered by stack_id";
  EXPECT_EQ(snap[1].ref_count, 3u);
  EXPECT_EQ(snap[1].ips, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(s.total_events(), 4u);
}

TEST(StackStore, RejectsOutOfRangeAndDuplicateIds) {
  StackStore s(8);
  EXPECT_FALSE(s.count(8));
  EXPECT_FALSE(s.valid_id(8));
  EXPECT_THROW(s.insert(8, {1}), Error);
  s.insert(2, {1});
  EXPECT_THROW(s.insert(2, {1}), Error);
}

TEST(StackStore, ClearForgetsEverything) {
  StackStore s(8);
  s.insert(1, {1});
  s.clear();
  EXPECT_EQ(s.size(), 0u);
  EXPECT_FALSE(s.count(1));
  s.insert(1, {2});
  EXPECT_EQ(s.snapshot()[0].ips[0], 2u);
}

}  // namespace
}  // namespace stackmapd
