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
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>

#ifdef SMT_BPFLOADER
/* Without bpf_loop the verifier walks every re-read of every probe in turn:
 * 64 x 512 is past its limits. A writer needs ~100 ns; a reader that gives
 * up sooner counts drop_busy, it never guesses. */
#define SMT_MAX_SPINS 16
#endif
#include "stackmapd/abi.h"

/*
 * Two builds of this file:
 *  - the daemon's own object (a skeleton): maps sized at load, settings in
 *    .rodata, one fentry copy per traced function;
 *  - -DSMT_BPFLOADER, the object another loader (Android's bpfloader) loads
 *    and pins for `stackmapd --pinned`: such loaders read map and program
 *    definitions of their own layout (bpfloader_maps.bpf.h, not BTF .maps),
 *    create no global-data maps, load each program section alone (no
 *    subprograms, so no bpf_loop callback), know no fentry sections, and
 *    their clients attach without BPF links, so without cookies.
 */
#ifdef SMT_BPFLOADER
#define SMT_SEC(bpfloader, libbpf) SEC(bpfloader)
#define SMT_SIZED(at_load, fixed) (fixed)
#else
#define SMT_SEC(bpfloader, libbpf) SEC(libbpf)
#define SMT_SIZED(at_load, fixed) (at_load)
#endif

/* The BPF side reaches its tables through global maps: t is NULL for the
 * kernel stack table, USER_TABLE for --user-stacks' (a constant after
 * inlining, so each lookup names one map). */
struct smt_table;
#define USER_TABLE ((struct smt_table *)1)

#ifndef SMT_BPFLOADER
/* The daemon mmaps both arrays to read each new stack once, without syscalls. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_slot);
	__uint(max_entries, SMT_SIZED(1, 2U << SMT_BPFLOADER_BITS)); /* 2^(bits+1) */
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_elt);
	__uint(max_entries, SMT_SIZED(1, 1U << SMT_BPFLOADER_BITS)); /* 2^bits */
} pool SEC(".maps");

#ifndef SMT_BPFLOADER
/* --user-stacks' table (abi.h, SMT_USER_MARKER): the same layout, sized at
 * load (one entry each when off). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_slot);
	__uint(max_entries, 1);
} uslots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_elt);
	__uint(max_entries, 1);
} upool SEC(".maps");
#endif

/* Index cpu * SMT_MAX_NEST + level; mmapped by the daemon, which reads the
 * counts in place (struct smt_batch). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_batch);
	__uint(max_entries, SMT_SIZED(1, SMT_BPFLOADER_CPUS *SMT_MAX_NEST));
} batches SEC(".maps");
#endif

/* 512 bytes of frames do not fit beside the rest on the 512-byte BPF stack.
 * One buffer per CPU and nesting level: an fentry program may run inside a
 * tracepoint program's event, and a sampling one inside either. */
struct stack_buf {
	/* Room for the frames cut (SMT_MAX_STRIP_FRAMES) and one frame more
	 * than is kept: a full buffer means a deeper stack. */
	__u64 ips[SMT_MAX_STRIP_FRAMES + SMT_MAX_DEPTH + 1];
	__u32 verify_countdown;
	__u32 reserved;
	__u64 uips[SMT_MAX_DEPTH]; /* --user-stacks: frames, then the marker */
};

#ifndef SMT_BPFLOADER
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct stack_buf);
	__uint(max_entries, SMT_MAX_NEST);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} nesting SEC(".maps");

/* Thread name -> id; an id is announced in the ring before it is stored
 * here, so whoever finds it here sends its events after the announcement. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct smt_comm);
	__type(value, __u32);
	__uint(max_entries, SMT_MAX_NAMES);
} names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, SMT_SIZED(4 << 20, SMT_BPFLOADER_RING_BYTES));
} ids SEC(".maps");
#endif

#ifdef SMT_BPFLOADER
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
#else
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
#endif

#ifdef SMT_BPFLOADER
static __always_inline struct smt_slot *smt_slot_at(struct smt_table *t, __u32 idx)
{
	return bpf_map_lookup_elem(&slots, &idx);
}

static __always_inline struct smt_elt *smt_elt_at(struct smt_table *t, __u32 idx)
{
	return bpf_map_lookup_elem(&pool, &idx);
}
#else
static __always_inline struct smt_slot *smt_slot_at(struct smt_table *t, __u32 idx)
{
	return t == USER_TABLE ? bpf_map_lookup_elem(&uslots, &idx) :
				 bpf_map_lookup_elem(&slots, &idx);
}

static __always_inline struct smt_elt *smt_elt_at(struct smt_table *t, __u32 idx)
{
	return t == USER_TABLE ? bpf_map_lookup_elem(&upool, &idx) :
				 bpf_map_lookup_elem(&pool, &idx);
}
#endif

#include "stackmapd/stack_table.h"

#ifdef SMT_BPFLOADER
/* A bounded loop: 64 probes of up to 64-frame compares verify in ~170 k of
 * the 1 M instruction budget. */
