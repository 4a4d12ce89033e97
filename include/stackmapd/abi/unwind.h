/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Unwind tables: how a user frame's caller is found without frame pointers.
 * The daemon builds one table per ELF file (shared by every process that maps
 * it) from the file's .eh_frame, or its .debug_frame when it has no .eh_frame
 * (daemon/unwind/). A table is its rows sorted by pc;
 * the row that applies at a pc is the last one at or below it. A pc that no
 * FDE covers (a gap between FDEs, past the last one) finds an SMT_CFA_NONE row:
 * no table there.
 *
 * x86_64 only for now: CFA = rsp|rbp + offset, or a word read from there plus
 * an offset; the return address at CFA - 8 (a row whose return address is
 * elsewhere is SMT_CFA_UNSUPPORTED).
 * Part of stackmapd/abi.h, which includes it.
 */
#ifndef STACKMAPD_ABI_UNWIND_H
#define STACKMAPD_ABI_UNWIND_H

#ifndef STACKMAPD_ABI_H
#error "include stackmapd/abi.h"
#endif

/* How the caller's stack pointer (the CFA) is found. */
enum smt_cfa_rule {
	SMT_CFA_NONE, /* no CFI covers this pc: no table here */
	SMT_CFA_RSP,  /* CFA = rsp + cfa_off */
	SMT_CFA_RBP,  /* CFA = rbp + cfa_off */
	/* A PLT stub's DW_CFA_def_cfa_expression, the one binutils writes:
	 * CFA = rsp + 8 + ((rip & 15) >= cfa_off ? 8 : 0), cfa_off 11 (or 10). */
	SMT_CFA_PLT,
	SMT_CFA_END,	/* return address undefined: the outermost frame (_start, clone3) */
	SMT_CFA_SIGNAL, /* a signal trampoline ('S'): the caller's registers are in the ucontext */
	SMT_CFA_UNSUPPORTED, /* another expression or register, an offset out of range, or the
			      * return address not at CFA - 8: cannot follow */
	/* DW_CFA_def_cfa_expression "breg7 AT; deref; plus_uconst ADD", as
	 * OpenSSL's assembly keeps the caller's rsp in its frame: CFA =
	 * *(rsp + AT) + ADD, both packed in cfa_off (SMT_CFA_DEREF_OFF). */
	SMT_CFA_RSP_DEREF,
	SMT_CFA_RBP_DEREF, /* the same from rbp (breg6) */
};

/* A deref rule's AT and ADD in cfa_off: 8-byte units, AT 0..8184 in the low
 * 10 bits, ADD 0..504 above (other values are SMT_CFA_UNSUPPORTED). */
#define SMT_CFA_DEREF_AT_MAX 8184
#define SMT_CFA_DEREF_ADD_MAX 504
#define SMT_CFA_DEREF_OFF(at, add) ((__u16)((at) / 8 | (add) / 8 << 10))
#define SMT_CFA_DEREF_AT(cfa_off) (((cfa_off)&0x3ff) * 8)
#define SMT_CFA_DEREF_ADD(cfa_off) (((cfa_off) >> 10) * 8)

/* Where the caller's rbp is. */
enum smt_rbp_rule {
	SMT_RBP_SAME,	/* unchanged: the caller's rbp is this frame's */
	SMT_RBP_AT_CFA, /* saved at CFA + rbp_off * 8 */
	SMT_RBP_LOST,	/* undefined, in another register, an expression, or an odd offset */
};

#define SMT_UNWIND_CFA_RULE(rules) ((rules)&0xf)
#define SMT_UNWIND_RBP_RULE(rules) ((rules) >> 4)
#define SMT_UNWIND_RULES(cfa, rbp) ((__u8)((cfa) | ((rbp) << 4)))

/*
 * One row, 8 bytes. Limits (a rule beyond them is SMT_CFA_UNSUPPORTED or
 * SMT_RBP_LOST, never a wrong rule):
 * - pc: the ELF virtual address minus the table's base (the lowest PT_LOAD's
 *   page), 32 bits: a file whose covered code ends 4 GiB or more past its base
 *   gets no table (its frames fall back to frame pointers);
 * - cfa_off: 0..65535 bytes (frames of 64 KiB or more are unsupported);
 * - rbp_off: -1024..1016 bytes from the CFA, in 8-byte units.
 * Equal adjacent rows are merged: each row starts a change.
 */
struct smt_unwind_row {
	__u32 pc;
	__u16 cfa_off;
	__u8 rules;   /* SMT_UNWIND_RULES(enum smt_cfa_rule, enum smt_rbp_rule) */
	__s8 rbp_off; /* in 8-byte units: the saved rbp is at CFA + rbp_off * 8 */
};
SMT_STATIC_ASSERT(sizeof(struct smt_unwind_row) == 8, "an unwind row is 8 bytes");

#define SMT_UNWIND_CFA_OFF_MAX 65535
#define SMT_UNWIND_RBP_OFF_MIN (-128 * 8)
#define SMT_UNWIND_RBP_OFF_MAX (127 * 8)

