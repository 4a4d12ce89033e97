// SPDX-License-Identifier: GPL-2.0
// The unwind rows' bookkeeping (daemon/unwind/row_allocator.h) without the
// kernel: tables of made-up sizes, a clock and last uses the test decides.
#include "daemon/unwind/row_allocator.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace stackmapd {
namespace {

using Table = RowAllocator::Table;
constexpr uint64_t kInUse = RowAllocator::kInUseTicks;

Table table(size_t rows) {
  auto t = std::make_shared<CfiTable>();
  t->rows.resize(rows);
  return t;
}

// An allocator of `max_rows` whose tables were last walked when `used` says.
struct Rows {
  explicit Rows(uint32_t max_rows) : alloc(max_rows) {}
  std::optional<uint32_t> place(const Table& t, uint64_t now) {
    const auto p = alloc.place(t, now, [this](const Table& x) {
      auto it = used.find(x);
      return it == used.end() ? 0 : it->second;
    });
    return p ? std::optional<uint32_t>(p->first) : std::nullopt;
  }
  std::map<Table, uint64_t> used;
  RowAllocator alloc;
};

TEST(RowAllocator, PlacesEachTableOnceInTheFirstRunThatHoldsIt) {
  RowAllocator alloc(10);
  const Table a = table(3), b = table(4);
  const auto none = [](const Table&) { return uint64_t{0}; };
  const std::optional<RowAllocator::Placement> pa = alloc.place(a, 100, none);
  ASSERT_TRUE(pa);
  EXPECT_EQ(pa->first, 0u);
  EXPECT_TRUE(pa->fresh) << "new rows: the writer copies them";
  const std::optional<RowAllocator::Placement> pb = alloc.place(b, 100, none);
  ASSERT_TRUE(pb);
  EXPECT_EQ(pb->first, 3u);
  EXPECT_TRUE(pb->fresh);
  // Another file with a's table (a copy of the binary): the same rows, not written again.
  const std::optional<RowAllocator::Placement> again = alloc.place(a, 100, none);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->first, 0u);
  EXPECT_FALSE(again->fresh);
  EXPECT_EQ(alloc.counts().rows, 7u);
  EXPECT_EQ(alloc.counts().tables, 2u);
}

TEST(RowAllocator, TheLeastRecentlyUsedTableMakesRoom) {
  Rows r(10);
  const Table a = table(4), b = table(4), c = table(4);
  ASSERT_EQ(r.place(a, 100), 0u);
  ASSERT_EQ(r.place(b, 100), 4u);
  // Later, b walked recently and a long ago: a goes, b stays where it is.
  r.used[a] = 110;
  r.used[b] = 100 + 10 * kInUse;
  EXPECT_EQ(r.place(c, 100 + 10 * kInUse), 0u) << "c in a's rows";
  EXPECT_EQ(r.alloc.take_evicted(), std::vector<Table>{a});
  EXPECT_TRUE(r.alloc.take_evicted().empty()) << "taken once";
  EXPECT_EQ(r.alloc.counts().tables_evicted, 1u);
  EXPECT_EQ(r.alloc.counts().rows, 8u);
  // a again: b's rows are in use, c was just placed: refused, counted.
  EXPECT_FALSE(r.place(a, 100 + 10 * kInUse + 1));
  EXPECT_EQ(r.alloc.counts().rows_full, 1u);
  EXPECT_TRUE(r.alloc.take_evicted().empty()) << "nothing evicted for a refusal";
}

TEST(RowAllocator, ATableInUseIsNeverEvicted) {
  Rows r(8);
  const Table a = table(8), b = table(2);
  ASSERT_EQ(r.place(a, 100), 0u);
  r.used[a] = 100 + kInUse;  // walked since: still in use at the next call
  EXPECT_FALSE(r.place(b, 100 + kInUse + 1));
  EXPECT_TRUE(r.alloc.take_evicted().empty());
  // Unused for kInUseTicks: now it goes.
  EXPECT_EQ(r.place(b, 100 + 2 * kInUse), 0u);
  EXPECT_EQ(r.alloc.take_evicted(), std::vector<Table>{a});
}

TEST(RowAllocator, EvictsUntilOneRunHoldsTheNewTable) {
  Rows r(9);
  const Table a = table(3), b = table(3), c = table(3), big = table(6);
  ASSERT_EQ(r.place(a, 100), 0u);
  ASSERT_EQ(r.place(b, 100), 3u);
  ASSERT_EQ(r.place(c, 100), 6u);
  r.used[a] = 200;  // the oldest but one
  r.used[b] = 150;  // the oldest
  r.used[c] = 250;
  // b's 3 rows alone are too few; a's join them: [0, 6).
  EXPECT_EQ(r.place(big, 400), 0u);
  EXPECT_EQ(r.alloc.take_evicted(), (std::vector<Table>{b, a}));
  EXPECT_EQ(r.alloc.counts().rows, 9u);
}

TEST(RowAllocator, ATableLargerThanTheBudgetIsRefused) {
  Rows r(4);
  EXPECT_FALSE(r.place(table(5), 100));
  EXPECT_EQ(r.alloc.counts().rows_full, 1u);
  EXPECT_EQ(r.place(table(4), 100), 0u) << "the budget untouched by the refusal";
}

}  // namespace
}  // namespace stackmapd
