// SPDX-License-Identifier: GPL-2.0
// The daemon's end of the `ids` ring buffer: each event record counts in the
// StackStore under its stack_id and key (who caused it: process, thread name,
// cgroup, source, CPU), and the first time an id is seen its frames are
// copied once from the table's pool. Name records give thread names their
// ids before any event uses them. Records of an ended epoch, ids that
// resolve to no published stack and --verify samples are counted apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/bpf/table_view.h"
#include "daemon/model/stack_store.h"
#include "daemon/model/table_stats.h"
#include "daemon/symbols/cgroups.h"
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
  // Receives every --trace record of the current epoch, in ring order, with
  // its thread's name.
  using TraceSink = std::function<void(const smt_trace_record&, const std::string& comm)>;
  void set_trace_sink(TraceSink sink) { trace_sink_ = std::move(sink); }
  // Counts --offcpu blocks still open when the session ends, as the BPF
  // side would have at their end (records of the current epoch only).
  void close_blocks(const std::vector<smt_event_record>& blocks, const std::vector<bool>& inserted);
  // Adds the consumer's counts (verify, stale, bad records, open blocks) to `s`.
  void add_counts(TableStats& s) const;

 private:
  static int on_record(void* ctx, void* data, size_t size);
  bool count_event(const smt_event_record& e);
  EventKey key_of(const smt_event_record& e);
  uint32_t cgroup_string(uint64_t id, bool unit);
  const std::string& comm_of(uint32_t name) const;
  void check_sample(const smt_verify_record& v);

  const TableView& table_;
  StackStore& store_;
  Mapping consumer_page_;
  Mapping producer_page_;
  RingBuffer ring_;
  TraceSink trace_sink_;
  // BPF name id -> the store's string id; the id of "[unnamed]" for 0.
  std::unordered_map<uint32_t, uint32_t> names_;
  uint32_t unnamed_;
  std::pair<uint32_t, uint32_t> last_name_;  // the last lookup; string id 0: none yet
  // What the store's keys need resolved, asked once: the hot path tests a bool.
  bool needs_comm_, needs_cgroup_, needs_unit_;
  std::optional<CgroupNames> cgroups_;  // only with --by cgroup or unit: it walks cgroupfs
  // cgroup id -> string ids of its path and its systemd unit.
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> cgroup_strings_;
  std::pair<uint64_t, const std::pair<uint32_t, uint32_t>*> last_cgroup_ = {0, nullptr};
  uint32_t epoch_ = 0;
  bool discarding_ = false;
  uint64_t consumed_ = 0;
  uint64_t verify_ok_ = 0;
  uint64_t verify_mismatch_ = 0;
  uint64_t stale_records_ = 0;
  uint64_t bad_records_ = 0;
  uint64_t open_blocks_ = 0;
  uint64_t open_inserts_ = 0;
};

}  // namespace stackmapd
