/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The maps of the daemon's own object (libbpf's BTF .maps, sized at load by
 * the daemon) and how the table code reaches them. The bpfloader objects
 * define the same maps in their loader's layout (bpfloader_maps.bpf.h); the
 * benchmark's producer (bench/synth_producer.bpf.c) includes this file and
 * swaps in the daemon's maps before load.
 */
#ifndef STACKMAPD_MAPS_BPF_H
#define STACKMAPD_MAPS_BPF_H

#include "stack_buf.bpf.h"
#include "stackmapd/abi.h"

/* The daemon mmaps both arrays to read each new stack once, without syscalls. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_slot);
	__uint(max_entries, 1); /* sized at load: 2^(bits+1) */
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_elt);
	__uint(max_entries, 1); /* sized at load: 2^bits */
} pool SEC(".maps");

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

/* Index cpu * SMT_MAX_NEST + level; mmapped by the daemon, which reads the
 * counts in place (struct smt_batch). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct smt_batch);
	__uint(max_entries, 1); /* sized at load: CPUs * SMT_MAX_NEST */
} batches SEC(".maps");

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
	__uint(max_entries, 4 << 20);
} ids SEC(".maps");

/* -- CMD: the command's processes by tgid (bpf/follow.bpf.h keeps it), sized
 * SMT_MAX_TRACKED at load when a command is followed, one entry otherwise;
 * tracked_lost counts the forks it had no room for. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH); /* preallocated: no allocation on fork */
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} tracked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} tracked_lost SEC(".maps");

/* The BPF side reaches its tables through global maps: t is NULL for the
 * kernel stack table, USER_TABLE for --user-stacks' (a constant after
 * inlining, so each lookup names one map). */
struct smt_table;
#define USER_TABLE ((struct smt_table *)1)

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

#endif /* STACKMAPD_MAPS_BPF_H */
