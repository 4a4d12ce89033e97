// SPDX-License-Identifier: GPL-2.0
// The daemon's end of the `ids` ring buffer, transport only: each count
// record (a batch entry making room, many events of one key) counts in the
// StackStore under its stack_id and the key the Resolver gives it (who
// caused it: process, thread name, cgroup, source, CPU, user stack:
// daemon/resolve/resolver.h), and the first time an id is seen its frames
// are copied once from the table's pool; the counts also go into the
// stack's ref_count in the pool. Stacks sent whole, which the table could
// not take, go to an overflow store of their own ids. Name records give
// thread names their ids before any event uses them. Records of an ended
// epoch, ids that resolve to no published stack and --verify samples are
// counted apart. --trace's buffers are read in ring_trace.cpp.
//
// Events still in the batches (daemon/bpf/cpu_batches.h) are read, not
// consumed. For a snapshot, an exact cut: copy the batches, hold_after() them
// (records they send later wait), drain until caught_up() (everything they
// had sent is counted), add their pending() entries to a copy of the store,
// release() the records held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/bpf/table_view.h"
#include "daemon/bpf/trace_decoder.h"
#include "daemon/model/stack_store.h"
#include "daemon/model/table_stats.h"
#include "daemon/resolve/resolver.h"
#include "daemon/sys/bpf_handles.h"
#include "daemon/sys/mapping.h"
#include "stackmapd/abi.h"

namespace stackmapd {

// Events of the batches, resolved against the consumer's names and cgroups.
struct PendingCount {
  uint32_t stack_id;
  EventKey key;
  uint64_t weight, count;
};

class RingConsumer {
 public:
  // Stacks sent whole that the daemon keeps, with ids from the table's size
  // up, so that they never collide with a slot's; past the cap their events
  // count in overflow_lost.
  static constexpr uint32_t kOverflowStacks = 4096;

  // trace_records: the session sends a record per event (--trace).
  RingConsumer(int ring_fd, const TableView& table, StackStore& store, Resolver& resolver,
               uint32_t batch_count, bool trace_records);  // throws Error
  RingConsumer(const RingConsumer&) = delete;
  RingConsumer& operator=(const RingConsumer&) = delete;

  // Waits up to timeout_ms for the ring buffer to fill past its wakeup mark,
  // then consumes everything pending. Returns the number of records consumed.
  size_t drain(int timeout_ms);
  // Readable when the ring buffer has woken its consumer, for poll().
  int wakeup_fd() const;
  // Byte positions in the ring (its mmapped consumer and producer pages).
  uint64_t consumer_pos() const;
  uint64_t producer_pos() const;

  // Until release(), records the batches send after these copies of them
  // wait instead of counting.
  void hold_after(const std::vector<smt_batch>& batches);
  void release();
  bool holding() const { return !limit_.empty(); }
  // Whether every record these batches had sent is consumed and every name
  // their entries use is known: then the store and their entries together
  // hold every event their counters counted, once.
  bool caught_up(const std::vector<smt_batch>& batches) const;
  // --trace: reads the events of the trace buffers in these copies that are
  // not read yet, where every buffer they sent before is (else later).
  // True when nothing is left to read in them (a name not yet announced
  // stops a buffer's reading at its event). read_ns: CLOCK_MONOTONIC before
  // the copies were taken. Without --trace, true.
  bool read_in_place(const std::vector<smt_batch>& batches, uint64_t read_ns);
  // --trace: hands the events read so far to the trace sink in time order,
  // those that no event still unread can precede (all: every one).
  void flush_traces(bool all = false);
  // The entries of the current epoch in `batches`, resolved (interning the
  // strings their keys need in the store). Only once caught_up(batches).
  std::vector<PendingCount> pending(const std::vector<smt_batch>& batches);
  // Detached, the ring drained: counts the batches' entries of the current
  // epoch into the store for good (the caller then empties them).
  void absorb(const std::vector<smt_batch>& batches);
  // A take-over, nothing running: what the batches sent so far is consumed.
  void sync(const std::vector<smt_batch>& batches);

