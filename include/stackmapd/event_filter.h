/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --filter's interpreter (stackmapd/abi/filter.h), written once and compiled
 * both into the BPF event path and into the host tests. It gives ftrace's
 * answer for the same filter and record: numbers compared in the field's
 * type, strings matched as kernel/trace/trace_events_filter.c's regex kinds
 * do, quirks included (ftrace's "*x" on a char array compares the bytes
 * before the array's last one, not the string's end). Every loop is bounded:
 * the predicates, "*x*" and globs step through smt_loop() (bpf_loop on the
 * BPF side) with state the verifier need not track exactly, the rest through
 * loops of at most SMT_FILTER_PATTERN_MAX.
 *
 * The includer defines, before including this file:
 *   SMT_LOOP_CB, smt_loop(n, cb, ctx)   cb(i, ctx) for i < n until it returns nonzero
 *   int smt_filter_read_num(__u64 *v, __u32 size, __u64 addr);    size <= 8, 0 on success
 *   int smt_filter_read_str(char *dst, __u32 size, __u64 addr);   size <= SMT_FILTER_STR_MAX
 *   void smt_filter_comm(char comm[16]);   the current task's name
 *   __u32 smt_filter_pid(void);            the current task's pid (ftrace's common_pid)
 *   __u32 smt_filter_cpu(void);
 */
#ifndef STACKMAPD_EVENT_FILTER_H
#define STACKMAPD_EVENT_FILTER_H

#include "stackmapd/abi.h"

#ifndef SMT_INLINE
#define SMT_INLINE static inline __attribute__((always_inline))
#endif

#define SMT_FILTER_PAT_MASK (SMT_FILTER_PATTERN_MAX - 1)
SMT_STATIC_ASSERT((SMT_FILTER_PATTERN_MAX & SMT_FILTER_PAT_MASK) == 0, "pattern index mask");
SMT_STATIC_ASSERT(((SMT_FILTER_STR_MAX + 1) & SMT_FILTER_STR_MAX) == 0, "string index mask");

/* One filter's run: the bpf_loop context of every step. */
struct smt_filter_run {
	const volatile struct smt_filter *f;
	char *str; /* SMT_FILTER_STR_MAX + 1 bytes: the string operand read */
	const volatile char *pat;
	__u64 rec;
	__u32 pc;  /* the predicate to run next, or ACCEPT / REJECT */
	__u32 len; /* bytes of str read ("*x*") */
	__u32 plen;
	__u32 result; /* "*x*" and glob: the match */
	__u64 states; /* glob: the token counts the bytes so far match */
	__u64 next;   /* glob: the same after the byte c */
	__u32 c;
	char comm[16] __attribute__((aligned(8)));
};

/* v, an integer of `size` bytes, widened as its type widens it. */
SMT_INLINE __u64 smt_filter_widen(__u64 v, __u32 size, __u32 is_signed)
{
	__u32 shift;

	if (size >= 8 || !size)
		return v;
	shift = 64 - 8 * size;
	v <<= shift;
	return is_signed ? (__u64)((__s64)v >> shift) : v >> shift;
}

SMT_INLINE int smt_filter_number(const volatile struct smt_filter_pred *p, __u64 v)
{
	__u64 c = p->value;
	__s64 sv = (__s64)v, sc = (__s64)c;

	switch (p->op) {
	case SMT_FO_EQ:
		return v == c;
	case SMT_FO_LT:
		return p->is_signed ? sv < sc : v < c;
	case SMT_FO_LE:
		return p->is_signed ? sv <= sc : v <= c;
	case SMT_FO_GT:
		return p->is_signed ? sv > sc : v > c;
	case SMT_FO_GE:
		return p->is_signed ? sv >= sc : v >= c;
	case SMT_FO_BAND:
		return (v & c) != 0;
	}
	return 0;
}

/* str[at, at + n) against the pattern's first n bytes. */
SMT_INLINE int smt_filter_same(struct smt_filter_run *r, __u32 at, __u32 n)
{
	for (__u32 k = 0; k < SMT_FILTER_PATTERN_MAX && k < n; k++)
		if (r->str[(at + k) & SMT_FILTER_STR_MAX] != r->pat[k & SMT_FILTER_PAT_MASK])
			return 0;
	return 1;
}

