// SPDX-License-Identifier: GPL-2.0
/*
 * stackmapd's event path: capture the kernel stack, find or insert it in the
 * shared lock-free table (include/stackmapd/stack_table.h), and send its id
 * with who caused it (struct smt_event_record) to the daemon through a ring
 * buffer; a thread name goes once, the first time it is seen.
 *
 * Order matters:
 *  1. announce a new thread name, then reserve the event's record before
 *     its stack is looked up, so a stack's ref_count is only incremented for
 *     an event whose id is then certainly delivered (the RFC counted hits
 *     for events it never recorded);
 *  2. read the reset state once; the daemon's reset waits out every program
 *     that may have read it live with an RCU grace period (membarrier), so
 *     the event path needs no barrier of its own (daemon/bpf/table_reset.cpp);
 *  3. every event then ends in SMC_HITS or exactly one SMC_DROP_* counter of
 *     the epoch it read.
 * Counters are per CPU and per nesting level, so plain increments are exact:
 * a program that interrupts another on the same CPU counts in its own level.
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>

#ifdef SMT_BPFLOADER
/* Without bpf_loop the verifier walks every re-read of every probe in turn:
 * 64 x 512 is past its limits. A writer needs ~100 ns; a reader that gives
 * up sooner counts drop_busy, it never guesses. */
#define SMT_MAX_SPINS 16
#endif
#include "stackmapd/abi.h"

/*
 * Two builds of this file:
 *  - the daemon's own object (a skeleton): maps sized at load, settings in
 *    .rodata, one fentry copy per traced function;
 *  - -DSMT_BPFLOADER, the object another loader (Android's bpfloader) loads
 *    and pins for `stackmapd --pinned`: such loaders create no global-data
 *    maps, size maps from the ELF file, load each program section alone (no
 *    subprograms, so no bpf_loop callback) and know no fentry sections.
 */
#ifdef SMT_BPFLOADER
#define SMT_SEC(bpfloader, libbpf) SEC(bpfloader)
#define SMT_SIZED(at_load, fixed) (fixed)
#else
#define SMT_SEC(bpfloader, libbpf) SEC(libbpf)
#define SMT_SIZED(at_load, fixed) (at_load)
#endif

struct smt_table; /* the BPF side reaches its table through global maps */

/* The daemon mmaps both arrays to read each new stack once, without syscalls. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_slot);
	__uint(max_entries, SMT_SIZED(1, 2U << SMT_BPFLOADER_BITS)); /* 2^(bits+1) */
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_elt);
	__uint(max_entries, SMT_SIZED(1, 1U << SMT_BPFLOADER_BITS)); /* 2^bits */
} pool SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct smt_cpu_counters);
	__uint(max_entries, SMT_MAX_NEST);
} counters SEC(".maps");

/* 512 bytes of frames do not fit beside the rest on the 512-byte BPF stack.
 * One buffer per CPU and nesting level: an fentry program may run inside a
 * tracepoint program's event, and a sampling one inside either. */
struct stack_buf {
	/* One frame more than is kept: a full buffer means a deeper stack. */
	__u64 ips[SMT_MAX_DEPTH + 1];
	__u32 verify_countdown;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct stack_buf);
	__uint(max_entries, SMT_MAX_NEST);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} nesting SEC(".maps");

/* Thread name -> id; an id is announced in the ring before it is stored
 * here, so whoever finds it here sends its events after the announcement. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct smt_comm);
	__type(value, __u32);
	__uint(max_entries, SMT_MAX_NAMES);
} names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, SMT_SIZED(4 << 20, SMT_BPFLOADER_RING_BYTES));
} ids SEC(".maps");

#ifdef SMT_BPFLOADER
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct smt_config);
	__uint(max_entries, 1);
} settings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_globals);
	__uint(max_entries, 1);
} globals SEC(".maps");

static __always_inline const volatile struct smt_config *get_config(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&settings, &zero);
}

static __always_inline struct smt_globals *get_globals(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&globals, &zero);
}
#else
/* Waking the consumer costs microseconds per wakeup (an irq_work and a
 * reschedule), several times the whole stack capture. Records go in silently
 * and the daemon drains on a timer; only a ring filling up wakes it early. */
