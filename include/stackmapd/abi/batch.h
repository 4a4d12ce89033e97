/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The batch of one CPU and nesting level: the events it counts, the
 * stacks it found lately, and its counters.
 * Part of stackmapd/abi.h, which includes it.
 */
#ifndef STACKMAPD_ABI_BATCH_H
#define STACKMAPD_ABI_BATCH_H

#ifndef STACKMAPD_ABI_H
#error "include stackmapd/abi.h"
#endif

/* One per CPU and nesting level (see SMT_MAX_NEST), in its smt_batch. */
struct smt_cpu_counters {
	__u64 events;	  /* every event of every epoch, counted apart */
	__u64 ring_bytes; /* submitted to the ring buffer, record headers included */
	__u64 epoch[2][SMC_NR];
};

/* Distinct keys a batch holds, direct-mapped by stack and thread. */
#define SMT_BATCH_BITS 8
#define SMT_BATCH_ENTRIES (1U << SMT_BATCH_BITS)

/*
 * One CPU's events at one nesting level, counted where they happen: an event
 * whose key (stack, thread, source, ...) is already in its entry adds to it,
 * with no ring-buffer record and no write another CPU shares. An entry sends
 * its counts (smt_count_record) only to make room for another key. The
 * daemon reads the entries in place (mmapped) for a snapshot, so counts are
 * exact at any moment without waiting for anything to be sent.
 * A seqlock: the one writer (the program at this level on this CPU) makes
 * seq odd, writes, makes it even, with fully ordered atomics; the daemon
 * copies between two equal even reads of seq.
 */
struct smt_batch_entry {
	struct smt_event_record event; /* weight: the sum so far */
	__u32 count;		       /* events; 0: empty */
	__u32 bucket;		       /* --hist: its events' log2 bucket (hist.h), else 0 */
};

/* Stacks a batch found lately (struct smt_recent), direct-mapped by their
 * callers' frames. */
#define SMT_RECENT_BITS 4
#define SMT_RECENT_STACKS (1U << SMT_RECENT_BITS)

/* A stack found in epoch `epoch`: its id and its pool element + 1 (0: none).
 * An event whose frames equal that element's needs no hash and no probe:
 * within one epoch a stack's slot and element never change (only a reset
 * clears them, and it ends the epoch). BPF's alone: the daemon zeroes it
 * with the batch and never reads it. */
struct smt_recent {
	__u32 epoch;
	__u32 stack;
	__u32 elt;
};

struct smt_batch {
	__u32 seq;
	__u32 sent; /* count records sent, SMT_BATCH_SEQ's n of the last one */
	/* The last thread name seen here, so that a run of one thread's events
	 * needs no names map lookup. */
	struct smt_comm last_comm;
	__u32 last_name;
	__u32 reserved;
	struct smt_recent recent[SMT_RECENT_STACKS];
	struct smt_cpu_counters counters;
	/* A session counts (entries) or traces (trace), never both. */
	union {
		struct smt_batch_entry entries[SMT_BATCH_ENTRIES];
		struct smt_trace_buf trace;
	};
} __attribute__((aligned(64))); /* a CPU's batches share no cache line with another's */

SMT_STATIC_ASSERT(sizeof(struct smt_trace_buf) <=
			  sizeof(struct smt_batch_entry) * SMT_BATCH_ENTRIES,
		  "the trace buffer takes the entries' room");

#endif /* STACKMAPD_ABI_BATCH_H */
