/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Settings fixed for a session (struct smt_config and the attach cookies),
 * the sizes of the bpfloader object, and --offcpu's map of open blocks.
 * Part of stackmapd/abi.h, which includes it.
 */
#ifndef STACKMAPD_ABI_SESSION_H
#define STACKMAPD_ABI_SESSION_H

#ifndef STACKMAPD_ABI_H
#error "include stackmapd/abi.h"
#endif

/* Leading frames of the tracing machinery (__traceiter_<event>, which a
 * tracepoint calls its probes through once another kind of probe shares
 * it: the ftrace event, a raw tracepoint program) are cut before a stack is
 * hashed, so a code path keeps one id whoever else traces it: the daemon
 * fills the sorted [start, end) ranges of its events' __traceiter_*
 * functions. At most SMT_MAX_STRIP_FRAMES frames are cut. */
#define SMT_MAX_STRIP 512
#define SMT_MAX_STRIP_FRAMES 3
struct smt_text_range {
	__u64 start;
	__u64 end;
};

/* --pid: the processes one session can keep. The event path compares the
 * current tgid with each in turn, before it takes the stack; the verifier
 * reads how many from frozen .rodata and keeps only those compares. */
#define SMT_MAX_PIDS 64

/* --comm: the names one session can keep, as the kernel keeps a task's
 * (task->comm: at most 15 bytes, zero-padded to 16), each compared as two
 * words with the current task's. */
#define SMT_MAX_COMMS 16

/* --cgroup: the cgroups (v2) one session can keep, each with every cgroup
 * below it: an event is kept when the current task's ancestor at a filter's
 * level is that filter's cgroup (bpf_get_current_ancestor_cgroup_id). */
#define SMT_MAX_CGROUPS 16
struct smt_cgroup_filter {
	__u64 id;    /* the cgroup's id: its directory's inode on the cgroup2 mount */
	__u32 level; /* its depth below the root cgroup (level 0) */
	__u32 reserved;
};

/* -- CMD: the processes (tgids) of the command and its descendants that one
 * session follows at once, in the daemon's own object's `tracked` map; a
 * process forked while it is full is not followed (counted in tracked_lost). */
#define SMT_MAX_TRACKED 16384

/* Settings fixed for a session: .rodata of the daemon's own object (so the
 * verifier prunes what is off), a one-entry array the daemon writes before
 * attaching in the bpfloader object, which has no global data. */
struct smt_config {
	__u64 wakeup_bytes; /* ring-buffer fill that wakes the daemon early */
	__u64 min_block_ns; /* --offcpu: shorter blocks are not events */
	__u32 table_bits;
	__u32 verify_every;   /* --verify N: 1 in N events also sends its frames */
	__u32 trace_records;  /* --trace: events go in trace buffers (smt_trace_buf) */
	__u32 filter_tgid_nr; /* --pid: how many of filter_tgid; 0 = every process */
	__u32 filter_cpu;     /* --cpu; SMT_ANY_CPU = every CPU */
	__u32 fentry_source;  /* source index of an fentry copy (one per function) */
	/* --offcpu: offsets of sched_switch's next_pid and prev_state fields */
	__u16 next_pid_offset;
	__u16 prev_state_offset;
	/* --by cgroup/unit: send cgroup ids; off, kernels without cgroups load us */
	__u32 cgroup_ids;
	__u32 strip_nr;
	__u32 user_stacks;	/* --user-stacks: capture user stacks too */
	__u32 filter_comm_nr;	/* --comm: how many of filter_comm; 0 = every name */
	__u32 filter_cgroup_nr; /* --cgroup: how many of filter_cgroup; 0 = every cgroup */
	__u32 user_unwind;	/* --user-stacks walks unwind tables (x86_64), not frame pointers */
	__u32 follow_command;	/* -- CMD: only the processes in the tracked map */
	__u32 hist; /* --hist: a batch entry counts events of one log2 bucket of their weight */
	struct smt_filter filter; /* --filter, on tracepoint records; nr 0 = every event */
	__u32 filter_tgid[SMT_MAX_PIDS];
	__u64 filter_comm[SMT_MAX_COMMS][2];
	struct smt_cgroup_filter filter_cgroup[SMT_MAX_CGROUPS];
	struct smt_text_range strip[SMT_MAX_STRIP];
};

