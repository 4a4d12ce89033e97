/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --user-stacks in the daemon's own object: each event's user stack, found
 * or inserted in the user table (maps.bpf.h: uslots, upool) by the same
 * table code as kernel stacks. Included by bpfloader_compat.bpf.h, after
 * struct task_struct and probe_step_cb.
 */
#ifndef STACKMAPD_USER_STACK_BPF_H
#define STACKMAPD_USER_STACK_BPF_H

static long probe_user_step_cb(__u32 i, void *ctx)
{
	if (i >= SMT_MAX_PROBES)
		return 1;
	return smt_probe_step(USER_TABLE, ctx, i);
}

/* --user-stacks: the current task's exec count (abi.h, SMT_USER_MARKER). */
static __always_inline __u32 exec_id(void)
{
	const struct task_struct *t = bpf_get_current_task_btf();

	return t->self_exec_id;
}

#include "user_unwind.bpf.h"

/* The current task's user stack into buf->uips: walked with the unwind
 * tables (user_unwind), else by frame pointers. Returns how many frames, 0
 * when there is none; with the tables, *stop is where the walk ended. */
static __always_inline __u32 user_frames(void *ctx, const volatile struct smt_config *cfg,
					 struct stack_buf *buf, __u32 tgid, __u32 *stop)
{
	if (cfg->user_unwind)
		return unwind_user(ctx, buf->uips, tgid, exec_id(), stop, buf->at_entry);
	return fp_user_stack(ctx, buf->uips, SMT_MAX_DEPTH, buf->at_entry);
}

/*
 * --user-stacks: captures the current task's user stack into buf->uips and
 * finds or inserts it in the user table, keyed by its process (the marker
 * frame). A global function: the verifier checks it once, not once per state
 * of every caller (the whole event path, walked again for each outcome of
 * the kernel stack's probe, is past its limit).
 */
__noinline __u64 smt_user_stack(void *ctx __attribute__((btf_decl_tag("arg:ctx"))),
				struct stack_buf *buf)
{
	const volatile struct smt_config *cfg = get_config();
	struct smt_globals *g = get_globals();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, stop = 0, nr;
	__u64 facts = 0;
	struct smt_probe p;

	if (!buf)
		return USER_NONE | SMT_NO_USER_STACK;
	nr = user_frames(ctx, cfg, buf, tgid, &stop);
	if (!nr)
		return USER_NONE | SMT_NO_USER_STACK; /* a kernel thread, or no readable frame */
	if (nr > SMT_MAX_USER_DEPTH) {
		nr = SMT_MAX_USER_DEPTH;
		stop = SMC_USER_TRUNCATED;
	}
	if (stop == SMC_USER_TRUNCATED)
		facts |= USER_TRUNCATED;
	else if (stop)
		facts |= USER_STOP(stop);
	buf->uips[nr & (SMT_MAX_DEPTH - 1)] = SMT_USER_MARKER(tgid, exec_id());
	smt_probe_init(&p, &g->user_shared, buf->uips, nr + 1, cfg->table_bits,
		       g->user_shared.hash_seed);
	bpf_loop(SMT_MAX_PROBES, probe_user_step_cb, &p, 0);
	smt_probe_finish(&p);
	if (p.status == SMT_FOUND || p.status == SMT_INSERTED)
		return facts | p.idx;
	return facts | USER_NOT_STORED | SMT_NO_STACK_ID;
}

#endif /* STACKMAPD_USER_STACK_BPF_H */