const volatile struct smt_config settings = {
	.wakeup_bytes = 1 << 20,
	.table_bits = SMT_DEFAULT_BITS,
	.filter_cpu = SMT_ANY_CPU,
};

struct smt_globals globals;

/* Constant offsets into frozen .rodata: the verifier reads the values and
 * prunes the branches of every setting that is off. */
static __always_inline const volatile struct smt_config *get_config(void)
{
	return &settings;
}

static __always_inline struct smt_globals *get_globals(void)
{
	return &globals;
}
#endif

static __always_inline struct smt_slot *smt_slot_at(struct smt_table *t, __u32 idx)
{
	return bpf_map_lookup_elem(&slots, &idx);
}

static __always_inline struct smt_elt *smt_elt_at(struct smt_table *t, __u32 idx)
{
	return bpf_map_lookup_elem(&pool, &idx);
}

#include "stackmapd/stack_table.h"

#ifdef SMT_BPFLOADER
/* A bounded loop: 64 probes of up to 64-frame compares verify in ~170 k of
 * the 1 M instruction budget. */
static __always_inline void probe_table(struct smt_probe *p)
{
	for (__u32 i = 0; i < SMT_MAX_PROBES; i++)
		if (smt_probe_step(NULL, p, i))
			break;
}
#else
static long probe_step_cb(__u32 i, void *ctx)
{
	/* The verifier does not carry i's bounds into the callback: re-check. */
	if (i >= SMT_MAX_PROBES)
		return 1;
	return smt_probe_step(NULL, ctx, i);
}

/* bpf_loop keeps verification near 14 k instructions at no run-time cost. */
static __always_inline void probe_table(struct smt_probe *p)
{
	bpf_loop(SMT_MAX_PROBES, probe_step_cb, p, 0);
}
#endif

static __always_inline void count(__u64 *c, enum smt_counter which)
{
	c[which]++;
}

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

/* The thread's name id, announcing a name seen for the first time. Called
 * before the event's own record is reserved, so the announcement comes
 * first in the ring. 0 when the name cannot be kept (counted). */
static __always_inline __u32 thread_name(struct smt_globals *g, __u64 *cnt)
{
	struct smt_name_record *rec;
	struct smt_comm key = {};
	__u32 *known, id;

	bpf_get_current_comm(key.comm, sizeof(key.comm));
	known = bpf_map_lookup_elem(&names, &key);
	if (known)
		return *known;
	rec = bpf_ringbuf_reserve(&ids, sizeof(*rec), 0);
	if (!rec)
		return 0; /* the event's own record will not fit either */
	id = __sync_fetch_and_add(&g->shared.next_name, 1) + 1;
	if (bpf_map_update_elem(&names, &key, &id, BPF_NOEXIST)) {
		/* Another CPU announced it first, or the map is full. */
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		known = bpf_map_lookup_elem(&names, &key);
		if (known)
			return *known;
		count(cnt, SMC_NAMES_FULL);
		return 0;
	}
	rec->name = id;
	rec->reserved = 0;
	__builtin_memcpy(rec->comm, key.comm, sizeof(rec->comm));
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return id;
}

/* The event's weight: 1, or the tracepoint field the cookie names (--sum).
 * A negative signed value weighs 0. */
static __always_inline __u64 event_weight(void *ctx, __u64 cookie)
{
	__u32 field = cookie >> 32, size = SMT_WEIGHT_SIZE(field), shift;
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

	e->stack_id = stack_id;
	e->epoch = epoch;
	e->tgid = id >> 32;
	e->tid = (__u32)id;
	e->cgroup_id = cgroup_id(cfg);
	e->weight = weight;
	e->name = name;
	e->source = source;
	e->cpu = bpf_get_smp_processor_id();
}

static __always_inline __u64 wakeup_flags(const volatile struct smt_config *cfg)
{
	return bpf_ringbuf_query(&ids, BPF_RB_AVAIL_DATA) >= cfg->wakeup_bytes ?
		       BPF_RB_FORCE_WAKEUP :
		       BPF_RB_NO_WAKEUP;
}

