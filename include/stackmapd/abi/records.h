/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The ring-buffer records and their kinds (a trace buffer's layout is in
 * trace.h), the daemon's view of a --trace event, and the key of the
 * thread-name map the name records announce.
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

/*
 * Ring-buffer records, each led by its kind (enum smt_record_kind) in its
 * first 4 bytes, which the daemon dispatches on. An event carries what
 * attribution needs (--by, --sum, --offcpu): who, where, which source and
 * how much. Events are counted per CPU in an smt_batch and reach the ring
 * as smt_count_records, many events to a record; a --trace session writes
 * each event into its batch's trace buffer instead (smt_trace_buf, many
 * events to a record; smt_event_record for --offcpu's).
 */
enum smt_record_kind {
	SMT_RECORD_NONE,  /* no ring record: an event in a batch entry or decoded */
	SMT_RECORD_COUNT, /* smt_count_record */
	SMT_RECORD_STACK, /* smt_stack_record */
	SMT_RECORD_NAME,  /* smt_name_record */
	SMT_RECORD_EVENT, /* smt_event_record, an --offcpu block of a --trace session */
	SMT_RECORD_TRACE, /* smt_trace_buf, SMT_TRACE_RECORD_SIZE(bytes) long (trace.h) */
};

struct smt_event_record {
	__u32 kind; /* of the record the event leads; SMT_RECORD_NONE where it leads none */
	__u32 stack_id;
	__u32 epoch;
	__u32 tgid;
	__u32 tid;
	__u32 user_stack_id; /* --user-stacks: its id in the user table, else SMT_NO_USER_STACK */
	__u64 cgroup_id;     /* the task's cgroup v2 id (its directory's inode) */
	__u64 weight;	     /* 1, the --sum field's value, or ns off the CPU */
	__u32 name;	     /* thread name id, announced by an smt_name_record; 0: none */
	__u16 source;	     /* index into the session's sources */
	__u16 cpu;
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

/* The daemon's view of one --trace event, decoded from a trace buffer: the
 * event with its timestamp (CLOCK_MONOTONIC) and the first raw_len bytes of
 * the tracepoint's raw record (0 for -f and --profile events, which have no
 * fields); raw[] past raw_len is undefined. */
struct smt_trace_record {
	struct smt_event_record event;
	__u64 ts_ns;
	__u32 raw_len;
	__u32 flags; /* SMT_TE_WHOLE: event.stack_id is that n, not an id */
	char raw[SMT_TRACE_RAW_MAX];
};

/* A thread name seen for the first time, sent before any event that names
 * it: names are stored once, so a process that exits at once or renames
 * itself by exec is named as it was at each event. */
struct smt_name_record {
	__u32 kind;
	__u32 name;
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
SMT_STATIC_ASSERT(sizeof(struct smt_trace_record) == 64 + SMT_TRACE_RAW_MAX, "trace layout");
SMT_STATIC_ASSERT(__builtin_offsetof(struct smt_name_record, kind) == 0 &&
			  __builtin_offsetof(struct smt_stack_record, counts.event.kind) == 0,
		  "every record leads with its kind");

/* The kind of the ring record of `size` bytes at `data`: SMT_RECORD_NONE when
 * the kind is unknown or the size is not its kind's (a trace buffer's reader
 * checks its size against its header). */
static inline __u32 smt_record_kind(const void *data, __u64 size)
{
	__u64 own_size;
	__u32 kind;

	if (size < sizeof(kind))
		return SMT_RECORD_NONE;
	__builtin_memcpy(&kind, data, sizeof(kind));
	switch (kind) {
	case SMT_RECORD_COUNT:
		own_size = sizeof(struct smt_count_record);
		break;
	case SMT_RECORD_STACK:
		own_size = sizeof(struct smt_stack_record);
		break;
	case SMT_RECORD_NAME:
		own_size = sizeof(struct smt_name_record);
		break;
	case SMT_RECORD_EVENT:
		own_size = sizeof(struct smt_event_record);
		break;
	case SMT_RECORD_TRACE:
		if (size < SMT_TRACE_HEADER)
			return SMT_RECORD_NONE;
		return kind;
	default:
		return SMT_RECORD_NONE;
	}
	if (size != own_size)
		return SMT_RECORD_NONE;
	return kind;
}

#endif /* STACKMAPD_ABI_RECORDS_H */
