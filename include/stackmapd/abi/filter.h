/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --filter: an ftrace event filter ("bytes_alloc >= 4096 && gfp_flags & 0x400")
 * compiled by the daemon (daemon/source/event_filter.h) into predicates
 * joined by forward jumps, run on a tracepoint's raw record before its stack
 * is taken (stackmapd/event_filter.h). Part of stackmapd/abi.h.
 */
#ifndef STACKMAPD_ABI_FILTER_H
#define STACKMAPD_ABI_FILTER_H

#ifndef STACKMAPD_ABI_H
#error "include stackmapd/abi.h"
#endif

#define SMT_FILTER_MAX_PREDS 16
/* Quoted strings one filter can hold, and their length with the NUL */
#define SMT_FILTER_MAX_PATTERNS 8
#define SMT_FILTER_PATTERN_MAX 64
/* Bytes of a record's string that "*x*" and full globs are matched against
 * (==, "x*" and "*x" read what they need, however long the string). */
#define SMT_FILTER_STR_MAX 255
/* Full globs (SMT_FO_GLOB) are stored as tokens: these bytes, the others
 * literal; a class is a bitmap of the bytes it takes. */
#define SMT_GLOB_STAR 1	 /* any bytes, none included */
#define SMT_GLOB_ANY 2	 /* one byte */
#define SMT_GLOB_CLASS 3 /* SMT_GLOB_CLASS + k: one byte of classes[k] */
#define SMT_FILTER_MAX_CLASSES 4
/* Jump targets past the last predicate: the event is kept, or left out. */
#define SMT_FILTER_ACCEPT 0xfe
#define SMT_FILTER_REJECT 0xff

/* Where a predicate's operand comes from. */
enum smt_filter_field {
	SMT_FF_NUMBER,	   /* an integer of `size` bytes at `offset` in the record */
	SMT_FF_PID,	   /* common_pid: the current task's pid (int) */
	SMT_FF_CPU,	   /* cpu, CPU, common_cpu: the current CPU (int) */
	SMT_FF_STATIC_STR, /* char name[size] at `offset` */
	SMT_FF_DYN_STR,	   /* __data_loc char[]: u32 at `offset`, length << 16 | record offset */
	SMT_FF_REL_STR,	   /* __rel_loc char[]: the same, the offset counted from the u32's end */
	SMT_FF_COMM,	   /* comm, COMM: the current task's name, 16 bytes */
};

/* Numbers compare as the field's type does (signed or not, in its size);
 * strings match as ftrace's regex kinds do, over the field's length (its
 * size, or the __data_loc length, 16 for comm). */
enum smt_filter_op {
	SMT_FO_EQ,
	SMT_FO_LT,
	SMT_FO_LE,
	SMT_FO_GT,
	SMT_FO_GE,
	SMT_FO_BAND,   /* nonzero after & */
	SMT_FO_FULL,   /* == "x": strncmp over the length */
	SMT_FO_FRONT,  /* ~ "x*" */
	SMT_FO_MIDDLE, /* ~ "*x*": within the length, NULs included */
	SMT_FO_END,    /* ~ "*x": the bytes before the length's last one */
	SMT_FO_GLOB,   /* ~ with * inside, ?, [ or \: the kernel's glob_match(), as tokens */
};

struct smt_filter_pred {
	__u64 value;  /* numbers: the constant as the field's type holds it, widened */
	__u16 offset; /* in the record */
	__u8 field;   /* enum smt_filter_field */
	__u8 size;    /* the field's bytes: 1, 2, 4 or 8 for numbers */
	__u8 op;      /* enum smt_filter_op */
	__u8 is_signed;
	__u8 negate;	  /* != and ~ "!x": the result inverted */
	__u8 pattern;	  /* strings: index in smt_filter.patterns */
	__u8 pattern_len; /* without the NUL */
	/* The next predicate when the result is true / false, always a later
	 * one, or SMT_FILTER_ACCEPT / SMT_FILTER_REJECT. */
	__u8 on_true;
	__u8 on_false;
	__u8 reserved[5];
};

struct smt_filter {
	__u32 nr; /* predicates; 0: no filter, every event is kept */
	__u32 reserved;
	struct smt_filter_pred preds[SMT_FILTER_MAX_PREDS];
	char patterns[SMT_FILTER_MAX_PATTERNS][SMT_FILTER_PATTERN_MAX];
	__u8 classes[SMT_FILTER_MAX_CLASSES][32];
};

SMT_STATIC_ASSERT(sizeof(struct smt_filter_pred) == 24, "filter predicate layout");
SMT_STATIC_ASSERT(sizeof(struct smt_filter) ==
			  8 + 24 * SMT_FILTER_MAX_PREDS +
				  SMT_FILTER_MAX_PATTERNS * SMT_FILTER_PATTERN_MAX +
				  32 * SMT_FILTER_MAX_CLASSES,
		  "filter layout");
SMT_STATIC_ASSERT(SMT_FILTER_MAX_PREDS < SMT_FILTER_ACCEPT, "targets fit a byte");

#endif /* STACKMAPD_ABI_FILTER_H */