/* Sends the captured frames with the event, 1 in verify_every events.
 * Returns 0 when the plain record is to be sent instead. */
static __always_inline int submit_verify(const volatile struct smt_config *cfg,
					 struct stack_buf *buf, struct smt_probe *p,
					 const struct smt_event_record *e, __u64 flags)
{
	struct smt_verify_record *v;
	__u32 every = cfg->verify_every;

	if (!every || ++buf->verify_countdown < every)
		return 0;
	buf->verify_countdown = 0;
	v = bpf_ringbuf_reserve(&ids, sizeof(*v), 0);
	if (!v)
		return 0;
	v->event = *e;
	v->nr = p->nr;
	v->reserved = 0;
	__builtin_memcpy(v->ips, buf->ips, sizeof(v->ips));
	bpf_ringbuf_submit(v, flags);
	return 1;
}

/* The record's size must be a constant the verifier sees on each path. */
static __always_inline void *reserve_record(__u32 trace)
{
	if (trace)
		return bpf_ringbuf_reserve(&ids, sizeof(struct smt_trace_record), 0);
	return bpf_ringbuf_reserve(&ids, sizeof(struct smt_event_record), 0);
}

/* Captures the current stack into buf and finds or inserts it. Returns the
 * drop counter of an event that ends here, or SMC_HITS. */
static __always_inline enum smt_counter capture(void *ctx, const volatile struct smt_config *cfg,
						struct smt_globals *g, struct stack_buf *buf,
						__u32 skip, __u64 *cnt, struct smt_probe *p)
{
	long len = bpf_get_stack(ctx, buf->ips, sizeof(buf->ips), skip & BPF_F_SKIP_FIELD_MASK);
	__u32 nr;

	if (len < (long)sizeof(__u64))
		return len == 0 ? SMC_DROP_NO_KERNEL_STACK : SMC_DROP_STACK_ERROR;
	nr = len / sizeof(__u64);
	if (nr > SMT_MAX_DEPTH) {
		/* The RFC keeps the innermost frames of a deeper stack. */
		nr = SMT_MAX_DEPTH;
		count(cnt, SMC_TRUNCATED);
	}
	smt_probe_init(p, &g->shared, buf->ips, nr, cfg->table_bits, g->shared.hash_seed);
	probe_table(p);
	smt_probe_finish(p);
	if (p->status != SMT_FOUND && p->status != SMT_INSERTED)
		return drop_counter(p->status);
	return SMC_HITS;
}

static __always_inline int record_in(void *ctx, const volatile struct smt_config *cfg,
				     struct smt_globals *g, struct stack_buf *buf, __u64 cookie,
				     __u32 skip, struct smt_cpu_counters *cpu)
{
	__u32 state, epoch, name, trace = cfg->trace_records;
	struct smt_event_record *e;
	enum smt_counter outcome;
	struct smt_probe p;
	__u64 flags, *cnt;
	void *rec;

	state = *(volatile __u32 *)&g->shared.state;
	epoch = SMT_STATE_EPOCH(state);
	cnt = cpu->epoch[epoch & 1];
	name = thread_name(g, cnt);
	rec = reserve_record(trace);
	cpu->events++;
	if (!rec) {
		count(cnt, SMC_DROP_RINGBUF_FULL);
		return 0;
	}
	if (state & SMT_STATE_RESETTING) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		count(cnt, SMC_DROP_RESETTING);
		return 0;
	}
	outcome = capture(ctx, cfg, g, buf, skip, cnt, &p);
	if (outcome != SMC_HITS) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		count(cnt, outcome);
		return 0;
	}

	flags = wakeup_flags(cfg);
	e = rec; /* every record starts with the event */
	fill_event(cfg, e, p.idx, epoch, name, SMT_COOKIE_SOURCE(cookie),
		   event_weight(ctx, cookie));
	if (trace) {
		struct smt_trace_record *t = rec;
		__u32 len = SMT_COOKIE_RAW_LEN(cookie);

		t->ts_ns = bpf_ktime_get_ns();
		/* ctx is the tracepoint's raw entry; the daemon sized len from its
		 * format file (0 for -f and --profile sources). */
		if (len > SMT_TRACE_RAW_MAX)
			len = SMT_TRACE_RAW_MAX;
		t->raw_len = 0;
		t->reserved = 0;
		if (len && !bpf_probe_read_kernel(t->raw, len, ctx))
			t->raw_len = len;
		bpf_ringbuf_submit(rec, flags);
	} else if (submit_verify(cfg, buf, &p, e, flags)) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
	} else {
		bpf_ringbuf_submit(rec, flags);
	}
	count(cnt, SMC_HITS);
	if (p.status == SMT_INSERTED)
		count(cnt, SMC_INSERTS);
	return 0;
}

