/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The maps and program definitions of the bpfloader objects (-DSMT_BPFLOADER),
 * in the layout Android's platform bpfloader reads (include/stackmapd/
 * bpfloader_abi.h): the `maps` and `progs` sections instead of libbpf's BTF
 * `.maps`, which no platform loader reads. -DSMT_BPFLOADER_FAMILY_S builds
 * the Android 12..16 layout (120/92 bytes, size and version sections), else
 * the Android 11..14 QPR2 one (32/20 bytes).
 *
 * The loader names each definition by its symbol: every one is a global (a
 * static one would name no map), one symbol per struct. Never a `critical`
 * section: a failing critical object reboots the phone.
 */
#ifndef STACKMAPD_BPFLOADER_MAPS_BPF_H
#define STACKMAPD_BPFLOADER_MAPS_BPF_H

#include "stack_buf.bpf.h"
#include "stackmapd/bpfloader_abi.h"

#ifdef SMT_BPFLOADER_FAMILY_S
#define SMT_LOADER_MAP(name, map_type, key, value, entries, flags, group, perm) \
	struct smt_bpfloader_map_def name SEC("maps") = {                       \
		.r = { .type = (map_type),                                      \
		       .key_size = (key),                                       \
		       .value_size = (value),                                   \
		       .max_entries = (entries),                                \
		       .map_flags = (flags),                                    \
		       .zero = 0,                                               \
		       .gid = (group),                                          \
		       .mode = (perm) },                                        \
		.bpfloader_min_ver = SMT_BPFLOADER_MIN_VER,                     \
		.bpfloader_max_ver = SMT_BPFLOADER_MAX_VER,                     \
		.min_kver = SMT_KVER_NONE,                                      \
		.max_kver = SMT_KVER_INF,                                       \
		.uid = SMT_AID_ROOT,                                            \
	}
#define SMT_LOADER_PROG(fn)                                     \
	struct smt_bpfloader_prog_def fn##_def SEC("progs") = { \
		.r = { .uid = SMT_AID_ROOT,                     \
		       .gid = SMT_AID_SYSTEM,                   \
		       .min_kver = SMT_KVER_NONE,               \
		       .max_kver = SMT_KVER_INF },              \
		.bpfloader_min_ver = SMT_BPFLOADER_MIN_VER,     \
		.bpfloader_max_ver = SMT_BPFLOADER_MAX_VER,     \
	}
/* S..U QPR2 split the sections by these strides; V and B require 120/92.
 * 8 bytes, as AOSP's size_t: the loaders read the first 4. */
__u64 _size_of_bpf_map_def SEC("size_of_bpf_map_def") = sizeof(struct smt_bpfloader_map_def);
__u64 _size_of_bpf_prog_def SEC("size_of_bpf_prog_def") = sizeof(struct smt_bpfloader_prog_def);
__u32 _bpfloader_min_ver SEC("bpfloader_min_ver") = SMT_BPFLOADER_MIN_VER;
__u32 _bpfloader_max_ver SEC("bpfloader_max_ver") = SMT_BPFLOADER_MAX_VER;
#else
#define SMT_LOADER_MAP(name, map_type, key, value, entries, flags, group, perm) \
	struct smt_bpfloader_map_def_r name SEC("maps") = {                     \
		.type = (map_type),                                             \
		.key_size = (key),                                              \
		.value_size = (value),                                          \
		.max_entries = (entries),                                       \
		.map_flags = (flags),                                           \
		.zero = 0,                                                      \
		.gid = (group),                                                 \
		.mode = (perm),                                                 \
	}
#define SMT_LOADER_PROG(fn)                                       \
	struct smt_bpfloader_prog_def_r fn##_def SEC("progs") = { \
		.uid = SMT_AID_ROOT,                              \
		.gid = SMT_AID_SYSTEM,                            \
		.min_kver = SMT_KVER_NONE,                        \
		.max_kver = SMT_KVER_INF,                         \
	}
#endif

/* What the daemon opens: root's, read-write for the system group. */
#define SMT_DAEMON_MAP(name, map_type, key, value, entries, flags) \
	SMT_LOADER_MAP(name, map_type, key, value, entries, flags, SMT_AID_SYSTEM, 0660)
/* BPF's alone: root's, no one opens the pin. */
#define SMT_BPF_ONLY_MAP(name, map_type, key, value, entries) \
	SMT_LOADER_MAP(name, map_type, key, value, entries, 0, SMT_AID_ROOT, 0600)

/* The same maps as the daemon's own object (maps.bpf.h), sized here. */
SMT_DAEMON_MAP(slots, BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct smt_slot),
	       2U << SMT_BPFLOADER_BITS, BPF_F_MMAPABLE);
SMT_DAEMON_MAP(pool, BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct smt_elt),
	       1U << SMT_BPFLOADER_BITS, BPF_F_MMAPABLE);
SMT_DAEMON_MAP(batches, BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct smt_batch),
	       SMT_BPFLOADER_CPUS *SMT_MAX_NEST, BPF_F_MMAPABLE);
SMT_BPF_ONLY_MAP(scratch, BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(__u32), sizeof(struct stack_buf),
		 SMT_MAX_NEST);
SMT_BPF_ONLY_MAP(nesting, BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(__u32), sizeof(__u32), 1);
SMT_DAEMON_MAP(names, BPF_MAP_TYPE_HASH, sizeof(struct smt_comm), sizeof(__u32), SMT_MAX_NAMES, 0);
SMT_DAEMON_MAP(ids, BPF_MAP_TYPE_RINGBUF, 0, 0, SMT_BPFLOADER_RING_BYTES, 0);
SMT_DAEMON_MAP(settings, BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct smt_config), 1, 0);
SMT_DAEMON_MAP(globals, BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(struct smt_globals), 1,
	       BPF_F_MMAPABLE);
/* What a cookie would say, by program slot (stackmapd/bpfloader_abi.h). */
SMT_DAEMON_MAP(cookies, BPF_MAP_TYPE_HASH, sizeof(__u32), sizeof(__u64), SMT_MAX_COOKIES, 0);

#endif /* STACKMAPD_BPFLOADER_MAPS_BPF_H */
