/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The daemon's own object's kernel stack lookup: a stack this CPU's batch
 * found lately is confirmed against its element, any other is probed for in
 * the table, in a global function (which the bpfloader objects, loaded one
 * section at a time, cannot have). Included by bpfloader_compat.bpf.h.
 */
#ifndef STACKMAPD_RECENT_STACKS_BPF_H
#define STACKMAPD_RECENT_STACKS_BPF_H

/* The recent stack ips[0..nr) would be, chosen by the frames that tell one
 * caller of the traced code from another (frame 0 is the traced code).
 * Frames past nr are an earlier stack's: they only pick the entry. */
static __always_inline struct smt_recent *recent_of(struct smt_batch *b, const __u64 *ips)
{
	__u64 mix = ips[1] ^ ips[2] >> 7 ^ ips[3] >> 13;

	return &b->recent[(mix * 0x9e3779b97f4a7c15ULL) >> (64 - SMT_RECENT_BITS)];
}

/*
 * Finds or inserts buf->ips[0..nr) in the kernel stack table: the status in
 * the high 32 bits, the stack id in the low ones. A stack this batch found
 * lately in this epoch is compared with its element and needs no hash and
 * no probe. A global function: the verifier checks it once, not once per
 * state of every caller (inlined, the recent-stack compare made loading 4-6x
 * slower).
 */
__noinline __u64 smt_kernel_stack(struct stack_buf *buf, struct smt_batch *b, __u32 nr, __u32 epoch)
{
	const volatile struct smt_config *cfg = get_config();
	struct smt_globals *g = get_globals();
	struct smt_recent *r;
	struct smt_probe p;
	struct smt_elt *e;

	if (!buf || !b || !nr || nr > SMT_MAX_DEPTH)
		return (__u64)SMT_MAP_ERROR << 32 | SMT_NO_STACK_ID;
	r = recent_of(b, buf->ips);
	if (r->elt && r->epoch == epoch) {
		e = smt_elt_at(NULL, r->elt - 1);
		if (e && smt_frames_equal(e, buf->ips, nr))
			return (__u64)SMT_FOUND << 32 | r->stack;
	}
	smt_probe_init(&p, &g->shared, buf->ips, nr, cfg->table_bits, g->shared.hash_seed);
	bpf_loop(SMT_MAX_PROBES, probe_step_cb, &p, 0);
	smt_probe_finish(&p);
	if (p.status == SMT_FOUND || p.status == SMT_INSERTED) {
		r->epoch = epoch;
		r->stack = p.idx;
		r->elt = p.elt + 1;
	}
	return (__u64)p.status << 32 | p.idx;
}

static __always_inline void find_stack(const volatile struct smt_config *cfg, struct smt_globals *g,
				       struct smt_batch *b, __u32 epoch, struct stack_buf *buf,
				       __u32 nr, struct smt_probe *p)
{
	__u64 r = smt_kernel_stack(buf, b, nr, epoch);

	p->status = r >> 32;
	p->idx = (__u32)r;
	p->nr = nr;
}

#endif /* STACKMAPD_RECENT_STACKS_BPF_H */
