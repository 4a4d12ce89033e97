// SPDX-License-Identifier: GPL-2.0
// The unwind rows' bookkeeping (daemon/unwind/row_allocator.h) without the
// kernel: tables of made-up sizes, processes whose exit the test decides.
#include "daemon/unwind/row_allocator.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <set>
#include <vector>

namespace stackmapd {
namespace {

using Table = RowAllocator::Table;

Table table(size_t rows) {
  auto t = std::make_shared<CfiTable>();
  t->rows.resize(rows);
  return t;
}

// An allocator of `max_rows` whose processes are gone once in `exited`.
struct Rows {
  explicit Rows(uint32_t max_rows)
      : alloc(max_rows, [this](uint32_t pid) {
          ++asked;
          return exited.count(pid) != 0;
        }) {}
  // The first row of `t` for a process listed with it alone; nullopt when full.
  std::optional<uint32_t> load(uint32_t pid, const Table& t) {
    const std::optional<RowAllocator::Placement> p = alloc.place(t, {});
    if (!p) return std::nullopt;
    alloc.set_users(pid, {t});
    return p->first;
  }
  std::set<uint32_t> exited;
  int asked = 0;  // exit checks made
  RowAllocator alloc;
};

TEST(RowAllocator, PlacesEachTableOnceInTheFirstRunThatHoldsIt) {
  Rows r(10);
  const Table a = table(3), b = table(4);
  const std::optional<RowAllocator::Placement> pa = r.alloc.place(a, {});
  ASSERT_TRUE(pa);
  EXPECT_EQ(pa->first, 0u);
  EXPECT_TRUE(pa->fresh) << "new rows: the writer copies them";
  const std::optional<RowAllocator::Placement> pb = r.alloc.place(b, {a});
  ASSERT_TRUE(pb);
  EXPECT_EQ(pb->first, 3u);
  EXPECT_TRUE(pb->fresh);
  r.alloc.set_users(1, {a, b});
  // A second process mapping a: the same rows, not written again.
  const std::optional<RowAllocator::Placement> again = r.alloc.place(a, {});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->first, 0u);
  EXPECT_FALSE(again->fresh);
  r.alloc.set_users(2, {a});
  const RowCounts c = r.alloc.counts();
  EXPECT_EQ(c.tables, 2u);
  EXPECT_EQ(c.rows, 7u);
  EXPECT_EQ(c.max_rows, 10u);
  EXPECT_EQ(c.rows_full, 0u);
  EXPECT_EQ(r.asked, 0) << "room left: no process checked";
}

TEST(RowAllocator, RowsOfExitedProcessesAreTakenOnlyWhenNeeded) {
  Rows r(10);
  const Table a = table(6), b = table(4), c = table(5);
  ASSERT_EQ(r.load(1, a), 0u);
  r.exited.insert(1);
  ASSERT_EQ(r.load(2, b), 6u) << "fits in the free rows: a stays";
  EXPECT_EQ(r.alloc.counts().tables_freed, 0u);
  EXPECT_TRUE(r.alloc.take_gone().empty());
  EXPECT_EQ(r.load(3, c), 0u) << "c in the exited process's rows";
  EXPECT_EQ(r.alloc.take_gone(), std::vector<uint32_t>{1}) << "its entry to be deleted";
  EXPECT_TRUE(r.alloc.take_gone().empty()) << "taken once";
  const RowCounts n = r.alloc.counts();
  EXPECT_EQ(n.tables_freed, 1u);
  EXPECT_EQ(n.tables, 2u);
  EXPECT_EQ(n.rows, 9u);
  EXPECT_FALSE(r.alloc.place(a, {})) << "a given back: 1 row free, b and c live";
}

TEST(RowAllocator, ATableStaysWhileAnyProcessListedWithItLives) {
  Rows r(8);
  const Table shared = table(6), big = table(5);
  ASSERT_EQ(r.load(1, shared), 0u);
  ASSERT_EQ(r.load(2, shared), 0u);
  r.exited.insert(1);
  EXPECT_FALSE(r.load(3, big)) << "2 lives: its rows stay";
  EXPECT_EQ(r.alloc.counts().rows_full, 1u);
  EXPECT_EQ(r.alloc.counts().tables_freed, 0u);
  EXPECT_EQ(r.alloc.take_gone(), std::vector<uint32_t>{1}) << "1 forgotten all the same";
  r.exited.insert(2);
  EXPECT_EQ(r.load(3, big), 0u);
  EXPECT_EQ(r.alloc.counts().tables_freed, 1u);
}

TEST(RowAllocator, AProcessListedAnewLetsGoOfTheTablesItNoLongerLists) {
  Rows r(10);
  const Table a = table(4), b = table(4), c = table(4);
  ASSERT_EQ(r.load(1, a), 0u);
  // Relisted with a and b (a dlopen): a counted once, still placed.
  ASSERT_TRUE(r.alloc.place(b, {a}));
  r.alloc.set_users(1, {a, b});
  EXPECT_EQ(r.alloc.place(a, {})->first, 0u);
  // Relisted with b only (an exec): a's rows are free to go, 1 living.
  r.alloc.set_users(1, {b});
  EXPECT_EQ(r.load(2, c), 0u) << "c in a's rows";
  EXPECT_EQ(r.alloc.counts().tables_freed, 1u);
  EXPECT_TRUE(r.alloc.take_gone().empty()) << "1 lives: its entry stays";
  // Forgotten (set_users with none): b goes at the next need.
  r.alloc.set_users(1, {});
  EXPECT_EQ(r.load(3, table(4)), 4u) << "in b's rows";
}

TEST(RowAllocator, FullIsNulloptAndCounted) {
  Rows r(10);
  ASSERT_EQ(r.load(1, table(8)), 0u);
  EXPECT_FALSE(r.alloc.place(table(11), {})) << "larger than the map";
  EXPECT_EQ(r.asked, 0) << "no reclaim can make room past max_rows";
  EXPECT_EQ(r.alloc.counts().rows_full, 1u);
  EXPECT_FALSE(r.alloc.place(table(3), {})) << "1 lives";
  EXPECT_EQ(r.asked, 1);
  const RowCounts c = r.alloc.counts();
  EXPECT_EQ(c.rows_full, 2u);
  EXPECT_EQ(c.tables, 1u);
  EXPECT_EQ(c.rows, 8u);
  EXPECT_EQ(r.load(2, table(2)), 8u) << "what fits still does";
}

TEST(RowAllocator, ATableNeedsOneRunOfFreeRows) {
  Rows r(10);
  ASSERT_EQ(r.load(1, table(3)), 0u);
  ASSERT_EQ(r.load(2, table(3)), 3u);
  ASSERT_EQ(r.load(3, table(3)), 6u);
  r.exited = {1, 3};
  // Free: [0, 3) and [6, 10), 7 rows in two runs.
  EXPECT_FALSE(r.load(4, table(5))) << "no run of 5";
  EXPECT_EQ(r.alloc.counts().rows_full, 1u);
  EXPECT_EQ(r.alloc.counts().tables_freed, 2u);
  EXPECT_EQ(r.load(4, table(4)), 6u) << "the first run long enough";
  r.exited = {2, 4};
  // [0, 6) once 2's rows join the run before them.
  EXPECT_EQ(r.load(5, table(6)), 0u);
  EXPECT_EQ(r.alloc.counts().rows, 6u);
}

TEST(RowAllocator, FreedRunsMergeWithTheRunAfterThem) {
  Rows r(9);
  ASSERT_EQ(r.load(1, table(3)), 0u);
  ASSERT_EQ(r.load(2, table(3)), 3u);
  ASSERT_EQ(r.load(3, table(3)), 6u);
  r.exited = {2, 3};
  EXPECT_EQ(r.load(4, table(6)), 3u) << "[3, 6) and [6, 9) as one run";
}

TEST(RowAllocator, FreedRowsFewerThanNeededStillCompleteARun) {
  Rows r(8);
  ASSERT_EQ(r.load(1, table(5)), 0u);
  r.exited.insert(1);
  // 5 rows freed, 3 free after them: one run of 8.
  EXPECT_EQ(r.load(2, table(6)), 0u);
  EXPECT_EQ(r.alloc.counts().rows_full, 0u);
}

// The tables an entry being built lists so far are no process's yet: a later
// table of the same entry that needs room never takes their rows.
TEST(RowAllocator, TheTablesOfTheEntryBeingBuiltAreKept) {
  Rows r(10);
  const Table gone_table = table(6), first = table(3), second = table(5);
  ASSERT_EQ(r.load(1, gone_table), 0u);
  r.exited.insert(1);
  const std::optional<RowAllocator::Placement> f = r.alloc.place(first, {});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->first, 6u);
  const std::optional<RowAllocator::Placement> s = r.alloc.place(second, {first});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->first, 0u) << "in the exited process's rows";
  EXPECT_EQ(r.alloc.counts().tables_freed, 1u) << "the exited process's table only";
  r.alloc.set_users(2, {first, second});
  EXPECT_EQ(r.alloc.place(first, {})->first, 6u) << "first kept its rows";
}

// Placed for an entry the kernel then refused: listed by no process, its
// rows go at the next need.
TEST(RowAllocator, ATableListedByNoEntryIsGivenBack) {
  Rows r(10);
  const Table unlisted = table(6);
  ASSERT_TRUE(r.alloc.place(unlisted, {}));
  EXPECT_EQ(r.load(1, table(5)), 0u);
  EXPECT_EQ(r.alloc.counts().tables_freed, 1u);
  EXPECT_TRUE(r.alloc.take_gone().empty());
}

}  // namespace
}  // namespace stackmapd