  // Records of other epochs count as stale.
  void set_epoch(uint32_t epoch) { epoch_ = epoch; }
  uint32_t epoch() const { return epoch_; }
  // Forgets the stacks sent whole, as the store forgets its own (a reset).
  void clear_overflow() {
    overflow_ids_.clear();
    whole_ids_.clear();
  }
  // Receives every --trace record of the current epoch, in time order
  // within one flush_traces() and in each CPU's order, with its thread's name.
  using TraceSink = std::function<void(const smt_trace_record&, const std::string& comm)>;
  void set_trace_sink(TraceSink sink) { trace_sink_ = std::move(sink); }
  // Counts --offcpu blocks still open when the session ends, as the BPF
  // side would have at their end (records of the current epoch only).
  void close_blocks(const std::vector<smt_event_record>& blocks, const std::vector<bool>& inserted);
  // Adds the consumer's counts (verify, stale, bad records, open blocks,
  // overflow) to `s`.
  void add_counts(TableStats& s) const;

 private:
  static constexpr uint32_t kSeqMask = (1u << SMT_SEQ_BITS) - 1;  // a batch's record number
  struct FramesHash {
    size_t operator()(const std::vector<uint64_t>& f) const;
  };

  static int on_record(void* ctx, void* data, size_t size);
  void on_count(const smt_count_record& c);
  void on_stack(const smt_stack_record& r);
  // The id a stack sent whole counts under (SMT_NO_STACK_ID: none is left).
  uint32_t count_whole(const smt_stack_record& r);
  bool count_event(const smt_event_record& e, uint64_t n);
  void check_sample(const smt_stack_record& v);
  bool held(const void* data, size_t size, uint32_t seq);
  void on_trace_buf(const void* data, size_t size);
  // Counts one traced event of `batch` and keeps it for flush_traces().
  // False, taking nothing, when its frames, sent whole, are not read yet.
  bool take_trace(const smt_trace_record& r, uint32_t batch);

  const TableView& table_;
  StackStore& store_;
  Resolver& resolver_;
  Mapping consumer_page_;
  Mapping producer_page_;
  RingBuffer ring_;
  const bool trace_records_;
  TraceSink trace_sink_;
  // By batch: SMT_BATCH_SEQ's n of the last count-carrying record consumed.
  std::vector<uint32_t> seen_;
  // hold_after(): by batch, the last n to count; records past it, held.
  std::vector<uint32_t> limit_;
  std::vector<std::vector<char>> held_;
  // Frames of a stack sent whole -> its id in the store.
  std::unordered_map<std::vector<uint64_t>, uint32_t, FramesHash> overflow_ids_;
  // --trace: the stack records sent whole not yet named by their event's
  // trace entry (SMT_TE_WHOLE), by batch << 32 | n -> count_whole()'s id.
  std::unordered_map<uint64_t, uint32_t> whole_ids_;
  // --trace: by batch, how far its buffers are read.
  std::vector<TraceCursor> cursors_;
  // Events read since the last flush_traces(): each with its raw bytes at
  // raw_at in trace_raw_.
  struct TracedEvent {
    smt_event_record event;
    uint64_t ts_ns;
    uint32_t raw_at, raw_len;
  };
  std::vector<TracedEvent> traced_;
  std::vector<char> trace_raw_;
  smt_trace_record scratch_trace_;
  uint32_t known_name_ = 0;  // a name id read_in_place() found announced
  // Every event before this time (ns) is read: flush_traces() hands them on.
  uint64_t emit_before_ = 0;
  uint32_t epoch_ = 0;
  uint64_t consumed_ = 0;
  uint64_t verify_ok_ = 0;
  uint64_t verify_mismatch_ = 0;
  uint64_t stale_records_ = 0;
  uint64_t bad_records_ = 0;
  uint64_t open_blocks_ = 0;
  uint64_t open_inserts_ = 0;
  uint64_t overflow_lost_ = 0;
};

}  // namespace stackmapd
