/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference of the bpfloader objects (-DSMT_BPFLOADER) from the
 * daemon's own, side by side: the parts after this one (stack_path.bpf.h
 * and on) are written once, on what this file defines for each build.
 *
 * Two builds of bpf/stackmapd.bpf.c:
 *  - the daemon's own object (a skeleton): maps sized at load, settings in
 *    .rodata, one fentry copy per traced function;
 *  - -DSMT_BPFLOADER, the object another loader (Android's bpfloader) loads
 *    and pins for `stackmapd --pinned`: such loaders read map and program
 *    definitions of their own layout (bpfloader_maps.bpf.h, not BTF .maps),
 *    create no global-data maps, load each program section alone (no
 *    subprograms, so no bpf_loop callback), know no fentry sections, and
 *    their clients attach without BPF links, so without cookies.
 */
#ifndef STACKMAPD_BPFLOADER_COMPAT_BPF_H
#define STACKMAPD_BPFLOADER_COMPAT_BPF_H

#ifdef SMT_BPFLOADER
/* Without bpf_loop the verifier walks every re-read of every probe in turn:
 * 64 x 512 is past its limits. A writer needs ~100 ns; a reader that gives
 * up sooner counts drop_busy, it never guesses. */
#define SMT_MAX_SPINS 16
#endif
#include "stackmapd/abi.h"

/* Settings, table state, maps and cookies. */
#ifdef SMT_BPFLOADER
#define SMT_SEC(bpfloader, libbpf) SEC(bpfloader)

#include "bpfloader_maps.bpf.h"

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

static __always_inline __u64 cookie_at(__u32 key)
{
	__u64 *cookie = bpf_map_lookup_elem(&cookies, &key);

	return cookie ? *cookie : 0;
}

#define SMT_PROFILE_COOKIE(ctx) cookie_at(SMT_PROFILE_COOKIE_KEY)
SMT_LOADER_PROG(stackmapd_profile);

/* The kernel stack table only: these objects keep no user stacks. */
struct smt_table;

static __always_inline struct smt_slot *smt_slot_at(struct smt_table *t, __u32 idx)
{
	return bpf_map_lookup_elem(&slots, &idx);
}

static __always_inline struct smt_elt *smt_elt_at(struct smt_table *t, __u32 idx)
{
	return bpf_map_lookup_elem(&pool, &idx);
}
#else
#define SMT_SEC(bpfloader, libbpf) SEC(libbpf)

#include "maps.bpf.h"

#define SMT_PROFILE_COOKIE(ctx) bpf_get_attach_cookie(ctx)
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

/* A global function (stack_table.h's smt_wait_published). */
#define SMT_WAIT_FN __noinline
#endif

#include "stackmapd/stack_table.h"
#include "stackmapd/hist.h"

/*
 * Bounded loops: smt_loop(n, cb, ctx) calls cb(i, ctx) for i in [0, n) until
 * it returns nonzero; a callback is declared SMT_LOOP_CB.
 */
#ifdef SMT_BPFLOADER
/* A bounded loop: 64 probes of up to 64-frame compares verify in ~170 k of
 * the 1 M instruction budget. */
#define SMT_LOOP_CB static __always_inline long
#define smt_loop(n, cb, ctx)                       \
	do {                                       \
		for (__u32 i_ = 0; i_ < (n); i_++) \
			if ((cb)(i_, (ctx)))       \
				break;             \
	} while (0)
#else
#define SMT_LOOP_CB static long
#define smt_loop(n, cb, ctx) bpf_loop((n), (cb), (ctx), 0)
#endif

SMT_LOOP_CB probe_step_cb(__u32 i, void *ctx)
{
	/* The verifier does not carry i's bounds into the callback: re-check. */
	if (i >= SMT_MAX_PROBES)
		return 1;
	return smt_probe_step(NULL, ctx, i);
}

/* smt_user_stack's result (--user-stacks): the id in the low 32 bits, then
 * facts. */
#define USER_NONE (1ULL << 32)
#define USER_NOT_STORED (1ULL << 33)
#define USER_TRUNCATED (1ULL << 34)
/* where an unwind-table walk ended (abi/table.h's SMC_USER_COMPLETE..) */
#define USER_STOP(counter) ((__u64)(counter) << 40)
#define USER_STOP_OF(r) ((__u32)((r) >> 40) & 0xff)

/* The current task's name, user stack and kernel stack lookup. */
#ifdef SMT_BPFLOADER
static __always_inline void current_comm(struct smt_comm *c)
{
	bpf_get_current_comm(c->comm, sizeof(c->comm));
}

/* No user stack table (it needs CO-RE and a subprogram): no event has one. */
static __always_inline __u64 smt_user_stack(void *ctx, struct stack_buf *buf)
{
	return SMT_NO_USER_STACK;
}

/* No --filter (the daemon refuses it with --pinned): settings in a map are
 * not frozen, so the verifier could not drop an unused filter. */
static __always_inline int record_filtered_out(void *ctx, const volatile struct smt_config *cfg,
					       struct stack_buf *buf)
{
	return 0;
}

static __always_inline void find_stack(const volatile struct smt_config *cfg, struct smt_globals *g,
				       struct smt_batch *b, __u32 epoch, struct stack_buf *buf,
				       __u32 nr, struct smt_probe *p)
{
	smt_probe_init(p, &g->shared, buf->ips, nr, cfg->table_bits, g->shared.hash_seed);
	smt_loop(SMT_MAX_PROBES, probe_step_cb, p);
	smt_probe_finish(p);
}
#else
/* What the programs read of a task, relocated by libbpf against the
 * kernel's BTF (CO-RE): only the fields a program uses must exist. */
struct signal_struct {
	struct {
		int counter;
	} live; /* threads not yet exiting; 0 once the last one is */
} __attribute__((preserve_access_index));

struct mm_struct;

struct task_struct {
	char comm[16];
	__u64 self_exec_id;
	int pid, tgid;
	struct mm_struct *mm;
	struct signal_struct *signal;
} __attribute__((preserve_access_index));

/* The name read in place: a third of bpf_get_current_comm's cost, which
 * copies and pads it. The kernel pads task->comm with zeros too
 * (strscpy_pad), so both read the same 16 bytes. */
static __always_inline void current_comm(struct smt_comm *c)
{
	const struct task_struct *t = bpf_get_current_task_btf();
	__u64 *w = (__u64 *)c->comm;

	w[0] = *(const __u64 *)&t->comm[0];
	w[1] = *(const __u64 *)&t->comm[8];
}

#include "recent_stacks.bpf.h"
#include "user_stack.bpf.h"
#include "record_filter.bpf.h"
#endif

#endif /* STACKMAPD_BPFLOADER_COMPAT_BPF_H */
