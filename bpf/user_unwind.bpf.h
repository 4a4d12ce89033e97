/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --user-stacks on x86_64: the user stack walked with the unwind tables of
 * the files each process maps (stackmapd/abi/unwind.h), one frame per
 * bpf_loop step (include/stackmapd/unwind_step.h), frame pointers where code
 * has no table (yet: a file met without one is asked for). Stock distributions build without frame pointers,
 * where bpf_get_stack(BPF_F_USER_STACK) gets 1-3 frames, often garbage.
 * Included by user_stack.bpf.h.
 */
#ifndef STACKMAPD_USER_UNWIND_BPF_H
#define STACKMAPD_USER_UNWIND_BPF_H

#include <bpf/bpf_core_read.h>

/* Every loaded file's rows, one run each; sized at load (one row when off). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct smt_unwind_row);
	__uint(max_entries, 1);
} unwind_rows SEC(".maps");

/* (inode, device) -> where the file's rows are; the daemon's to fill and
 * evict. Sized at load (one when off). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct smt_unwind_file_key);
	__type(value, struct smt_unwind_file);
	__uint(max_entries, 1);
} unwind_files SEC(".maps");

/* tgid -> its code mappings; least recently used first out, so processes
 * that exited leave on their own. Sized at load (one when off). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u32);
	__type(value, struct smt_unwind_process);
	__uint(max_entries, 1);
} unwind_procs SEC(".maps");

/* The files asked for, so each is asked once; the daemon deletes a file's
 * key when it evicts its rows. Sized at load (one when off). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct smt_unwind_file_key);
	__type(value, __u8);
	__uint(max_entries, 1);
} unwind_asked SEC(".maps");

/* The daemon's queue of files to build tables for (struct smt_unwind_wanted). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} unwind_wanted SEC(".maps");

/* Asks the daemon once for the table of m's file, mapped in process tgid. */
static __always_inline void smt_unwind_want(__u32 tgid, const struct smt_unwind_mapping *m)
{
	const struct smt_unwind_file_key *key = SMT_UNWIND_KEY_OF(m);
	struct smt_unwind_wanted *w;
	__u8 one = 1;

	if (bpf_map_update_elem(&unwind_asked, key, &one, BPF_NOEXIST))
		return; /* asked already, or the map is busy on this CPU: next time */
	w = bpf_ringbuf_reserve(&unwind_wanted, sizeof(*w), 0);
	if (!w) {
		bpf_map_delete_elem(&unwind_asked, key); /* not sent: ask again */
		return;
	}
	w->tgid = tgid;
	w->zero = 0;
	w->mapping = *m;
	bpf_ringbuf_submit(w, 0);
}

static __always_inline const struct smt_unwind_row *smt_unwind_row_at(void *rows, __u32 idx)
{
	return bpf_map_lookup_elem(&unwind_rows, &idx);
}

static __always_inline int smt_unwind_read(__u64 *dst, __u64 addr)
{
	return bpf_probe_read_user(dst, sizeof(*dst), (const void *)addr);
}

#include "stackmapd/unwind_find.h"
#include "stackmapd/unwind_step.h"

/* x86_64's saved user registers (the kernel's struct pt_regs), relocated
 * against the running kernel's BTF. Only read where the session set
 * user_unwind, which the daemon does on x86_64 kernels only. */
struct pt_regs___x86 {
	unsigned long bp, ip, cs, sp;
} __attribute__((preserve_access_index));

/*
 * A frame-pointer walk, with -u's probes at a function's entry on x86_64:
 * the function has not pushed its frame yet, so the chain starts at its
 * caller's caller, and the caller is the return address at the top of the
 * stack: put it after the first frame. Returns how many frames. (Elsewhere
 * the return address is in a register, and the walk stays as it is.)
 */
static __always_inline __u32 fp_user_stack(void *ctx, __u64 *ips, __u32 max, __u32 at_entry)
{
	struct task_struct *task = bpf_get_current_task_btf();
	const struct pt_regs___x86 *regs = (const void *)bpf_task_pt_regs(task);
	__u64 ra = 0;
	long len;

	if (!at_entry || !regs || !bpf_core_field_exists(regs->cs)) {
		len = bpf_get_stack(ctx, ips, max * sizeof(__u64), BPF_F_USER_STACK);
		return len < (long)sizeof(__u64) ? 0 : len / sizeof(__u64);
	}
	len = bpf_get_stack(ctx, ips + 1, (max - 1) * sizeof(__u64), BPF_F_USER_STACK);
	if (len < (long)sizeof(__u64))
		return 0;
	/* A return address that cannot be read is no code: the resolver cuts
	 * the stack there (daemon/resolve/user_capture.h). */
	bpf_probe_read_user(&ra, sizeof(ra), (const void *)regs->sp);
	ips[0] = ips[1];
	ips[1] = ra;
	return len / sizeof(__u64) + 1;
}

/*
 * The two searches are global functions: the verifier checks each once, on
 * its own, where inside the walk's callback it would follow every path
 * through both binary searches for every path through the step.
 */

/* The mapping of ip in process tgid's entry, copied to *out: 1. None: 0, or
 * 2 when the entry does not list all of the process's code. */
