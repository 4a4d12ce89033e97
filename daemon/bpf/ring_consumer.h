// SPDX-License-Identifier: GPL-2.0
// The daemon's end of the `ids` ring buffer: each record counts its stack_id
// in the StackStore, and the first time an id is seen its frames are copied
// once from the table's pool. Records of an ended epoch, ids that resolve to
// no published stack and --verify samples are counted apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "daemon/bpf/table_view.h"
#include "daemon/model/stack_store.h"
#include "daemon/model/table_stats.h"
#include "daemon/sys/bpf_handles.h"
#include "daemon/sys/mapping.h"
#include "stackmapd/abi.h"

namespace stackmapd {

class RingConsumer {
 public:
  RingConsumer(int ring_fd, const TableView& table, StackStore& store);  // throws Error
  RingConsumer(const RingConsumer&) = delete;
  RingConsumer& operator=(const RingConsumer&) = delete;

  // Waits up to timeout_ms for the ring buffer to fill past its wakeup mark,
  // then consumes everything pending. Returns the number of records consumed.
  size_t drain(int timeout_ms);
  // Consumes what is pending without counting it: records whose events are
  // in the table's ref_counts already (a table taken over).
  void discard_pending();
  // Readable when the ring buffer has woken its consumer, for poll().
  int wakeup_fd() const;
  // Byte positions in the ring (its mmapped consumer and producer pages).
  uint64_t consumer_pos() const;
  uint64_t producer_pos() const;

  // Records of other epochs count as stale.
  void set_epoch(uint32_t epoch) { epoch_ = epoch; }
  uint32_t epoch() const { return epoch_; }
  // Receives every --trace record of the current epoch, in ring order.
  void set_trace_sink(std::function<void(const smt_trace_record&)> sink) {
    trace_sink_ = std::move(sink);
  }
  // Adds the consumer's counts (verify, stale, bad records) to `s`.
  void add_counts(TableStats& s) const;

 private:
  static int on_record(void* ctx, void* data, size_t size);
  void count_id(uint32_t id, uint32_t epoch);
  void check_sample(const smt_verify_record& v);

  const TableView& table_;
  StackStore& store_;
  Mapping consumer_page_;
  Mapping producer_page_;
  RingBuffer ring_;
  std::function<void(const smt_trace_record&)> trace_sink_;
  uint32_t epoch_ = 0;
  bool discarding_ = false;
  uint64_t consumed_ = 0;
  uint64_t verify_ok_ = 0;
  uint64_t verify_mismatch_ = 0;
  uint64_t stale_records_ = 0;
  uint64_t bad_records_ = 0;
};

}  // namespace stackmapd
