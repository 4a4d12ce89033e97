// SPDX-License-Identifier: GPL-2.0
/*
 * One tracing session on the BPF path. Data flow:
 *   (1) stackmapd.bpf.c, on every attached event, in the kernel: capture the
 *       stack, find or insert it in the lock-free table, submit its id (and
 *       the table's epoch) to the `ids` ring buffer without waking anybody;
 *   (2) drain(), on the daemon's one thread: consume the ids, count each in
 *       the StackStore and, the first time an id is seen, copy its frames
 *       once from the table's pool (mmapped, no syscall);
 *   (3) snapshot() feeds the exports (daemon/export/exports.h).
 * reset() empties the table while events keep arriving (daemon/bpf/table_reset.cpp).
 * Lifecycle: open, configure (table size, hash seed), load, attach, in the
 * constructor; one teardown path in the destructor. The object is our own
 * skeleton, or with SessionConfig::pinned_dir the one another loader pinned;
 * past loading, both are used through the same map and program fds.
 */
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/export/exports.h"
#include "daemon/bpf/loader_pins.h"
#include "daemon/bpf/sources.h"
#include "daemon/model/stack_store.h"
#include "daemon/model/table_stats.h"
#include "stackmapd/abi.h"

struct stackmapd_bpf;
struct ring_buffer;
struct bpf_link;

namespace stackmapd {

struct Tracepoint {
  std::string category;
  std::string name;

  // "CATEGORY:NAME"; throws Error naming the expected form.
  static Tracepoint parse(std::string_view spec);
  std::string str() const { return category + ":" + name; }
};

struct SessionConfig {
  std::vector<Tracepoint> events;
  std::vector<FunctionTarget> functions;  // fentry, one program per function
  uint32_t profile_hz = 0;                // CPU sampling on every online CPU; 0 = off
  bool trace = false;                     // richer records for the per-event trace
  uint32_t filter_pid = 0;                // only this process (tgid); 0 = all
  uint32_t filter_cpu = SMT_ANY_CPU;
  uint32_t bits = SMT_DEFAULT_BITS;
  uint32_t ringbuf_bytes = 8u << 20;  // power of two; 16 B per id
  uint32_t verify_every = 0;          // 1 in N events also sends its frames; 0 = off
  // Pin the table's maps here and take over a compatible table found there
  // (same ids and counts after a restart). Empty: nothing pinned.
  std::string pin_dir;
  // Use the programs and maps another loader pinned here (daemon/bpf/loader_pins.h)
  // instead of loading our own; the table's size is then the object's.
  std::string pinned_dir;
};

class BpfSession {
 public:
  explicit BpfSession(const SessionConfig& config);  // throws Error
  ~BpfSession();
  BpfSession(const BpfSession&) = delete;
  BpfSession& operator=(const BpfSession&) = delete;

  // Attaches to `events` instead of the current tracepoints; the table is kept.
  void reattach(const std::vector<Tracepoint>& events);

  // The session's event sources by index (smt_trace_record.source): its
  // tracepoints, then its functions, then "profile".
  const std::vector<std::string>& sources() const { return sources_; }
  // Receives every --trace record of the current epoch, in ring order.
  void set_trace_sink(std::function<void(const smt_trace_record&)> sink) {
    trace_sink_ = std::move(sink);
  }

  // True when the table was taken over from pins left by an earlier daemon.
  bool resumed() const { return resumed_; }
  // Removes the pins: the maps go away with the last user (call on a clean
  // stop unless the table is to be kept for the next start).
  void unpin();
  // The pin file names under SessionConfig::pin_dir.
  static const std::vector<std::string>& pin_names();

  // Stops new events; what is in flight can still be drained. After detach()
  // and a final drain() the daemon's counts and the table's agree exactly.
  void detach();

  // Waits up to timeout_ms for the ring buffer to fill past its wakeup mark,
  // then consumes everything pending. Returns the number of records consumed.
  size_t drain(int timeout_ms);

  // Empties the table while events keep arriving and returns the final state
  // of the epoch it ended. Throws Error if in-flight events never finish.
  Snapshot reset();