/*
 * The BPF side's maps. Tables are per file, found by the file itself, never
 * by a process, so a table is built once and every process mapping the file
 * uses it, from its first event:
 * - rows: every loaded file's rows, one run each, in a fixed budget the
 *   daemon places them in and evicts from by use (daemon/unwind/);
 * - files, by (inode, device) as the kernel names the mapped file: where its
 *   rows are, how its file offsets become their pcs, and when a walk last
 *   used them;
 * - per process (by tgid): its code (executable) mappings, sorted by start,
 *   each naming its file. The BPF side writes them itself as processes exec,
 *   fork and map code (bpf/unwind_fill.bpf.h), the daemon as it reads
 *   /proc/PID/maps. A caller's address outside them all is not code: the
 *   walk stops there.
 * A file without a loaded table, met by a walk or mapped, is asked for once
 * (struct smt_unwind_wanted) and walked by frame pointers meanwhile.
 * include/stackmapd/unwind_find.h searches them.
 */
#define SMT_UNWIND_FILE_ROWS_MAX (1u << 20) /* one file's: libLLVM-14 837 k, cc1plus 472 k */
#define SMT_UNWIND_MAPPINGS_MAX 64	    /* per process; past them, SMT_UNWIND_UNLISTED_CODE */
#define SMT_UNWIND_PAGE_SHIFT 12	    /* x86_64's: a mapping's file offset in pages */

/* A mapped file as the kernel names it: its inode number and the device of
 * its superblock (the kernel's encoding, major << 20 | minor, as
 * /proc/PID/maps prints it). Inode 0 is code in no file (JIT code: frame
 * pointers); SMT_UNWIND_VDSO_INO on device 0 (which no filesystem has) the
 * vdso, whose table the daemon builds from its own. 12 bytes, the tail of a
 * mapping's fields: the walker looks a file up by its mapping in place
 * (SMT_UNWIND_KEY_OF), with no copy on its 512-byte stack. */
struct smt_unwind_file_key {
	__u64 ino;
	__u32 dev;
} __attribute__((packed));
SMT_STATIC_ASSERT(sizeof(struct smt_unwind_file_key) == 12, "a file key is 12 bytes");
#define SMT_UNWIND_VDSO_INO 1

struct smt_unwind_mapping {
	__u64 start, end; /* the mapping's user addresses, [start, end) */
	__u64 ino;	  /* its file's (struct smt_unwind_file_key) */
	__u32 dev;
	__u32 pgoff; /* the file offset at start, in pages */
};
SMT_STATIC_ASSERT(sizeof(struct smt_unwind_mapping) == 32, "an unwind mapping is 32 bytes");
SMT_STATIC_ASSERT(__builtin_offsetof(struct smt_unwind_mapping, dev) ==
			  __builtin_offsetof(struct smt_unwind_mapping, ino) + 8,
		  "a mapping's ino and dev are its file's key");
#define SMT_UNWIND_KEY_OF(m) ((const struct smt_unwind_file_key *)&(m)->ino)

struct smt_unwind_file {
	/* A row's pc = the file offset + pc_off (mod 2^64): the executable
	 * segment's vaddr - offset, minus the table's base. */
	__u64 pc_off;
	__u32 first_row; /* its rows are rows[first_row, first_row + nr_rows) */
	__u32 nr_rows;
	/* CLOCK_MONOTONIC's ns >> 30 (about seconds) when a walk last used the
	 * rows, written when it changes: what eviction goes by. */
	__u64 used;
};
SMT_STATIC_ASSERT(sizeof(struct smt_unwind_file) == 24, "an unwind file is 24 bytes");

/* smt_unwind_process.flags: more code mappings than SMT_UNWIND_MAPPINGS_MAX,
 * or an entry begun by a mapping of a process seen neither exec nor fork,
 * so an address in none of them may still be code (frame pointers there). */
#define SMT_UNWIND_UNLISTED_CODE 1
/* Loaded before the process was seen (--pid at the start), so before its
 * exec count was known: any exec count matches until its first stack is. */
#define SMT_UNWIND_ANY_EXEC 2

struct smt_unwind_process {
	__u32 nr;      /* mappings in use, sorted by start */
	__u16 exec_id; /* the process's exec count, as SMT_USER_MARKER keeps it */
	__u16 flags;
	struct smt_unwind_mapping mappings[SMT_UNWIND_MAPPINGS_MAX];
};
SMT_STATIC_ASSERT(sizeof(struct smt_unwind_process) == 8 + 32 * SMT_UNWIND_MAPPINGS_MAX,
		  "an unwind process is its mappings and their count");

/* A file whose table the daemon is asked for (the unwind_wanted ring): a
 * mapping of it in process tgid, where /proc/TGID/map_files opens it. */
struct smt_unwind_wanted {
	__u32 tgid;
	__u32 zero;
	struct smt_unwind_mapping mapping;
};
SMT_STATIC_ASSERT(sizeof(struct smt_unwind_wanted) == 40, "a wanted file is 40 bytes");

#endif /* STACKMAPD_ABI_UNWIND_H */
