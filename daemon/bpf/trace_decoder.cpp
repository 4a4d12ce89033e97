// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/trace_decoder.h"

#include <cstring>

namespace stackmapd {

namespace {

uint64_t u64_at(const char* p) {
  uint32_t w[2];
  std::memcpy(w, p, sizeof(w));
  return static_cast<uint64_t>(w[1]) << 32 | w[0];
}

}  // namespace

bool read_trace_entry(const TraceCursor& c, const char* data, uint32_t bytes, uint16_t cpu,
                      smt_trace_record& r, uint32_t& next, smt_trace_context& who) {
  uint32_t at = c.offset;
  smt_trace_entry te;
  if (bytes - at < sizeof(te)) return false;
  std::memcpy(&te, data + at, sizeof(te));
  at += sizeof(te);
  const uint32_t raw = (te.raw_len + 3u) & ~3u;
  const uint32_t need = (te.flags & SMT_TE_CONTEXT ? sizeof(who) : 0) +
                        (te.flags & SMT_TE_TS ? 8 : 0) + (te.flags & SMT_TE_WEIGHT ? 8 : 0) + raw;
  // A buffer starts with who and when.
  if ((te.flags & ~(SMT_TE_CONTEXT | SMT_TE_TS | SMT_TE_WEIGHT | SMT_TE_WHOLE)) ||
      te.raw_len > SMT_TRACE_RAW_MAX || bytes - at < need ||
      (c.offset == 0 && (te.flags & (SMT_TE_CONTEXT | SMT_TE_TS)) != (SMT_TE_CONTEXT | SMT_TE_TS)))
    return false;
  who = c.who;
  if (te.flags & SMT_TE_CONTEXT) {
    std::memcpy(&who, data + at, sizeof(who));
    at += sizeof(who);
  }
  r.ts_ns = c.ts + te.ts_delta;
  if (te.flags & SMT_TE_TS) {
    r.ts_ns = u64_at(data + at);
    at += 8;
  }
  smt_event_record& e = r.event;
  e.weight = 1;
  if (te.flags & SMT_TE_WEIGHT) {
    e.weight = u64_at(data + at);
    at += 8;
  }
  e.kind = SMT_RECORD_NONE;
  e.stack_id = te.stack_id;
  e.epoch = who.epoch;
  e.tgid = who.tgid;
  e.tid = who.tid;
  e.cgroup_id = static_cast<uint64_t>(who.cgroup_hi) << 32 | who.cgroup_lo;
  e.name = who.name;
  e.source = who.source;
  e.cpu = cpu;
  e.user_stack_id = who.user_stack_id;
  r.raw_len = te.raw_len;
  r.flags = te.flags & SMT_TE_WHOLE;
  std::memcpy(r.raw, data + at, te.raw_len);
  next = at + raw;
  return true;
}

}  // namespace stackmapd
