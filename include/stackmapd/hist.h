/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --hist's log2 buckets, as bpftrace's hist() draws them: bucket 0 holds 0,
 * bucket 1 holds 1, bucket b >= 2 holds [2^(b-1), 2^b), up to bucket 64.
 * Shared by the BPF program (which keys its counts by the bucket) and the
 * daemon (which recovers it from a count's weight): one definition.
 *
 * A count of n events of one bucket weighs their sum, whose mean lies in
 * the same bucket (every bucket is an interval), so
 * smt_hist_bucket(weight / n) is the bucket of each of them, as long as the
 * sum does not wrap (the BPF side starts a new count before it would).
 */
#ifndef STACKMAPD_HIST_H
#define STACKMAPD_HIST_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#ifndef SMT_INLINE
#define SMT_INLINE static inline __attribute__((always_inline))
#endif

#define SMT_HIST_BUCKETS 65

/* Branch-free binary search for the top bit: BPF has no count-leading-zeros
 * instruction. */
SMT_INLINE __u32 smt_hist_bucket(__u64 v)
{
	__u64 x = v;
	__u32 top = 0, s;

	s = (x >= 1ULL << 32) << 5;
	x >>= s;
	top |= s;
	s = (x >= 1ULL << 16) << 4;
	x >>= s;
	top |= s;
	s = (x >= 1ULL << 8) << 3;
	x >>= s;
	top |= s;
	s = (x >= 1ULL << 4) << 2;
	x >>= s;
	top |= s;
	s = (x >= 1ULL << 2) << 1;
	x >>= s;
	top |= s;
	top |= x >= 2;
	return top + (v != 0);
}

/* The smallest value of bucket b. */
SMT_INLINE __u64 smt_hist_lower(__u32 b)
{
	return b ? 1ULL << (b - 1) : 0;
}

#endif /* STACKMAPD_HIST_H */