static __always_inline void probe_table(struct smt_probe *p)
{
	for (__u32 i = 0; i < SMT_MAX_PROBES; i++)
		if (smt_probe_step(NULL, p, i))
			break;
}
#else
static long probe_step_cb(__u32 i, void *ctx)
{
	/* The verifier does not carry i's bounds into the callback: re-check. */
	if (i >= SMT_MAX_PROBES)
		return 1;
	return smt_probe_step(NULL, ctx, i);
}

static long probe_user_step_cb(__u32 i, void *ctx)
{
	if (i >= SMT_MAX_PROBES)
		return 1;
	return smt_probe_step(USER_TABLE, ctx, i);
}
#endif

static __always_inline void count(__u64 *c, enum smt_counter which)
{
	c[which]++;
}

static __always_inline enum smt_counter drop_counter(enum smt_status s)
{
	switch (s) {
	case SMT_POOL_FULL:
		return SMC_DROP_POOL_FULL;
	case SMT_BUSY:
		return SMC_DROP_BUSY;
	default: /* SMT_PROBE_LIMIT, and a map error that sane sizes exclude */
		return SMC_DROP_PROBE_LIMIT;
	}
}

/* What an event learnt before its batch is written, counted there. */
struct event_facts {
	__u64 ring_bytes; /* a thread name announced */
	__u32 names_full;
	__u32 truncated;
	/* --user-stacks (capture_user) */
	__u32 user_stack_id;
	__u8 no_user_stack;
	__u8 user_not_stored;
	__u8 user_truncated;
};

#ifdef SMT_BPFLOADER
static __always_inline void current_comm(struct smt_comm *c)
{
	bpf_get_current_comm(c->comm, sizeof(c->comm));
}
#else
/* What the programs read of the current task, relocated by libbpf against
 * the kernel's BTF (CO-RE). */
struct task_struct {
	char comm[16];
	__u64 self_exec_id;
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
#endif

/* The thread's name id, announcing a name seen for the first time before
 * anything that uses it. 0 when the name cannot be kept (counted). The batch
 * remembers the last name: a run of one thread's events needs no lookup. */
static __always_inline __u32 thread_name(struct smt_globals *g, struct smt_batch *b,
					 struct event_facts *f)
{
	const __u64 *last = (const __u64 *)&b->last_comm;
	union {
		struct smt_comm comm;
		__u64 words[2];
	} key;
	struct smt_name_record *rec;
	__u32 *known, id;

