/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The stack table's find-or-insert, written once and compiled both into the BPF
 * program and into the host tests, so the tests exercise the code that runs in
 * the kernel.
 *
 * Layout (as in the RFC): 2^(bits+1) slots (2x over-provisioned) and a pool of
 * 2^bits elements. A stack's home slot is the top bits+1 bits of its jhash2; a
 * collision probes linearly. The stack_id is the slot index.
 *
 * Insert protocol, safe on every CPU at once without locks:
 *  1. claim a free slot: cmpxchg(slot.key, 0, key);
 *  2. take the next pool element (fetch-add); if the pool is exhausted the slot
 *     is marked SMT_ELT_DEAD so later probes step over it at once;
 *  3. fill the element (frames, nr; ref_count = 0: the daemon counts events);
 *  4. publish it: xchg(slot.elt, 1 + index). The xchg is a full barrier, so a
 *     reader that sees the index also sees the element's contents.
 * A reader whose key matches a slot with no element yet re-reads it (at most
 * SMT_MAX_SPINS times), then counts SMC_DROP_BUSY: it never guesses, so one
 * stack never gets two ids and an id never means two stacks (every match is
 * confirmed by comparing all frames).
 *
 * Once the pool is exhausted, a new stack is dropped when its probe reaches a
 * free slot, without claiming it: a miss costs at most SMT_MAX_PROBES slot
 * reads, never a scan of the table (the RFC's version spins up to the table
 * size on a slot claimed but never filled).
 *
 * Reader side (smt_published_elt): the daemon reads slots and pool through
 * mmaps of the two arrays while the writers run, with no lock either.
 *
 * The writer's includer defines, before including this file:
 *   struct smt_table;
 *   struct smt_slot *smt_slot_at(struct smt_table *t, __u32 idx);  NULL if out of range
 *   struct smt_elt *smt_elt_at(struct smt_table *t, __u32 idx);    NULL if out of range
 * A reader that only needs the reader side defines SMT_TABLE_READER_ONLY instead.
 */
#ifndef STACKMAPD_STACK_TABLE_H
#define STACKMAPD_STACK_TABLE_H

#include "stackmapd/abi.h"
#include "stackmapd/jhash.h"

#if defined(__bpf__)
/* BPF atomics that return a value are fully ordered (needs -mcpu=v3). */
#define smt_cmpxchg32(p, o, n) __sync_val_compare_and_swap((p), (o), (n))
#define smt_xchg32(p, v) __sync_lock_test_and_set((p), (v))
#define smt_fetch_add32(p, v) __sync_fetch_and_add((p), (v))
/* A plain load: readers use the loaded index to form the element's address, and
 * that address dependency orders the element reads after it. */
