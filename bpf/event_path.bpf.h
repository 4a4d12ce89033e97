/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One event, from its program's entry to its outcome: the nesting level's
 * buffer and batch, the stack path (stack_path.bpf.h), then in the batch's
 * write window where the event goes (batch.bpf.h, trace_buf.bpf.h) and the
 * one counter it ends in.
 */
#ifndef STACKMAPD_EVENT_PATH_BPF_H
#define STACKMAPD_EVENT_PATH_BPF_H

/* The event's weight: 1, or what the cookie's weight field names (--sum):
 * a tracepoint record's field, a -u argument's register in ctx (pt_regs).
 * A negative signed value weighs 0. */
static __always_inline __u64 event_weight(void *ctx, __u64 cookie)
{
	__u32 field = SMT_COOKIE_WEIGHT_FIELD(cookie), size = SMT_WEIGHT_SIZE(field), shift;
	__u64 v = 0;

	if (!size || size > 8)
		return 1;
	if (bpf_probe_read_kernel(&v, size, (char *)ctx + SMT_WEIGHT_OFFSET(field)))
		return 0;
	if (SMT_WEIGHT_SIGNED(field)) {
		shift = 64 - 8 * size;
		if ((__s64)(v << shift) < 0)
			return 0;
	}
	return v;
}

/* Who and where, for an event of the current task. */
static __always_inline __u64 cgroup_id(const volatile struct smt_config *cfg)
{
	return cfg->cgroup_ids ? bpf_get_current_cgroup_id() : 0;
}

static __always_inline void fill_event(const volatile struct smt_config *cfg,
				       struct smt_event_record *e, __u32 stack_id, __u32 epoch,
				       __u32 name, __u32 source, __u64 weight)
{
	__u64 id = bpf_get_current_pid_tgid();

	e->kind = SMT_RECORD_NONE; /* set by whichever record sends it */
	e->stack_id = stack_id;
	e->epoch = epoch;
	e->tgid = id >> 32;
	e->tid = (__u32)id;
	e->cgroup_id = cgroup_id(cfg);
	e->weight = weight;
	e->name = name;
	e->source = source;
	e->cpu = bpf_get_smp_processor_id();
	e->user_stack_id = SMT_NO_USER_STACK;
}

/* In the write window: where a captured event goes. Returns its outcome. */
static __always_inline enum smt_counter deliver(const volatile struct smt_config *cfg,
						struct smt_batch *b, __u32 batch,
						struct smt_event_record *e, struct stack_buf *buf,
						const struct smt_probe *p, enum smt_counter outcome,
						__u64 *cnt, void *ctx, __u32 raw_len)
{
	__u32 every = cfg->verify_every;

	if (outcome == SMC_DROP_POOL_FULL || outcome == SMC_DROP_PROBE_LIMIT ||
	    outcome == SMC_DROP_BUSY) {
		/* Not in the table, not lost: the daemon keeps it whole. */
		e->stack_id = SMT_NO_STACK_ID;
		if (!send_stack(cfg, b, batch, e, 1, buf, p->nr))
			return SMC_DROP_RINGBUF_FULL;
		count(cnt, SMC_SENT_WHOLE);
		/* --trace: the event after its frames, naming their record. */
		if (cfg->trace_records)
			send_trace(cfg, b, batch, e, ctx, raw_len, 1);
		return outcome;
	}
	if (outcome != SMC_HITS)
		return outcome;
	if (cfg->trace_records)
		return send_trace(cfg, b, batch, e, ctx, raw_len, 0);
	if (every && ++buf->verify_countdown >= every) {
		buf->verify_countdown = 0;
		send_stack(cfg, b, batch, e, 0, buf, p->nr);
	}
	return add_to_batch(cfg, b, batch, e);
}

static __always_inline int record_in(void *ctx, const volatile struct smt_config *cfg,
				     struct smt_globals *g, struct stack_buf *buf, __u64 cookie,
				     __u32 skip, struct smt_batch *b, __u32 batch)
{
	__u32 state, epoch, name, in_user_mode;
	struct event_facts f = {};
	struct smt_event_record e;
	enum smt_counter outcome;
	struct smt_probe p;
	__u64 *cnt;

	state = *(volatile __u32 *)&g->shared.state;
	epoch = SMT_STATE_EPOCH(state);
	name = thread_name(g, b, &f);
	p.status = SMT_PROBING;
	p.nr = 0;
	p.idx = SMT_NO_STACK_ID;
	if (state & SMT_STATE_RESETTING)
		outcome = SMC_DROP_RESETTING;
	else
		outcome = capture(ctx, cfg, g, b, epoch, buf, skip, &f, &p);
	fill_event(cfg, &e, p.idx, epoch, name, SMT_COOKIE_SOURCE(cookie),
		   event_weight(ctx, cookie));
	if (cfg->user_stacks && !(state & SMT_STATE_RESETTING)) {
		buf->at_entry = !!(cookie & SMT_COOKIE_AT_ENTRY);
		capture_user(ctx, cfg, g, buf, &f);
		e.user_stack_id = f.user_stack_id;
	}
	/* A sample taken in user mode: an empty kernel stack (abi.h,
	 * SMT_NO_KERNEL_STACK), its user stack the rest when there is one. A
	 * hit, and counted apart as taken in user mode. */
	in_user_mode = outcome == SMC_DROP_NO_KERNEL_STACK;
	if (in_user_mode) {
		outcome = SMC_HITS;
		e.stack_id = SMT_NO_KERNEL_STACK;
	}

	batch_write_begin(b);
	cnt = b->counters.epoch[epoch & 1];
	b->counters.events++;
	count_facts(b, cnt, &f);
	outcome =
		deliver(cfg, b, batch, &e, buf, &p, outcome, cnt, ctx, SMT_COOKIE_RAW_LEN(cookie));
	count(cnt, outcome);
	if (in_user_mode)
		count(cnt, SMC_DROP_NO_KERNEL_STACK);
	if (outcome == SMC_HITS && p.status == SMT_INSERTED)
		count(cnt, SMC_INSERTS);
	batch_write_end(b);
	return 0;
}

