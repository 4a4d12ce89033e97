/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The stack table (its slots, pool and state), the stack ids outside it,
 * the outcome counters and what the BPF program keeps besides the table.
 * Part of stackmapd/abi.h, which includes it.
 */
#ifndef STACKMAPD_ABI_TABLE_H
#define STACKMAPD_ABI_TABLE_H

#ifndef STACKMAPD_ABI_H
#error "include stackmapd/abi.h"
#endif

/* The RFC's depth: deeper stacks are truncated to their innermost 64 frames. */
#define SMT_MAX_DEPTH 64
#define SMT_MIN_BITS 10
#define SMT_MAX_BITS 20
#define SMT_DEFAULT_BITS 14
/* Distinct slots one lookup may visit; at the 50% maximum load of a 2x table a
 * probe chain this long is vanishingly rare, and it bounds the cost of a miss. */
#define SMT_MAX_PROBES 64
/* Re-reads of a slot whose element another CPU is still writing. The
 * bpfloader object, verified without bpf_loop, walks every re-read of every
 * probe and sets fewer (bpf/bpfloader_compat.bpf.h). */
#ifndef SMT_MAX_SPINS
#define SMT_MAX_SPINS 512
#endif

/* slot.elt values besides 1 + pool index */
#define SMT_ELT_NONE 0U		 /* claimed, element not yet published */
#define SMT_ELT_DEAD 0xffffffffU /* claimed when the pool was empty: skip it */

/* One hash-table slot; its index is the stack_id. key 0 means free. */
struct smt_slot {
	__u32 key;
	__u32 elt;
};

/* One unique stack in the preallocated pool. ref_count is the daemon's: it
 * adds the events it counts (the BPF side writes 0 at insert and never again,
 * so no CPU writes a shared line on a hit), so a daemon that takes over a
 * pinned table finds the counts of the one before. 64-bit so it never wraps;
 * 32-bit exports saturate it. */
struct smt_elt {
	__u32 nr;
	__u32 hash;
	__u64 ref_count;
	__u64 ips[SMT_MAX_DEPTH];
};

/* Table-wide mutable state, written by the BPF side. */
struct smt_shared {
	__u32 next_elt; /* pool elements handed out; may pass the pool size */
	/* Reset protocol state, written by the daemon only: epoch << 1 | resetting
	 * (see daemon/bpf/table_reset.cpp). */
	__u32 state;
	/* jhash2 seed, random per table: kept with the table (not in .rodata) so
	 * a daemon that takes over pinned maps hashes into the same slots. */
	__u32 hash_seed;
	/* Thread-name ids handed out (smt_name_record); kept with the table so
	 * that ids never repeat within a pinned table's life. */
	__u32 next_name;
};

#define SMT_STATE_RESETTING 1U
#define SMT_STATE_EPOCH(state) ((state) >> 1)

#define SMT_NO_STACK_ID 0xffffffffU

/* Outcome counters, kept per CPU and per epoch parity. Every event ends in
 * SMC_HITS or exactly one SMC_DROP_* counter of the epoch it read. */
enum smt_counter {
	SMC_HITS,    /* counted under its stack's id */
	SMC_INSERTS, /* of those, stacks stored for the first time */
	/* The table could not take the stack: sent whole (SMC_SENT_WHOLE) to
	 * the daemon's overflow store, as the RFC falls back to the full stack. */
	SMC_DROP_POOL_FULL,	  /* new stack, element pool exhausted */
	SMC_DROP_PROBE_LIMIT,	  /* SMT_MAX_PROBES slots visited without a match */
	SMC_DROP_BUSY,		  /* matching slot still being written by another CPU */
	SMC_DROP_STACK_ERROR,	  /* bpf_get_stack() failed */
	SMC_DROP_NO_KERNEL_STACK, /* taken in user mode: also a hit (SMT_NO_KERNEL_STACK), no drop */
	SMC_DROP_RINGBUF_FULL,	  /* no room for the id record: consumer too slow */
	SMC_DROP_RESETTING,	  /* arrived while the table was being reset */
	SMC_DROP_NESTED,	  /* programs nested deeper than SMT_MAX_NEST on one CPU */
	SMC_DROP_OFFCPU_FULL,	  /* --offcpu: no room to remember a switched-out thread */
	SMC_DROP_OFFCPU_UNENDED,  /* --offcpu: a block whose switch-in never ran the program */
	/* Not outcomes: facts about events counted in one of the above. */
	SMC_TRUNCATED,	/* stack deeper than SMT_MAX_DEPTH: its innermost frames kept */
	SMC_NAMES_FULL, /* thread name not kept: SMT_MAX_NAMES names seen already */
	SMC_SENT_WHOLE, /* a table drop whose frames went to the daemon instead */
	/* --user-stacks, facts about the event's user stack (user_stack_id): */
	SMC_NO_USER_STACK,   /* none: a kernel thread, or no user frame readable */
	SMC_USER_NOT_STORED, /* the user table could not take it (SMT_NO_STACK_ID) */
	SMC_USER_TRUNCATED,  /* deeper than SMT_MAX_USER_DEPTH: innermost frames kept */
	/* --user-stacks with unwind tables (abi/unwind.h): where each walk ended,
	 * one of these or SMC_USER_TRUNCATED per user stack walked. */
	SMC_USER_COMPLETE,     /* at the outermost frame (_start, clone3) */
	SMC_USER_NOT_LOADED,   /* its process's tables not loaded (yet): frame pointers */
	SMC_USER_NO_TABLE,     /* code with no table and no frame pointer to follow */
	SMC_USER_FAULT,	       /* a read of the stack faulted (not resident, or bad) */
	SMC_USER_UNSUPPORTED,  /* a rule the walker cannot follow */
	SMC_USER_OUTSIDE_CODE, /* the caller would be outside any code mapping: cut there */
	SMC_NR,
};

