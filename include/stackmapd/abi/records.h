/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The ring-buffer records (bar the trace buffers, trace.h) and the key
 * of the thread-name map they announce.
 * Part of stackmapd/abi.h, which includes it.
 */
#ifndef STACKMAPD_ABI_RECORDS_H
#define STACKMAPD_ABI_RECORDS_H

#ifndef STACKMAPD_ABI_H
#error "include stackmapd/abi.h"
#endif

/* The key of the BPF side's name -> id map (a task's comm). */
struct smt_comm {
	char comm[16];
};

/* Ring-buffer records, told apart by size. An event carries what
 * attribution needs (--by, --sum, --offcpu): who, where, which source and
 * how much. Events are counted per CPU in an smt_batch and reach the ring
 * as smt_count_records, many events to a record; a --trace session writes
 * each event into its batch's trace buffer instead (smt_trace_buf, many
 * events to a record; smt_event_record for --offcpu's). */
struct smt_event_record {
	__u32 stack_id;
	__u32 epoch;
	__u32 tgid;
	__u32 tid;
	__u64 cgroup_id; /* the task's cgroup v2 id (its directory's inode) */
	__u64 weight;	 /* 1, the --sum field's value, or ns off the CPU */
	__u32 name;	 /* thread name id, announced by an smt_name_record; 0: none */
	__u16 source;	 /* index into the session's sources */
	__u16 cpu;
	__u32 user_stack_id; /* --user-stacks: its id in the user table, else SMT_NO_USER_STACK */
	__u32 reserved;
};

/* Events of one key counted together: what a batch entry sends the ring when
 * it makes room for another key. seq orders the records of one batch
 * (SMT_BATCH_SEQ), so the daemon knows when it has read all of them. */
struct smt_count_record {
	struct smt_event_record event; /* weight: the sum of the events' weights */
	__u32 count;
	__u32 seq;
};

/* seq = the batch's index (cpu * SMT_MAX_NEST + level) above the number of
 * records it has sent, modulo 2^18: the daemon is never that far behind a
 * batch (a ring buffer holds fewer records). */
#define SMT_SEQ_BITS 18
#define SMT_BATCH_SEQ(batch, n) ((batch) << SMT_SEQ_BITS | ((n) & ((1U << SMT_SEQ_BITS) - 1)))
#define SMT_SEQ_BATCH(seq) ((seq) >> SMT_SEQ_BITS)
#define SMT_MAX_CPUS ((1U << (32 - SMT_SEQ_BITS)) / SMT_MAX_NEST)

/* A thread name seen for the first time, sent before any event that names
 * it: names are stored once, so a process that exits at once or renames
 * itself by exec is named as it was at each event. */
struct smt_name_record {
	__u32 name;
	__u32 reserved;
	char comm[16];
};

/* Distinct thread names the BPF side keeps ids for. */
#define SMT_MAX_NAMES 8192

/* A stack with its frames: count 0, a --verify sample (1 in N events also
 * sends what it captured; the event itself is counted in its batch), or
 * stack_id SMT_NO_STACK_ID, an event whose stack the table could not take,
 * for the daemon's overflow store. */
struct smt_stack_record {
	struct smt_count_record counts;
	__u32 nr;
	__u32 reserved;
	__u64 ips[SMT_MAX_DEPTH];
};

SMT_STATIC_ASSERT(sizeof(struct smt_event_record) == 48, "event layout");
SMT_STATIC_ASSERT(sizeof(struct smt_name_record) == 24, "name layout");
SMT_STATIC_ASSERT(sizeof(struct smt_stack_record) == 64 + 8 * SMT_MAX_DEPTH, "stack layout");
SMT_STATIC_ASSERT(sizeof(struct smt_count_record) == 56, "count layout");

#endif /* STACKMAPD_ABI_RECORDS_H */