	current_comm(&key.comm);
	if (b->last_name && key.words[0] == last[0] && key.words[1] == last[1])
		return b->last_name;
	known = bpf_map_lookup_elem(&names, &key.comm);
	if (known) {
		id = *known;
		goto remember;
	}
	rec = bpf_ringbuf_reserve(&ids, sizeof(*rec), 0);
	if (!rec)
		return 0; /* the event's own record would not fit either */
	id = __sync_fetch_and_add(&g->shared.next_name, 1) + 1;
	if (bpf_map_update_elem(&names, &key.comm, &id, BPF_NOEXIST)) {
		/* Another CPU announced it first, or the map is full. */
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		known = bpf_map_lookup_elem(&names, &key.comm);
		if (!known) {
			f->names_full = 1;
			return 0;
		}
		id = *known;
		goto remember;
	}
	rec->name = id;
	rec->reserved = 0;
	__builtin_memcpy(rec->comm, key.comm.comm, sizeof(rec->comm));
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	f->ring_bytes += sizeof(*rec) + BPF_RINGBUF_HDR_SZ;
remember:
	b->last_comm = key.comm;
	b->last_name = id;
	return id;
}

/* The event's weight: 1, or the tracepoint field the cookie names (--sum).
 * A negative signed value weighs 0. */
static __always_inline __u64 event_weight(void *ctx, __u64 cookie)
{
	__u32 field = cookie >> 32, size = SMT_WEIGHT_SIZE(field), shift;
	__u64 v = 0;

	if (!size || size > 8)
		return 1;
	if (bpf_probe_read_kernel(&v, size, (char *)ctx + SMT_WEIGHT_OFFSET(field)))
		return 0;
	if (SMT_WEIGHT_SIGNED(field)) {
		shift = 64 - 8 * size;
		if ((__s64)(v << shift) < 0)
			return 0;
	}
	return v;
}

/* Who and where, for an event of the current task. */
static __always_inline __u64 cgroup_id(const volatile struct smt_config *cfg)
{
	return cfg->cgroup_ids ? bpf_get_current_cgroup_id() : 0;
}

static __always_inline void fill_event(const volatile struct smt_config *cfg,
				       struct smt_event_record *e, __u32 stack_id, __u32 epoch,
				       __u32 name, __u32 source, __u64 weight)
{
	__u64 id = bpf_get_current_pid_tgid();

	e->stack_id = stack_id;
	e->epoch = epoch;
	e->tgid = id >> 32;
	e->tid = (__u32)id;
	e->cgroup_id = cgroup_id(cfg);
	e->weight = weight;
	e->name = name;
	e->source = source;
	e->cpu = bpf_get_smp_processor_id();
	e->user_stack_id = SMT_NO_USER_STACK;
	e->reserved = 0;
}

static __always_inline __u64 wakeup_flags(const volatile struct smt_config *cfg)
{
	return bpf_ringbuf_query(&ids, BPF_RB_AVAIL_DATA) >= cfg->wakeup_bytes ?
		       BPF_RB_FORCE_WAKEUP :
		       BPF_RB_NO_WAKEUP;
}

/* A binary search of the machinery's sorted ranges (abi.h), one step per call. */
struct range_search {
	__u64 ip;
	__u32 lo, hi, found;
};

static __always_inline int range_step(struct range_search *s)
{
	const volatile struct smt_config *cfg = get_config();
	__u32 mid;

	if (!cfg || s->lo >= s->hi)
		return 1;
	mid = (s->lo + s->hi) / 2;
	if (mid >= SMT_MAX_STRIP)
		return 1;
	if (s->ip < cfg->strip[mid].start) {
		s->hi = mid;
	} else if (s->ip >= cfg->strip[mid].end) {
		s->lo = mid + 1;
	} else {
		s->found = 1;
		return 1;
	}
	return 0;
}

#define SMT_STRIP_STEPS 10 /* 2^10 > SMT_MAX_STRIP */
#ifdef SMT_BPFLOADER
static __always_inline void search_ranges(struct range_search *s)
{
	for (int i = 0; i < SMT_STRIP_STEPS; i++)
		if (range_step(s))
			break;
}
#else
static long range_step_cb(__u32 i, void *ctx)
{
	return range_step(ctx);
}

/* In a callback the verifier walks the search once, not once per outcome of
 * every compare before it (seconds of load time otherwise). */
static __always_inline void search_ranges(struct range_search *s)
{
	bpf_loop(SMT_STRIP_STEPS, range_step_cb, s, 0);
}
#endif

/* Whether ip lies in one of the machinery's ranges: one compare for the
 * common ip outside all of them, else the search. */
static __always_inline int machinery_frame(const volatile struct smt_config *cfg, __u64 ip)
{
	struct range_search s = { .ip = ip, .hi = cfg->strip_nr };

	if (!s.hi || s.hi > SMT_MAX_STRIP || ip < cfg->strip[0].start ||
	    ip >= cfg->strip[s.hi - 1].end)
		return 0;
	search_ranges(&s);
	return s.found;
}

/* Cuts the leading frames of the tracing machinery (abi.h), keeping one
 * frame at least. Returns the frames left. */
static __always_inline __u32 cut_machinery(const volatile struct smt_config *cfg,
					   struct stack_buf *buf, __u32 nr)
{
	__u32 cut = 0;

	for (int i = 0; i < SMT_MAX_STRIP_FRAMES; i++) {
		if (cut + 1 >= nr || !machinery_frame(cfg, buf->ips[cut]))
			break;
		cut++;
	}
	if (!cut)
		return nr;
	for (__u32 k = 0; k < SMT_MAX_DEPTH + 1; k++) {
		if (k + cut >= nr)
			break;
		buf->ips[k] = buf->ips[k + cut];
	}
	return nr - cut;
}

#ifdef SMT_BPFLOADER
static __always_inline void find_stack(const volatile struct smt_config *cfg, struct smt_globals *g,
				       struct smt_batch *b, __u32 epoch, struct stack_buf *buf,
				       __u32 nr, struct smt_probe *p)
{
	smt_probe_init(p, &g->shared, buf->ips, nr, cfg->table_bits, g->shared.hash_seed);
	probe_table(p);
	smt_probe_finish(p);
}
#else
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
#endif

/* Captures the current stack into buf and finds or inserts it. Returns the
 * drop counter of an event that ends here, or SMC_HITS. */
static __always_inline enum smt_counter capture(void *ctx, const volatile struct smt_config *cfg,
						struct smt_globals *g, struct smt_batch *b,
						__u32 epoch, struct stack_buf *buf, __u32 skip,
						struct event_facts *f, struct smt_probe *p)
{
	long len = bpf_get_stack(ctx, buf->ips, sizeof(buf->ips), skip & BPF_F_SKIP_FIELD_MASK);
	__u32 nr;