/* The nesting level's buffers for one program run, or NULL when programs
 * nest deeper than any context can (counted, atomically, in the last level,
 * which its rightful user may be updating). Pair with leave_level(). */
static __always_inline __u32 *enter_level(struct smt_globals *g, struct stack_buf **buf,
					  struct smt_cpu_counters **cpu)
{
	__u32 zero = 0, level, last = SMT_MAX_NEST - 1, *depth;

	depth = bpf_map_lookup_elem(&nesting, &zero);
	if (!depth)
		return NULL;
	/* Plain increments are enough: whatever interrupts us on this CPU
	 * restores the depth before we resume. */
	level = (*depth)++;
	*buf = bpf_map_lookup_elem(&scratch, &level);
	*cpu = bpf_map_lookup_elem(&counters, &level);
	if (*buf && *cpu)
		return depth;
	*cpu = bpf_map_lookup_elem(&counters, &last);
	if (*cpu) {
		__sync_fetch_and_add(&(*cpu)->events, 1);
		__sync_fetch_and_add(
			&(*cpu)->epoch[SMT_STATE_EPOCH(g->shared.state) & 1][SMC_DROP_NESTED], 1);
	}
	(*depth)--;
	return NULL;
}

static __always_inline void leave_level(__u32 *depth)
{
	(*depth)--;
}

static __always_inline int filtered_out(const volatile struct smt_config *cfg)
{
	if (cfg->filter_tgid && bpf_get_current_pid_tgid() >> 32 != cfg->filter_tgid)
		return 1;
	return cfg->filter_cpu != SMT_ANY_CPU && bpf_get_smp_processor_id() != cfg->filter_cpu;
}

/* skip: frames above the traced code (see stackmapd_fentry). */
static __always_inline int record_stack(void *ctx, __u64 cookie, __u32 skip)
{
	const volatile struct smt_config *cfg = get_config();
	struct smt_globals *g = get_globals();
	struct smt_cpu_counters *cpu;
	struct stack_buf *buf;
	__u32 *depth;

	if (!cfg || !g || filtered_out(cfg))
		return 0;
	depth = enter_level(g, &buf, &cpu);
	if (!depth)
		return 0;
	record_in(ctx, cfg, g, buf, cookie, skip, cpu);
	leave_level(depth);
	return 0;
}

/* bpfloader pins these as prog_stackmapd_tracepoint_stackmapd and
 * prog_stackmapd_perf_event_stackmapd. */
SMT_SEC("tracepoint/stackmapd", "tracepoint")
int stackmapd_tracepoint(void *ctx)
{
	return record_stack(ctx, bpf_get_attach_cookie(ctx), 0);
}

SMT_SEC("perf_event/stackmapd", "perf_event")
int stackmapd_profile(void *ctx)
{
	return record_stack(ctx, (__u32)bpf_get_attach_cookie(ctx), 0);
}

#ifndef SMT_BPFLOADER
/* Its target is set before load; the daemon loads one copy per function.
 * Its stack starts with this program and the BPF trampoline, addresses that
 * change with every load and are gone (unsymbolizable) by export time: skip
 * them, so a stack starts in the traced function, as with kprobes. */
#define SMT_FENTRY_SKIP 2

SEC("fentry")
int stackmapd_fentry(__u64 *ctx)
{
	return record_stack(ctx, get_config()->fentry_source, SMT_FENTRY_SKIP);
}

