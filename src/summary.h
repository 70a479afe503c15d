/*
 * summary.h — the packed 64-bit summary of a region of pages.
 *
 * A summary describes a power-of-two region of pages (a chunk at the leaves,
 * 8^k chunks higher up) by three counts: `start`, free pages at its low end;
 * `end`, free pages at its high end; `max`, the longest free run anywhere in
 * it. Each count fits 21 bits except the one value 2^21 (a completely free
 * level-0 region), where start == max == end; the top bit encodes that case
 * alone. A completely allocated region packs to 0, so searches skip full
 * regions with one load and one branch.
 *
 *     bit  0..20  start     bit 21..41  max     bit 42..62  end     bit 63  all = 2^21
 */
#ifndef PA_SUMMARY_H
#define PA_SUMMARY_H

#include <stdint.h>

#include "layout.h"

typedef uint64_t pa_sum;

#define PA_SUM_FIELD_BITS 21u
#define PA_SUM_FIELD_MASK ((1u << PA_SUM_FIELD_BITS) - 1u)
#define PA_SUM_ALL_FREE_BIT ((uint64_t)1 << 63)

static inline pa_sum sum_pack(unsigned start, unsigned max, unsigned end)
{
	if (max == PA_SUM_MAX_PAGES)
		return PA_SUM_ALL_FREE_BIT;
	return (uint64_t)(start & PA_SUM_FIELD_MASK) |
	       (uint64_t)(max & PA_SUM_FIELD_MASK) << PA_SUM_FIELD_BITS |
	       (uint64_t)(end & PA_SUM_FIELD_MASK) << (2 * PA_SUM_FIELD_BITS);
}

static inline unsigned sum_start(pa_sum s)
{
	return s & PA_SUM_ALL_FREE_BIT ? PA_SUM_MAX_PAGES : (unsigned)(s & PA_SUM_FIELD_MASK);
}

static inline unsigned sum_max(pa_sum s)
{
	return s & PA_SUM_ALL_FREE_BIT ? PA_SUM_MAX_PAGES
	                               : (unsigned)((s >> PA_SUM_FIELD_BITS) & PA_SUM_FIELD_MASK);
}

static inline unsigned sum_end(pa_sum s)
{
	return s & PA_SUM_ALL_FREE_BIT
	           ? PA_SUM_MAX_PAGES
	           : (unsigned)((s >> (2 * PA_SUM_FIELD_BITS)) & PA_SUM_FIELD_MASK);
}

/* The summary of a completely free region of 2^log_pages pages. */
static inline pa_sum sum_free(unsigned log_pages)
{
	unsigned n = 1u << log_pages;
	return sum_pack(n, n, n);
}

/*
 * Fields of a summary below level 0 without the all-free branch: such a
 * region holds at most 2^18 pages, so its top bit is never set. (Only a
 * level-0 entry covers 2^21 pages; every sum_merge input is a child, so
 * one level down at least.)
 */
static inline unsigned sum_sub_start(pa_sum s)
{
	return (unsigned)(s & PA_SUM_FIELD_MASK);
}
static inline unsigned sum_sub_max(pa_sum s)
{
	return (unsigned)((s >> PA_SUM_FIELD_BITS) & PA_SUM_FIELD_MASK);
}
static inline unsigned sum_sub_end(pa_sum s)
{
	return (unsigned)(s >> (2 * PA_SUM_FIELD_BITS));
}

/* sum_pack for a region below level 0 (no field can reach 2^21). */
static inline pa_sum sum_sub_pack(unsigned start, unsigned max, unsigned end)
{
	return (uint64_t)start | (uint64_t)max << PA_SUM_FIELD_BITS |
	       (uint64_t)end << (2 * PA_SUM_FIELD_BITS);
}

/*
 * Merge the summaries of n adjacent equal-sized regions (lowest address
 * first), each of 2^log_pages pages (log_pages <= 18, so no child has the
 * top bit), into the summary of their union:
 *   start grows through a prefix of wholly free regions,
 *   end grows through a suffix of wholly free regions,
 *   max is the largest of the parts' maxes and every end+start seam.
 * Written as selects rather than branches: on a fragmented heap every
 * comparison here is a coin toss, and this runs once per tree level per
 * allocation and free. Only the pack of the result can reach 2^21.
 */
static inline pa_sum sum_merge(const pa_sum *sums, unsigned n, unsigned log_pages)
{
	const unsigned size = 1u << log_pages;
	unsigned start = sum_sub_start(sums[0]), max = sum_sub_max(sums[0]);
	unsigned end = sum_sub_end(sums[0]);
	for (unsigned i = 1; i < n; i++) {
		unsigned si = sum_sub_start(sums[i]), mi = sum_sub_max(sums[i]);
		unsigned ei = sum_sub_end(sums[i]);
		start += start == i * size ? si : 0;
		unsigned seam = end + si;
		max = seam > max ? seam : max;
		max = mi > max ? mi : max;
		end = ei == size ? end + size : ei;
	}
	return sum_pack(start, max, end);
}

#endif
