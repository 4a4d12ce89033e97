// SPDX-License-Identifier: GPL-2.0
/*
 * Resetting the table while events keep arriving on every CPU.
 *
 * The RFC cleared the table under a `resetting` flag and accepted that an
 * insert which had passed the flag check could still publish into the cleared
 * table: a stale or half-written stack under a fresh id. Here the daemon waits
 * until every program that may have seen the table live has finished, with an
 * RCU grace period: BPF programs run inside RCU read-side critical sections
 * (tracepoints and sampling with preemption or interrupts off, fentry under
 * rcu_read_lock()), and membarrier(MEMBARRIER_CMD_GLOBAL) is synchronize_rcu().
 * By RCU's guarantee, a program that read the state before our store is
 * waited for, and one that starts after the grace period sees the store; so
 * the event path needs no barrier or atomic of its own.
 *
 * globals.shared.state = epoch << 1 | RESETTING, written only by this file.
 *
 * Event (bpf/stackmapd.bpf.c):
 *   reserve its record R; load state;
 *   RESETTING: discard R, count drop_resetting in the epoch's counters; done.
 *   else: use the table, submit R carrying the epoch it read.
 *
 * Reset (here, on the daemon's one thread):
 *  1. state = E << 1 | RESETTING; grace period; consume every record
 *     committed so far. Every event of epoch E is now in the store, and
 *     nobody touches slots, pool or next_elt.
 *  2. take the ended epoch's stacks; record the baseline of the counters of
 *     parity E + 1 (nobody counts there now: that takes reading state E + 1);
 *     clear the slots, next_elt = 0, the daemon's store.
 *  3. state = (E + 1) << 1: new events find an empty table.
 *  4. grace period: the events that read RESETTING have counted their drop in
 *     epoch E, whose counters are now final and go into the running totals.
 * Records carry their epoch, and one from an epoch the daemon has left counts
 * as stale_records, which this protocol keeps at 0 (the tests check it).
 * Pool elements need no clearing: an element is fully written before it is
 * published, and only published elements are read.
 * Counters are never written by the daemon (a per-CPU write would race with
 * the events' increments); each epoch's values are relative to its baseline.
 */
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>

#include "daemon/bpf/bpf_session.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

uint64_t load_pos(const void* page) {
  return __atomic_load_n(static_cast<const unsigned long*>(page), __ATOMIC_SEQ_CST);
}

}  // namespace

void BpfSession::set_state(uint32_t state) {
  __atomic_exchange_n(&globals_->shared.state, state, __ATOMIC_SEQ_CST);
}

// Waits until every BPF program running now has finished, then consumes
// every record committed so far.
void BpfSession::wait_for_programs() {
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0)
    throw Error(std::string("reset needs membarrier(MEMBARRIER_CMD_GLOBAL): ") + strerror(errno) +
                " (not available with nohz_full CPUs); the table was left resetting: restart "
                "stackmapd to clear it");
  // Finished programs have committed their records, but a program of the
  // next epoch may hold one reserved in front of them: consume around it.
  const uint64_t target = load_pos(ring_producer_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    drain(0);
    if (load_pos(ring_consumer_) >= target) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw Error("reset: the ring buffer did not drain; restart stackmapd");
    sched_yield();
  }
}

Snapshot BpfSession::reset() {
  const uint32_t ended = epoch_;
  drain(0);
  set_state(ended << 1 | SMT_STATE_RESETTING);
  wait_for_programs();

  Snapshot last = snapshot();
  auto next_base = sum_counters((ended + 1) & 1);
  std::copy(next_base.begin(), next_base.end(), book().baseline[(ended + 1) & 1]);
  clear_table();
  epoch_ = ended + 1;
  set_state(epoch_ << 1);
  wait_for_programs();

  TableStats final_stats = stats_of(ended & 1);
  final_stats.entries = last.stats.entries;
  last.stats = final_stats;
  book().past_events += final_stats.events();
  ++book().resets;
  return last;
}

void BpfSession::clear_table() {
  std::memset(slots_, 0, static_cast<size_t>(table_size()) * sizeof(smt_slot));
  __atomic_store_n(&globals_->shared.next_elt, 0, __ATOMIC_SEQ_CST);
  store_.clear();
}

}  // namespace stackmapd
