/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The batch of a CPU and nesting level (abi.h, struct smt_batch): its
 * seqlock, the thread names it remembers, the events it counts and the
 * records it sends the ring to make room or with a stack's frames.
 */
#ifndef STACKMAPD_BATCH_BPF_H
#define STACKMAPD_BATCH_BPF_H

static __always_inline void count(__u64 *c, enum smt_counter which)
{
	c[which]++;
}

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
	rec->kind = SMT_RECORD_NAME;
	rec->name = id;
	__builtin_memcpy(rec->comm, key.comm.comm, sizeof(rec->comm));
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	f->ring_bytes += sizeof(*rec) + BPF_RINGBUF_HDR_SZ;
remember:
	b->last_comm = key.comm;
	b->last_name = id;
	return id;
}

static __always_inline __u64 wakeup_flags(const volatile struct smt_config *cfg)
{
	return bpf_ringbuf_query(&ids, BPF_RB_AVAIL_DATA) >= cfg->wakeup_bytes ?
		       BPF_RB_FORCE_WAKEUP :
		       BPF_RB_NO_WAKEUP;
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
	if (f->user_stop >= SMC_USER_COMPLETE && f->user_stop < SMC_NR)
		count(cnt, f->user_stop);
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

/* Every field but the weight (the fifth word). */
static __always_inline int same_key(const struct smt_event_record *a,
				    const struct smt_event_record *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[5] == y[5];
}

static __always_inline __u32 entry_of(const struct smt_event_record *e, __u32 bucket)
{
	return ((e->stack_id ^ e->tid * 0x9e3779b1U ^ e->source ^ e->user_stack_id ^ bucket) *
		0x85ebca6bU) >>
	       (32 - SMT_BATCH_BITS);
}

/* --hist: whether e belongs in the entry's count, of its bucket, and its
 * weight's sum does not wrap (the daemon takes the bucket of the mean). */
static __always_inline int same_bucket(const volatile struct smt_config *cfg,
				       const struct smt_batch_entry *slot,
				       const struct smt_event_record *e, __u32 bucket)
{
	return !cfg->hist ||
	       (slot->bucket == bucket && slot->event.weight + e->weight >= slot->event.weight);
}

/* In the batch's write window: counts e in its entry, sending the entry's
 * earlier key to the daemon to make room. An entry of an ended epoch went
 * with its reset: it is overwritten. */
static __always_inline enum smt_counter add_to_batch(const volatile struct smt_config *cfg,
						     struct smt_batch *b, __u32 batch,
						     const struct smt_event_record *e)
{
	__u32 bucket = cfg->hist ? smt_hist_bucket(e->weight) : 0;
	struct smt_batch_entry *slot = &b->entries[entry_of(e, bucket) & (SMT_BATCH_ENTRIES - 1)];
	struct smt_count_record *rec;

	if (slot->count && same_key(&slot->event, e) && slot->count != 0xffffffffU &&
	    same_bucket(cfg, slot, e, bucket)) {
		slot->count++;
		slot->event.weight += e->weight;
		return SMC_HITS;
	}
	if (slot->count && slot->event.epoch == e->epoch) {
		rec = bpf_ringbuf_reserve(&ids, sizeof(*rec), 0);
		if (!rec)
			return SMC_DROP_RINGBUF_FULL;
		rec->event = slot->event;
		rec->event.kind = SMT_RECORD_COUNT;
		rec->count = slot->count;
		rec->seq = SMT_BATCH_SEQ(batch, ++b->sent);
		submit(cfg, b, rec, sizeof(*rec));
	}
	slot->event = *e;
	slot->count = 1;
	slot->bucket = bucket;
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
	r->counts.event.kind = SMT_RECORD_STACK;
	r->counts.count = count;
	r->counts.seq = count ? SMT_BATCH_SEQ(batch, ++b->sent) : 0;
	r->nr = nr;
	r->reserved = 0;
	__builtin_memcpy(r->ips, buf->ips, sizeof(r->ips));
	submit(cfg, b, r, sizeof(*r));
	return 1;
}

#endif /* STACKMAPD_BATCH_BPF_H */
