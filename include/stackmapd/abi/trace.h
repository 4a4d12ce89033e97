/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --trace: the layout of the trace buffer each batch writes its events into.
 * Part of stackmapd/abi.h, which includes it.
 */
#ifndef STACKMAPD_ABI_TRACE_H
#define STACKMAPD_ABI_TRACE_H

#ifndef STACKMAPD_ABI_H
#error "include stackmapd/abi.h"
#endif

/* Bytes of a tracepoint's raw record (common fields first, as its format
 * file lays them out) a --trace event carries at most. */
#define SMT_TRACE_RAW_MAX 256

/*
 * --trace: each CPU and nesting level writes its events, in order, into the
 * trace buffer of its batch (the union in struct smt_batch, under the same
 * seqlock as its counters), and sends the buffer to the ring whole only when
 * the next event might not fit: one ring record for a few hundred events.
 * The daemon reads what is not sent yet in place (mmapped), at every drain
 * and for every snapshot, so an idle CPU's events never wait for new ones.
 *
 * A buffer is a run of entries, each 4-aligned (u64 values go as two u32
 * halves): an smt_trace_entry, then what its flags say follows, in this
 * order: the context (smt_trace_context, who: when it differs from the
 * entry before), the timestamp (when it is not within 2^32 ns of the entry
 * before), the weight (when not 1), then raw_len bytes of the raw record,
 * padded to 4. The first entry of a buffer carries its context and
 * timestamp, so each buffer decodes alone; the CPU is the batch's.
 */
#define SMT_TE_CONTEXT 1U /* an smt_trace_context follows */
#define SMT_TE_TS 2U	  /* u32 ts_lo, ts_hi follow; ts_delta is 0 */
#define SMT_TE_WEIGHT 4U  /* u32 weight_lo, weight_hi follow; else it weighs 1 */
/* An event whose stack the table could not take: its frames went to the ring
 * before it in an smt_stack_record of the same batch, whose SMT_BATCH_SEQ n
 * the entry's stack_id holds. */
#define SMT_TE_WHOLE 8U

struct smt_trace_entry {
	__u32 ts_delta; /* ns after the entry before in this buffer */
	__u32 stack_id;
	__u16 raw_len;
	__u16 flags;
};

/* Who an event is: what it shares with the events around it. */
struct smt_trace_context {
	__u32 tgid;
	__u32 tid;
	__u32 cgroup_lo;
	__u32 cgroup_hi;
	__u32 name;
	__u32 epoch;
	__u32 user_stack_id;
	__u16 source;
	__u16 reserved;
};

#define SMT_TRACE_ENTRY_MAX \
	(sizeof(struct smt_trace_entry) + sizeof(struct smt_trace_context) + 16 + SMT_TRACE_RAW_MAX)
#define SMT_TRACE_HEADER 16U /* kind, seq, bytes, events: what precedes data[] in the ring */
#define SMT_TRACE_BYTES 14280U

/* Sent as its first SMT_TRACE_HEADER + bytes bytes. */
struct smt_trace_buf {
	__u32 kind; /* SMT_RECORD_TRACE, written as it is sent */
	/* SMT_BATCH_SEQ(batch, n), n = the buffers this one sent before (so the
	 * daemon knows which part of a buffer it has read in place); in place
	 * only n is kept up to date. */
	__u32 seq;
	__u32 bytes;  /* of data[] written */
	__u32 events; /* entries in data[] */
	char data[SMT_TRACE_BYTES];
	/* The writer's own, never sent: */
	__u64 last_ts;
	struct smt_trace_context last;
};

#define SMT_TRACE_RECORD_SIZE(bytes) (SMT_TRACE_HEADER + (bytes))

SMT_STATIC_ASSERT(sizeof(struct smt_trace_entry) == 12, "trace entry layout");
SMT_STATIC_ASSERT(sizeof(struct smt_trace_context) == 32, "trace context layout");
SMT_STATIC_ASSERT(sizeof(struct smt_trace_buf) ==
			  SMT_TRACE_HEADER + SMT_TRACE_BYTES + 8 + sizeof(struct smt_trace_context),
		  "trace buffer layout");
SMT_STATIC_ASSERT(SMT_TRACE_BYTES % 4 == 0 && SMT_TRACE_BYTES < 65536, "trace buffer size");

#endif /* STACKMAPD_ABI_TRACE_H */
