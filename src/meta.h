/*
 * meta.h — fixed-size pools for the malloc layer's own records (span
 * descriptors, thread caches). Records come from anonymous mappings of
 * PA_META_BLOCK bytes aligned to their size (os_reserve + os_commit, zeroed),
 * never from libc or from the heap the records describe.
 *
 * Each block starts with its header (the first PA_META_HEADER bytes) and
 * keeps its own free list, so a block whose records are all free can give
 * its memory back: the pool keeps one empty block resident for the next
 * burst and releases the pages of every other block that empties (all but
 * the header's page), which then starts over as fresh. After seed 000's
 * example (4,000 spans at the peak, all freed) that is ~700 KiB of span
 * descriptors returned instead of kept for the process's life. Blocks with
 * free records are listed lowest address first, and records are taken from
 * the first of them, so live records pack into few blocks and the others
 * empty.
 *
 * A pool is a value with its own lock, so tests can build their own.
 */
#ifndef PA_META_H
#define PA_META_H

#include <stddef.h>
#include <stdint.h>

#include "lock.h"

#define PA_META_BLOCK ((size_t)64 << 10)
#define PA_META_HEADER ((size_t)64)

struct pa_meta_block;

struct pa_meta_pool {
	pa_lock lock;
	size_t size;                 /* bytes per record (a multiple of 64), set at init */
	struct pa_meta_block *avail; /* blocks with a free record, by address */
	size_t mapped;               /* bytes of blocks mapped */
	size_t live;                 /* records handed out and not returned */
	size_t empty;                /* resident blocks with no live record (at most 1) */
	size_t released;             /* bytes of block pages released (not yet reused) */
};

#define PA_META_POOL_INIT(bytes)                                                                   \
	{                                                                                          \
		.lock = PA_LOCK_INIT, .size = ((bytes) + 63) & ~(size_t)63                         \
	}

/* A zeroed record, or NULL (errno = ENOMEM) when the OS refuses memory. */
void *meta_alloc(struct pa_meta_pool *p);
void meta_free(struct pa_meta_pool *p, void *rec);

/* Records per block for records of `size` bytes. */
static inline size_t meta_per_block(size_t size)
{
	return (PA_META_BLOCK - PA_META_HEADER) / size;
}

#endif
