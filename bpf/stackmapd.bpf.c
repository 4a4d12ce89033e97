// SPDX-License-Identifier: GPL-2.0
/*
 * stackmapd's event path: capture the kernel stack, cut the tracing
 * machinery's own leading frames, find or insert it in the shared lock-free
 * table (include/stackmapd/stack_table.h), and count the event with who
 * caused it in this CPU's batch (struct smt_batch): an event whose key is
 * already there costs no ring-buffer record and writes no line another CPU
 * shares. A batch entry goes to the daemon only to make room for another key
 * (smt_count_record); the daemon reads the rest in place. A stack the table
 * cannot take goes whole (smt_stack_record); a thread name once, the first
 * time it is seen.
 *
 * Order matters:
 *  1. announce a new thread name before any record or batch entry uses it;
 *  2. read the reset state once; the daemon's reset waits out every program
 *     that may have read it live with an RCU grace period (membarrier), so
 *     the event path needs no barrier of its own for it
 *     (daemon/bpf/table_reset.cpp);
 *  3. every event then ends in SMC_HITS or exactly one SMC_DROP_* counter of
 *     the epoch it read, written with the event's batch entry in one seqlock
 *     window, so a snapshot's counters and counts agree exactly.
 * Batches are per CPU and per nesting level, so their one writer needs no
 * atomics but the seqlock's: a program that interrupts another on the same
 * CPU writes in its own level.
 *
 * This file holds the programs; their code is in parts, in include order:
 * bpfloader_compat.bpf.h (the maps, settings and everything the bpfloader
 * objects do differently), stack_path.bpf.h (a stack captured and found),
 * batch.bpf.h (thread names, counts and the records they send),
 * trace_buf.bpf.h (--trace), event_path.bpf.h (one event, entry to
 * outcome), offcpu.bpf.h (--offcpu) and follow.bpf.h (-- CMD); -u's uprobes
 * share the event path.
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>

#include "bpfloader_compat.bpf.h"
#include "stack_path.bpf.h"
#include "batch.bpf.h"
#include "trace_buf.bpf.h"
#include "event_path.bpf.h"

#ifdef SMT_BPFLOADER
/* Without cookies a program cannot tell which tracepoint it runs for (the
 * kernel overwrites a record's common fields with a pt_regs pointer before
 * BPF sees it): one copy per attached tracepoint, its slot's cookie in the
 * cookies map. bpfloader pins them as prog_stackmapd_tracepoint_stackmapd_N. */
#define SMT_TRACEPOINT_SLOT(n)                                \
	SMT_LOADER_PROG(stackmapd_tp##n);                     \
	SEC("tracepoint/stackmapd_" #n)                       \
	int stackmapd_tp##n(void *ctx)                        \
	{                                                     \
		return record_stack(ctx, cookie_at(n), 0, 1); \
	}
SMT_TRACEPOINT_SLOT(0)
SMT_TRACEPOINT_SLOT(1)
SMT_TRACEPOINT_SLOT(2)
SMT_TRACEPOINT_SLOT(3)
SMT_TRACEPOINT_SLOT(4)
SMT_TRACEPOINT_SLOT(5)
SMT_TRACEPOINT_SLOT(6)
SMT_TRACEPOINT_SLOT(7)
_Static_assert(SMT_LOADER_TRACEPOINTS == 8, "one SMT_TRACEPOINT_SLOT each");
#else
SEC("tracepoint")
int stackmapd_tracepoint(void *ctx)
{
	return record_stack(ctx, bpf_get_attach_cookie(ctx), 0, 1);
}
#endif

/* bpfloader pins this as prog_stackmapd_perf_event_stackmapd. */
SMT_SEC("perf_event/stackmapd", "perf_event")
int stackmapd_profile(void *ctx)
{
	return record_stack(ctx, (__u32)SMT_PROFILE_COOKIE(ctx), 0, 0);
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
	return record_stack(ctx, get_config()->fentry_source, SMT_FENTRY_SKIP, 0);
}

/* -u: user-space probes (uprobes and USDT sites), one program for all of
 * them, each link's cookie naming its source. ctx is the user registers: no
 * kernel stack, the user stack is the event's whole stack (--user-stacks is
 * on). At a function's entry its frame is not set up yet; the unwind tables'
 * walk finds its caller (CFA = rsp + 8 there). */
SEC("uprobe")
int stackmapd_uprobe(void *ctx)
{
	return record_stack(ctx, bpf_get_attach_cookie(ctx), 0, 0);
}

/* -f where fentry cannot go (no BPF trampolines, or a function without BTF):
 * one program, attached once per function with its source as the cookie.
 * Its stack is unwound from the probe's registers, so it starts in the
 * probed function as fentry's does, with no frame of ours to skip. */
SEC("kprobe")
int stackmapd_kprobe(void *ctx)
{
	return record_stack(ctx, bpf_get_attach_cookie(ctx), 0, 0);
}

#include "offcpu.bpf.h"

SEC("tracepoint")
int stackmapd_offcpu(void *ctx)
{
	const volatile struct smt_config *cfg = get_config();
	struct smt_globals *g = get_globals();
	__u64 now = bpf_ktime_get_ns();
	struct stack_buf *buf;
	struct smt_batch *b;
	__u32 *depth, batch;

	depth = enter_level(g, &buf, &b, &batch);
	if (!depth)
		return 0;
	switch_in(ctx, cfg, g, b, batch, now);
	switch_out(ctx, cfg, g, buf, b, (__u32)bpf_get_attach_cookie(ctx), now);
	leave_level(depth);
	return 0;
}

#include "unwind_fill.bpf.h"

/* --user-stacks with unwind tables: loaded and attached only then. */
SEC("raw_tp/sched_process_exec")
int stackmapd_unwind_exec(void *ctx)
{
	unwind_exec();
	return 0;
}

SEC("raw_tp/sched_process_fork")
int stackmapd_unwind_fork(__u64 *ctx)
{
	unwind_fork((const struct task_struct *)ctx[0], (const struct task_struct *)ctx[1]);
	return 0;
}

/* The syscall tracepoints' records (their format files): the return value,
 * or the arguments, after the common fields and the syscall's number. */
struct sys_exit_args {
	__u64 common;
	__s64 nr;
	__s64 ret;
};

struct sys_enter_mprotect_args {
	__u64 common;
	__s64 nr;
	__u64 start, len, prot;
};

SEC("tracepoint/syscalls/sys_exit_mmap")
int stackmapd_unwind_mmap(struct sys_exit_args *ctx)
{
	if (ctx->ret > 0) /* an address, not an error */
		add_code_at((__u64)ctx->ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_mprotect")
int stackmapd_unwind_mprotect(struct sys_enter_mprotect_args *ctx)
{
	unwind_mprotect(ctx->start, ctx->len, ctx->prot);
	return 0;
}

#include "follow.bpf.h"

/* Loaded and attached only when a command is followed (-- CMD). */
SEC("tp_btf/sched_process_fork")
int stackmapd_follow_fork(__u64 *ctx)
{
	follow_fork((const struct task_struct *)ctx[1]);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int stackmapd_follow_exit(__u64 *ctx)
{
	follow_exit((const struct task_struct *)ctx[0]);
	return 0;
}
#endif

char LICENSE[] SEC("license") = "GPL";
