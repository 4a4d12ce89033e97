/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The definitions Android's platform bpfloader reads from an object in
 * /system/etc/bpf, in the two layout families stackmapd ships
 * (../shared/notes/android-bpfloader.md, sections 1 and 7). Written from the
 * documented field list, not from AOSP's headers. Used by the BPF object
 * (bpf/bpfloader_maps.bpf.h), by the host test's loader and by the ELF rule
 * check (tests/bpfloader/), so all three agree on every offset.
 *
 *  - family R: Android 11 (R) loaders, also read by S..U QPR2: 32-byte map
 *    and 20-byte program definitions, no size_of_* sections;
 *  - family S: Android 12 (S) to 16 (B): 120/92 bytes, announced in
 *    size_of_bpf_map_def / size_of_bpf_prog_def, with bpfloader_min_ver and
 *    bpfloader_max_ver sections.
 * All little-endian, 4-byte aligned, no 64-bit members.
 */
#ifndef STACKMAPD_BPFLOADER_ABI_H
#define STACKMAPD_BPFLOADER_ABI_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* Kernel versions, min_kver inclusive, max_kver exclusive. 0 as max_kver
 * skips the definition on every release: always write SMT_KVER_INF. */
#define SMT_KVER_NONE 0U
#define SMT_KVER_INF 0xffffffffU
/* bpfloader versions (major << 16 | minor), min inclusive, max exclusive.
 * 0 as max skips the definition on S..U QPR2: write 0x10000 (1.0). */
#define SMT_BPFLOADER_MIN_VER 0U
#define SMT_BPFLOADER_MAX_VER 0x10000U

/* Android ids the pins are given to: root owns, the system group (the
 * daemon's, packaging/android/stackmapd.rc) reads and writes. */
#define SMT_AID_ROOT 0U
#define SMT_AID_SYSTEM 1000U

/* Family R: R's struct, which S..U QPR2 extend with defaults. */
struct smt_bpfloader_map_def_r {
	__u32 type;
	__u32 key_size;
	__u32 value_size;  /* RINGBUF: 0 */
	__u32 max_entries; /* RINGBUF: bytes */
	__u32 map_flags;
	__u32 zero; /* R..T: uid (chown before chmod: must be root); U+: abort() unless 0 */
	__u32 gid;
	__u32 mode;
};

struct smt_bpfloader_prog_def_r {
	__u32 uid; /* R/S chown before chmod: must be root */
	__u32 gid;
	__u32 min_kver; /* R encodes a.b.c as LINUX_VERSION_CODE, S+ as a<<24|b<<16|c */
	__u32 max_kver;
	__u8 optional;
	__u8 ignore_on; /* U+: eng, user, userdebug, arm32, aarch64, x86_32, x86_64, riscv64 */
	__u8 pad0[2];
};

/* Family S: U's 120-byte struct; S reads the first 48 bytes, T 116. */
struct smt_bpfloader_map_def {
	struct smt_bpfloader_map_def_r r;
	__u32 bpfloader_min_ver;
	__u32 bpfloader_max_ver;
	__u32 min_kver;
	__u32 max_kver;
	char selinux_context[32]; /* T, U: only "" is safe for /system; V+ ignore */
	char pin_subdir[32];
	__u8 shared;
	__u8 ignore_on;
	__u8 pad0[2];
	__u32 uid; /* read by v0.28+ (U..B), chown after chmod */
};

struct smt_bpfloader_prog_def {
	struct smt_bpfloader_prog_def_r r;
	__u32 bpfloader_min_ver;
	__u32 bpfloader_max_ver;
	char selinux_context[32];
	char pin_subdir[32];
};

#ifdef __cplusplus
static_assert(sizeof(struct smt_bpfloader_map_def_r) == 32, "R map def");
static_assert(sizeof(struct smt_bpfloader_prog_def_r) == 20, "R prog def");
static_assert(sizeof(struct smt_bpfloader_map_def) == 120, "S map def");
static_assert(sizeof(struct smt_bpfloader_prog_def) == 92, "S prog def");
static_assert(alignof(struct smt_bpfloader_map_def) == 4, "4-byte aligned");
#else
_Static_assert(sizeof(struct smt_bpfloader_map_def_r) == 32, "R map def");
_Static_assert(sizeof(struct smt_bpfloader_prog_def_r) == 20, "R prog def");
_Static_assert(sizeof(struct smt_bpfloader_map_def) == 120, "S map def");
_Static_assert(sizeof(struct smt_bpfloader_prog_def) == 92, "S prog def");
_Static_assert(_Alignof(struct smt_bpfloader_map_def) == 4, "4-byte aligned");
#endif

/* No attach cookies without BPF links (5.15): the bpfloader objects hold
 * SMT_LOADER_TRACEPOINTS copies of the tracepoint program, one per
 * tracepoint a --pinned session attaches at once, and the daemon stores each
 * copy's cookie in the cookies map under its slot number, the sampling
 * program's under SMT_PROFILE_COOKIE_KEY. */
#define SMT_LOADER_TRACEPOINTS 8
#define SMT_PROFILE_COOKIE_KEY 0xffffffffU
#define SMT_MAX_COOKIES (SMT_LOADER_TRACEPOINTS + 1)

#endif /* STACKMAPD_BPFLOADER_ABI_H */
