/*
 * meta.h — fixed-size pools for the malloc layer's own records (span
 * descriptors, thread caches). Records come from anonymous mappings of
 * PA_META_BLOCK bytes aligned to their size (os_reserve + os_commit, zeroed),
 * never from libc or from the heap the records describe.
 *
 * Each block starts with its header (the first PA_META_HEADER bytes): a bit
 * per record (1: handed out), so the pool never writes a free record, and a
 * bit per OS page released. Records are handed out lowest block (by
 * address) first, lowest record first, so live records pack low and the
 * blocks and pages above them empty. meta_trim gives back the OS pages of
 * blocks that only hold free records (all but the header's page), from
 * blocks quiet since the previous call (or all, when forced): the scavenger
 * calls it in the background, pa_malloc_trim forced. A record handed out on
 * a released page faults it back in as zeroes. After seed 000's example
 * (4,000 spans at the peak, all freed) that is ~500 KiB of span descriptors
 * returned instead of kept for the process's life; in a Perl run, 3.4 MiB of
 * descriptor blocks whose live records were scattered.
 *
 * A pool is a value with its own lock, so tests can build their own.
 */
#ifndef PA_META_H
#define PA_META_H

#include <stddef.h>
#include <stdint.h>

#include "lock.h"

#define PA_META_BLOCK ((size_t)64 << 10)
#define PA_META_HEADER ((size_t)128)
#define PA_META_MAX_RECORDS 512u /* a block's bitmap: 64-byte records in 32 KiB blocks */

struct pa_meta_block;

struct pa_meta_pool {
	pa_lock lock;
	size_t size;                 /* bytes per record (a multiple of 64), set at init */
	struct pa_meta_block *avail; /* blocks with a free record, by address */
	size_t mapped;               /* bytes of blocks mapped */
	size_t live;                 /* records handed out and not returned */
	size_t released;             /* bytes of block pages released (not yet reused) */
	int ahead;                   /* map the next block ahead under an address-space
	                              * limit (set at init): */
	void *spare;                 /* that block (not in mapped until used), so that the
	                              * records outlast the heap's last growth */
};

#define PA_META_POOL_INIT(bytes)                                                                   \
	{                                                                                          \
		.lock = PA_LOCK_INIT, .size = ((bytes) < 64 ? 64 : ((bytes) + 63) & ~(size_t)63)   \
	}
/* The same, mapping its next block ahead under an address-space limit. */
#define PA_META_POOL_INIT_AHEAD(bytes)                                                             \
	{                                                                                          \
		.lock = PA_LOCK_INIT, .size = ((bytes) < 64 ? 64 : ((bytes) + 63) & ~(size_t)63),  \
		.ahead = 1                                                                         \
	}

/* A zeroed record, or NULL (errno = ENOMEM) when the OS refuses memory. */
void *meta_alloc(struct pa_meta_pool *p);
void meta_free(struct pa_meta_pool *p, void *rec);

/* The same for up to n records under one acquisition of the lock: the
 * number of records put in recs (fewer only when the OS refuses memory;
 * errno is not set). They are not zeroed: the caller zeroes each when it
 * uses it (span.c's spares). */
unsigned meta_alloc_n(struct pa_meta_pool *p, void **recs, unsigned n);
void meta_free_n(struct pa_meta_pool *p, void *const *recs, unsigned n);

/* Release the OS pages of p's blocks that hold only free records: of every
 * block when force, else of blocks with no meta_alloc or meta_free since the
 * previous call. Returns bytes released. */
size_t meta_trim(struct pa_meta_pool *p, int force);

/* Bytes per block for records of `size` bytes. */
static inline size_t meta_block_bytes(size_t size)
{
	return size < 128 ? PA_META_BLOCK / 2 : PA_META_BLOCK;
}

/* Records per block for records of `size` bytes. */
static inline size_t meta_per_block(size_t size)
{
	size_t n = (meta_block_bytes(size) - PA_META_HEADER) / size;
	return n < PA_META_MAX_RECORDS ? n : PA_META_MAX_RECORDS;
}

#endif
