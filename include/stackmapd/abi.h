/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Layouts and limits shared by the BPF program (bpf/) and the daemon (daemon/).
 * Only __u32/__u64 types and plain C: this header is compiled by clang -target bpf
 * (after bpf/kernel_types.h) and by the host C++ compiler.
 */
#ifndef STACKMAPD_ABI_H
#define STACKMAPD_ABI_H

#ifndef __bpf__
#include <linux/types.h>
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
	SMC_DROP_NO_KERNEL_STACK, /* no kernel frames, no user stack (SMT_NO_KERNEL_STACK) */
	SMC_DROP_RINGBUF_FULL,	  /* no room for the id record: consumer too slow */
	SMC_DROP_RESETTING,	  /* arrived while the table was being reset */
	SMC_DROP_NESTED,	  /* programs nested deeper than SMT_MAX_NEST on one CPU */
	SMC_DROP_OFFCPU_FULL,	  /* --offcpu: no room to remember a switched-out thread */
	/* Not outcomes: facts about events counted in one of the above. */
	SMC_TRUNCATED,	/* stack deeper than SMT_MAX_DEPTH: its innermost frames kept */
	SMC_NAMES_FULL, /* thread name not kept: SMT_MAX_NAMES names seen already */
	SMC_SENT_WHOLE, /* a table drop whose frames went to the daemon instead */
	/* --user-stacks, facts about the event's user stack (user_stack_id): */
	SMC_NO_USER_STACK,   /* none: a kernel thread, or no user frame readable */
	SMC_USER_NOT_STORED, /* the user table could not take it (SMT_NO_STACK_ID) */
	SMC_USER_TRUNCATED,  /* deeper than SMT_MAX_USER_DEPTH: innermost frames kept */
	SMC_NR,
};

#define SMC_FIRST_DROP SMC_DROP_POOL_FULL
#define SMC_LAST_DROP SMC_DROP_OFFCPU_FULL

/* Bumped whenever the meaning of a map changes without its size changing: a
 * daemon finding pinned maps of another version starts clean. */
#define SMT_LAYOUT_VERSION 6

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

/* Settings fixed for a session: .rodata of the daemon's own object (so the
 * verifier prunes what is off), a one-entry array the daemon writes before
 * attaching in the bpfloader object, which has no global data. */