  Snapshot snapshot() const;
  TableStats stats() const;
  const StackStore& store() const { return store_; }
  uint32_t bits() const { return bits_; }
  uint32_t hash_seed() const { return hash_seed_; }
  uint32_t epoch() const { return epoch_; }
  uint32_t table_size() const { return 1u << (bits_ + 1); }
  uint32_t pool_size() const { return 1u << bits_; }
  // The `ids` ring buffer, for tools that feed the consumer synthetic ids.
  int ring_fd() const;
  // Readable when the ring buffer has woken its consumer, for poll().
  int wakeup_fd() const;

  // The table's own view of a stack, for checks: its frames and BPF-side
  // ref_count. Empty frames when the slot holds no published element.
  StackRecord table_stack(uint32_t id) const;
  // Every stack the BPF table holds, by slot order.
  std::vector<StackRecord> table_stacks() const;

 private:
  // A BPF link on a perf event (tracepoint or CPU clock); closing both detaches.
  struct PerfLink {
    int perf_fd;
    int link_fd;
  };

  bool load_own(const SessionConfig& config);
  void use_pins(const SessionConfig& config);
  void map_table();
  static int on_record(void* ctx, void* data, size_t size);
  void count_id(uint32_t id, uint32_t epoch);
  void check_sample(const smt_verify_record& v);
  const smt_elt* published_elt(uint32_t id) const;
  std::vector<smt_cpu_counters> read_counters() const;
  // Outcome counters of one epoch parity, summed over CPUs, since load.
  std::array<uint64_t, SMC_NR> sum_counters(uint32_t parity) const;
  TableStats stats_of(uint32_t parity) const;
  void set_state(uint32_t state);
  void wait_for_programs();
  void clear_table();
  PerfLink attach_perf(int prog_fd, int perf_fd, uint64_t cookie, const std::string& what);
  static void close_links(std::vector<PerfLink>& links);
  void attach_functions(const SessionConfig& config);
  void attach_profile(uint32_t hz, uint32_t filter_cpu);
  void start_fresh();
  void resume(const std::string& where);
  smt_daemon_state& book() const { return globals_->daemon_state; }
  void teardown();

  std::unique_ptr<LoaderPins> pins_;  // --pinned
  uint32_t bits_;
  uint32_t hash_seed_ = 0;
  std::string pin_dir_;
  bool resumed_ = false;
  bool discard_records_ = false;  // while draining what a previous daemon left
  stackmapd_bpf* skel_ = nullptr;  // our own object, without --pinned
  // What the session works with, from skel_ or pins_ (not owned here).
  int slots_fd_ = -1, pool_fd_ = -1, counters_fd_ = -1, ids_fd_ = -1;
  int tracepoint_prog_ = -1, profile_prog_ = -1;
  smt_globals* globals_ = nullptr;  // skel_'s .bss, or the pinned map mmapped
  size_t globals_len_ = 0;          // mmapped length (pins only)
  ring_buffer* ring_ = nullptr;
  std::vector<PerfLink> tracepoint_links_;
  std::vector<PerfLink> profile_links_;
  std::vector<bpf_link*> fentry_links_;
  std::vector<stackmapd_bpf*> fentry_objs_;  // one loaded copy per function
  std::vector<std::string> sources_;
  std::function<void(const smt_trace_record&)> trace_sink_;
  smt_slot* slots_ = nullptr;        // mmap of the `slots` map (written only by reset)
  const smt_elt* pool_ = nullptr;    // read-only mmap of the `pool` map
  const void* ring_consumer_ = nullptr;  // the ring's consumer and producer pages
  const void* ring_producer_ = nullptr;
  size_t slots_len_ = 0;
  size_t pool_len_ = 0;
  StackStore store_;
  uint32_t epoch_ = 0;
  uint64_t verify_ok_ = 0;
  uint64_t verify_mismatch_ = 0;
  uint64_t stale_records_ = 0;
  uint64_t bad_records_ = 0;
  uint64_t consumed_ = 0;
};

}  // namespace stackmapd
