// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/drop_bursts.h"

#include <gtest/gtest.h>

#include <optional>

namespace stackmapd {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A clock of the test's own: looks every 250 ms, as BpfSession::drain() does.
class DropBurstsTest : public ::testing::Test {
 protected:
  std::optional<DropBursts::Burst> look(uint64_t total) {
    now_ += milliseconds(250);
    return bursts_.observe(now_, total);
  }
  // Looks until `quiet_for` passed with `total` unchanged; what was reported.
  std::vector<DropBursts::Burst> idle(uint64_t total, DropBursts::Clock::duration quiet_for) {
    std::vector<DropBursts::Burst> out;
    for (auto end = now_ + quiet_for; now_ < end;)
      if (auto b = look(total)) out.push_back(*b);
    return out;
  }

  DropBursts bursts_{seconds(2), seconds(30)};
  DropBursts::Clock::time_point now_{};
};

TEST_F(DropBurstsTest, OneReportPerBurstWithItsCountAndSpan) {
  EXPECT_FALSE(look(500)) << "drops before the first look are where counting starts";
  EXPECT_TRUE(idle(500, seconds(5)).empty());
  // 4 s of drops: 16 looks, each finding more.
  uint64_t total = 500;
  for (int i = 0; i < 16; ++i) EXPECT_FALSE(look(total += 1801)) << "said while still dropping";
  const auto reports = idle(total, seconds(3));
  ASSERT_EQ(reports.size(), 1u) << "once, after the quiet period";
  EXPECT_EQ(reports[0].dropped, 16u * 1801);
  EXPECT_DOUBLE_EQ(reports[0].seconds, 4.0);
  EXPECT_TRUE(idle(total, seconds(60)).empty()) << "nothing more without new drops";

  // A second burst is said again: not silent after the first.
  EXPECT_FALSE(look(total += 7));
  const auto again = idle(total, seconds(3));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].dropped, 7u);
  EXPECT_DOUBLE_EQ(again[0].seconds, 0.25);
}

TEST_F(DropBurstsTest, ShortPausesDoNotSplitABurst) {
  look(0);
  uint64_t total = 0;
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(look(total += 100));
    EXPECT_TRUE(idle(total, milliseconds(1500)).empty()) << "1.5 s is no quiet period";
  }
  const auto reports = idle(total, seconds(3));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].dropped, 500u);
}

TEST_F(DropBurstsTest, AnEndlessBurstIsSaidEveryLongestPeriod) {
  look(0);
  uint64_t total = 0;
  int said = 0;
  uint64_t dropped = 0;
  for (int i = 0; i < 4 * 95; ++i)  // 95 s of drops
    if (auto b = look(total += 10)) {
      ++said;
      dropped += b->dropped;
      EXPECT_DOUBLE_EQ(b->seconds, 30.0);
    }
  EXPECT_EQ(said, 3);
  auto last = bursts_.finish();
  ASSERT_TRUE(last) << "the end says what the last report left";
  EXPECT_EQ(dropped + last->dropped, total);
  EXPECT_FALSE(bursts_.finish());
}

TEST_F(DropBurstsTest, FinishSaysTheOpenBurstOnly) {
  look(0);
  EXPECT_FALSE(bursts_.finish()) << "no drops, nothing to say";
  look(40);
  auto b = bursts_.finish();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->dropped, 40u);
  EXPECT_TRUE(idle(40, seconds(5)).empty()) << "said once";
}

TEST_F(DropBurstsTest, ACountStartingOverEndsTheBurst) {
  look(0);
  look(1000);
  auto b = look(3);  // counters cleared: the burst so far, then counting from 3
  ASSERT_TRUE(b);
  EXPECT_EQ(b->dropped, 1000u);
  look(5);
  const auto reports = idle(5, seconds(3));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].dropped, 2u);
}

}  // namespace
}  // namespace stackmapd