	p->status = SMT_PROBING;
	p->nr = 0;
	if (len < (long)sizeof(__u64))
		return len == 0 ? SMC_DROP_NO_KERNEL_STACK : SMC_DROP_STACK_ERROR;
	nr = cut_machinery(cfg, buf, len / sizeof(__u64));
	if (nr > SMT_MAX_DEPTH) {
		/* The RFC keeps the innermost frames of a deeper stack. */
		nr = SMT_MAX_DEPTH;
		f->truncated = 1;
	}
	find_stack(cfg, g, b, epoch, buf, nr, p);
	if (p->status != SMT_FOUND && p->status != SMT_INSERTED)
		return drop_counter(p->status);
	return SMC_HITS;
}

#ifndef SMT_BPFLOADER
/* --user-stacks: the current task's exec count (abi.h, SMT_USER_MARKER). */
static __always_inline __u32 exec_id(void)
{
	const struct task_struct *t = bpf_get_current_task_btf();

	return t->self_exec_id;
}
#endif

#ifndef SMT_BPFLOADER
/* capture_user's result: the id in the low 32 bits, then facts. */
#define USER_NONE (1ULL << 32)
#define USER_NOT_STORED (1ULL << 33)
#define USER_TRUNCATED (1ULL << 34)

/*
 * --user-stacks: captures the current task's user stack (frame pointers)
 * into buf->uips and finds or inserts it in the user table, keyed by its
 * process (the marker frame). A global function: the verifier checks it
 * once, not once per state of every caller (the whole event path, walked
 * again for each outcome of the kernel stack's probe, is past its limit).
 */
__noinline __u64 smt_user_stack(void *ctx __attribute__((btf_decl_tag("arg:ctx"))),
				struct stack_buf *buf)
{
	const volatile struct smt_config *cfg = get_config();
	struct smt_globals *g = get_globals();
	__u64 facts = 0;
	struct smt_probe p;
	long len;
	__u32 nr;

	if (!buf)
		return USER_NONE | SMT_NO_USER_STACK;
	len = bpf_get_stack(ctx, buf->uips, sizeof(buf->uips), BPF_F_USER_STACK);
	if (len < (long)sizeof(__u64))
		return USER_NONE | SMT_NO_USER_STACK; /* a kernel thread, or no readable frame */
	nr = len / sizeof(__u64);
	if (nr > SMT_MAX_USER_DEPTH) {
		nr = SMT_MAX_USER_DEPTH;
		facts |= USER_TRUNCATED;
	}
	buf->uips[nr & (SMT_MAX_DEPTH - 1)] =
		SMT_USER_MARKER(bpf_get_current_pid_tgid() >> 32, exec_id());
	smt_probe_init(&p, &g->user_shared, buf->uips, nr + 1, cfg->table_bits,
		       g->user_shared.hash_seed);
	bpf_loop(SMT_MAX_PROBES, probe_user_step_cb, &p, 0);
	smt_probe_finish(&p);
	if (p.status == SMT_FOUND || p.status == SMT_INSERTED)
		return facts | p.idx;
	return facts | USER_NOT_STORED | SMT_NO_STACK_ID;
}
#endif

/* --user-stacks: the event's user stack id and facts, in f. Off, it costs
 * one compare of a .rodata constant, which the verifier prunes. */
static __always_inline void capture_user(void *ctx, const volatile struct smt_config *cfg,
					 struct smt_globals *g, struct stack_buf *buf,
					 struct event_facts *f)
{
#ifndef SMT_BPFLOADER
	__u64 r;

