// SPDX-License-Identifier: GPL-2.0
// --trace: reads the entries of a batch's trace buffer (abi.h, smt_trace_buf)
// back into smt_trace_records, resuming where the last read of the same
// buffer stopped: the daemon reads a buffer in place part by part, then the
// rest when it arrives whole in the ring.
#pragma once

#include <cstdint>

#include "stackmapd/abi.h"

namespace stackmapd {

// Where the reading of one batch's buffers stands.
struct TraceCursor {
  uint32_t n = 0;       // SMT_BATCH_SEQ's n of the buffer being read
  uint32_t offset = 0;  // bytes of its data[] read
  smt_trace_context who{};
  uint64_t ts = 0;
};

enum class TraceRead { kDone, kStopped, kBad };

// Reads data[offset, bytes) of buffer c.n, an event at a time into `r`
// (cpu: the batch's), calling take(r) for each: when it returns false the
// cursor stays before that event, to be read again. kBad: a malformed entry
// (the rest of the buffer cannot be read).
template <typename Take>
TraceRead read_trace(TraceCursor& c, const char* data, uint32_t bytes, uint16_t cpu,
                     smt_trace_record& r, Take&& take);

// The entry at data[c.offset]: its record in r, the offset after it in next
// and the context it leaves in who; false if malformed. c is not changed.
bool read_trace_entry(const TraceCursor& c, const char* data, uint32_t bytes, uint16_t cpu,
                      smt_trace_record& r, uint32_t& next, smt_trace_context& who);

template <typename Take>
TraceRead read_trace(TraceCursor& c, const char* data, uint32_t bytes, uint16_t cpu,
                     smt_trace_record& r, Take&& take) {
  while (c.offset < bytes) {
    uint32_t next;
    smt_trace_context who;
    if (!read_trace_entry(c, data, bytes, cpu, r, next, who)) return TraceRead::kBad;
    if (!take(static_cast<const smt_trace_record&>(r))) return TraceRead::kStopped;
    c.offset = next;
    c.who = who;
    c.ts = r.ts_ns;
  }
  return TraceRead::kDone;
}

}  // namespace stackmapd