/* The table size of the object shipped for bpfloader, which sizes maps from
 * the ELF file: 4096 stacks, 2.1 MiB of pool. */
#ifndef SMT_BPFLOADER_BITS
#define SMT_BPFLOADER_BITS 12
#endif
#define SMT_BPFLOADER_RING_BYTES (1U << 20)
/* CPUs the bpfloader object has batches for (smt_batch): phones have 8-12. */
#define SMT_BPFLOADER_CPUS 32

/* A tracepoint link's attach cookie: the source index in bits 0-15, in bits
 * 16-31 how many bytes of the raw tracepoint record --trace copies (0: none),
 * in bits 32-62 where --sum reads the event's weight (0: each event weighs 1),
 * so the event path needs no per-source lookup. */
#define SMT_WEIGHT_FIELD(offset, size, is_signed) ((offset) << 8 | (size) << 1 | (is_signed))
#define SMT_WEIGHT_OFFSET(field) ((field) >> 8)
#define SMT_WEIGHT_SIZE(field) (((field) >> 1) & 0xf)
#define SMT_WEIGHT_SIGNED(field) ((field)&1)
#define SMT_COOKIE(source, raw_len, weight_field) \
	((__u64)(weight_field) << 32 | (__u64)((raw_len)&0xffff) << 16 | ((source)&0xffff))
#define SMT_COOKIE_SOURCE(cookie) ((__u32)(cookie)&0xffff)
#define SMT_COOKIE_RAW_LEN(cookie) ((__u32)((cookie) >> 16) & 0xffff)
/* -u: a uprobe at a function's entry, where a frame-pointer walk misses the
 * caller (bpf/user_unwind.bpf.h). Bit 63: a weight field (a tracepoint's, or
 * a -u argument's register), the only other user of bits 32-63, never
 * reaches it: its offset is below 2^23. */
#define SMT_COOKIE_AT_ENTRY (1ull << 63)
#define SMT_COOKIE_WEIGHT_FIELD(cookie) ((__u32)((cookie) >> 32) & 0x7fffffffU)

/* --offcpu: a switched-out thread, until it runs again (keyed by tid). */
struct smt_offcpu_start {
	__u64 ts_ns;
	__u64 cgroup_id;
	__u32 stack_id;
	__u32 epoch;
	__u32 tgid;
	__u32 name;
	__u16 cpu;
	__u16 source;
	__u32 inserted; /* the switch-out stored the stack for the first time */
	__u32 user_stack_id;
	__u32 reserved;
};

/* Threads --offcpu can follow at once; more are counted in drop_offcpu_full. */
#define SMT_OFFCPU_THREADS 16384

/* sched_switch's prev_state of a thread that is exiting (EXIT_DEAD,
 * EXIT_ZOMBIE): it never runs again, so its switch-out is no block. */
#define SMT_PREV_STATE_EXITING 0x30

/* Stack buffers per CPU: task, softirq, hardirq and NMI context may each
 * interrupt the one before with a program of another type. */
#define SMT_MAX_NEST 4
/* filter_cpu when every CPU is traced */
#define SMT_ANY_CPU 0xffffffffU

SMT_STATIC_ASSERT(sizeof(struct smt_offcpu_start) == 48, "offcpu layout");
SMT_STATIC_ASSERT(sizeof(struct smt_cgroup_filter) == 16, "cgroup filter layout");
SMT_STATIC_ASSERT(sizeof(struct smt_config) == 80 + sizeof(struct smt_filter) + 4 * SMT_MAX_PIDS +
						       16 * SMT_MAX_COMMS + 16 * SMT_MAX_CGROUPS +
						       16 * SMT_MAX_STRIP,
		  "config layout");

#endif /* STACKMAPD_ABI_SESSION_H */
