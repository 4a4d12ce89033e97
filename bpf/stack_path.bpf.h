/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The per-event stack path: capture the kernel stack, cut the tracing
 * machinery's leading frames, find or insert it in the table (find_stack,
 * bpfloader_compat.bpf.h), and the user stack with it (--user-stacks). What
 * an event learns here is counted later, in its batch's write window
 * (batch.bpf.h, event_path.bpf.h).
 */
#ifndef STACKMAPD_STACK_PATH_BPF_H
#define STACKMAPD_STACK_PATH_BPF_H

static __always_inline enum smt_counter drop_counter(enum smt_status s)
{
	switch (s) {
	case SMT_POOL_FULL:
		return SMC_DROP_POOL_FULL;
	case SMT_BUSY:
		return SMC_DROP_BUSY;
	default: /* SMT_PROBE_LIMIT, and a map error that sane sizes exclude */
		return SMC_DROP_PROBE_LIMIT;
	}
}

/* What an event learnt before its batch is written, counted there. */
struct event_facts {
	__u64 ring_bytes; /* a thread name announced */
	__u32 names_full;
	__u32 truncated;
	/* --user-stacks (capture_user) */
	__u32 user_stack_id;
	__u8 no_user_stack;
	__u8 user_not_stored;
	__u8 user_truncated;
	__u8 user_stop; /* with unwind tables: where the walk ended (0: depth, or no walk) */
};

/* A binary search of the machinery's sorted ranges (abi.h), one step per call. */
struct range_search {
	__u64 ip;
	__u32 lo, hi, found;
};

static __always_inline int range_step(struct range_search *s)
{
	const volatile struct smt_config *cfg = get_config();
	__u32 mid;

	if (!cfg || s->lo >= s->hi)
		return 1;
	mid = (s->lo + s->hi) / 2;
	if (mid >= SMT_MAX_STRIP)
		return 1;
	if (s->ip < cfg->strip[mid].start) {
		s->hi = mid;
	} else if (s->ip >= cfg->strip[mid].end) {
		s->lo = mid + 1;
	} else {
		s->found = 1;
		return 1;
	}
	return 0;
}

#define SMT_STRIP_STEPS 10 /* 2^10 > SMT_MAX_STRIP */
SMT_LOOP_CB range_step_cb(__u32 i, void *ctx)
{
	return range_step(ctx);
}

/* In a callback the verifier walks the search once, not once per outcome of
 * every compare before it (seconds of load time otherwise). */
static __always_inline void search_ranges(struct range_search *s)
{
	smt_loop(SMT_STRIP_STEPS, range_step_cb, s);
}

/* Whether ip lies in one of the machinery's ranges: one compare for the
 * common ip outside all of them, else the search. */
static __always_inline int machinery_frame(const volatile struct smt_config *cfg, __u64 ip)
{
	struct range_search s = { .ip = ip, .hi = cfg->strip_nr };

	if (!s.hi || s.hi > SMT_MAX_STRIP || ip < cfg->strip[0].start ||
	    ip >= cfg->strip[s.hi - 1].end)
		return 0;
	search_ranges(&s);
	return s.found;
}

/* Cuts the leading frames of the tracing machinery (abi.h), keeping one
 * frame at least. Returns the frames left. */
static __always_inline __u32 cut_machinery(const volatile struct smt_config *cfg,
					   struct stack_buf *buf, __u32 nr)
{
	__u32 cut = 0;

	for (int i = 0; i < SMT_MAX_STRIP_FRAMES; i++) {
		if (cut + 1 >= nr || !machinery_frame(cfg, buf->ips[cut]))
			break;
		cut++;
	}
	if (!cut)
		return nr;
	for (__u32 k = 0; k < SMT_MAX_DEPTH + 1; k++) {
		if (k + cut >= nr)
			break;
		buf->ips[k] = buf->ips[k + cut];
	}
	return nr - cut;
}

/* Captures the current stack into buf and finds or inserts it. Returns the
 * drop counter of an event that ends here, or SMC_HITS. */
static __always_inline enum smt_counter capture(void *ctx, const volatile struct smt_config *cfg,
						struct smt_globals *g, struct smt_batch *b,
						__u32 epoch, struct stack_buf *buf, __u32 skip,
						struct event_facts *f, struct smt_probe *p)
{
	long len = bpf_get_stack(ctx, buf->ips, sizeof(buf->ips), skip & BPF_F_SKIP_FIELD_MASK);
	__u32 nr;

	p->status = SMT_PROBING;
	p->nr = 0;
	if (len < (long)sizeof(__u64))
		return len == 0 ? SMC_DROP_NO_KERNEL_STACK : SMC_DROP_STACK_ERROR;
	nr = cut_machinery(cfg, buf, len / sizeof(__u64));
	if (nr > SMT_MAX_DEPTH) {
		/* The RFC keeps the innermost frames of a deeper stack. */
		nr = SMT_MAX_DEPTH;
		f->truncated = 1;
	}
	find_stack(cfg, g, b, epoch, buf, nr, p);
	if (p->status != SMT_FOUND && p->status != SMT_INSERTED)
		return drop_counter(p->status);
	return SMC_HITS;
}

/* --user-stacks: the event's user stack id and facts, in f. Off, it costs
 * one compare of a .rodata constant, which the verifier prunes. */
static __always_inline void capture_user(void *ctx, const volatile struct smt_config *cfg,
					 struct smt_globals *g, struct stack_buf *buf,
					 struct event_facts *f)
{
	__u64 r;

	f->user_stack_id = SMT_NO_USER_STACK;
	if (!cfg->user_stacks)
		return;
	r = smt_user_stack(ctx, buf);
	f->user_stack_id = (__u32)r;
	f->no_user_stack = !!(r & USER_NONE);
	f->user_not_stored = !!(r & USER_NOT_STORED);
	f->user_truncated = !!(r & USER_TRUNCATED);
	f->user_stop = USER_STOP_OF(r);
}

#endif /* STACKMAPD_STACK_PATH_BPF_H */
