// SPDX-License-Identifier: GPL-2.0
/*
 * stackmapd's event path: capture the kernel stack, find or insert it in the
 * shared lock-free table (include/stackmapd/stack_table.h), and send only its
 * id to the daemon through a ring buffer.
 *
 * Order matters:
 *  1. reserve the ring-buffer record first, so a stack's ref_count is only
 *     incremented for an event whose id is then certainly delivered (the RFC
 *     counted hits for events it never recorded);
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
	__u64 ips[SMT_MAX_DEPTH];
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

/* Sends the captured frames with the id, 1 in verify_every events. Returns
 * 0 when the plain record is to be sent instead. */
static __always_inline int submit_verify(const volatile struct smt_config *cfg,
					 struct stack_buf *buf, struct smt_probe *p, __u32 epoch,
					 __u64 flags)
{
	struct smt_verify_record *v;
	__u32 every = cfg->verify_every;

	if (!every || ++buf->verify_countdown < every)
		return 0;
	buf->verify_countdown = 0;
	v = bpf_ringbuf_reserve(&ids, sizeof(*v), 0);
	if (!v)
		return 0;
	v->stack_id = p->idx;
	v->epoch = epoch;
	v->nr = p->nr;
	v->reserved = 0;
	__builtin_memcpy(v->ips, buf->ips, sizeof(v->ips));
	bpf_ringbuf_submit(v, flags);
	return 1;
}

static __always_inline void fill_trace(struct smt_trace_record *t, struct smt_probe *p, __u32 epoch,
				       __u32 source)
{
	__u64 id = bpf_get_current_pid_tgid();

	t->stack_id = p->idx;
	t->epoch = epoch;
	t->ts_ns = bpf_ktime_get_ns();
	t->tgid = id >> 32;
	t->tid = (__u32)id;
	t->cpu = bpf_get_smp_processor_id();
	t->source = source;
	t->reserved = 0;
	bpf_get_current_comm(t->comm, sizeof(t->comm));
}

/* The record's size must be a constant the verifier sees on each path. */
static __always_inline void *reserve_record(__u32 trace)
{
	if (trace)
		return bpf_ringbuf_reserve(&ids, sizeof(struct smt_trace_record), 0);
	return bpf_ringbuf_reserve(&ids, sizeof(struct smt_id_record), 0);
}

static __always_inline int record_in(void *ctx, const volatile struct smt_config *cfg,
				     struct smt_globals *g, struct stack_buf *buf, __u32 source,
				     __u32 skip, struct smt_cpu_counters *cpu)
{
	__u32 state, epoch, trace = cfg->trace_records;
	struct smt_probe p;
	__u64 flags, *cnt;
	void *rec;
	long len;

	rec = reserve_record(trace);
	cpu->events++;
	state = *(volatile __u32 *)&g->shared.state;
	epoch = SMT_STATE_EPOCH(state);
	cnt = cpu->epoch[epoch & 1];
	if (!rec) {
		count(cnt, SMC_DROP_RINGBUF_FULL);
		return 0;
	}
	if (state & SMT_STATE_RESETTING) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		count(cnt, SMC_DROP_RESETTING);
		return 0;
	}
	len = bpf_get_stack(ctx, buf->ips, sizeof(buf->ips), skip & BPF_F_SKIP_FIELD_MASK);
	if (len < (long)sizeof(__u64)) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		count(cnt, len == 0 ? SMC_DROP_NO_KERNEL_STACK : SMC_DROP_STACK_ERROR);
		return 0;
	}

	smt_probe_init(&p, &g->shared, buf->ips, len / sizeof(__u64), cfg->table_bits,
		       g->shared.hash_seed);
	probe_table(&p);
	smt_probe_finish(&p);
	if (p.status != SMT_FOUND && p.status != SMT_INSERTED) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		count(cnt, drop_counter(p.status));
		return 0;
	}

	flags = bpf_ringbuf_query(&ids, BPF_RB_AVAIL_DATA) >= cfg->wakeup_bytes ?
			BPF_RB_FORCE_WAKEUP :
			BPF_RB_NO_WAKEUP;
	if (trace) {
		fill_trace(rec, &p, epoch, source);
		bpf_ringbuf_submit(rec, flags);
	} else if (submit_verify(cfg, buf, &p, epoch, flags)) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
	} else {
		((struct smt_id_record *)rec)->stack_id = p.idx;
		((struct smt_id_record *)rec)->epoch = epoch;
		bpf_ringbuf_submit(rec, flags);
	}
	count(cnt, SMC_HITS);
	if (p.status == SMT_INSERTED)
		count(cnt, SMC_INSERTS);
	return 0;
}

/* skip: frames above the traced code (see stackmapd_fentry). */
static __always_inline int record_stack(void *ctx, __u32 source, __u32 skip)
{
	const volatile struct smt_config *cfg = get_config();
	struct smt_globals *g = get_globals();
	struct smt_cpu_counters *cpu;
	struct stack_buf *buf;
	__u32 zero = 0, level, *depth;
	int ret = 0;

	if (!cfg || !g)
		return 0;
	if (cfg->filter_tgid && bpf_get_current_pid_tgid() >> 32 != cfg->filter_tgid)
		return 0;
	if (cfg->filter_cpu != SMT_ANY_CPU && bpf_get_smp_processor_id() != cfg->filter_cpu)
		return 0;
	depth = bpf_map_lookup_elem(&nesting, &zero);
	if (!depth)
		return 0;
	/* Plain increments are enough: whatever interrupts us on this CPU
	 * restores the depth before we resume. */
	level = (*depth)++;
	buf = bpf_map_lookup_elem(&scratch, &level);
	cpu = bpf_map_lookup_elem(&counters, &level);
	if (buf && cpu) {
		ret = record_in(ctx, cfg, g, buf, source, skip, cpu);
	} else {
		/* Deeper than any context can nest: count it, atomically, in
		 * the last level, which its rightful user may be updating. */
		__u32 last = SMT_MAX_NEST - 1;

		cpu = bpf_map_lookup_elem(&counters, &last);
		if (cpu) {
			__sync_fetch_and_add(&cpu->events, 1);
			__sync_fetch_and_add(
				&cpu->epoch[SMT_STATE_EPOCH(g->shared.state) & 1][SMC_DROP_NESTED],
				1);
		}
	}
	(*depth)--;
	return ret;
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
	return record_stack(ctx, bpf_get_attach_cookie(ctx), 0);
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
#endif

char LICENSE[] SEC("license") = "GPL";
