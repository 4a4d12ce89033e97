/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One step of the user stack walk: from a frame's registers to its caller's,
 * by the frame's unwind row (stackmapd/abi/unwind.h), or by its frame pointer
 * in code that has no table. Written once, compiled into the BPF walker
 * (bpf/user_unwind.bpf.h) and into the host tests, which walk real stopped
 * processes with it.
 *
 * The includer defines, before including this file:
 *   int smt_unwind_read(__u64 *dst, __u64 addr);  8 bytes of user memory; 0 or an error
 * and finds each frame's mapping and row (unwind_find.h) itself: the BPF
 * walker in functions the verifier checks once each, apart from the step.
 */
#ifndef STACKMAPD_UNWIND_STEP_H
#define STACKMAPD_UNWIND_STEP_H

#include "stackmapd/abi.h"

#ifndef SMT_INLINE
#define SMT_INLINE static inline __attribute__((always_inline))
#endif

/* A frame: where it runs and the two registers its caller is found from. */
struct smt_unwind_regs {
	__u64 ip, sp, bp;
	/* ip is exact (the interrupted instruction), not a return address:
	 * frame 0, and the frame a signal interrupted. A return address is
	 * looked up one byte back, in its call instruction: a call that
	 * never returns may be a function's last instruction. */
	__u32 exact;
	__u32 reserved;
};

/* x86_64's struct rt_sigframe as a signal handler's return finds it: the
 * ucontext at the handler's CFA, its mcontext 40 bytes in (uc_flags, uc_link,
 * uc_stack), the registers in struct sigcontext's order (UAPI). */
#define SMT_SIGFRAME_RBP 120
#define SMT_SIGFRAME_RSP 160
#define SMT_SIGFRAME_RIP 168

/* The caller of the frame in *r, by its row. Returns 0 with *r the caller's
 * frame, or the counter (abi/table.h) that ends the walk. */
SMT_INLINE int smt_unwind_by_row(const struct smt_unwind_row *row, struct smt_unwind_regs *r)
{
	__u32 cfa_rule = SMT_UNWIND_CFA_RULE(row->rules);
	__u64 cfa, ra, bp = r->bp, base;

	switch (cfa_rule) {
	case SMT_CFA_RSP:
		cfa = r->sp + row->cfa_off;
		break;
	case SMT_CFA_RBP:
		if (!r->bp)
			return SMC_USER_UNSUPPORTED; /* its caller's rbp was lost */
		cfa = r->bp + row->cfa_off;
		break;
	case SMT_CFA_PLT:
		cfa = r->sp + 8 + ((r->ip & 15) >= row->cfa_off ? 8 : 0);
		break;
	case SMT_CFA_RSP_DEREF:
	case SMT_CFA_RBP_DEREF:
		base = cfa_rule == SMT_CFA_RSP_DEREF ? r->sp : r->bp;
		if (!base)
			return SMC_USER_UNSUPPORTED;
		if (smt_unwind_read(&cfa, base + SMT_CFA_DEREF_AT(row->cfa_off)))
			return SMC_USER_FAULT;
		cfa += SMT_CFA_DEREF_ADD(row->cfa_off);
		break;
	case SMT_CFA_END:
		return SMC_USER_COMPLETE;
	case SMT_CFA_SIGNAL:
		if (smt_unwind_read(&ra, r->sp + SMT_SIGFRAME_RIP) ||
		    smt_unwind_read(&cfa, r->sp + SMT_SIGFRAME_RSP) ||
		    smt_unwind_read(&bp, r->sp + SMT_SIGFRAME_RBP))
			return SMC_USER_FAULT;
		r->ip = ra;
		r->sp = cfa;
		r->bp = bp;
		r->exact = 1;
		return 0;
	default:
		return SMC_USER_UNSUPPORTED;
	}
	if (smt_unwind_read(&ra, cfa - 8))
		return SMC_USER_FAULT;
	if (SMT_UNWIND_RBP_RULE(row->rules) == SMT_RBP_AT_CFA) {
		if (smt_unwind_read(&bp, cfa + (__s64)row->rbp_off * 8))
			return SMC_USER_FAULT;
	} else if (SMT_UNWIND_RBP_RULE(row->rules) == SMT_RBP_LOST) {
		bp = 0;
	}
	if (cfa <= r->sp)
		return SMC_USER_OUTSIDE_CODE; /* not up the stack: a wrong row or a corrupt one */
	r->ip = ra;
	r->sp = cfa;
	r->bp = bp;
	r->exact = 0;
	return 0;
}

/* The caller by the frame pointer: code with no table (JIT code, a file
 * without CFI, a gap between FDEs). */
SMT_INLINE int smt_unwind_by_fp(struct smt_unwind_regs *r)
{
	__u64 ra, bp;

	if (!r->bp || r->bp < r->sp || (r->bp & 7))
		return SMC_USER_NO_TABLE;
	if (smt_unwind_read(&ra, r->bp + 8) || smt_unwind_read(&bp, r->bp))
		return SMC_USER_FAULT;
	r->sp = r->bp + 16;
	r->ip = ra;
	r->bp = bp;
	r->exact = 0;
	return 0;
}

/* The pc a frame's row is found at: a return address's call instruction. */
SMT_INLINE __u64 smt_unwind_lookup_pc(const struct smt_unwind_regs *r)
{
	return r->exact ? r->ip : r->ip - 1;
}

/* One step: *r becomes its caller's frame (return 0), or the walk ends with
 * the counter returned. `row` is the frame's row (at smt_unwind_lookup_pc),
 * NULL where no table covers it: frame pointers then. The walker then looks
 * the caller's ip up in the process's mappings: an ip in none of them (0,
 * data, a heap pointer) is no code, and the stack is cut there
 * (SMC_USER_OUTSIDE_CODE), never given that frame. */
SMT_INLINE int smt_unwind_step(const struct smt_unwind_row *row, struct smt_unwind_regs *r)
{
	int stop;

	if (row && SMT_UNWIND_CFA_RULE(row->rules) != SMT_CFA_NONE)
		stop = smt_unwind_by_row(row, r);
	else
		stop = smt_unwind_by_fp(r);
	if (!stop && !r->ip)
		return SMC_USER_COMPLETE; /* a zeroed return address: the thread's first frame */
	return stop;
}

#endif /* STACKMAPD_UNWIND_STEP_H */
