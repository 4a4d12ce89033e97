// SPDX-License-Identifier: GPL-2.0
/*
 * Resetting the table while events keep arriving on every CPU.
 *
 * The RFC cleared the table under a `resetting` flag and accepted that an
 * insert which had passed the flag check could still publish into the cleared
 * table: a stale or half-written stack under a fresh id. Here the daemon knows
 * when every such event has finished, because each event reserves its
 * ring-buffer record before it looks at the table, and a ring-buffer consumer
 * cannot pass a record that is still reserved.
 *
 * shared.state = epoch << 1 | RESETTING, written only by this file.
 *
 * Event (bpf/stackmapd.bpf.c):
 *   reserve record R; atomic events++ (a full barrier); load state;
 *   RESETTING: discard R, count drop_resetting in the epoch's counters; done.
 *   else: use the table, submit R carrying the epoch it read.
 *
 * Reset (here, on the daemon's one thread):
 *  1. drain; state = E << 1 | RESETTING (an xchg: a full barrier).
 *  2. P = producer position; consume until the consumer position reaches P.
 *     An event that read the table live reserved R before it loaded the state
 *     and we stored the state before we loaded P, each with a full barrier in
 *     between, so (store buffering) R lies below P. The consumer passes R only
 *     once it is submitted or discarded, after the event is done with the
 *     table. From here on nobody touches slots, pool or next_elt.
 *  3. take the ended epoch's stacks; record the baseline of the counters of
 *     parity E + 1 (nobody counts there now: that takes reading state E + 1);
 *     clear the slots, next_elt = 0, the daemon's store.
 *  4. state = (E + 1) << 1: new events find an empty table.
 *  5. wait as in 2 for the events that read RESETTING: epoch E's counters are
 *     then final, and its outcomes go into the running totals.
 * Records carry their epoch and one from an epoch the daemon has left counts
 * as stale_records, which this protocol keeps at 0 (the tests check it).
 * Pool elements need no clearing: an element is fully written before it is
 * published, and only published elements are read.
 * Counters are never written by the daemon (a per-CPU write would race with
 * the events' increments); each epoch's values are relative to its baseline.
 */
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "daemon/bpf_session.h"
#include "daemon/error.h"
#include "stackmapd.skel.h"

namespace stackmapd {

namespace {

uint64_t load_pos(const void* page) {
  return __atomic_load_n(static_cast<const unsigned long*>(page), __ATOMIC_SEQ_CST);
}

}  // namespace

void BpfSession::set_state(uint32_t state) {
  __atomic_exchange_n(&skel_->bss->shared.state, state, __ATOMIC_SEQ_CST);
}

void BpfSession::wait_for_reserved_records(const char* phase) {
  const uint64_t target = load_pos(ring_producer_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    drain(0);
    if (load_pos(ring_consumer_) >= target) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(std::string("reset: timed out waiting for ") + phase +
                  "; the table was left resetting (events are dropped and counted): restart stackmapd");
    sched_yield();
  }
}

Snapshot BpfSession::reset() {
  const uint32_t ended = epoch_;
  drain(0);
  set_state(ended << 1 | SMT_STATE_RESETTING);
  wait_for_reserved_records("in-flight events");

  Snapshot last = snapshot();
  auto next_base = sum_counters((ended + 1) & 1);
  std::copy(next_base.begin(), next_base.end(), book().baseline[(ended + 1) & 1]);
  clear_table();
  epoch_ = ended + 1;
  set_state(epoch_ << 1);
  wait_for_reserved_records("events that saw the reset");

  TableStats final_stats = stats_of(ended & 1);
  final_stats.entries = last.stats.entries;
  last.stats = final_stats;
  book().past_events += final_stats.events();
  ++book().resets;
  return last;
}

void BpfSession::clear_table() {
  std::memset(slots_, 0, static_cast<size_t>(table_size()) * sizeof(smt_slot));
  __atomic_store_n(&skel_->bss->shared.next_elt, 0, __ATOMIC_SEQ_CST);
  store_.clear();
}

}  // namespace stackmapd