struct smt_config {
	__u64 wakeup_bytes; /* ring-buffer fill that wakes the daemon early */
	__u64 min_block_ns; /* --offcpu: shorter blocks are not events */
	__u32 table_bits;
	__u32 verify_every;  /* --verify N: 1 in N events also sends its frames */
	__u32 trace_records; /* --trace: events go in trace buffers (smt_trace_buf) */
	__u32 filter_tgid;   /* --pid; 0 = every process */
	__u32 filter_cpu;    /* --cpu; SMT_ANY_CPU = every CPU */
	__u32 fentry_source; /* source index of an fentry copy (one per function) */
	/* --offcpu: offsets of sched_switch's next_pid and prev_state fields */
	__u16 next_pid_offset;
	__u16 prev_state_offset;
	/* --by cgroup/unit: send cgroup ids; off, kernels without cgroups load us */
	__u32 cgroup_ids;
	__u32 strip_nr;
	__u32 user_stacks; /* --user-stacks: capture user stacks too */
	__u32 reserved;
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

#define SMT_STATE_RESETTING 1U
#define SMT_STATE_EPOCH(state) ((state) >> 1)

/* The key of the BPF side's name -> id map (a task's comm). */
struct smt_comm {
	char comm[16];
};

/* One per CPU and nesting level (see SMT_MAX_NEST), in its smt_batch. */
struct smt_cpu_counters {
	__u64 events;	  /* every event of every epoch, counted apart */
	__u64 ring_bytes; /* submitted to the ring buffer, record headers included */
	__u64 epoch[2][SMC_NR];
};

/* A tracepoint link's attach cookie: the source index in bits 0-15, in bits
 * 16-31 how many bytes of the raw tracepoint record --trace copies (0: none),
 * in bits 32-63 where --sum reads the event's weight (0: each event weighs 1),
 * so the event path needs no per-source lookup. */
#define SMT_WEIGHT_FIELD(offset, size, is_signed) ((offset) << 8 | (size) << 1 | (is_signed))
#define SMT_WEIGHT_OFFSET(field) ((field) >> 8)
#define SMT_WEIGHT_SIZE(field) (((field) >> 1) & 0xf)
#define SMT_WEIGHT_SIGNED(field) ((field)&1)
#define SMT_COOKIE(source, raw_len, weight_field) \
	((__u64)(weight_field) << 32 | (__u64)((raw_len)&0xffff) << 16 | ((source)&0xffff))
#define SMT_COOKIE_SOURCE(cookie) ((__u32)(cookie)&0xffff)
#define SMT_COOKIE_RAW_LEN(cookie) ((__u32)((cookie) >> 16) & 0xffff)

/* Ring-buffer records, told apart by size. An event carries what
 * attribution needs (--by, --sum, --offcpu): who, where, which source and
 * how much. Events are counted per CPU in an smt_batch and reach the ring
 * as smt_count_records, many events to a record; a --trace session writes
 * each event into its batch's trace buffer instead (smt_trace_buf, many
 * events to a record; smt_event_record for --offcpu's). */
struct smt_event_record {
	__u32 stack_id;
	__u32 epoch;
	__u32 tgid;
	__u32 tid;
	__u64 cgroup_id; /* the task's cgroup v2 id (its directory's inode) */
	__u64 weight;	 /* 1, the --sum field's value, or ns off the CPU */
	__u32 name;	 /* thread name id, announced by an smt_name_record; 0: none */
	__u16 source;	 /* index into the session's sources */
	__u16 cpu;
	__u32 user_stack_id; /* --user-stacks: its id in the user table, else SMT_NO_USER_STACK */
	__u32 reserved;
};

/* Events of one key counted together: what a batch entry sends the ring when
 * it makes room for another key. seq orders the records of one batch
 * (SMT_BATCH_SEQ), so the daemon knows when it has read all of them. */
struct smt_count_record {
	struct smt_event_record event; /* weight: the sum of the events' weights */
	__u32 count;
	__u32 seq;
};

/* seq = the batch's index (cpu * SMT_MAX_NEST + level) above the number of
 * records it has sent, modulo 2^18: the daemon is never that far behind a
 * batch (a ring buffer holds fewer records). */
#define SMT_SEQ_BITS 18
#define SMT_BATCH_SEQ(batch, n) ((batch) << SMT_SEQ_BITS | ((n) & ((1U << SMT_SEQ_BITS) - 1)))
#define SMT_SEQ_BATCH(seq) ((seq) >> SMT_SEQ_BITS)
#define SMT_MAX_CPUS ((1U << (32 - SMT_SEQ_BITS)) / SMT_MAX_NEST)

/* Bytes of a tracepoint's raw record (common fields first, as its format
 * file lays them out) a --trace event carries at most. */
#define SMT_TRACE_RAW_MAX 256

/* The daemon's view of one --trace event, decoded from a trace buffer: the
 * event with its timestamp (CLOCK_MONOTONIC) and the first raw_len bytes of
 * the tracepoint's raw record (0 for -f and --profile events, which have no
 * fields); raw[] past raw_len is undefined. */
struct smt_trace_record {
	struct smt_event_record event;
	__u64 ts_ns;
	__u32 raw_len;
	__u32 reserved;
	char raw[SMT_TRACE_RAW_MAX];
};

/*
 * --trace: each CPU and nesting level writes its events, in order, into the
 * trace buffer of its batch (the union in struct smt_batch, under the same
 * seqlock as its counters), and sends the buffer to the ring whole only when
 * the next event might not fit: one ring record for a few hundred events.
 * The daemon reads what is not sent yet in place (mmapped), at every drain
 * and for every snapshot, so an idle CPU's events never wait for new ones.
 *
 * A buffer is a run of entries, each 4-aligned (u64 values go as two u32
 * halves): an smt_trace_entry, then what its flags say follows, in this
 * order: the context (smt_trace_context, who: when it differs from the
 * entry before), the timestamp (when it is not within 2^32 ns of the entry
 * before), the weight (when not 1), then raw_len bytes of the raw record,
 * padded to 4. The first entry of a buffer carries its context and
 * timestamp, so each buffer decodes alone; the CPU is the batch's.
 */
#define SMT_TE_CONTEXT 1U /* an smt_trace_context follows */
#define SMT_TE_TS 2U	  /* u32 ts_lo, ts_hi follow; ts_delta is 0 */
#define SMT_TE_WEIGHT 4U  /* u32 weight_lo, weight_hi follow; else it weighs 1 */

struct smt_trace_entry {
	__u32 ts_delta; /* ns after the entry before in this buffer */
	__u32 stack_id;
	__u16 raw_len;
	__u16 flags;
};

/* Who an event is: what it shares with the events around it. */
struct smt_trace_context {
	__u32 tgid;
	__u32 tid;
	__u32 cgroup_lo;
	__u32 cgroup_hi;
	__u32 name;
	__u32 epoch;
	__u32 user_stack_id;
	__u16 source;
	__u16 reserved;
};

#define SMT_TRACE_ENTRY_MAX \
	(sizeof(struct smt_trace_entry) + sizeof(struct smt_trace_context) + 16 + SMT_TRACE_RAW_MAX)
#define SMT_TRACE_HEADER 12U /* seq, bytes, events: what precedes data[] in the ring */
#define SMT_TRACE_BYTES 14280U

/* Sent as its first SMT_TRACE_HEADER + bytes bytes, padded so that the
 * record's size is 4 mod 8: every other record's size is a multiple of 8. */
struct smt_trace_buf {
	/* SMT_BATCH_SEQ(batch, n), n = the buffers this one sent before (so the
	 * daemon knows which part of a buffer it has read in place); in place
	 * only n is kept up to date. */
	__u32 seq;
	__u32 bytes;  /* of data[] written */
	__u32 events; /* entries in data[] */
	char data[SMT_TRACE_BYTES];
	/* The writer's own, never sent: */
	__u32 reserved;
	__u64 last_ts;
	struct smt_trace_context last;
};

#define SMT_TRACE_RECORD_SIZE(bytes) \
	(SMT_TRACE_HEADER + (bytes) + ((SMT_TRACE_HEADER + (bytes)) % 8 == 4 ? 0 : 4))

/* Distinct keys a batch holds, direct-mapped by stack and thread. */
#define SMT_BATCH_BITS 8
#define SMT_BATCH_ENTRIES (1U << SMT_BATCH_BITS)

/*
 * One CPU's events at one nesting level, counted where they happen: an event
 * whose key (stack, thread, source, ...) is already in its entry adds to it,
 * with no ring-buffer record and no write another CPU shares. An entry sends
 * its counts (smt_count_record) only to make room for another key. The
 * daemon reads the entries in place (mmapped) for a snapshot, so counts are
 * exact at any moment without waiting for anything to be sent.
 * A seqlock: the one writer (the program at this level on this CPU) makes
 * seq odd, writes, makes it even, with fully ordered atomics; the daemon
 * copies between two equal even reads of seq.
 */
struct smt_batch_entry {
	struct smt_event_record event; /* weight: the sum so far */
	__u32 count;		       /* events; 0: empty */
	__u32 reserved;
};

/* Stacks a batch found lately (struct smt_recent), direct-mapped by their
 * callers' frames. */
#define SMT_RECENT_BITS 4
#define SMT_RECENT_STACKS (1U << SMT_RECENT_BITS)

/* A stack found in epoch `epoch`: its id and its pool element + 1 (0: none).
 * An event whose frames equal that element's needs no hash and no probe:
 * within one epoch a stack's slot and element never change (only a reset
 * clears them, and it ends the epoch). BPF's alone: the daemon zeroes it
 * with the batch and never reads it. */
struct smt_recent {
	__u32 epoch;
	__u32 stack;
	__u32 elt;
};

struct smt_batch {
	__u32 seq;
	__u32 sent; /* count records sent, SMT_BATCH_SEQ's n of the last one */
	/* The last thread name seen here, so that a run of one thread's events
	 * needs no names map lookup. */
	struct smt_comm last_comm;
	__u32 last_name;
	__u32 reserved;
	struct smt_recent recent[SMT_RECENT_STACKS];
	struct smt_cpu_counters counters;
	/* A session counts (entries) or traces (trace), never both. */
	union {
		struct smt_batch_entry entries[SMT_BATCH_ENTRIES];
		struct smt_trace_buf trace;
	};
} __attribute__((aligned(64))); /* a CPU's batches share no cache line with another's */

/* A thread name seen for the first time, sent before any event that names
 * it: names are stored once, so a process that exits at once or renames
 * itself by exec is named as it was at each event. */
struct smt_name_record {
	__u32 name;
	__u32 reserved;
	char comm[16];
};

/* Distinct thread names the BPF side keeps ids for. */
#define SMT_MAX_NAMES 8192

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

/* A stack with its frames: count 0, a --verify sample (1 in N events also
 * sends what it captured; the event itself is counted in its batch), or
 * stack_id SMT_NO_STACK_ID, an event whose stack the table could not take,
 * for the daemon's overflow store. */
struct smt_stack_record {
	struct smt_count_record counts;
	__u32 nr;
	__u32 reserved;
	__u64 ips[SMT_MAX_DEPTH];
};

#define SMT_NO_STACK_ID 0xffffffffU

#ifdef __cplusplus
#define SMT_STATIC_ASSERT static_assert
#else
#define SMT_STATIC_ASSERT _Static_assert
#endif
SMT_STATIC_ASSERT(sizeof(struct smt_slot) == 8, "slot layout");
SMT_STATIC_ASSERT(sizeof(struct smt_elt) == 16 + 8 * SMT_MAX_DEPTH, "elt layout");
SMT_STATIC_ASSERT(sizeof(struct smt_event_record) == 48, "event layout");
SMT_STATIC_ASSERT(sizeof(struct smt_name_record) == 24, "name layout");
SMT_STATIC_ASSERT(sizeof(struct smt_stack_record) == 64 + 8 * SMT_MAX_DEPTH, "stack layout");
SMT_STATIC_ASSERT(sizeof(struct smt_count_record) == 56, "count layout");
SMT_STATIC_ASSERT(sizeof(struct smt_trace_record) == 64 + SMT_TRACE_RAW_MAX, "trace layout");
SMT_STATIC_ASSERT(sizeof(struct smt_trace_entry) == 12, "trace entry layout");
SMT_STATIC_ASSERT(sizeof(struct smt_trace_context) == 32, "trace context layout");
SMT_STATIC_ASSERT(sizeof(struct smt_trace_buf) == SMT_TRACE_HEADER + SMT_TRACE_BYTES + 12 +
							  sizeof(struct smt_trace_context),
		  "trace buffer layout");
SMT_STATIC_ASSERT(sizeof(struct smt_trace_buf) <=
			  sizeof(struct smt_batch_entry) * SMT_BATCH_ENTRIES,
		  "the trace buffer takes the entries' room");
SMT_STATIC_ASSERT(SMT_TRACE_BYTES % 4 == 0 && SMT_TRACE_BYTES < 65536, "trace buffer size");
/* Trace buffers are told apart from every other record by size (4 mod 8). */
SMT_STATIC_ASSERT(sizeof(struct smt_event_record) % 8 == 0 &&
			  sizeof(struct smt_name_record) % 8 == 0 &&
			  sizeof(struct smt_stack_record) % 8 == 0 &&
			  sizeof(struct smt_count_record) % 8 == 0,
		  "records of 8-byte multiples");
SMT_STATIC_ASSERT(sizeof(struct smt_offcpu_start) == 48, "offcpu layout");
SMT_STATIC_ASSERT(sizeof(struct smt_config) == 64 + 16 * SMT_MAX_STRIP, "config layout");

#endif /* STACKMAPD_ABI_H */