/*
 * --offcpu, on sched:sched_switch, where the current task is the one being
 * switched out. One event per block: the stack and who are taken at
 * switch-out and kept per thread; at switch-in the block ends, weighted by
 * the time off the CPU. Each block ends in exactly one counter: a drop at
 * switch-out, or a hit or drop at switch-in (a block shorter than
 * min_block_ns is no event). Blocks still open when the session ends are
 * closed by the daemon from this map.
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

static __always_inline void switch_in(void *ctx, const volatile struct smt_config *cfg,
				      struct smt_globals *g, struct smt_cpu_counters *cpu,
				      __u64 now)
{
	__u32 tid = read_u32_field(ctx, cfg->next_pid_offset), state, epoch;
	struct smt_offcpu_start *found, s;
	struct smt_event_record *e;
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
	cnt = cpu->epoch[epoch & 1];
	cpu->events++;
	/* A block that began before a reset names a stack of the old table. */
	if ((state & SMT_STATE_RESETTING) || s.epoch != epoch) {
		count(cnt, SMC_DROP_RESETTING);
		return;
	}
	e = bpf_ringbuf_reserve(&ids, sizeof(*e), 0);
	if (!e) {
		count(cnt, SMC_DROP_RINGBUF_FULL);
		return;
	}
	e->stack_id = s.stack_id;
	e->epoch = epoch;
	e->tgid = s.tgid;
	e->tid = tid;
	e->cgroup_id = s.cgroup_id;
	e->weight = now - s.ts_ns;
	e->name = s.name;
	e->source = s.source;
	e->cpu = s.cpu;
	bpf_ringbuf_submit(e, wakeup_flags(cfg));
	count(cnt, SMC_HITS);
	if (s.inserted)
		count(cnt, SMC_INSERTS);
}

static __always_inline void switch_out(void *ctx, const volatile struct smt_config *cfg,
				       struct smt_globals *g, struct stack_buf *buf,
				       struct smt_cpu_counters *cpu, __u32 source, __u64 now)
{
	__u64 id = bpf_get_current_pid_tgid(), *cnt;
	__u32 tid = (__u32)id, state, epoch;
	struct smt_offcpu_start s;
	enum smt_counter outcome;
	struct smt_probe p;

	/* The idle task's waits are not blocks; an exiting thread's last. */
	if (!tid || filtered_out(cfg) ||
	    (read_u32_field(ctx, cfg->prev_state_offset) & SMT_PREV_STATE_EXITING))
		return;
	state = *(volatile __u32 *)&g->shared.state;
	epoch = SMT_STATE_EPOCH(state);
	cnt = cpu->epoch[epoch & 1];
	s.name = thread_name(g, cnt);
	if (state & SMT_STATE_RESETTING) {
		cpu->events++;
		count(cnt, SMC_DROP_RESETTING);
		return;
	}
	outcome = capture(ctx, cfg, g, buf, 0, cnt, &p);
	if (outcome != SMC_HITS) {
		cpu->events++;
		count(cnt, outcome);
		return;
	}
	s.ts_ns = now;
	s.cgroup_id = cgroup_id(cfg);
	s.stack_id = p.idx;
	s.epoch = epoch;
	s.tgid = id >> 32;
	s.cpu = bpf_get_smp_processor_id();
	s.source = source;
	s.inserted = p.status == SMT_INSERTED;
	if (bpf_map_update_elem(&offcpu_start, &tid, &s, BPF_ANY)) {
		cpu->events++;
		count(cnt, SMC_DROP_OFFCPU_FULL);
	}
}

SEC("tracepoint")
int stackmapd_offcpu(void *ctx)
{
	const volatile struct smt_config *cfg = get_config();
	struct smt_globals *g = get_globals();
	__u64 now = bpf_ktime_get_ns();
	struct smt_cpu_counters *cpu;
	struct stack_buf *buf;
	__u32 *depth;

	depth = enter_level(g, &buf, &cpu);
	if (!depth)
		return 0;
	switch_in(ctx, cfg, g, cpu, now);
	switch_out(ctx, cfg, g, buf, cpu, (__u32)bpf_get_attach_cookie(ctx), now);
	leave_level(depth);
	return 0;
}
#endif

char LICENSE[] SEC("license") = "GPL";
