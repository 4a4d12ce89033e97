// SPDX-License-Identifier: GPL-2.0
/*
 * Synthetic producers for the daemon benchmarks (bench/drain_bench.cpp), run
 * with bpf_prog_test_run_opts() and writing into the *daemon's own* maps
 * (bpf_map__reuse_fd before load):
 *  - replay: submits `replay_count` ids, cycling through `replay_ids`, which
 *    the host fills with ids already in the table (from a real event burst),
 *    as stackmapd.bpf.c's batches submit them (a count record of one event,
 *    no wakeup);
 *  - insert_synthetic: stores one new, distinct synthetic stack per run in the
 *    daemon's lock-free table through the same find-or-insert code
 *    (include/stackmapd/stack_table.h) and submits its id, so the daemon
 *    drains and copies it like a real new stack (for RSS at N unique stacks).
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>

/* The daemon's own map definitions: ids, slots and pool are swapped for the
 * daemon's before load (bpf_map__reuse_fd), scratch holds a synthetic stack. */
#include "maps.bpf.h"

/* Replaced by the daemon's .bss map; `shared` sits at shared_off in it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct smt_shared);
	__uint(max_entries, 1);
} daemon_bss SEC(".maps");

const volatile __u32 table_bits = SMT_DEFAULT_BITS;
const volatile __u32 shared_off;      /* offset of `shared` in the daemon's .bss */
const volatile __u32 synth_depth = 8; /* frames per synthetic stack */

#define REPLAY_MAX 4096
__u32 replay_ids[REPLAY_MAX];
__u32 replay_nr;
__u32 replay_count;
__u64 submitted;
__u64 failed;
__u64 prod_pos_before;
__u64 prod_pos_after;
__u32 synth_next;   /* index of the next synthetic stack */
__u32 synth_status; /* enum smt_status of the last insert */
__u32 synth_id;

#include "stackmapd/stack_table.h"

static __always_inline struct smt_shared *daemon_shared(void)
{
	__u32 zero = 0;
	char *bss = bpf_map_lookup_elem(&daemon_bss, &zero);

	if (!bss || shared_off > 4096)
		return NULL;
	return (struct smt_shared *)(bss + shared_off);
}

static __u32 replay_epoch;

/* One event of one process and source, weight 1, in a count record as a
 * stackmapd.bpf.c batch sends it. Its seq names a batch no CPU has, so the
 * consumer's per-batch ordering (for snapshots) leaves it alone. */
static __always_inline void fill_record(struct smt_count_record *rec, __u32 id, __u32 epoch)
{
	rec->event.kind = SMT_RECORD_COUNT;
	rec->event.stack_id = id;
	rec->event.epoch = epoch;
	rec->event.tgid = 1;
	rec->event.tid = 1;
	rec->event.cgroup_id = 1;
	rec->event.weight = 1;
	rec->event.name = 0;
	rec->event.source = 0;
	rec->event.cpu = 0;
	rec->count = 1;
	rec->seq = 0xffffffff;
}

static long replay_cb(__u32 i, void *ctx)
{
	struct smt_count_record *rec;
	__u32 n = replay_nr;

	if (n == 0 || n > REPLAY_MAX)
		return 1;
	rec = bpf_ringbuf_reserve(&ids, sizeof(*rec), 0);
	if (!rec) {
		failed++;
		return 0;
	}
	__u32 k = i % n;
	/* Hide k's range from clang so the mask below stays for the verifier. */
	asm volatile("" : "+r"(k));
	k &= REPLAY_MAX - 1;
	fill_record(rec, replay_ids[k], replay_epoch);
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	submitted++;
	return 0;
}

SEC("syscall")
int replay(void *ctx)
{
	struct smt_shared *sh = daemon_shared();

	if (!sh)
		return 1;
	/* Records carry the table's epoch, as stackmapd.bpf.c writes them. */
	replay_epoch = SMT_STATE_EPOCH(*(volatile __u32 *)&sh->state);
	prod_pos_before = bpf_ringbuf_query(&ids, BPF_RB_PROD_POS);
	bpf_loop(replay_count, replay_cb, NULL, 0);
	prod_pos_after = bpf_ringbuf_query(&ids, BPF_RB_PROD_POS);
	return 0;
}

static long probe_step_cb(__u32 i, void *ctx)
{
	if (i >= SMT_MAX_PROBES)
		return 1;
	return smt_probe_step(NULL, ctx, i);
}

SEC("syscall")
int insert_synthetic(void *ctx)
{
	struct smt_count_record *rec;
	struct stack_buf *buf;
	struct smt_probe p;
	__u32 zero = 0, n = synth_next, depth = synth_depth, state;
	struct smt_shared *sh;

	if (depth == 0 || depth > SMT_MAX_DEPTH)
		return 1;
	buf = bpf_map_lookup_elem(&scratch, &zero);
	sh = daemon_shared();
	if (!buf || !sh)
		return 1;
	state = *(volatile __u32 *)&sh->state;
	/* Kernel-text-looking frames; the innermost one makes the stack distinct. */
	for (__u32 k = 0; k < SMT_MAX_DEPTH; k++) {
		if (k >= depth)
			break;
		buf->ips[k] = 0xffffffff81000000ULL + k * 0x1000 + (k == 0 ? (__u64)n * 16 : 0);
	}
	rec = bpf_ringbuf_reserve(&ids, sizeof(*rec), 0);
	if (!rec)
		return 2;
	smt_probe_init(&p, sh, buf->ips, depth, table_bits, sh->hash_seed);
	bpf_loop(SMT_MAX_PROBES, probe_step_cb, &p, 0);
	smt_probe_finish(&p);
	synth_status = p.status;
	synth_next = n + 1;
	if (p.status != SMT_FOUND && p.status != SMT_INSERTED) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		return 3;
	}
	synth_id = p.idx;
	fill_record(rec, p.idx, SMT_STATE_EPOCH(state));
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