#define smt_load32(p) (*(volatile __u32 *)(p))
#else
#define smt_cmpxchg32(p, o, n)                                                                     \
	({                                                                                         \
		__u32 o_ = (o);                                                                    \
		__atomic_compare_exchange_n((p), &o_, (n), 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
		o_;                                                                                \
	})
#define smt_xchg32(p, v) __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)
#define smt_fetch_add32(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
#define smt_load32(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#endif

SMT_INLINE __u32 smt_table_size(__u32 bits)
{
	return 1U << (bits + 1);
}

SMT_INLINE __u32 smt_pool_size(__u32 bits)
{
	return 1U << bits;
}

/*
 * The element slot `id` publishes, or NULL while it has none (free, claimed
 * and not yet written, claimed when the pool was empty) or when it holds no
 * frames a reader could use. `slots` and `pool` are the whole arrays of a
 * table of 2^bits elements. The load of slot.elt pairs with the writer's
 * publishing xchg (smt_insert_here): acquire on the host, and on BPF the
 * address dependency from the loaded index to the element; so the element's
 * frames and nr read after it are the ones written before it was published.
 * Its ref_count is the daemon's (abi.h).
 */
/*
 * `visible`: how many pool elements, from the first, the reader can read
 * (at most smt_pool_size(bits)); the daemon maps the pool as it is handed
 * out, so an element past that is one it has yet to map, and reads as 0.
 */
SMT_INLINE const struct smt_elt *smt_published_elt(const struct smt_slot *slots,
						   const struct smt_elt *pool, __u32 bits,
						   __u32 visible, __u32 id)
{
	const struct smt_elt *e;
	__u32 elt;

	if (id >= smt_table_size(bits))
		return 0;
	elt = smt_load32(&slots[id].elt);
	if (elt == SMT_ELT_NONE || elt == SMT_ELT_DEAD || elt > smt_pool_size(bits) ||
	    elt > visible)
		return 0;
	e = &pool[elt - 1];
	if (e->nr == 0 || e->nr > SMT_MAX_DEPTH)
		return 0;
	return e;
}

SMT_INLINE int smt_frames_equal(const struct smt_elt *e, const __u64 *ips, __u32 nr)
{
	if (e->nr != nr)
		return 0;
	for (__u32 k = 0; k < SMT_MAX_DEPTH; k++) {
		if (k >= nr)
			break;
		if (e->ips[k] != ips[k])
			return 0;
	}
	return 1;
}

/*
 * The reader side's lookup by frames: the id of the published stack equal
 * to ips[0..nr), found by the writers' hash and probe order, or
 * SMT_NO_STACK_ID. Writes nothing; for the daemon, which is sent the frames
 * of an event that found its stack's slot still being written (SMT_BUSY).
 */
SMT_INLINE __u32 smt_find_published(const struct smt_slot *slots, const struct smt_elt *pool,
				    __u32 bits, __u32 visible, __u32 seed, const __u64 *ips,
				    __u32 nr)
{
	__u32 key = smt_jhash2_ips(ips, nr, seed), home, idx, k;
	const struct smt_elt *e;

	if (!key)
		key = 1; /* as smt_probe_init */
	home = key >> (32 - (bits + 1));
	for (__u32 i = 0; i < SMT_MAX_PROBES; i++) {
		idx = (home + i) & (smt_table_size(bits) - 1);
		k = smt_load32(&slots[idx].key);
		if (!k)
			break;
		if (k != key)
			continue;
		e = smt_published_elt(slots, pool, bits, visible, idx);
		if (e && smt_frames_equal(e, ips, nr))
			return idx;
	}
	return SMT_NO_STACK_ID;
}

#ifndef SMT_TABLE_READER_ONLY

enum smt_status {
	SMT_PROBING,
	SMT_FOUND,
	SMT_INSERTED,
	SMT_POOL_FULL,
	SMT_PROBE_LIMIT,
	SMT_BUSY,
	SMT_MAP_ERROR, /* a map lookup failed: cannot happen with sane sizes */
};

/*
 * One lookup in progress, advanced one slot per step so that the BPF side can
 * run the steps from bpf_loop(). Step i visits slot home + i: the step number
 * comes from the loop, not from a counter kept here, because a counter with a
 * value the verifier knows would make it walk every iteration separately.
 */
struct smt_probe {
	const __u64 *ips;
	struct smt_shared *shared;
	__u32 nr;
	__u32 key; /* jhash2 of the frames, never 0 */
	__u32 bits;
	__u32 home; /* slot of step 0 */
	__u32 idx;  /* the stack_id on SMT_FOUND and SMT_INSERTED */
	__u32 elt;  /* and its pool element's index */
	enum smt_status status;
};

SMT_INLINE void smt_probe_init(struct smt_probe *p, struct smt_shared *shared, const __u64 *ips,
			       __u32 nr, __u32 bits, __u32 seed)
{
	__u32 key = smt_jhash2_ips(ips, nr, seed);

	if (!key)
		key = 1; /* 0 marks a free slot */
	p->ips = ips;
	p->shared = shared;
	p->nr = nr;
	p->key = key;
	p->bits = bits;
	p->home = key >> (32 - (bits + 1));
	p->idx = p->home;
	p->elt = 0;
	p->status = SMT_PROBING;
}

SMT_INLINE int smt_insert_here(struct smt_table *t, struct smt_probe *p, struct smt_slot *slot)
{
	__u32 eidx = smt_fetch_add32(&p->shared->next_elt, 1);
	struct smt_elt *e;

	if (eidx >= smt_pool_size(p->bits)) {
		smt_xchg32(&slot->elt, SMT_ELT_DEAD);
		p->status = SMT_POOL_FULL;
		return 1;
	}
	e = smt_elt_at(t, eidx);
	if (!e) {
		smt_xchg32(&slot->elt, SMT_ELT_DEAD);
		p->status = SMT_MAP_ERROR;
		return 1;
	}
	e->nr = p->nr;
	e->hash = p->key;
	e->ref_count = 0;
	for (__u32 k = 0; k < SMT_MAX_DEPTH; k++) {
		if (k >= p->nr)
			break;
		e->ips[k] = p->ips[k];
	}
	smt_xchg32(&slot->elt, eidx + 1);
	p->elt = eidx;
	p->status = SMT_INSERTED;
	return 1;
}

/*
 * Waits a bounded time for another CPU to publish the slot's element. The
 * includer may define it otherwise with SMT_WAIT_FN: the daemon's BPF object
 * makes it a global function, which the verifier walks once per program
 * rather than SMT_MAX_SPINS times over for every state of every probe step
 * (inline, its re-reads were ~60% of what loading verified).
 */
#ifndef SMT_WAIT_FN
#define SMT_WAIT_FN SMT_INLINE
#endif
SMT_WAIT_FN __u32 smt_wait_published(struct smt_slot *slot)
{
	__u32 elt = SMT_ELT_NONE;

	if (!slot) /* a global function's pointer argument may be NULL */
		return elt;
	for (__u32 s = 0; s < SMT_MAX_SPINS; s++) {
		elt = smt_load32(&slot->elt);
		if (elt != SMT_ELT_NONE)
			break;
	}
	return elt;
}

/*
 * Step `i` (0, 1, ... SMT_MAX_PROBES - 1) of find-or-insert. Returns 1 when
 * the lookup is over (p->status says how), 0 to go on with step i + 1.
 */
SMT_INLINE int smt_probe_step(struct smt_table *t, struct smt_probe *p, __u32 i)
{
	__u32 idx = (p->home + i) & (smt_table_size(p->bits) - 1);
	struct smt_slot *slot = smt_slot_at(t, idx);
	__u32 key, elt;
	struct smt_elt *e;

	if (!slot) {
		p->status = SMT_MAP_ERROR;
		return 1;
	}
	p->idx = idx;
	key = smt_load32(&slot->key);
	if (!key) {
		/* Checked before claiming so that an exhausted pool costs no
		 * writes and leaves the slot free for nobody to trip over. */
		if (smt_load32(&p->shared->next_elt) >= smt_pool_size(p->bits)) {
			p->status = SMT_POOL_FULL;
			return 1;
		}
		key = smt_cmpxchg32(&slot->key, 0, p->key);
		if (!key)
			return smt_insert_here(t, p, slot);
		/* Lost the race for this slot: look at what the winner wrote. */
	}
	if (key != p->key)
		return 0;

	elt = smt_load32(&slot->elt);
	if (elt == SMT_ELT_NONE)
		elt = smt_wait_published(slot);
	if (elt == SMT_ELT_NONE) {
		p->status = SMT_BUSY;
		return 1;
	}
	if (elt == SMT_ELT_DEAD)
		return 0;
	e = smt_elt_at(t, elt - 1);
	if (!e) {
		p->status = SMT_MAP_ERROR;
		return 1;
	}
	if (!smt_frames_equal(e, p->ips, p->nr))
		return 0;
	p->elt = elt - 1;
	p->status = SMT_FOUND;
	return 1;
}

/* After the last step: a lookup that never ended ran out of probes. */
SMT_INLINE void smt_probe_finish(struct smt_probe *p)
{
	if (p->status == SMT_PROBING)
		p->status = SMT_PROBE_LIMIT;
}

/* The whole lookup, for callers without bpf_loop() (the host). */
SMT_INLINE enum smt_status smt_find_or_insert(struct smt_table *t, struct smt_probe *p)
{
	for (__u32 i = 0; i < SMT_MAX_PROBES; i++)
		if (smt_probe_step(t, p, i))
			break;
	smt_probe_finish(p);
	return p->status;
}

#endif /* SMT_TABLE_READER_ONLY */

#endif /* STACKMAPD_STACK_TABLE_H */
