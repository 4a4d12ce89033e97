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
 *  2. count the event with a fully ordered atomic, then read the reset state:
 *     the daemon's reset relies on every event that saw the table live having
 *     a record reserved before it looked (daemon/table_reset.cpp);
 *  3. every event then ends in SMC_HITS or exactly one SMC_DROP_* counter of
 *     the epoch it read.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "stackmapd/abi.h"

struct smt_table;	/* the BPF side reaches its table through global maps */

/* The daemon mmaps both arrays to read each new stack once, without syscalls. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_slot);
	__uint(max_entries, 1);		/* sized at load: 2^(bits+1) */
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_elt);
	__uint(max_entries, 1);		/* sized at load: 2^bits */
} pool SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct smt_cpu_counters);
	__uint(max_entries, 1);
} counters SEC(".maps");

/* 512 bytes of frames do not fit beside the rest on the 512-byte BPF stack.
 * Tracepoint programs never nest on one CPU (the kernel's bpf_prog_active
 * guard), so one buffer per CPU is enough. */
struct stack_buf {
	__u64 ips[SMT_MAX_DEPTH];
	__u32 verify_countdown;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct stack_buf);
	__uint(max_entries, 1);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);	/* resized at load */
} ids SEC(".maps");

const volatile __u32 table_bits = SMT_DEFAULT_BITS;
/* Waking the consumer costs microseconds per wakeup (an irq_work and a
 * reschedule), several times the whole stack capture. Records go in silently
 * and the daemon drains on a timer; only a ring filling up wakes it early. */
const volatile __u64 wakeup_bytes = 1 << 20;
/* --verify N: 1 in N events also sends its captured frames; 0 = off. */
const volatile __u32 verify_every;

struct smt_shared shared;
struct smt_daemon_state daemon_state;

static __always_inline struct smt_slot *smt_slot_at(struct smt_table *t, __u32 idx)
{
	return bpf_map_lookup_elem(&slots, &idx);
}

static __always_inline struct smt_elt *smt_elt_at(struct smt_table *t, __u32 idx)
{
	return bpf_map_lookup_elem(&pool, &idx);
}

#include "stackmapd/stack_table.h"

static long probe_step_cb(__u32 i, void *ctx)
{
	/* The verifier does not carry i's bounds into the callback: re-check. */
	if (i >= SMT_MAX_PROBES)
		return 1;
	return smt_probe_step(NULL, ctx, i);
}

static __always_inline void count(__u64 *c, enum smt_counter which)
{
	/* Atomic: programs of other types (NMI sampling) may interrupt this
	 * one on the same CPU and bump the same counters. */
	__sync_fetch_and_add(&c[which], 1);
}

static __always_inline enum smt_counter drop_counter(enum smt_status s)
{
	switch (s) {
	case SMT_POOL_FULL:
		return SMC_DROP_POOL_FULL;
	case SMT_BUSY:
		return SMC_DROP_BUSY;
	default:	/* SMT_PROBE_LIMIT, and a map error that sane sizes exclude */
		return SMC_DROP_PROBE_LIMIT;
	}
}

/* Sends the captured frames with the id, 1 in verify_every events. Returns
 * 0 when the plain record is to be sent instead. */
static __always_inline int submit_verify(struct stack_buf *buf, struct smt_probe *p,
					 __u32 epoch, __u64 flags)
{
	struct smt_verify_record *v;

	if (!verify_every || ++buf->verify_countdown < verify_every)
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

static __always_inline int record_stack(void *ctx)
{
	struct smt_cpu_counters *cpu;
	struct smt_id_record *rec;
	struct stack_buf *buf;
	struct smt_probe p;
	__u32 zero = 0, state;
	__u64 flags, *cnt;
	long len;

	cpu = bpf_map_lookup_elem(&counters, &zero);
	buf = bpf_map_lookup_elem(&scratch, &zero);
	if (!cpu || !buf)
		return 0;

	rec = bpf_ringbuf_reserve(&ids, sizeof(*rec), 0);
	/* Fully ordered: the reservation above is visible before the state
	 * is read below (a plain load may pass a store otherwise, even on x86). */
	__sync_fetch_and_add(&cpu->events, 1);
	state = *(volatile __u32 *)&shared.state;
	cnt = cpu->epoch[SMT_STATE_EPOCH(state) & 1];
	if (!rec) {
		count(cnt, SMC_DROP_RINGBUF_FULL);
		return 0;
	}
	if (state & SMT_STATE_RESETTING) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		count(cnt, SMC_DROP_RESETTING);
		return 0;
	}
	len = bpf_get_stack(ctx, buf->ips, sizeof(buf->ips), 0);
	if (len < (long)sizeof(__u64)) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		count(cnt, SMC_DROP_STACK_ERROR);
		return 0;
	}

	smt_probe_init(&p, &shared, buf->ips, len / sizeof(__u64), table_bits,
		       shared.hash_seed);
	bpf_loop(SMT_MAX_PROBES, probe_step_cb, &p, 0);
	smt_probe_finish(&p);
	if (p.status != SMT_FOUND && p.status != SMT_INSERTED) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		count(cnt, drop_counter(p.status));
		return 0;
	}

	flags = bpf_ringbuf_query(&ids, BPF_RB_AVAIL_DATA) >= wakeup_bytes ?
		BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	if (submit_verify(buf, &p, SMT_STATE_EPOCH(state), flags)) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
	} else {
		rec->stack_id = p.idx;
		rec->epoch = SMT_STATE_EPOCH(state);
		bpf_ringbuf_submit(rec, flags);
	}
	count(cnt, SMC_HITS);
	if (p.status == SMT_INSERTED)
		count(cnt, SMC_INSERTS);
	return 0;
}

SEC("tracepoint")
int stackmapd_tracepoint(void *ctx)
{
	return record_stack(ctx);
}

char LICENSE[] SEC("license") = "GPL";