#define SMC_FIRST_DROP SMC_DROP_POOL_FULL
#define SMC_LAST_DROP SMC_DROP_OFFCPU_UNENDED

/* Bumped whenever the meaning of a map changes without its size changing: a
 * daemon finding pinned maps of another version starts clean. */
#define SMT_LAYOUT_VERSION 8

/* The daemon's bookkeeping, kept beside the table (struct smt_globals) so that
 * it is pinned with it and survives a daemon restart. BPF never touches it. */
struct smt_daemon_state {
	__u32 layout_version;
	__u32 bits;
	__u64 resets;
	__u64 past_events;	   /* hits + drops of the epochs before this one */
	__u64 baseline[2][SMC_NR]; /* counters at the start of each parity's epoch */
	__u64 no_kernel_refs;	   /* SMT_NO_KERNEL_STACK's ref_count: it has no pool element */
};

/* Everything the BPF program keeps besides the table: the .bss of the
 * daemon's own object, a one-entry array in the bpfloader object. */
struct smt_globals {
	struct smt_shared shared;
	struct smt_daemon_state daemon_state;
	/* --user-stacks: the user stack table's own state (same table code, its
	 * own slots and pool: uslots, upool). */
	struct smt_shared user_shared;
};

/*
 * --user-stacks: user stacks go in a second table of the same layout and
 * code (stack_table.h). A user address means something only within one
 * address space, so every stored user stack ends with one marker frame
 * naming its process: equal addresses in two processes are two stacks, and
 * the frame comparison that confirms every match tells them apart. User
 * addresses never have the top 16 bits set, so a marker is never a frame.
 * The marker holds the tgid and the low 16 bits of the task's exec count
 * (task_struct.self_exec_id), so an exec'd image rarely shares stacks with
 * the one before.
 */
#define SMT_USER_MARKER_TAG 0xffff000000000000ULL
#define SMT_USER_MARKER(tgid, exec_id) \
	(SMT_USER_MARKER_TAG | (__u64)((exec_id)&0xffff) << 32 | (__u32)(tgid))
#define SMT_USER_MARKER_TGID(m) ((__u32)(m))
#define SMT_USER_MARKER_EXEC(m) ((__u32)((m) >> 32) & 0xffff)
#define SMT_IS_USER_MARKER(m) (((m)&SMT_USER_MARKER_TAG) == SMT_USER_MARKER_TAG)
/* User frames kept: one element slot is the marker's. */
#define SMT_MAX_USER_DEPTH (SMT_MAX_DEPTH - 1)
/* user_stack_id of an event without a user stack (a kernel thread, no user
 * frame readable, --user-stacks off); SMT_NO_STACK_ID: one the table could
 * not take. Both counted (SMC_NO_USER_STACK, SMC_USER_NOT_STORED). */
#define SMT_NO_USER_STACK 0xfffffffeU
/* stack_id of a --user-stacks event with no kernel frames (a --profile sample
 * taken in user mode) and a user stack: the stack the exports show for it is
 * empty (depth 0), its frames are all user frames. Never a slot index (at
 * most 2^(SMT_MAX_BITS+1)) nor an overflow id (the daemon's, from the table
 * size up), nor either of the SMT_NO_* ids. */
#define SMT_NO_KERNEL_STACK 0xfffffffdU

SMT_STATIC_ASSERT(sizeof(struct smt_slot) == 8, "slot layout");
SMT_STATIC_ASSERT(sizeof(struct smt_elt) == 16 + 8 * SMT_MAX_DEPTH, "elt layout");

#endif /* STACKMAPD_ABI_TABLE_H */