SMT_INLINE long smt_filter_done(struct smt_filter_run *r, __u32 result)
{
	r->result = result;
	return 1;
}

/* "*x*": whether the pattern starts at byte s of the string. */
SMT_LOOP_CB smt_filter_middle_cb(__u32 s, void *ctx)
{
	struct smt_filter_run *r = (struct smt_filter_run *)ctx;

	if (s > SMT_FILTER_STR_MAX || s + r->plen > r->len)
		return smt_filter_done(r, 0);
	if (smt_filter_same(r, s, r->plen))
		return smt_filter_done(r, 1);
	return 0;
}

/* Full globs: the pattern's tokens run as an automaton, one string byte per
 * step, one token per inner step (every loop a bpf_loop: the verifier checks
 * each body once instead of every combination of token outcomes); bit k of
 * r->states: the bytes so far match the first k tokens. It accepts what the
 * kernel's backtracking glob_match() accepts. */
SMT_LOOP_CB smt_filter_glob_token_cb(__u32 k, void *ctx)
{
	struct smt_filter_run *r = (struct smt_filter_run *)ctx;
	unsigned char t, c = r->c;
	__u32 ok;

	if (k >= SMT_FILTER_PATTERN_MAX - 1 || k >= r->plen)
		return 1;
	if (!(r->states >> k & 1))
		return 0;
	t = r->pat[k];
	if (t == SMT_GLOB_STAR) {
		r->next |= 1ULL << k;
		return 0;
	}
	if (t == SMT_GLOB_ANY)
		ok = 1;
	else if (t >= SMT_GLOB_CLASS && t < SMT_GLOB_CLASS + SMT_FILTER_MAX_CLASSES)
		ok = r->f->classes[(__u32)(t - SMT_GLOB_CLASS) % SMT_FILTER_MAX_CLASSES][c >> 3] >>
			     (c & 7) &
		     1;
	else
		ok = t == c;
	if (ok)
		r->next |= 1ULL << (k + 1);
	return 0;
}

/* A '*' may match nothing: past it from wherever it is reached. */
SMT_LOOP_CB smt_filter_glob_star_cb(__u32 k, void *ctx)
{
	struct smt_filter_run *r = (struct smt_filter_run *)ctx;

	if (k >= SMT_FILTER_PATTERN_MAX - 1 || k >= r->plen)
		return 1;
	if ((r->next >> k & 1) && r->pat[k] == SMT_GLOB_STAR)
		r->next |= 1ULL << (k + 1);
	return 0;
}

SMT_LOOP_CB smt_filter_glob_cb(__u32 i, void *ctx)
{
	struct smt_filter_run *r = (struct smt_filter_run *)ctx;

	if (i > SMT_FILTER_STR_MAX)
		return smt_filter_done(r, 0);
	r->c = r->str[i & SMT_FILTER_STR_MAX];
	if (!r->c)
		return smt_filter_done(r, r->states >> (r->plen & SMT_FILTER_PAT_MASK) & 1);
	r->next = 0;
	smt_loop(SMT_FILTER_PATTERN_MAX - 1, smt_filter_glob_token_cb, r);
	smt_loop(SMT_FILTER_PATTERN_MAX - 1, smt_filter_glob_star_cb, r);
	r->states = r->next;
	return r->states ? 0 : smt_filter_done(r, 0);
}

/* Reads n bytes of the string at addr into str, NUL-terminated. */
SMT_INLINE int smt_filter_load(struct smt_filter_run *r, __u64 addr, __u32 n)
{
	if (n > SMT_FILTER_STR_MAX)
		n = SMT_FILTER_STR_MAX;
	if (smt_filter_read_str(r->str, n, addr))
		return -1;
	r->str[n & SMT_FILTER_STR_MAX] = 0;
	r->len = n;
	return 0;
}

