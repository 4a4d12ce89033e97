// SPDX-License-Identifier: GPL-2.0
/*
 * One tracing session on the BPF path. Data flow:
 *   (1) stackmapd.bpf.c, on every attached event, in the kernel: capture the
 *       stack, find or insert it in the lock-free table, count the event
 *       under its id and key in the CPU's batch; a batch entry makes room by
 *       sending its counts to the `ids` ring buffer, without waking anybody;
 *   (2) drain(), on the daemon's loop thread: consume the counts, attribute
 *       each (the Resolver: names, cgroups, and a new user stack queued to
 *       its worker thread, daemon/resolve/user_stacks.h), add it to the
 *       StackStore and, the first time an id is seen, copy its frames once
 *       from the table's pool (mmapped, no syscall);
 *   (3) snapshot() feeds the exports (daemon/export/exports.h): the store
 *       and the batches' entries read in place, one exact cut. After it,
 *       the keys of processes that exited fold (ExitWatch), so that the
 *       store's (stack, key) pairs recycle.
 * reset() empties the table while events keep arriving (daemon/bpf/table_reset.cpp).
 *
 * The parts, one file each: BpfObject (the loaded object and the table's
 * pins), TableView (the mmapped table), CpuBatches (the mmapped batches and
 * counters), Resolver (attribution), RingConsumer (the ring buffer into the StackStore),
 * Attachments (the event sources' links).
 *
 * Lifecycle in stages, so that a reload can build a new session while the
 * old one still counts, and keep the old one if anything fails: load() loads
 * and maps, attaching nothing and changing no pins on disk; attach() attaches
 * every source, all or nothing, and pins the table the first time; detach()
 * stops new events. The one-argument constructor does load and attach at once.
 */
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/bpf/attachments.h"
#include "daemon/bpf/bpf_object.h"
#include "daemon/bpf/cpu_batches.h"
#include "daemon/bpf/ring_consumer.h"
#include "daemon/bpf/table_view.h"
#include "daemon/bpf/user_table.h"
#include "daemon/model/snapshot.h"
#include "daemon/model/snapshot_cut.h"
#include "daemon/model/stack_store.h"
#include "daemon/model/table_stats.h"
#include "daemon/resolve/exit_watch.h"
#include "daemon/resolve/resolver.h"
#include "daemon/source/session_config.h"
#include "daemon/source/sources.h"
#include "daemon/sys/drop_bursts.h"
#include "stackmapd/abi.h"

namespace stackmapd {

class BpfSession {
 public:
  // Loads, maps and attaches: a session that counts from the start. Throws Error.
  explicit BpfSession(const SessionConfig& config);
  // Loads and maps only; nothing runs and no pin changes until attach().
  static std::unique_ptr<BpfSession> load(const SessionConfig& config);
  BpfSession(const BpfSession&) = delete;
  BpfSession& operator=(const BpfSession&) = delete;

  // Attaches every configured source, all or nothing (throws Error with
  // nothing attached); the first time, pins the table if pin_dir is set. A
  // table from pins is taken over first: the store becomes the table's
  // stacks and counts, so a session handed a table another one counted into
  // (detached before this attach) counts on from exactly there.
  void attach();
  // Attaches to `events` instead of the current tracepoints; the table is
  // kept. Links of events in both sets stay; on failure nothing changes.
  void reattach(const std::vector<Tracepoint>& events);
  // Whether reattach() can take `events`: a session loaded without
  // tracepoints has no program for them.
  bool can_reattach(const std::vector<Tracepoint>& events) const {
    return events.empty() || object_.tracepoint_prog() >= 0;
  }
  // Stops new events, waits for those in flight and counts every event into
  // the store: the ring drained, the batches' entries absorbed. After it the
  // store, the table's ref_counts and the counters agree exactly.
  void detach();
  bool attached() const { return attachments_.attached(); }

  // The session's event sources by index (smt_trace_record.source).
  const std::vector<std::string>& sources() const { return attachments_.sources(); }
  // Receives every --trace record of the current epoch, in ring order.
  void set_trace_sink(RingConsumer::TraceSink sink) { consumer_.set_trace_sink(std::move(sink)); }
  // --offcpu, once detached and drained: counts the blocks still open, up to
  // now, so that a thread asleep at the end is not left out.
  void close_open_blocks();

  // -- CMD (SessionConfig::follow_command): follows `pid` and every process
  // it forks from now on; tracked_lost() counts those the map had no room for.
  void track(uint32_t pid) { object_.track(pid); }
  uint64_t tracked_lost() const { return object_.tracked_lost(); }

  // True when the table was taken over from pins left by an earlier daemon.
  bool resumed() const { return resumed_; }
  // Removes the pins: the maps go away with the last user (call on a clean
  // stop unless the table is to be kept for the next start).
  void unpin() { object_.unpin(); }
  // The pin file names under SessionConfig::pin_dir.
  static const std::vector<std::string>& pin_names() { return BpfObject::pin_names(); }