	f->user_stack_id = SMT_NO_USER_STACK;
	if (!cfg->user_stacks)
		return;
	r = smt_user_stack(ctx, buf);
	f->user_stack_id = (__u32)r;
	f->no_user_stack = !!(r & USER_NONE);
	f->user_not_stored = !!(r & USER_NOT_STORED);
	f->user_truncated = !!(r & USER_TRUNCATED);
#else
	f->user_stack_id = SMT_NO_USER_STACK;
#endif
}

/* In the write window. */
static __always_inline void count_facts(struct smt_batch *b, __u64 *cnt,
					const struct event_facts *f)
{
	b->counters.ring_bytes += f->ring_bytes;
	if (f->names_full)
		count(cnt, SMC_NAMES_FULL);
	if (f->truncated)
		count(cnt, SMC_TRUNCATED);
	if (f->no_user_stack)
		count(cnt, SMC_NO_USER_STACK);
	if (f->user_not_stored)
		count(cnt, SMC_USER_NOT_STORED);
	if (f->user_truncated)
		count(cnt, SMC_USER_TRUNCATED);
}

/* The batch's seqlock (abi.h): xchg is fully ordered on every JIT. */
static __always_inline void batch_write_begin(struct smt_batch *b)
{
	__sync_lock_test_and_set(&b->seq, b->seq + 1);
}

static __always_inline void batch_write_end(struct smt_batch *b)
{
	__sync_lock_test_and_set(&b->seq, b->seq + 1);
}

/* In the write window: sends a reserved record, counting its bytes. */
static __always_inline void submit(const volatile struct smt_config *cfg, struct smt_batch *b,
				   void *rec, __u32 size)
{
	bpf_ringbuf_submit(rec, wakeup_flags(cfg));
	b->counters.ring_bytes += size + BPF_RINGBUF_HDR_SZ;
}

/* Every field but the weight. */
static __always_inline int same_key(const struct smt_event_record *a,
				    const struct smt_event_record *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[4] == y[4] && x[5] == y[5];
}

static __always_inline __u32 entry_of(const struct smt_event_record *e)
{
	return ((e->stack_id ^ e->tid * 0x9e3779b1U ^ e->source ^ e->user_stack_id) *
		0x85ebca6bU) >>
	       (32 - SMT_BATCH_BITS);
}

/* In the batch's write window: counts e in its entry, sending the entry's
 * earlier key to the daemon to make room. An entry of an ended epoch went
 * with its reset: it is overwritten. */
static __always_inline enum smt_counter add_to_batch(const volatile struct smt_config *cfg,
						     struct smt_batch *b, __u32 batch,
						     const struct smt_event_record *e)
{
	struct smt_batch_entry *slot = &b->entries[entry_of(e) & (SMT_BATCH_ENTRIES - 1)];
	struct smt_count_record *rec;

	if (slot->count && same_key(&slot->event, e) && slot->count != 0xffffffffU) {
		slot->count++;
		slot->event.weight += e->weight;
		return SMC_HITS;
	}
	if (slot->count && slot->event.epoch == e->epoch) {
		rec = bpf_ringbuf_reserve(&ids, sizeof(*rec), 0);
		if (!rec)
			return SMC_DROP_RINGBUF_FULL;
		rec->event = slot->event;
		rec->count = slot->count;
		rec->seq = SMT_BATCH_SEQ(batch, ++b->sent);
		submit(cfg, b, rec, sizeof(*rec));
	}
	slot->event = *e;
	slot->count = 1;
	return SMC_HITS;
}

/* In the write window: a stack with its frames (abi.h, smt_stack_record):
 * count 1 for an event the table could not take, 0 for a --verify sample. */
static __always_inline int send_stack(const volatile struct smt_config *cfg, struct smt_batch *b,
				      __u32 batch, const struct smt_event_record *e, __u32 count,
				      const struct stack_buf *buf, __u32 nr)
{
	struct smt_stack_record *r = bpf_ringbuf_reserve(&ids, sizeof(*r), 0);

	if (!r)
		return 0;
	r->counts.event = *e;
	r->counts.count = count;
	r->counts.seq = count ? SMT_BATCH_SEQ(batch, ++b->sent) : 0;
	r->nr = nr;
	r->reserved = 0;
	__builtin_memcpy(r->ips, buf->ips, sizeof(r->ips));
	submit(cfg, b, r, sizeof(*r));
	return 1;
}

/* In the write window, --trace: sends the batch's trace buffer (abi.h,
 * smt_trace_buf) and starts the next one. Nonzero when the ring has no room:
 * the buffer keeps its events (the daemon reads them in place). */
static __always_inline int send_trace_buf(const volatile struct smt_config *cfg,
					  struct smt_batch *b, __u32 batch)
{
	struct smt_trace_buf *t = &b->trace;
	__u32 used = t->bytes, n = t->seq & ((1U << SMT_SEQ_BITS) - 1), size;

