// SPDX-License-Identifier: GPL-2.0
// The table's counters as the stat export reports them.
#pragma once

#include <cstdint>
#include <optional>

#include "stackmapd/abi.h"

namespace stackmapd {

struct TableStats {
  uint64_t counters[SMC_NR] = {};  // this epoch (since the last reset), summed over CPUs
  uint32_t entries = 0;            // pool elements in use
  uint32_t pool_size = 0;
  uint32_t table_size = 0;
  uint64_t resets = 0;
  uint64_t events_total = 0;  // every event since load, counted apart from the outcomes
  uint64_t past_events = 0;   // outcomes (hits + drops) of the epochs before this one
  uint64_t verify_ok = 0;     // --verify samples whose frames equal the stored stack
  uint64_t verify_mismatch = 0;
  uint64_t stale_records = 0;     // records of an earlier epoch: 0 unless the reset protocol broke
  uint64_t bad_records = 0;       // records the daemon could not resolve
  uint64_t key_pairs = 0;         // distinct (stack, --by key) pairs the daemon holds
  uint64_t max_key_pairs = 0;     // their cap
  uint64_t key_overflow = 0;      // events counted to a stack's `other` because of the cap
  uint64_t key_pairs_folded = 0;  // pairs of exited processes folded (StackStore::fold_exited)
  uint64_t offcpu_open = 0;       // --offcpu blocks still open at the end, counted up to then
  uint64_t ring_bytes = 0;        // submitted to the ring buffer since load, headers included
  uint64_t overflow_stacks = 0;   // stacks sent whole that the daemon keeps beside the table's
  uint64_t overflow_lost = 0;     // events sent whole past the overflow store's cap: not kept
  // --user-stacks only (exports print these lines only then)
  bool user_stacks = false;
  uint32_t user_entries = 0;           // user table pool elements in use (of pool_size)
  uint64_t user_stacks_truncated = 0;  // stopping short of an entry point (no frame pointers)
  uint64_t user_processes_gone = 0;  // stacks whose process exited before the daemon read its maps
  uint64_t user_maps_evicted = 0;    // process maps dropped from the cache (its cap)
  uint64_t user_binaries_evicted = 0;  // symbol tables closed (the symbolizer's cap)
  uint64_t user_parse_failures = 0;  // build ids and names lost to a parser helper's crash or hang
  // With unwind tables (x86_64): processes and files loaded, rows used of the
  // rows map, files left out because it was full.
  uint64_t unwind_processes = 0, unwind_tables = 0, unwind_rows = 0, unwind_rows_full = 0,
           unwind_tables_freed = 0;
  // User stacks not resolved: the resolver's queue was full (metrics only).
  uint64_t user_stacks_dropped = 0;

  uint64_t get(smt_counter c) const { return counters[c]; }
  // --profile samples taken in user mode: hits under the empty kernel stack
  // SMT_NO_KERNEL_STACK, counted apart too (SMC_DROP_NO_KERNEL_STACK, a
  // counter among the drops by its place in the ABI, yet no drop).
  uint64_t user_mode() const { return get(SMC_DROP_NO_KERNEL_STACK); }
  // Events lost, or whose stack the table could not take (sent whole instead).
  uint64_t drops() const {
    uint64_t d = 0;
    for (int c = SMC_FIRST_DROP; c <= SMC_LAST_DROP; ++c) d += counters[c];
    return d - user_mode();
  }
  // Events the daemon counts under a stack: hits, and the table's drops whose
  // frames were sent whole instead (a busy slot's stack then counts under
  // its table id, the rest in the overflow store).
  uint64_t counted() const { return get(SMC_HITS) + get(SMC_SENT_WHOLE); }
  // Every event of this epoch ends in a hit or exactly one named drop.
  uint64_t events() const { return get(SMC_HITS) + drops(); }
  bool pool_full() const { return entries >= pool_size; }
  // The RFC's hit_rate: hits * 100 / (hits + drops), a stack's first insert counted as a hit.
  // None without hits or drops, where the RFC prints no hit_rate line.
  std::optional<uint64_t> hit_rate_percent() const {
    const uint64_t tried = get(SMC_HITS) + drops();
    if (tried == 0) return std::nullopt;
    return get(SMC_HITS) * 100 / tried;
  }
  // Our reuse_rate: share of events whose stack was already stored (hits less first inserts).
  // None without events, as hit_rate.
  std::optional<uint64_t> reuse_rate_percent() const {
    if (events() == 0) return std::nullopt;
    // A stat read mid-insert can show more inserts than hits (the RFC's kernel counts the
    // element before the hit, and the tracefs path takes its entries as inserts).
    const uint64_t reused = get(SMC_HITS) > get(SMC_INSERTS) ? get(SMC_HITS) - get(SMC_INSERTS) : 0;
    return reused * 100 / events();
  }
};

}  // namespace stackmapd