__noinline int smt_unwind_mapping_at(__u32 tgid, __u64 ip, struct smt_unwind_mapping *out)
{
	const struct smt_unwind_process *p = bpf_map_lookup_elem(&unwind_procs, &tgid);
	const struct smt_unwind_mapping *m;

	if (!p || !out)
		return 0;
	m = smt_unwind_mapping_of(p, ip);
	if (!m)
		return (p->flags & SMT_UNWIND_UNLISTED_CODE) ? 2 : 0;
	*out = *m;
	return 1;
}

/* The row of pc in mapping m of process tgid, copied to *out: 1; 0 when
 * none. A file whose table is not loaded is asked for; one whose is, is
 * stamped with `now` (smt_unwind_file.used). */
__noinline int smt_unwind_row_in(const struct smt_unwind_mapping *m, __u64 pc, __u32 tgid,
				 __u64 now, struct smt_unwind_row *out)
{
	const struct smt_unwind_row *row;
	struct smt_unwind_file *f;
	__u32 at;

	if (!m || !out || !m->ino)
		return 0; /* code in no file: frame pointers */
	f = bpf_map_lookup_elem(&unwind_files, SMT_UNWIND_KEY_OF(m));
	if (!f) {
		smt_unwind_want(tgid, m);
		return 0;
	}
	if (f->used != now) /* a shared line written once a second at most */
		f->used = now;
	if (!f->nr_rows || !smt_unwind_pc(m, f, pc, &at))
		return 0;
	row = smt_unwind_row_of(0, f, at);
	if (!row)
		return 0;
	*out = *row;
	return 1;
}

/* The step from *r to its caller by row (when has_row) or frame pointer.
 * Its own function, verified once: inline in the walk's callback, the
 * verifier carried the outcome of each of its branches (which counter, an
 * exact ip or a return address) into the next step's state, and the
 * callback never converged (its first instruction verified 598 times). */
__noinline int smt_unwind_step_by(const struct smt_unwind_row *row, __u32 has_row,
				  struct smt_unwind_regs *r)
{
	if (!row || !r)
		return SMC_USER_FAULT;
	return smt_unwind_step(has_row ? row : 0, r);
}

struct unwind_walk {
	struct smt_unwind_regs r;
	__u64 *ips;
	__u64 now; /* smt_unwind_file.used's clock: CLOCK_MONOTONIC's ns >> 30 */
	__u32 tgid;
	__u32 nr;
	__u32 stop; /* the counter the walk ended in; 0 while it goes on */
};

/* Frame i is in w->r: keep it if it is code, then step to its caller. */
static long unwind_step_cb(__u32 i, void *ctx)
{
	struct unwind_walk *w = ctx;
	struct smt_unwind_mapping m;
	struct smt_unwind_row row;
	int found, has_row = 0;

	if (i >= SMT_MAX_USER_DEPTH)
		return 1;
	found = smt_unwind_mapping_at(w->tgid, w->r.ip, &m);
	if (!found && i > 0) {
		w->stop = SMC_USER_OUTSIDE_CODE; /* a caller that is no code: cut here */
		return 1;
	}
	w->ips[i] = w->r.ip;
	w->nr = i + 1;
	if (found == 1)
		has_row = smt_unwind_row_in(&m, smt_unwind_lookup_pc(&w->r), w->tgid, w->now, &row);
	w->stop = smt_unwind_step_by(&row, has_row, &w->r);
	return w->stop != 0;
}

/* The current task's user stack into ips (SMT_MAX_USER_DEPTH frames at
 * most). Returns how many, or 0 for a task with no user context (a kernel
 * thread); *stop says where the walk ended (SMC_USER_TRUNCATED at depth). */
static __always_inline __u32 unwind_user(void *ctx, __u64 *ips, __u32 tgid, __u32 exec, __u32 *stop,
					 __u32 at_entry)
{
	struct task_struct *task = bpf_get_current_task_btf();
	const struct pt_regs___x86 *regs = (const void *)bpf_task_pt_regs(task);
	const struct smt_unwind_process *proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
	struct unwind_walk w = {};

	if (!regs || (regs->cs & 3) != 3)
		return 0;
	w.r.ip = regs->ip;
	w.r.sp = regs->sp;
	w.r.bp = regs->bp;
	w.r.exact = 1;
	w.ips = ips;
	w.tgid = tgid;
	if (!proc || (proc->exec_id != (__u16)exec && !(proc->flags & SMT_UNWIND_ANY_EXEC))) {
		/* Not loaded yet (a process that lives a few milliseconds may
		 * never be), or loaded before an exec: frame pointers, whose
		 * frames past the first that are no code the resolver cuts
		 * (daemon/resolve/user_capture.h). */
		*stop = SMC_USER_NOT_LOADED;
		return fp_user_stack(ctx, ips, SMT_MAX_USER_DEPTH, at_entry);
	}
	w.now = bpf_ktime_get_ns() >> 30;
	bpf_loop(SMT_MAX_USER_DEPTH, unwind_step_cb, &w, 0);
	*stop = w.stop ? w.stop : SMC_USER_TRUNCATED;
	return w.nr;
}

#endif /* STACKMAPD_USER_UNWIND_BPF_H */
