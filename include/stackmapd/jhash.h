/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Bob Jenkins' lookup3 as the kernel's include/linux/jhash.h implements jhash2(),
 * bit-exact, so ids hashed here land in the same slots as the kernel path's.
 * Shared by the BPF program and the host.
 */
#ifndef STACKMAPD_JHASH_H
#define STACKMAPD_JHASH_H

#ifndef __bpf__
#include <linux/types.h>
#endif
#include "stackmapd/abi.h"

#ifndef SMT_INLINE
#define SMT_INLINE static inline __attribute__((always_inline))
#endif

#define SMT_JHASH_INITVAL 0xdeadbeefU

SMT_INLINE __u32 smt_rol32(__u32 w, unsigned int s)
{
	return (w << s) | (w >> (32 - s));
}

/* lookup3's own layout, as in the kernel's jhash.h */
/* clang-format off */
#define SMT_JHASH_MIX(a, b, c)                                          \
	do {                                                            \
		a -= c; a ^= smt_rol32(c, 4);  c += b;                  \
		b -= a; b ^= smt_rol32(a, 6);  a += c;                  \
		c -= b; c ^= smt_rol32(b, 8);  b += a;                  \
		a -= c; a ^= smt_rol32(c, 16); c += b;                  \
		b -= a; b ^= smt_rol32(a, 19); a += c;                  \
		c -= b; c ^= smt_rol32(b, 4);  b += a;                  \
	} while (0)

#define SMT_JHASH_FINAL(a, b, c)                                        \
	do {                                                            \
		c ^= b; c -= smt_rol32(b, 14);                          \
		a ^= c; a -= smt_rol32(c, 11);                          \
		b ^= a; b -= smt_rol32(a, 25);                          \
		c ^= b; c -= smt_rol32(b, 16);                          \
		a ^= c; a -= smt_rol32(c, 4);                           \
		b ^= a; b -= smt_rol32(a, 14);                          \
		c ^= b; c -= smt_rol32(b, 24);                          \
	} while (0)

/*
 * jhash2() over `len` 32-bit words fetched by WORD(i). The loop is bounded by
 * `max_words` so the verifier sees a constant trip count.
 */
#define SMT_JHASH2_BODY(WORD, len, seed, max_words, out)                \
	do {                                                            \
		__u32 a_, b_, c_, i_ = 0, left_ = (len);                \
		a_ = b_ = c_ = SMT_JHASH_INITVAL + ((len) << 2) + (seed); \
		for (int r_ = 0; r_ < ((max_words) + 2) / 3; r_++) {    \
			if (left_ <= 3)                                 \
				break;                                  \
			a_ += WORD(i_);                                 \
			b_ += WORD(i_ + 1);                             \
			c_ += WORD(i_ + 2);                             \
			SMT_JHASH_MIX(a_, b_, c_);                      \
			left_ -= 3;                                     \
			i_ += 3;                                        \
		}                                                       \
		switch (left_) {                                        \
		case 3: c_ += WORD(i_ + 2); /* fall through */          \
		case 2: b_ += WORD(i_ + 1); /* fall through */          \
		case 1: a_ += WORD(i_);                                 \
			SMT_JHASH_FINAL(a_, b_, c_);                    \
			break;                                          \
		default:                                                \
			break;                                          \
		}                                                       \
		(out) = c_;                                             \
	} while (0)
/* clang-format on */

/* The kernel's jhash2(k, len, seed) for up to 2 * SMT_MAX_DEPTH words. */
SMT_INLINE __u32 smt_jhash2(const __u32 *k, __u32 len, __u32 seed)
{
	__u32 h;

#define SMT_WORD_ARRAY(i) k[(i) & (2 * SMT_MAX_DEPTH - 1)]
	SMT_JHASH2_BODY(SMT_WORD_ARRAY, len, seed, 2 * SMT_MAX_DEPTH, h);
#undef SMT_WORD_ARRAY
	return h;
}

/*
 * jhash2((u32 *)ips, nr * 2, seed) as the kernel computes it over an array of
 * 64-bit frames on a little-endian machine: word 2k is the low half of ips[k].
 * Two rounds of 3 words take 3 whole frames, so each frame is loaded once and
 * split by a shift (no cast: no strict-aliasing trouble on the host), and no
 * word's half depends on a run-time parity.
 */
SMT_INLINE __u32 smt_jhash2_ips(const __u64 *ips, __u32 nr, __u32 seed)
{
	__u32 a, b, c, left = nr * 2, i = 0;
	__u64 x, y, z;

#define SMT_IP(k) ips[(k) & (SMT_MAX_DEPTH - 1)]
	a = b = c = SMT_JHASH_INITVAL + (left << 2) + seed;
	/* left is even here, odd after the first round of each pass. */
	for (int r = 0; r < (2 * SMT_MAX_DEPTH + 5) / 6; r++) {
		if (left <= 3)
			break;
		x = SMT_IP(i);
		y = SMT_IP(i + 1);
		a += (__u32)x;
		b += (__u32)(x >> 32);
		c += (__u32)y;
		SMT_JHASH_MIX(a, b, c);
		left -= 3;
		if (left <= 3) {
			a += (__u32)(y >> 32);
			if (left == 3) {
				z = SMT_IP(i + 2);
				b += (__u32)z;
				c += (__u32)(z >> 32);
			}
			SMT_JHASH_FINAL(a, b, c);
			return c;
		}
		z = SMT_IP(i + 2);
		a += (__u32)(y >> 32);
		b += (__u32)z;
		c += (__u32)(z >> 32);
		SMT_JHASH_MIX(a, b, c);
		left -= 3;
		i += 3;
	}
	if (left == 2) {
		x = SMT_IP(i);
		a += (__u32)x;
		b += (__u32)(x >> 32);
		SMT_JHASH_FINAL(a, b, c);
	}
#undef SMT_IP
	return c;
}

#endif /* STACKMAPD_JHASH_H */