/* The nesting level's buffer and batch for one program run, or NULL when
 * programs nest deeper than any context can (counted, atomically, in the
 * last level, which its rightful user may be updating). Pair with
 * leave_level(). */
static __always_inline __u32 *enter_level(struct smt_globals *g, struct stack_buf **buf,
					  struct smt_batch **b, __u32 *batch)
{
	__u32 zero = 0, level, cpu = bpf_get_smp_processor_id(), last, *depth;
	struct smt_batch *full;

	depth = bpf_map_lookup_elem(&nesting, &zero);
	if (!depth)
		return NULL;
	/* Plain increments are enough: whatever interrupts us on this CPU
	 * restores the depth before we resume. */
	level = (*depth)++;
	*batch = cpu * SMT_MAX_NEST + level;
	*buf = bpf_map_lookup_elem(&scratch, &level);
	*b = level < SMT_MAX_NEST ? bpf_map_lookup_elem(&batches, batch) : NULL;
	if (*buf && *b)
		return depth;
	last = cpu * SMT_MAX_NEST + SMT_MAX_NEST - 1;
	full = bpf_map_lookup_elem(&batches, &last);
	if (full) {
		__sync_fetch_and_add(&full->counters.events, 1);
		__sync_fetch_and_add(
			&full->counters.epoch[SMT_STATE_EPOCH(g->shared.state) & 1][SMC_DROP_NESTED],
			1);
	}
	(*depth)--;
	return NULL;
}

static __always_inline void leave_level(__u32 *depth)
{
	(*depth)--;
}

/* --pid: whether the current process is one of the session's. nr is known
 * to the verifier, which drops the loop for one pid: that costs the one
 * compare it did before lists. */
static __always_inline int tgid_wanted(const volatile struct smt_config *cfg, __u32 nr)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (cfg->filter_tgid[0] == tgid)
		return 1;
	for (__u32 i = 1; i < SMT_MAX_PIDS && i < nr; i++)
		if (cfg->filter_tgid[i] == tgid)
			return 1;
	return 0;
}

/* --comm: whether the current task's name is one of the session's. */
static __always_inline int comm_wanted(const volatile struct smt_config *cfg, __u32 nr)
{
	struct smt_comm c __attribute__((aligned(8)));
	const __u64 *w = (const __u64 *)c.comm;

	current_comm(&c);
	for (__u32 i = 0; i < SMT_MAX_COMMS && i < nr; i++)
		if (cfg->filter_comm[i][0] == w[0] && cfg->filter_comm[i][1] == w[1])
			return 1;
	return 0;
}

/* --cgroup: whether the current task is in one of the session's cgroups or
 * below one. Only reached when the session has some, so kernels without
 * cgroups still load the programs. */
static __always_inline int cgroup_wanted(const volatile struct smt_config *cfg, __u32 nr)
{
	for (__u32 i = 0; i < SMT_MAX_CGROUPS && i < nr; i++)
		if (bpf_get_current_ancestor_cgroup_id(cfg->filter_cgroup[i].level) ==
		    cfg->filter_cgroup[i].id)
			return 1;
	return 0;
}

#ifndef SMT_BPFLOADER
/* -- CMD: whether the current process is the command or descends from it
 * (bpf/follow.bpf.h keeps the map). */
static __always_inline int tracked_wanted(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return bpf_map_lookup_elem(&tracked, &tgid) != NULL;
}
#endif

/* The session's filters, AND across kinds, OR within one; each count is
 * frozen .rodata, so the verifier drops the kinds a session does not use. */
static __always_inline int filtered_out(const volatile struct smt_config *cfg)
{
	__u32 nr = cfg->filter_tgid_nr;
	__u32 comms = cfg->filter_comm_nr;
	__u32 cgroups = cfg->filter_cgroup_nr;

	if (nr && !tgid_wanted(cfg, nr))
		return 1;
	if (comms && !comm_wanted(cfg, comms))
		return 1;
	if (cgroups && !cgroup_wanted(cfg, cgroups))
		return 1;
#ifndef SMT_BPFLOADER
	if (cfg->follow_command && !tracked_wanted())
		return 1;
#endif
	return cfg->filter_cpu != SMT_ANY_CPU && bpf_get_smp_processor_id() != cfg->filter_cpu;
}

/* skip: frames above the traced code (see stackmapd_fentry). raw_record:
 * ctx is a tracepoint's record, which --filter applies to. */
static __always_inline int record_stack(void *ctx, __u64 cookie, __u32 skip, int raw_record)
{
	const volatile struct smt_config *cfg = get_config();
	struct smt_globals *g = get_globals();
	struct stack_buf *buf;
	struct smt_batch *b;
	__u32 *depth, batch;

	if (!cfg || !g || filtered_out(cfg))
		return 0;
	depth = enter_level(g, &buf, &b, &batch);
	if (!depth)
		return 0;
	if (!(raw_record && record_filtered_out(ctx, cfg, buf)))
		record_in(ctx, cfg, g, buf, cookie, skip, b, batch);
	leave_level(depth);
	return 0;
}

#endif /* STACKMAPD_EVENT_PATH_BPF_H */