  // Waits up to timeout_ms for the ring buffer to fill past its wakeup mark,
  // then consumes everything pending; --trace reads the batches' trace
  // buffers in place too, so an idle CPU's events wait for no more. Returns
  // the number of records consumed.
  size_t drain(int timeout_ms);
  // --user-stacks: hands the stacks the user table published since the last
  // call to the resolver (drain() does too). Cheap when there are none: the
  // loop calls it every kUserStackScanMs, so that a process that lives 50 ms
  // is still there when its first stack is captured.
  static constexpr int kUserStackScanMs = 10;
  void see_user_stacks();
  bool has_user_stacks() const { return resolver_.user_stacks() != nullptr; }

  // Empties the table while events keep arriving and returns the final state
  // of the epoch it ended. Throws Error if it cannot: before the table is
  // touched, the reset is rolled back and counting goes on in the same epoch.
  SnapshotCut reset();
  // The RCU grace period the reset protocol waits for: 0 or -1 with errno
  // set, as membarrier(MEMBARRIER_CMD_GLOBAL). Tests inject failures here.
  void set_grace_period(std::function<int()> grace_period) {
    grace_period_ = std::move(grace_period);
  }

  // Every event counted up to now, exactly: what the ring holds is drained,
  // what the batches hold is read (in place, not consumed).
  Snapshot snapshot() { return cut().finish(); }
  // The same in two steps: only cut() needs this session (snapshot_cut.h).
  SnapshotCut cut();
  TableStats stats() const;
  const StackStore& store() const { return store_; }
  // --user-stacks: the user stacks seen so far (null without it); a
  // record's are there once the consumer has counted it. Waits for the
  // resolver's worker to name the stacks queued since the last call, handing
  // it new stacks meanwhile.
  const UserStackSet* user_stacks() {
    UserStackCollector* u = resolver_.user_stacks();
    return u ? &u->resolved([this] { see_user_stacks(); }) : nullptr;
  }
  uint32_t bits() const { return table_.bits(); }
  uint32_t hash_seed() const { return hash_seed_; }
  uint32_t epoch() const { return consumer_.epoch(); }
  uint32_t table_size() const { return table_.table_size(); }
  uint32_t pool_size() const { return table_.pool_size(); }
  // The `ids` ring buffer, for tools that feed the consumer synthetic ids.
  int ring_fd() const { return object_.ids_fd(); }
  // Readable when the ring buffer has woken its consumer, for poll().
  int wakeup_fd() const { return consumer_.wakeup_fd(); }
  // Bytes submitted to the ring buffer and not consumed yet (its fill).
  uint64_t ring_pending_bytes() const {
    return consumer_.producer_pos() - consumer_.consumer_pos();
  }
  // The loaded programs by role ("tracepoint", "offcpu", "profile", "uprobe"), for
  // their run time and count (bpf_prog_info).
  std::vector<std::pair<std::string, int>> programs() const;

  // The table's own view of a stack, for checks: its frames and the
  // ref_count the daemon keeps there. Empty frames when the slot holds no published element.
  StackRecord table_stack(uint32_t id) const { return table_.stack(id); }
  // Every stack the BPF table holds, by slot order.
  std::vector<StackRecord> table_stacks() const { return table_.stacks(); }
  // --user-stacks: the user table's stack `id`, for checks.
  std::optional<UserStackIps> user_table_stack(uint32_t id) const { return user_table_.stack(id); }

 private:
  enum class Stage { kLoaded, kAttached };
  BpfSession(const SessionConfig& config, Stage stage);

  void start_fresh();
  void take_over();
  // The reset protocol (table_reset.cpp).
  void set_state(uint32_t state);
  bool wait_grace_period();
  void consume_committed();
  void absorb_batches();
  TableStats stats_of(const std::vector<smt_cpu_counters>& counters, uint32_t parity) const;
  void add_user_counts(TableStats& s) const;
  // Says once per burst how many events a full ring buffer dropped (drain()
  // looks a few times a second; at_end: the open burst too, detach()).
  void watch_ring_drops(bool at_end);

  // Declared in the order they are built; torn down in reverse: links first,
  // so nothing writes while the consumer and the mappings go away.
  BpfObject object_;
  TableView table_;
  UserTable user_table_;  // --user-stacks; disabled otherwise
  CpuBatches batches_;
  StackStore store_;
  Resolver resolver_;
  RingConsumer consumer_;
  Attachments attachments_;
  // Keys naming a process (--by pid, tid): their exits, so that they fold.
  std::unique_ptr<ExitWatch> exits_;
  std::function<int()> grace_period_;
  uint32_t hash_seed_ = 0;
  bool resumed_ = false;
  bool keys_requested_;      // --by given: the exports show the breakdown
  std::string weight_unit_;  // --sum's field, "ns" for --offcpu; empty: unweighted
  uint64_t min_block_ns_;
  bool trace_;  // --trace
  // --user-stacks: user table pool elements already handed to the resolver.
  uint32_t user_scanned_ = 0;
  DropBursts ring_full_{std::chrono::seconds(2), std::chrono::seconds(30)};
  DropBursts::Clock::time_point next_drop_look_;
};

}  // namespace stackmapd
