/* SPDX-License-Identifier: GPL-2.0 */
/* --offcpu's part of the daemon's own object (stackmapd_offcpu). */
#ifndef STACKMAPD_OFFCPU_BPF_H
#define STACKMAPD_OFFCPU_BPF_H

/*
 * --offcpu, on sched:sched_switch, where the current task is the one being
 * switched out. One event per block: the stack and who are taken at
 * switch-out and kept per thread; at switch-in the block ends, weighted by
 * the time off the CPU, and counts in the batch of the CPU it ends on. Each
 * block ends in exactly one counter: a drop at switch-out, or a hit or drop
 * at switch-in (a block shorter than min_block_ns is no event). Blocks still
 * open when the session ends are closed by the daemon from this map.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH); /* preallocated: no allocation here */
	__type(key, __u32);
	__type(value, struct smt_offcpu_start);
	__uint(max_entries, SMT_OFFCPU_THREADS);
} offcpu_start SEC(".maps");

static __always_inline __u32 read_u32_field(void *ctx, __u32 offset)
{
	__u32 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), (char *)ctx + offset);
	return v;
}

/* In the write window: a --trace block ends as a plain event record. */
static __always_inline enum smt_counter send_event(const volatile struct smt_config *cfg,
						   struct smt_batch *b,
						   const struct smt_event_record *e)
{
	struct smt_event_record *r = bpf_ringbuf_reserve(&ids, sizeof(*r), 0);

	if (!r)
		return SMC_DROP_RINGBUF_FULL;
	*r = *e;
	r->kind = SMT_RECORD_EVENT;
	submit(cfg, b, r, sizeof(*r));
	return SMC_HITS;
}

static __always_inline void switch_in(void *ctx, const volatile struct smt_config *cfg,
				      struct smt_globals *g, struct smt_batch *b, __u32 batch,
				      __u64 now)
{
	__u32 tid = read_u32_field(ctx, cfg->next_pid_offset), state, epoch;
	struct smt_offcpu_start *found, s;
	enum smt_counter outcome;
	struct smt_event_record e;
	__u64 *cnt;

	found = bpf_map_lookup_elem(&offcpu_start, &tid);
	if (!found)
		return;
	s = *found; /* the element is reused once deleted */
	bpf_map_delete_elem(&offcpu_start, &tid);
	if (now - s.ts_ns < cfg->min_block_ns)
		return;
	state = *(volatile __u32 *)&g->shared.state;
	epoch = SMT_STATE_EPOCH(state);
	e.kind = SMT_RECORD_NONE;
	e.stack_id = s.stack_id;
	e.epoch = epoch;
	e.tgid = s.tgid;
	e.tid = tid;
	e.cgroup_id = s.cgroup_id;
	e.weight = now - s.ts_ns;
	e.name = s.name;
	e.source = s.source;
	e.cpu = s.cpu;
	e.user_stack_id = s.user_stack_id;

	batch_write_begin(b);
	cnt = b->counters.epoch[epoch & 1];
	b->counters.events++;
	/* A block that began before a reset names a stack of the old table. */
	if ((state & SMT_STATE_RESETTING) || s.epoch != epoch)
		outcome = SMC_DROP_RESETTING;
	else if (cfg->trace_records)
		outcome = send_event(cfg, b, &e);
	else
		outcome = add_to_batch(cfg, b, batch, &e);
	count(cnt, outcome);
	if (outcome == SMC_HITS && s.inserted)
		count(cnt, SMC_INSERTS);
	batch_write_end(b);
}

/* A switch-out: a block begins (outcome SMC_NR, counted at its end) or a
 * drop that ends it at once; `unended`: the thread's last block had no
 * switch-in, a drop of its own. */
static __always_inline void count_switch_out(struct smt_batch *b, __u32 epoch,
					     const struct event_facts *f, enum smt_counter outcome,
					     __u32 unended)
{
	__u64 *cnt;

	batch_write_begin(b);
	cnt = b->counters.epoch[epoch & 1];
	count_facts(b, cnt, f);
	if (outcome != SMC_NR) {
		b->counters.events++;
		count(cnt, outcome);
	}
	if (unended) {
		b->counters.events++;
		count(cnt, SMC_DROP_OFFCPU_UNENDED);
	}
	batch_write_end(b);
}

static __always_inline void switch_out(void *ctx, const volatile struct smt_config *cfg,
				       struct smt_globals *g, struct stack_buf *buf,
				       struct smt_batch *b, __u32 source, __u64 now)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, state, epoch;
	struct event_facts f = {};
	struct smt_offcpu_start s;
	enum smt_counter outcome;
	struct smt_probe p;
	__u32 unended = 0;

	/* The idle task's waits are not blocks; an exiting thread's last. */
	if (!tid || filtered_out(cfg) ||
	    (read_u32_field(ctx, cfg->prev_state_offset) & SMT_PREV_STATE_EXITING))
		return;
	state = *(volatile __u32 *)&g->shared.state;
	epoch = SMT_STATE_EPOCH(state);
	s.name = thread_name(g, b, &f);
	if (state & SMT_STATE_RESETTING) {
		count_switch_out(b, epoch, &f, SMC_DROP_RESETTING, 0);
		return;
	}
	/* A block's weight is only known at its end, when its frames are
	 * gone: a stack the table cannot take is a drop here. */
	outcome = capture(ctx, cfg, g, b, epoch, buf, 0, &f, &p);
	if (outcome == SMC_HITS) {
		s.ts_ns = now;
		s.cgroup_id = cgroup_id(cfg);
		s.stack_id = p.idx;
		s.epoch = epoch;
		s.tgid = id >> 32;
		s.cpu = bpf_get_smp_processor_id();
		s.source = source;
		s.inserted = p.status == SMT_INSERTED;
		s.user_stack_id = SMT_NO_USER_STACK;
		s.reserved = 0;
		if (cfg->user_stacks) {
			capture_user(ctx, cfg, g, buf, &f);
			s.user_stack_id = f.user_stack_id;
		}
		/* A block still here never saw its switch-in: the kernel runs
		 * no perf tracepoint program for some switches (about 1 in 500
		 * under load, bpftrace's alike), so its end is unknown. */
		outcome = SMC_NR;
		if (bpf_map_update_elem(&offcpu_start, &tid, &s, BPF_NOEXIST)) {
			unended = bpf_map_lookup_elem(&offcpu_start, &tid) != NULL;
			if (bpf_map_update_elem(&offcpu_start, &tid, &s, BPF_ANY))
				outcome = SMC_DROP_OFFCPU_FULL;
		}
	}
	count_switch_out(b, epoch, &f, outcome, unended);
}

#endif /* STACKMAPD_OFFCPU_BPF_H */
