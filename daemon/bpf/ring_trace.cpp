// SPDX-License-Identifier: GPL-2.0
// --trace: the ring consumer's reading of the per-CPU trace buffers, those
// sent whole through the ring and those still open, read in place; and the
// hand-off of their events to the trace sink in time order.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "daemon/bpf/ring_consumer.h"

namespace stackmapd {

bool RingConsumer::take_trace(const smt_trace_record& r, uint32_t batch) {
  smt_event_record e = r.event;
  if (r.flags & SMT_TE_WHOLE) {
    // Counted as its frames were read; stale, they were not kept.
    if (e.epoch != epoch_) {
      ++stale_records_;
      return true;
    }
    const auto it = whole_ids_.find(uint64_t{batch} << 32 | e.stack_id);
    if (it == whole_ids_.end()) return false;
    e.stack_id = it->second;
    whole_ids_.erase(it);
    if (e.stack_id == SMT_NO_STACK_ID) return true;  // past the overflow store
  } else if (!count_event(e, 1)) {
    return true;
  }
  if (!trace_sink_) return true;
  traced_.push_back({e, r.ts_ns, static_cast<uint32_t>(trace_raw_.size()), r.raw_len});
  trace_raw_.insert(trace_raw_.end(), r.raw, r.raw + r.raw_len);
  return true;
}

// A buffer sent whole: the rest of what was read of it in place.
void RingConsumer::on_trace_buf(const void* data, size_t size) {
  struct {
    uint32_t kind, seq, bytes, events;
  } head;  // smt_trace_buf's first fields; data[] is read where it is
  static_assert(sizeof(head) == SMT_TRACE_HEADER && offsetof(smt_trace_buf, data) == sizeof(head));
  std::memcpy(&head, data, sizeof(head));
  const uint32_t batch = SMT_SEQ_BATCH(head.seq), n = head.seq & kSeqMask;
  if (batch >= cursors_.size() || head.bytes > SMT_TRACE_BYTES ||
      size != SMT_TRACE_RECORD_SIZE(head.bytes)) {
    ++bad_records_;
    return;
  }
  // Sent after the copy a snapshot holds (hold_after): read with the rest.
  if (!limit_.empty() && n == limit_[batch]) {
    const char* bytes = static_cast<const char*>(data);
    held_.emplace_back(bytes, bytes + size);
    return;
  }
  TraceCursor& c = cursors_[batch];
  if (c.n != n) c = TraceCursor{n};  // a table taken over: its buffers from here on
  const char* entries = static_cast<const char*>(data) + SMT_TRACE_HEADER;
  const auto cpu = static_cast<uint16_t>(batch / SMT_MAX_NEST);
  // The ring holds each name's announcement before its events.
  const TraceRead read =
      read_trace(c, entries, head.bytes, cpu, scratch_trace_, [&](const smt_trace_record& r) {
        // Its frames came before it in the ring: when they are not here,
        // they never will be.
        if (!take_trace(r, batch)) ++bad_records_;
        return true;
      });
  if (read == TraceRead::kBad) ++bad_records_;
  // The next buffer starts with its own time; until it is read, the batch's
  // unread events are no older than this one's last.
  c = TraceCursor{(n + 1) & kSeqMask, 0, {}, c.ts};
}

bool RingConsumer::read_in_place(const std::vector<smt_batch>& batches, uint64_t read_ns) {
  bool all = true;
  // An event the copies miss began after them, so at read_ns or later,
  // unless its batch is behind: then after that batch's last event read.
  uint64_t before = read_ns;
  for (size_t i = 0; i < batches.size() && i < cursors_.size(); ++i) {
    const smt_trace_buf& t = batches[i].trace;
    TraceCursor& c = cursors_[i];
    if ((t.seq & kSeqMask) != c.n) {  // a buffer it sent is still on its way
      all = false;
      before = std::min(before, c.ts);
      continue;
    }
    if (t.bytes > SMT_TRACE_BYTES || c.offset > t.bytes) {
      ++bad_records_;
      c.offset = std::min(t.bytes, SMT_TRACE_BYTES);
      continue;
    }
    const auto cpu = static_cast<uint16_t>(i / SMT_MAX_NEST);
    const TraceRead read =
        read_trace(c, t.data, t.bytes, cpu, scratch_trace_, [&](const smt_trace_record& r) {
          // Its name's announcement may still wait in the ring. Names come
          // in runs: one lookup per run.
          if (r.event.name != known_name_) {
            if (r.event.name && !resolver_.knows_name(r.event.name)) return false;
            known_name_ = r.event.name;
          }
          // Its frames, sent whole, may still wait in the ring too.
          return take_trace(r, static_cast<uint32_t>(i));
        });
    if (read == TraceRead::kBad) {
      ++bad_records_;
      c.offset = t.bytes;
    }
    if (read == TraceRead::kStopped) {
      all = false;
      before = std::min(before, c.ts);
    }
  }
  if (trace_records_) emit_before_ = std::max(emit_before_, before);
  return all;
}

void RingConsumer::flush_traces(bool all) {
  if (traced_.empty()) return;
  // Each batch's events are in order already; the CPUs' are merged.
  std::stable_sort(traced_.begin(), traced_.end(),
                   [](const TracedEvent& a, const TracedEvent& b) { return a.ts_ns < b.ts_ns; });
  smt_trace_record& r = scratch_trace_;
  size_t done = 0;
  for (; done < traced_.size() && (all || traced_[done].ts_ns < emit_before_); ++done) {
    const TracedEvent& t = traced_[done];
    r.event = t.event;
    r.ts_ns = t.ts_ns;
    r.raw_len = t.raw_len;
    std::memcpy(r.raw, trace_raw_.data() + t.raw_at, t.raw_len);
    trace_sink_(r, resolver_.comm_of(t.event.name));
  }
  if (done == traced_.size()) {
    traced_.clear();
    trace_raw_.clear();
    return;
  }
  // The rest wait for what may come before them, their raw bytes moved up.
  std::vector<char> raw;
  std::vector<TracedEvent> rest(traced_.begin() + done, traced_.end());
  for (TracedEvent& t : rest) {
    const uint32_t at = static_cast<uint32_t>(raw.size());
    raw.insert(raw.end(), trace_raw_.begin() + t.raw_at, trace_raw_.begin() + t.raw_at + t.raw_len);
    t.raw_at = at;
  }
  traced_.swap(rest);
  trace_raw_.swap(raw);
}

}  // namespace stackmapd
