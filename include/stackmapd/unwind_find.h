/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Finding the unwind row of a user ip (stackmapd/abi/unwind.h), written once
 * and compiled both into the BPF walker and into the host tests. Both searches
 * are binary searches with a fixed bound of steps, which the verifier needs:
 * 2^SMT_UNWIND_SEARCH_STEPS covers a file's SMT_UNWIND_FILE_ROWS_MAX rows, 2^7
 * the mappings.
 *
 * The includer defines, before including this file:
 *   const struct smt_unwind_row *smt_unwind_row_at(void *rows, __u32 idx);  NULL out of range
 */
#ifndef STACKMAPD_UNWIND_FIND_H
#define STACKMAPD_UNWIND_FIND_H

#include "stackmapd/abi.h"

#ifndef SMT_INLINE
#define SMT_INLINE static inline __attribute__((always_inline))
#endif

#define SMT_UNWIND_SEARCH_STEPS 21
SMT_STATIC_ASSERT((1u << SMT_UNWIND_SEARCH_STEPS) > SMT_UNWIND_FILE_ROWS_MAX,
		  "the row search reaches every row of a file");
SMT_STATIC_ASSERT((1u << 7) >= SMT_UNWIND_MAPPINGS_MAX, "the mapping search reaches every mapping");

/* The mapping of `p` that holds ip, or NULL. */
SMT_INLINE const struct smt_unwind_mapping *
smt_unwind_mapping_of(const struct smt_unwind_process *p, __u64 ip)
{
	__u32 lo = 0, hi = p->nr < SMT_UNWIND_MAPPINGS_MAX ? p->nr : SMT_UNWIND_MAPPINGS_MAX;
	const struct smt_unwind_mapping *m;

	/* lo ends at the first mapping that starts above ip */
	for (int i = 0; i < 7 && lo < hi; i++) {
		__u32 mid = lo + (hi - lo) / 2;

		if (mid >= SMT_UNWIND_MAPPINGS_MAX)
			return 0;
		if (ip < p->mappings[mid].start)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo == 0 || lo > SMT_UNWIND_MAPPINGS_MAX)
		return 0;
	m = &p->mappings[lo - 1];
	return ip < m->end ? m : 0;
}

/* ip's pc in the rows of file f, mapped by m: its file offset plus the
 * file's pc_off. 0 where it does not fit the rows' 32 bits. */
SMT_INLINE int smt_unwind_pc(const struct smt_unwind_mapping *m, const struct smt_unwind_file *f,
			     __u64 ip, __u32 *pc)
{
	__u64 v = ip - m->start + ((__u64)m->pgoff << SMT_UNWIND_PAGE_SHIFT) + f->pc_off;

	if (ip < m->start || ip >= m->end || v > 0xffffffffull)
		return 0;
	*pc = (__u32)v;
	return 1;
}

/* The row that applies at pc in file f: the last at or below it; NULL below
 * the first row. */
SMT_INLINE const struct smt_unwind_row *smt_unwind_row_of(void *rows,
							  const struct smt_unwind_file *f, __u32 pc)
{
	__u32 lo = 0, hi = f->nr_rows;

	/* lo ends at the first row above pc */
	for (int i = 0; i < SMT_UNWIND_SEARCH_STEPS && lo < hi; i++) {
		__u32 mid = lo + (hi - lo) / 2;
		const struct smt_unwind_row *r = smt_unwind_row_at(rows, f->first_row + mid);

		if (!r)
			return 0;
		if (pc < r->pc)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo < hi || lo == 0) /* a table longer than the steps reach, or pc below it */
		return 0;
	return smt_unwind_row_at(rows, f->first_row + lo - 1);
}

#endif /* STACKMAPD_UNWIND_FIND_H */
