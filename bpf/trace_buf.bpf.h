/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --trace: the writer of each batch's trace buffer (abi.h, struct
 * smt_trace_buf), which takes the place of its counts.
 */
#ifndef STACKMAPD_TRACE_BUF_BPF_H
#define STACKMAPD_TRACE_BUF_BPF_H

/* In the write window, --trace: sends the batch's trace buffer (abi.h,
 * smt_trace_buf) and starts the next one. Nonzero when the ring has no room:
 * the buffer keeps its events (the daemon reads them in place). */
static __always_inline int send_trace_buf(const volatile struct smt_config *cfg,
					  struct smt_batch *b, __u32 batch)
{
	struct smt_trace_buf *t = &b->trace;
	__u32 used = t->bytes, n = t->seq & ((1U << SMT_SEQ_BITS) - 1), size;

	if (used > SMT_TRACE_BYTES)
		used = SMT_TRACE_BYTES;
	size = SMT_TRACE_RECORD_SIZE(used);
	t->kind = SMT_RECORD_TRACE;
	t->seq = SMT_BATCH_SEQ(batch, n);
	if (bpf_ringbuf_output(&ids, t, size, wakeup_flags(cfg)))
		return -1;
	/* The entries were counted as they were written. */
	b->counters.ring_bytes += ((size + 7) & ~7U) + BPF_RINGBUF_HDR_SZ - used;
	t->seq = SMT_BATCH_SEQ(batch, n + 1);
	t->bytes = 0;
	t->events = 0;
	return 0;
}

static __always_inline int same_context(const struct smt_trace_context *a,
					const struct smt_trace_context *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

/* In the write window, --trace: appends the event to the batch's trace
 * buffer (abi.h), in time order, with the first raw_len bytes of ctx, the
 * tracepoint's raw entry (the daemon sized raw_len from its format file; 0
 * for -f and --profile sources). Who it is goes only when it changed.
 * whole: its frames were just sent whole (SMT_TE_WHOLE). */
static __always_inline enum smt_counter send_trace(const volatile struct smt_config *cfg,
						   struct smt_batch *b, __u32 batch,
						   const struct smt_event_record *e, void *ctx,
						   __u32 raw_len, int whole)
{
	struct smt_trace_buf *t = &b->trace;
	struct smt_trace_context who = {
		.tgid = e->tgid,
		.tid = e->tid,
		.cgroup_lo = (__u32)e->cgroup_id,
		.cgroup_hi = e->cgroup_id >> 32,
		.name = e->name,
		.epoch = e->epoch,
		.user_stack_id = e->user_stack_id,
		.source = e->source,
	};
	__u64 now = bpf_ktime_get_ns(), delta = now - t->last_ts;
	struct smt_trace_entry *te;
	__u32 off = t->bytes, at, flags = 0, *w;

	if (off > SMT_TRACE_BYTES - SMT_TRACE_ENTRY_MAX) {
		if (send_trace_buf(cfg, b, batch))
			return SMC_DROP_RINGBUF_FULL;
		off = 0;
	}
	/* A buffer decodes alone: its first entry says who and when. */
	if (!t->events || !same_context(&who, &t->last))
		flags |= SMT_TE_CONTEXT;
	if (!t->events || delta > 0xffffffffULL)
		flags |= SMT_TE_TS;
	if (e->weight != 1)
		flags |= SMT_TE_WEIGHT;
	if (whole)
		flags |= SMT_TE_WHOLE;
	if (raw_len > SMT_TRACE_RAW_MAX)
		raw_len = SMT_TRACE_RAW_MAX;
	te = (struct smt_trace_entry *)&t->data[off];
	at = off + sizeof(*te);
	if (flags & SMT_TE_CONTEXT) {
		const __u32 *from = (const __u32 *)&who;

		/* As words: a byte copy is what clang makes of a char array. */
		w = (__u32 *)&t->data[at];
		for (__u32 i = 0; i < sizeof(who) / 4; i++)
			w[i] = from[i];
		t->last = who;
		at += sizeof(who);
	}
	if (flags & SMT_TE_TS) {
		w = (__u32 *)&t->data[at];
		w[0] = (__u32)now;
		w[1] = now >> 32;
		at += 8;
	}
	if (flags & SMT_TE_WEIGHT) {
		w = (__u32 *)&t->data[at];
		w[0] = (__u32)e->weight;
		w[1] = e->weight >> 32;
		at += 8;
	}
	if (!raw_len || bpf_probe_read_kernel(&t->data[at], raw_len, ctx))
		raw_len = 0;
	te->ts_delta = flags & SMT_TE_TS ? 0 : (__u32)delta;
	te->stack_id = whole ? b->sent & ((1U << SMT_SEQ_BITS) - 1) : e->stack_id;
	te->raw_len = raw_len;
	te->flags = flags;
	at += (raw_len + 3) & ~3U;
	b->counters.ring_bytes += at - off;
	t->bytes = at;
	t->events++;
	t->last_ts = now;
	return SMC_HITS;
}

#endif /* STACKMAPD_TRACE_BUF_BPF_H */
