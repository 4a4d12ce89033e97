// SPDX-License-Identifier: GPL-2.0
// The trace buffer's entries (abi.h, smt_trace_buf) read back as the BPF
// side writes them, whole and part by part.
#include "daemon/bpf/trace_decoder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace stackmapd {
namespace {

// Appends one entry as bpf/trace_buf.bpf.h's send_trace() lays it out.
void put(std::vector<char>& buf, uint32_t delta, uint32_t stack_id, uint16_t flags,
         const smt_trace_context* who, uint64_t ts, uint64_t weight, const std::string& raw) {
  const smt_trace_entry te{delta, stack_id, static_cast<uint16_t>(raw.size()), flags};
  auto add = [&](const void* p, size_t n) {
    buf.insert(buf.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
  };
  add(&te, sizeof(te));
  if (flags & SMT_TE_CONTEXT) add(who, sizeof(*who));
  const uint32_t tsw[2] = {static_cast<uint32_t>(ts), static_cast<uint32_t>(ts >> 32)};
  if (flags & SMT_TE_TS) add(tsw, sizeof(tsw));
  const uint32_t ww[2] = {static_cast<uint32_t>(weight), static_cast<uint32_t>(weight >> 32)};
  if (flags & SMT_TE_WEIGHT) add(ww, sizeof(ww));
  add(raw.data(), raw.size());
  buf.resize((buf.size() + 3) & ~size_t{3});
}

smt_trace_context who(uint32_t tid) {
  smt_trace_context c{};
  c.tgid = 100;
  c.tid = tid;
  c.cgroup_lo = 0x89abcdef;
  c.cgroup_hi = 0x1234567;
  c.name = 7;
  c.epoch = 2;
  c.user_stack_id = SMT_NO_USER_STACK;
  c.source = 1;
  return c;
}

std::vector<smt_trace_record> read_all(TraceCursor& c, const std::vector<char>& buf,
                                       size_t stop_after = SIZE_MAX) {
  std::vector<smt_trace_record> out;
  smt_trace_record r;
  read_trace(c, buf.data(), static_cast<uint32_t>(buf.size()), 1, r,
             [&](const smt_trace_record& e) {
               if (out.size() >= stop_after) return false;
               out.push_back(e);
               return true;
             });
  return out;
}

TEST(TraceDecoder, ReadsContextTimeWeightAndRawBytes) {
  std::vector<char> buf;
  const smt_trace_context a = who(101), b = who(102);
  put(buf, 0, 31, SMT_TE_CONTEXT | SMT_TE_TS, &a, 5000000000123ull, 1, "abcde");
  put(buf, 40, 32, 0, nullptr, 0, 1, "xy");
  put(buf, 7, 33, SMT_TE_CONTEXT | SMT_TE_WEIGHT, &b, 0, 1ull << 40, "");
  put(buf, 0, 34, SMT_TE_TS | SMT_TE_WHOLE, nullptr, 9000000000000ull, 1, "12345678");
  TraceCursor c;
  const auto r = read_all(c, buf);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(c.offset, buf.size());
  EXPECT_EQ(r[0].ts_ns, 5000000000123ull);
  EXPECT_EQ(r[0].event.stack_id, 31u);
  EXPECT_EQ(r[0].event.tid, 101u);
  EXPECT_EQ(r[0].event.cgroup_id, 0x123456789abcdefull);
  EXPECT_EQ(r[0].event.cpu, 1u);
  EXPECT_EQ(r[0].event.epoch, 2u);
  EXPECT_EQ(r[0].event.weight, 1u);
  EXPECT_EQ(std::string(r[0].raw, r[0].raw_len), "abcde");
  EXPECT_EQ(r[1].ts_ns, 5000000000163ull);
  EXPECT_EQ(r[1].event.tid, 101u);  // the context carries on
  EXPECT_EQ(std::string(r[1].raw, r[1].raw_len), "xy");
  EXPECT_EQ(r[2].ts_ns, 5000000000170ull);
  EXPECT_EQ(r[2].event.tid, 102u);
  EXPECT_EQ(r[2].event.weight, 1ull << 40);
  EXPECT_EQ(r[2].raw_len, 0u);
  EXPECT_EQ(r[3].ts_ns, 9000000000000ull);
  EXPECT_EQ(r[3].event.tid, 102u);
  EXPECT_EQ(r[3].event.weight, 1u);
  EXPECT_EQ(r[0].flags, 0u);
  EXPECT_EQ(r[3].flags, SMT_TE_WHOLE);  // stack_id 34 names its frames' record
  EXPECT_EQ(r[3].event.stack_id, 34u);
}

TEST(TraceDecoder, ResumesWhereItStopped) {
  std::vector<char> buf;
  const smt_trace_context a = who(101);
  put(buf, 0, 1, SMT_TE_CONTEXT | SMT_TE_TS, &a, 1000, 1, "a");
  put(buf, 10, 2, 0, nullptr, 0, 1, "b");
  const size_t first_two = buf.size();
  put(buf, 10, 3, 0, nullptr, 0, 1, "c");
  TraceCursor c;
  // In place, while the third event is not written yet; then a stop.
  std::vector<char> part(buf.begin(), buf.begin() + first_two);
  EXPECT_EQ(read_all(c, part, 1).size(), 1u);
  EXPECT_EQ(read_all(c, part).size(), 1u);
  EXPECT_EQ(c.offset, first_two);
  const auto rest = read_all(c, buf);  // then the buffer sent whole
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].event.stack_id, 3u);
  EXPECT_EQ(rest[0].ts_ns, 1020u);
  EXPECT_EQ(rest[0].event.tid, 101u);
}

TEST(TraceDecoder, RefusesMalformedEntries) {
  const smt_trace_context a = who(101);
  smt_trace_record r;
  auto take = [](const smt_trace_record&) { return true; };
  std::vector<char> no_start;  // a buffer's first entry says who and when
  put(no_start, 5, 1, 0, nullptr, 0, 1, "a");
  TraceCursor c;
  EXPECT_EQ(read_trace(c, no_start.data(), no_start.size(), 0, r, take), TraceRead::kBad);
  std::vector<char> cut;  // raw bytes past the buffer's end
  put(cut, 0, 1, SMT_TE_CONTEXT | SMT_TE_TS, &a, 1, 1, "abcdefgh");
  TraceCursor d;
  EXPECT_EQ(read_trace(d, cut.data(), cut.size() - 4, 0, r, take), TraceRead::kBad);
  std::vector<char> flags;  // a flag of no meaning
  put(flags, 0, 1, SMT_TE_CONTEXT | SMT_TE_TS | SMT_TE_WHOLE << 1, &a, 1, 1, "");
  TraceCursor e;
  EXPECT_EQ(read_trace(e, flags.data(), flags.size(), 0, r, take), TraceRead::kBad);
  EXPECT_EQ(e.offset, 0u);
}

}  // namespace
}  // namespace stackmapd