/* A string predicate, before its negation. */
SMT_INLINE int smt_filter_string(struct smt_filter_run *r, const volatile struct smt_filter_pred *p)
{
	__u64 addr = r->rec + p->offset, item = 0;
	__u32 len = p->size, plen = p->pattern_len;

	r->pat = r->f->patterns[p->pattern % SMT_FILTER_MAX_PATTERNS];
	r->plen = plen;
	if (p->field == SMT_FF_COMM) {
		smt_filter_comm(r->comm);
		addr = (__u64)(unsigned long)r->comm;
		len = sizeof(r->comm);
	} else if (p->field == SMT_FF_DYN_STR || p->field == SMT_FF_REL_STR) {
		if (smt_filter_read_num(&item, 4, addr))
			return 0;
		len = item >> 16;
		addr = (p->field == SMT_FF_DYN_STR ? r->rec : addr + 4) + (item & 0xffff);
	}
	switch (p->op) {
	case SMT_FO_FULL: /* strncmp(str, pat, len) == 0 */
		if (smt_filter_load(r, addr, len < plen + 1 ? len : plen + 1))
			return 0;
		for (__u32 k = 0; k < SMT_FILTER_PATTERN_MAX && k < r->len; k++) {
			if (r->str[k & SMT_FILTER_STR_MAX] != r->pat[k & SMT_FILTER_PAT_MASK])
				return 0;
			if (!r->str[k & SMT_FILTER_STR_MAX])
				return 1;
		}
		return 1;
	case SMT_FO_FRONT:
		if (len && len < plen)
			return 0;
		return !smt_filter_load(r, addr, plen) && smt_filter_same(r, 0, plen);
	case SMT_FO_END: /* the plen bytes before the length's last one */
		if (!len || len - 1 < plen)
			return 0;
		return !smt_filter_load(r, addr + len - 1 - plen, plen) &&
		       smt_filter_same(r, 0, plen);
	case SMT_FO_MIDDLE:
		if (smt_filter_load(r, addr, len))
			return 0;
		r->result = plen == 0;
		if (!r->result)
			smt_loop(SMT_FILTER_STR_MAX + 1, smt_filter_middle_cb, r);
		return r->result;
	case SMT_FO_GLOB: /* to the string's NUL */
		if (smt_filter_load(r, addr, len))
			return 0;
		r->next = 1;
		smt_loop(SMT_FILTER_PATTERN_MAX - 1, smt_filter_glob_star_cb, r);
		r->states = r->next;
		r->result = 0;
		smt_loop(SMT_FILTER_STR_MAX + 1, smt_filter_glob_cb, r);
		return r->result;
	}
	return 0;
}

SMT_INLINE int smt_filter_pred_match(struct smt_filter_run *r,
				     const volatile struct smt_filter_pred *p)
{
	__u64 v = 0;

	switch (p->field) {
	case SMT_FF_NUMBER:
		if (smt_filter_read_num(&v, p->size, r->rec + p->offset))
			return 0;
		break;
	case SMT_FF_PID:
		v = smt_filter_pid();
		break;
	case SMT_FF_CPU:
		v = smt_filter_cpu();
		break;
	default:
		return smt_filter_string(r, p);
	}
	return smt_filter_number(p, smt_filter_widen(v, p->size, p->is_signed));
}

/* Runs the predicate at pc and jumps; stops past the last one. */
SMT_LOOP_CB smt_filter_pred_cb(__u32 i, void *ctx)
{
	struct smt_filter_run *r = (struct smt_filter_run *)ctx;
	const volatile struct smt_filter_pred *p;
	__u32 pc = r->pc;

	(void)i; /* the jumps say which predicate runs */
	if (pc >= SMT_FILTER_MAX_PREDS || pc >= r->f->nr)
		return 1;
	p = &r->f->preds[pc];
	r->pc = (smt_filter_pred_match(r, p) ^ p->negate) ? p->on_true : p->on_false;
	return r->pc <= pc; /* targets only run forward: anything else ends the run */
}

/* Whether the record at rec passes the filter (which has predicates). str:
 * SMT_FILTER_STR_MAX + 1 bytes of scratch. */
SMT_INLINE int smt_filter_match(const volatile struct smt_filter *f, __u64 rec, char *str)
{
	struct smt_filter_run r = {};

	r.f = f;
	r.str = str;
	r.rec = rec;
	smt_loop(SMT_FILTER_MAX_PREDS, smt_filter_pred_cb, &r);
	return r.pc == SMT_FILTER_ACCEPT;
}

#endif /* STACKMAPD_EVENT_FILTER_H */
