// SPDX-License-Identifier: GPL-2.0
/*
 * Resetting the table while events keep arriving on every CPU.
 *
 * The RFC cleared the table under a `resetting` flag and accepted that an
 * insert which had passed the flag check could still publish into the cleared
 * table: a stale or half-written stack under a fresh id. Here the daemon waits
 * until every program that may have seen the table live has finished, with an
 * RCU grace period: BPF programs run inside RCU read-side critical sections
 * (tracepoints, kprobes and sampling with preemption or interrupts off, fentry under
 * rcu_read_lock()), and membarrier(MEMBARRIER_CMD_GLOBAL) is synchronize_rcu().
 * RCU's guarantee, used twice below: if any part of a program runs before a
 * grace period starts, all of it runs (its loads and stores are visible)
 * before the grace period ends; if any part of it observes a store made after
 * the grace period ended, all of it runs after the grace period started, and
 * sees every store made before. So the event path needs no barrier or atomic
 * of its own, on weakly ordered CPUs (arm64) too, where its plain loads of
 * the state and of the slots may otherwise be reordered.
 *
 * globals.shared.state = epoch << 1 | RESETTING, written only by this file.
 *
 * Event (bpf/stackmapd.bpf.c):
 *   reserve its record R; load state;
 *   RESETTING: discard R, count drop_resetting in the epoch's counters; done.
 *   else: use the table, submit R carrying the epoch it read.
 *
 * Reset (here, on the daemon's one thread):
 *  1. state = E << 1 | RESETTING; grace period GP1. A program that read state
 *     E (not resetting) read it before the store, so before GP1 started: it
 *     has finished, its table writes and its record committed. Consume every
 *     record committed so far: every event of epoch E is now in the store,
 *     and nobody touches slots, pool or next_elt. If GP1 or the consumption
 *     fails, nothing was cleared: state = E << 1 again (roll back), and the
 *     epoch goes on; its drop_resetting counts stay, as drops of epoch E.
 *  2. take the ended epoch's stacks; record the baseline of the counters of
 *     parity E + 1 (nobody counts there now: that takes reading state E + 1);
 *     clear the slots, next_elt = 0, the daemon's store.
 *  3. grace period GP2: the cleared slots and next_elt are stored before it
 *     starts, state E + 1 after it ends (step 4), so a program that reads
 *     state E + 1 runs wholly after GP2 started and reads the cleared table,
 *     never a slot of epoch E (its slot loads cannot pass its state load
 *     into the old table). Failing here, the table stays RESETTING (events
 *     are dropped and counted) until a reset or the next daemon finishes it.
 *  4. state = (E + 1) << 1: new events find an empty table.
 *  5. grace period GP3: the events that read RESETTING have counted their
 *     drop in epoch E, whose counters are now final and go into the running
 *     totals.
 * Records carry their epoch, and one from an epoch the daemon has left counts
 * as stale_records, which this protocol keeps at 0 (the tests check it).
 * Pool elements need no clearing: an element is fully written before it is
 * published, and only published elements are read.
 * Counters are never written by the daemon (a per-CPU write would race with
 * the events' increments); each epoch's values are relative to its baseline.
 * The daemon's own stores to state are seq_cst exchanges: ordered after every
 * store before them, the memset of the slots included.
 */
#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "daemon/bpf/bpf_session.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

const char* kNoMembarrier =
    "reset needs membarrier(MEMBARRIER_CMD_GLOBAL) (not available with nohz_full CPUs)";

}  // namespace

void BpfSession::set_state(uint32_t state) {
  __atomic_exchange_n(&table_.shared().state, state, __ATOMIC_SEQ_CST);
}

// Waits until every BPF program running now has finished.
bool BpfSession::wait_grace_period() { return grace_period_() == 0; }

// Consumes every record committed so far. Finished programs have committed
// theirs, but a program of the next epoch may hold one reserved in front of
// them: consume around it.
void BpfSession::consume_committed() {
  const uint64_t target = consumer_.producer_pos();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    drain(0);
    if (consumer_.consumer_pos() >= target) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw Error("reset: the ring buffer did not drain within 2 s; nothing was reset");
    sched_yield();
  }
}

SnapshotCut BpfSession::reset() {
  const uint32_t ended = epoch();
  drain(0);
  set_state(ended << 1 | SMT_STATE_RESETTING);
  try {
    if (!wait_grace_period())
      throw Error(std::string(kNoMembarrier) + ": " + std::strerror(errno) +
                  "; nothing was reset, counting goes on");
    consume_committed();
  } catch (...) {
    set_state(ended << 1);  // nothing was cleared: the epoch goes on
    throw;
  }

  SnapshotCut last = cut();
  auto next_base = TableView::sum_counters(batches_.counters(), (ended + 1) & 1);
  std::copy(next_base.begin(), next_base.end(), table_.book().baseline[(ended + 1) & 1]);
  table_.clear();
  user_table_.clear(table_.shared().hash_seed);
  if (UserStackCollector* u = resolver_.user_stacks()) u->clear();
  user_scanned_ = 0;
  store_.clear();
  consumer_.clear_overflow();
  if (!wait_grace_period())
    throw Error(
        std::string(kNoMembarrier) + ": " + std::strerror(errno) +
        "; the table was cleared and left resetting: reset again or restart stackmapd to finish");
  consumer_.set_epoch(ended + 1);
  set_state((ended + 1) << 1);
  if (!wait_grace_period())
    spdlog::warn("reset: {}: {}; the ended epoch's drops may miss events still in flight",
                 kNoMembarrier, std::strerror(errno));
  TableStats final_stats = stats_of(batches_.counters(), ended & 1);
  final_stats.entries = last.snap.stats.entries;
  last.snap.stats = final_stats;
  table_.book().past_events += final_stats.events();
  ++table_.book().resets;
  return last;
}

}  // namespace stackmapd