	if (used > SMT_TRACE_BYTES)
		used = SMT_TRACE_BYTES;
	size = SMT_TRACE_RECORD_SIZE(used);
	if (size > SMT_TRACE_HEADER + SMT_TRACE_BYTES)
		size = SMT_TRACE_HEADER + SMT_TRACE_BYTES;
	t->seq = SMT_BATCH_SEQ(batch, n);
	if (bpf_ringbuf_output(&ids, t, size, wakeup_flags(cfg)))
		return -1;
	/* The entries were counted as they were written. */
	b->counters.ring_bytes += ((size + 7) & ~7U) + BPF_RINGBUF_HDR_SZ - used;
	t->seq = SMT_BATCH_SEQ(batch, n + 1);
	t->bytes = 0;
	t->events = 0;
	return 0;
}

static __always_inline int same_context(const struct smt_trace_context *a,
					const struct smt_trace_context *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

/* In the write window, --trace: appends the event to the batch's trace
 * buffer (abi.h), in time order, with the first raw_len bytes of ctx, the
 * tracepoint's raw entry (the daemon sized raw_len from its format file; 0
 * for -f and --profile sources). Who it is goes only when it changed. */
static __always_inline enum smt_counter send_trace(const volatile struct smt_config *cfg,
						   struct smt_batch *b, __u32 batch,
						   const struct smt_event_record *e, void *ctx,
						   __u32 raw_len)
{
	struct smt_trace_buf *t = &b->trace;
	struct smt_trace_context who = {
		.tgid = e->tgid,
		.tid = e->tid,
		.cgroup_lo = (__u32)e->cgroup_id,
		.cgroup_hi = e->cgroup_id >> 32,
		.name = e->name,
		.epoch = e->epoch,
		.user_stack_id = e->user_stack_id,
		.source = e->source,
	};
	__u64 now = bpf_ktime_get_ns(), delta = now - t->last_ts;
	struct smt_trace_entry *te;
	__u32 off = t->bytes, at, flags = 0, *w;

	if (off > SMT_TRACE_BYTES - SMT_TRACE_ENTRY_MAX) {
		if (send_trace_buf(cfg, b, batch))
			return SMC_DROP_RINGBUF_FULL;
		off = 0;
	}
	/* A buffer decodes alone: its first entry says who and when. */
	if (!t->events || !same_context(&who, &t->last))
		flags |= SMT_TE_CONTEXT;
	if (!t->events || delta > 0xffffffffULL)
		flags |= SMT_TE_TS;
	if (e->weight != 1)
		flags |= SMT_TE_WEIGHT;
	if (raw_len > SMT_TRACE_RAW_MAX)
		raw_len = SMT_TRACE_RAW_MAX;
	te = (struct smt_trace_entry *)&t->data[off];
	at = off + sizeof(*te);
	if (flags & SMT_TE_CONTEXT) {
		const __u32 *from = (const __u32 *)&who;

		/* As words: a byte copy is what clang makes of a char array. */
		w = (__u32 *)&t->data[at];
		for (__u32 i = 0; i < sizeof(who) / 4; i++)
			w[i] = from[i];
		t->last = who;
		at += sizeof(who);
	}
	if (flags & SMT_TE_TS) {
		w = (__u32 *)&t->data[at];
		w[0] = (__u32)now;
		w[1] = now >> 32;
		at += 8;
	}
	if (flags & SMT_TE_WEIGHT) {
		w = (__u32 *)&t->data[at];
		w[0] = (__u32)e->weight;
		w[1] = e->weight >> 32;
		at += 8;
	}
	if (!raw_len || bpf_probe_read_kernel(&t->data[at], raw_len, ctx))
		raw_len = 0;
	te->ts_delta = flags & SMT_TE_TS ? 0 : (__u32)delta;
	te->stack_id = e->stack_id;
	te->raw_len = raw_len;
	te->flags = flags;
	at += (raw_len + 3) & ~3U;
	b->counters.ring_bytes += at - off;
	t->bytes = at;
	t->events++;
	t->last_ts = now;
	return SMC_HITS;
}

/* In the write window: where a captured event goes. Returns its outcome. */
static __always_inline enum smt_counter deliver(const volatile struct smt_config *cfg,
						struct smt_batch *b, __u32 batch,
						struct smt_event_record *e, struct stack_buf *buf,
						const struct smt_probe *p, enum smt_counter outcome,
						__u64 *cnt, void *ctx, __u32 raw_len)
{
	__u32 every = cfg->verify_every;

	if (outcome == SMC_DROP_POOL_FULL || outcome == SMC_DROP_PROBE_LIMIT ||
	    outcome == SMC_DROP_BUSY) {
		/* Not in the table, not lost: the daemon keeps it whole. */
		e->stack_id = SMT_NO_STACK_ID;
		if (!send_stack(cfg, b, batch, e, 1, buf, p->nr))
			return SMC_DROP_RINGBUF_FULL;
		count(cnt, SMC_SENT_WHOLE);
		return outcome;
	}
	if (outcome != SMC_HITS)
		return outcome;
	if (cfg->trace_records)
		return send_trace(cfg, b, batch, e, ctx, raw_len);
	if (every && ++buf->verify_countdown >= every) {
		buf->verify_countdown = 0;
		send_stack(cfg, b, batch, e, 0, buf, p->nr);
	}
	return add_to_batch(cfg, b, batch, e);
}

static __always_inline int record_in(void *ctx, const volatile struct smt_config *cfg,
				     struct smt_globals *g, struct stack_buf *buf, __u64 cookie,
				     __u32 skip, struct smt_batch *b, __u32 batch)
{
	__u32 state, epoch, name;
	struct event_facts f = {};
	struct smt_event_record e;
	enum smt_counter outcome;
	struct smt_probe p;
	__u64 *cnt;

	state = *(volatile __u32 *)&g->shared.state;
	epoch = SMT_STATE_EPOCH(state);
	name = thread_name(g, b, &f);
	p.status = SMT_PROBING;
	p.nr = 0;
	p.idx = SMT_NO_STACK_ID;
	if (state & SMT_STATE_RESETTING)
		outcome = SMC_DROP_RESETTING;
	else
		outcome = capture(ctx, cfg, g, b, epoch, buf, skip, &f, &p);
	fill_event(cfg, &e, p.idx, epoch, name, SMT_COOKIE_SOURCE(cookie),
		   event_weight(ctx, cookie));
	if (cfg->user_stacks && !(state & SMT_STATE_RESETTING)) {
		capture_user(ctx, cfg, g, buf, &f);
		e.user_stack_id = f.user_stack_id;
		/* A sample taken in user mode: its user stack is the whole
		 * stack (abi.h, SMT_NO_KERNEL_STACK). */
		if (outcome == SMC_DROP_NO_KERNEL_STACK && !f.no_user_stack) {
			outcome = SMC_HITS;
			e.stack_id = SMT_NO_KERNEL_STACK;
		}
	}

	batch_write_begin(b);
	cnt = b->counters.epoch[epoch & 1];
	b->counters.events++;
	count_facts(b, cnt, &f);
	outcome =
		deliver(cfg, b, batch, &e, buf, &p, outcome, cnt, ctx, SMT_COOKIE_RAW_LEN(cookie));
	count(cnt, outcome);
	if (outcome == SMC_HITS && p.status == SMT_INSERTED)
		count(cnt, SMC_INSERTS);
	batch_write_end(b);
	return 0;
}

/* The nesting level's buffer and batch for one program run, or NULL when
 * programs nest deeper than any context can (counted, atomically, in the
 * last level, which its rightful user may be updating). Pair with
 * leave_level(). */
static __always_inline __u32 *enter_level(struct smt_globals *g, struct stack_buf **buf,
					  struct smt_batch **b, __u32 *batch)
{
	__u32 zero = 0, level, cpu = bpf_get_smp_processor_id(), last, *depth;
	struct smt_batch *full;

	depth = bpf_map_lookup_elem(&nesting, &zero);
	if (!depth)
		return NULL;
	/* Plain increments are enough: whatever interrupts us on this CPU
	 * restores the depth before we resume. */
	level = (*depth)++;
	*batch = cpu * SMT_MAX_NEST + level;
	*buf = bpf_map_lookup_elem(&scratch, &level);
	*b = level < SMT_MAX_NEST ? bpf_map_lookup_elem(&batches, batch) : NULL;
	if (*buf && *b)
		return depth;
	last = cpu * SMT_MAX_NEST + SMT_MAX_NEST - 1;
	full = bpf_map_lookup_elem(&batches, &last);
	if (full) {
		__sync_fetch_and_add(&full->counters.events, 1);
		__sync_fetch_and_add(
			&full->counters.epoch[SMT_STATE_EPOCH(g->shared.state) & 1][SMC_DROP_NESTED],
			1);
	}
	(*depth)--;
	return NULL;
}

static __always_inline void leave_level(__u32 *depth)
{
	(*depth)--;
}

static __always_inline int filtered_out(const volatile struct smt_config *cfg)
{
	if (cfg->filter_tgid && bpf_get_current_pid_tgid() >> 32 != cfg->filter_tgid)
		return 1;
	return cfg->filter_cpu != SMT_ANY_CPU && bpf_get_smp_processor_id() != cfg->filter_cpu;
}

/* skip: frames above the traced code (see stackmapd_fentry). */
static __always_inline int record_stack(void *ctx, __u64 cookie, __u32 skip)
{
	const volatile struct smt_config *cfg = get_config();
	struct smt_globals *g = get_globals();
	struct stack_buf *buf;
	struct smt_batch *b;
	__u32 *depth, batch;

	if (!cfg || !g || filtered_out(cfg))
		return 0;
	depth = enter_level(g, &buf, &b, &batch);
	if (!depth)
		return 0;
	record_in(ctx, cfg, g, buf, cookie, skip, b, batch);
	leave_level(depth);
	return 0;
}

#ifdef SMT_BPFLOADER
/* Without cookies a program cannot tell which tracepoint it runs for (the
 * kernel overwrites a record's common fields with a pt_regs pointer before
 * BPF sees it): one copy per attached tracepoint, its slot's cookie in the
 * cookies map. bpfloader pins them as prog_stackmapd_tracepoint_stackmapd_N. */
#define SMT_TRACEPOINT_SLOT(n)                             \
	SMT_LOADER_PROG(stackmapd_tp##n);                  \
	SEC("tracepoint/stackmapd_" #n)                    \
	int stackmapd_tp##n(void *ctx)                     \
	{                                                  \
		return record_stack(ctx, cookie_at(n), 0); \
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
	return record_stack(ctx, bpf_get_attach_cookie(ctx), 0);
}
#endif

/* bpfloader pins this as prog_stackmapd_perf_event_stackmapd. */
SMT_SEC("perf_event/stackmapd", "perf_event")
int stackmapd_profile(void *ctx)
{
	return record_stack(ctx, (__u32)SMT_PROFILE_COOKIE(ctx), 0);
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
	return record_stack(ctx, get_config()->fentry_source, SMT_FENTRY_SKIP);
}

/*
 * --offcpu, on sched:sched_switch, where the current task is the one being
 * switched out. One event per block: the stack and who are taken at
 * switch-out and kept per thread; at switch-in the block ends, weighted by
 * the time off the CPU, and counts in the batch of the CPU it ends on. Each
 * block ends in exactly one counter: a drop at switch-out, or a hit or drop
 * at switch-in (a block shorter than min_block_ns is no event). Blocks still
 * open when the session ends are closed by the daemon from this map.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH); /* preallocated: no allocation here */
	__type(key, __u32);
	__type(value, struct smt_offcpu_start);
	__uint(max_entries, SMT_OFFCPU_THREADS);
} offcpu_start SEC(".maps");

static __always_inline __u32 read_u32_field(void *ctx, __u32 offset)
{
	__u32 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), (char *)ctx + offset);
	return v;
}

/* In the write window: a --trace block ends as a plain event record. */
static __always_inline enum smt_counter send_event(const volatile struct smt_config *cfg,
						   struct smt_batch *b,
						   const struct smt_event_record *e)
{
	struct smt_event_record *r = bpf_ringbuf_reserve(&ids, sizeof(*r), 0);

	if (!r)
		return SMC_DROP_RINGBUF_FULL;
	*r = *e;
	submit(cfg, b, r, sizeof(*r));
	return SMC_HITS;
}

static __always_inline void switch_in(void *ctx, const volatile struct smt_config *cfg,
				      struct smt_globals *g, struct smt_batch *b, __u32 batch,
				      __u64 now)
{
	__u32 tid = read_u32_field(ctx, cfg->next_pid_offset), state, epoch;
	struct smt_offcpu_start *found, s;
	enum smt_counter outcome;
	struct smt_event_record e;
	__u64 *cnt;

	found = bpf_map_lookup_elem(&offcpu_start, &tid);
	if (!found)
		return;
	s = *found; /* the element is reused once deleted */
	bpf_map_delete_elem(&offcpu_start, &tid);
	if (now - s.ts_ns < cfg->min_block_ns)
		return;
	state = *(volatile __u32 *)&g->shared.state;
	epoch = SMT_STATE_EPOCH(state);
	e.stack_id = s.stack_id;
	e.epoch = epoch;
	e.tgid = s.tgid;
	e.tid = tid;
	e.cgroup_id = s.cgroup_id;
	e.weight = now - s.ts_ns;
	e.name = s.name;
	e.source = s.source;
	e.cpu = s.cpu;
	e.user_stack_id = s.user_stack_id;
	e.reserved = 0;

	batch_write_begin(b);
	cnt = b->counters.epoch[epoch & 1];
	b->counters.events++;
	/* A block that began before a reset names a stack of the old table. */
	if ((state & SMT_STATE_RESETTING) || s.epoch != epoch)
		outcome = SMC_DROP_RESETTING;
	else if (cfg->trace_records)
		outcome = send_event(cfg, b, &e);
	else
		outcome = add_to_batch(cfg, b, batch, &e);
	count(cnt, outcome);
	if (outcome == SMC_HITS && s.inserted)
		count(cnt, SMC_INSERTS);
	batch_write_end(b);
}

/* A switch-out: a block begins (outcome SMC_NR, counted at its end) or a
 * drop that ends it at once. */
static __always_inline void count_switch_out(struct smt_batch *b, __u32 epoch,
					     const struct event_facts *f, enum smt_counter outcome)
{
	__u64 *cnt;

	batch_write_begin(b);
	cnt = b->counters.epoch[epoch & 1];
	count_facts(b, cnt, f);
	if (outcome != SMC_NR) {
		b->counters.events++;
		count(cnt, outcome);
	}
	batch_write_end(b);
}

static __always_inline void switch_out(void *ctx, const volatile struct smt_config *cfg,
				       struct smt_globals *g, struct stack_buf *buf,
				       struct smt_batch *b, __u32 source, __u64 now)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, state, epoch;
	struct event_facts f = {};
	struct smt_offcpu_start s;
	enum smt_counter outcome;
	struct smt_probe p;

