/*
 * stash.h — a bounded stack of entries kept for reuse, oldest first: the
 * mechanics of the large stash (large.h), and the byte bound it shares with
 * the central lists' batch stashes (central.h, which take no lock and keep
 * their slots in their own way).
 *
 * A stash is an array of slots [0, *n), oldest first, with a low-water mark
 * *low: the fewest entries it held since its last decay. Pushes and pops
 * work at the newest end (the entries likeliest still in cache); a decay
 * (stash_cut_oldest) takes out the oldest entries, those the stash kept
 * unused for a whole period (jemalloc's and tcmalloc's low-water mark), or
 * all of them.
 *
 * Locking: under the lock of whoever owns the stash. *n is written with
 * relaxed atomic stores, so the stats may read it without that lock.
 */
#ifndef PA_STASH_H
#define PA_STASH_H

#include <stddef.h>
#include <stdint.h>

/* The most a stash holds, in bytes of what its entries stand for (a batch
 * of objects, a large object's pages): per class, per page count. */
#define PA_STASH_BYTES ((size_t)1 << 20)

/* How many entries of `unit` bytes a stash keeps: at most `max` and
 * PA_STASH_BYTES. */
static inline unsigned stash_cap_of(size_t unit, unsigned max)
{
	size_t n = PA_STASH_BYTES / unit;
	return n < max ? (unsigned)n : max;
}

static inline void stash_push(void **slot, uint32_t *n, void *p)
{
	slot[*n] = p;
	__atomic_store_n(n, *n + 1, __ATOMIC_RELAXED);
}

/* The newest entry (*n != 0): the likeliest still in cache. */
static inline void *stash_pop(void **slot, uint32_t *n, uint32_t *low)
{
	uint32_t k = *n - 1;
	__atomic_store_n(n, k, __ATOMIC_RELAXED);
	if (k < *low)
		*low = k;
	return slot[k];
}

/* Move to out[] the oldest entries: all, or those held throughout the
 * period since the last decay (the low-water mark); a new period starts.
 * Returns how many. */
static inline uint32_t stash_cut_oldest(void **slot, uint32_t *n, uint32_t *low, int all,
                                        void **out)
{
	uint32_t cut = all ? *n : *low, left = *n - cut;
	for (uint32_t k = 0; k < cut; k++)
		out[k] = slot[k];
	for (uint32_t k = 0; k < left; k++)
		slot[k] = slot[cut + k];
	__atomic_store_n(n, left, __ATOMIC_RELAXED);
	*low = left;
	return cut;
}

#endif
