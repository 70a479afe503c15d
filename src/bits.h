/*
 * bits.h — 64-bit bitmap primitives, all static inline (they sit on hot paths).
 *
 * Convention everywhere in the page heap: bit i of word w stands for page
 * w*64 + i, so lower bits are lower addresses. In an allocation bitmap a set
 * bit means "in use"; functions that look for free space take the complement
 * ("free mask") where a set bit means "free".
 *
 * Writers hold the page heap lock, but a per-CPU cache reads a chunk's
 * allocation word without it (pagecache.c), so words are written with
 * relaxed atomic stores: the same plain moves on x86, and no data race for
 * the compiler or ThreadSanitizer.
 */
#ifndef PA_BITS_H
#define PA_BITS_H

#include <stdint.h>

static inline unsigned bits_ctz(uint64_t x)
{
	return x ? (unsigned)__builtin_ctzll(x) : 64u;
}
static inline unsigned bits_clz(uint64_t x)
{
	return x ? (unsigned)__builtin_clzll(x) : 64u;
}
static inline unsigned bits_popcount(uint64_t x)
{
	return (unsigned)__builtin_popcountll(x);
}

/* Mask of n bits starting at bit `start`; start + n <= 64, n may be 64. */
static inline uint64_t bits_mask(unsigned start, unsigned n)
{
	uint64_t m = n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
	return m << start;
}

/*
 * Lowest bit index that starts a run of at least n set bits in c, or 64.
 * 1 <= n <= 64. Strategy: strip n-1 bits off the top of every run, then the
 * first bit left is the answer. A shift by s is only exact while every gap
 * between runs is at least s wide; each strip widens the gaps by s, so the
 * step can double each round (1, 2, 4, ...): at most 6 rounds.
 */
static inline unsigned bits_find_run(uint64_t c, unsigned n)
{
	unsigned strip = n - 1, gap = 1;
	while (strip > 0) {
		unsigned s = strip < gap ? strip : gap;
		c &= c >> s;
		if (c == 0)
			return 64;
		strip -= s;
		gap += s;
	}
	return bits_ctz(c);
}

static inline void bits_store(uint64_t *w, uint64_t v)
{
	__atomic_store_n(w, v, __ATOMIC_RELAXED);
}

/* Set bits [start, start+n) of a multi-word bitmap. */
static inline void bits_set_range(uint64_t *w, unsigned start, unsigned n)
{
	while (n > 0) {
		unsigned i = start / 64, b = start % 64;
		unsigned k = 64 - b < n ? 64 - b : n;
		bits_store(&w[i], w[i] | bits_mask(b, k));
		start += k;
		n -= k;
	}
}

/* Clear bits [start, start+n) of a multi-word bitmap. */
static inline void bits_clear_range(uint64_t *w, unsigned start, unsigned n)
{
	while (n > 0) {
		unsigned i = start / 64, b = start % 64;
		unsigned k = 64 - b < n ? 64 - b : n;
		bits_store(&w[i], w[i] & ~bits_mask(b, k));
		start += k;
		n -= k;
	}
}

/* Number of set bits in [start, start+n) of a multi-word bitmap. */
static inline unsigned bits_count_range(const uint64_t *w, unsigned start, unsigned n)
{
	unsigned count = 0;
	while (n > 0) {
		unsigned i = start / 64, b = start % 64;
		unsigned k = 64 - b < n ? 64 - b : n;
		count += bits_popcount(w[i] & bits_mask(b, k));
		start += k;
		n -= k;
	}
	return count;
}

#endif
