// SPDX-License-Identifier: GPL-2.0
// The ring's records are told apart by the kind that leads each (abi.h,
// smt_record_kind), never by size alone: a record whose kind is unknown, or
// whose size is not its kind's, is of no kind (the consumer counts it bad).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "stackmapd/abi.h"

namespace {

// A record of `size` bytes that starts with `kind`.
std::vector<char> record(uint32_t kind, size_t size) {
  std::vector<char> r(size);
  std::memcpy(r.data(), &kind, std::min(size, sizeof(kind)));
  return r;
}

uint32_t kind_of(const std::vector<char>& r) { return smt_record_kind(r.data(), r.size()); }

TEST(RingRecords, EachKindAtItsOwnSize) {
  EXPECT_EQ(kind_of(record(SMT_RECORD_COUNT, sizeof(smt_count_record))), SMT_RECORD_COUNT);
  EXPECT_EQ(kind_of(record(SMT_RECORD_STACK, sizeof(smt_stack_record))), SMT_RECORD_STACK);
  EXPECT_EQ(kind_of(record(SMT_RECORD_NAME, sizeof(smt_name_record))), SMT_RECORD_NAME);
  EXPECT_EQ(kind_of(record(SMT_RECORD_EVENT, sizeof(smt_event_record))), SMT_RECORD_EVENT);
  for (uint32_t bytes : {0u, 4u, 12u, SMT_TRACE_BYTES})
    EXPECT_EQ(kind_of(record(SMT_RECORD_TRACE, SMT_TRACE_RECORD_SIZE(bytes))), SMT_RECORD_TRACE)
        << bytes;
}

TEST(RingRecords, TheKindIsWhereEachRecordStarts) {
  smt_stack_record s{};
  s.counts.event.kind = SMT_RECORD_STACK;
  EXPECT_EQ(smt_record_kind(&s, sizeof(s)), SMT_RECORD_STACK);
  smt_count_record c{};
  c.event.kind = SMT_RECORD_COUNT;
  EXPECT_EQ(smt_record_kind(&c, sizeof(c)), SMT_RECORD_COUNT);
  smt_name_record n{};
  n.kind = SMT_RECORD_NAME;
  EXPECT_EQ(smt_record_kind(&n, sizeof(n)), SMT_RECORD_NAME);
  smt_trace_buf t{};
  t.kind = SMT_RECORD_TRACE;
  EXPECT_EQ(smt_record_kind(&t, SMT_TRACE_RECORD_SIZE(0)), SMT_RECORD_TRACE);
}

TEST(RingRecords, ASizeThatIsNotItsKindsIsNoRecord) {
  // Each kind at every other fixed kind's size, and one byte off its own.
  const size_t sizes[] = {sizeof(smt_count_record), sizeof(smt_stack_record),
                          sizeof(smt_name_record), sizeof(smt_event_record)};
  const uint32_t kinds[] = {SMT_RECORD_COUNT, SMT_RECORD_STACK, SMT_RECORD_NAME, SMT_RECORD_EVENT};
  for (size_t k = 0; k < 4; ++k) {
    for (size_t s = 0; s < 4; ++s) {
      if (s == k) continue;
      EXPECT_EQ(kind_of(record(kinds[k], sizes[s])), SMT_RECORD_NONE) << k << " " << s;
    }
    EXPECT_EQ(kind_of(record(kinds[k], sizes[k] + 8)), SMT_RECORD_NONE) << k;
    EXPECT_EQ(kind_of(record(kinds[k], sizes[k] - 8)), SMT_RECORD_NONE) << k;
  }
  EXPECT_EQ(kind_of(record(SMT_RECORD_TRACE, SMT_TRACE_HEADER - 4)), SMT_RECORD_NONE);
}

TEST(RingRecords, AnUnknownKindOrNoRoomForOneIsNoRecord) {
  for (uint32_t kind : {uint32_t{SMT_RECORD_NONE}, SMT_RECORD_TRACE + 1u, 0xffffffffu})
    for (size_t size : {sizeof(smt_count_record), sizeof(smt_stack_record), sizeof(smt_name_record),
                        size_t{SMT_TRACE_RECORD_SIZE(8)}})
      EXPECT_EQ(kind_of(record(kind, size)), SMT_RECORD_NONE) << kind << " " << size;
  for (size_t size = 0; size < sizeof(uint32_t); ++size)
    EXPECT_EQ(kind_of(record(SMT_RECORD_NAME, size)), SMT_RECORD_NONE) << size;
}

}  // namespace