	/* The idle task's waits are not blocks; an exiting thread's last. */
	if (!tid || filtered_out(cfg) ||
	    (read_u32_field(ctx, cfg->prev_state_offset) & SMT_PREV_STATE_EXITING))
		return;
	state = *(volatile __u32 *)&g->shared.state;
	epoch = SMT_STATE_EPOCH(state);
	s.name = thread_name(g, b, &f);
	if (state & SMT_STATE_RESETTING) {
		count_switch_out(b, epoch, &f, SMC_DROP_RESETTING);
		return;
	}
	/* A block's weight is only known at its end, when its frames are
	 * gone: a stack the table cannot take is a drop here. */
	outcome = capture(ctx, cfg, g, b, epoch, buf, 0, &f, &p);
	if (outcome == SMC_HITS) {
		s.ts_ns = now;
		s.cgroup_id = cgroup_id(cfg);
		s.stack_id = p.idx;
		s.epoch = epoch;
		s.tgid = id >> 32;
		s.cpu = bpf_get_smp_processor_id();
		s.source = source;
		s.inserted = p.status == SMT_INSERTED;
		s.user_stack_id = SMT_NO_USER_STACK;
		s.reserved = 0;
		if (cfg->user_stacks) {
			capture_user(ctx, cfg, g, buf, &f);
			s.user_stack_id = f.user_stack_id;
		}
		outcome = bpf_map_update_elem(&offcpu_start, &tid, &s, BPF_ANY) ?
				  SMC_DROP_OFFCPU_FULL :
				  SMC_NR;
	}
	count_switch_out(b, epoch, &f, outcome);
}

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
#endif

char LICENSE[] SEC("license") = "GPL";
