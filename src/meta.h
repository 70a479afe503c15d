/*
 * meta.h — fixed-size pools for the malloc layer's own records (span
 * descriptors, thread caches). Records come from anonymous mappings of
 * PA_META_BLOCK bytes (os_alloc, zeroed), never from libc or from the heap
 * the records describe, and go back on a free list; the mappings are kept.
 * A pool is a value with its own lock, so tests can build their own.
 */
#ifndef PA_META_H
#define PA_META_H

#include <stddef.h>

#include "lock.h"

#define PA_META_BLOCK ((size_t)64 << 10)

struct pa_meta_pool {
	pa_lock lock;
	size_t size;      /* bytes per record (a multiple of 16), set at init */
	void *free;       /* returned records, linked through their first word */
	char *next, *end; /* the unused rest of the newest block */
	size_t mapped;    /* bytes of blocks mapped */
	size_t live;      /* records handed out and not returned */
};

#define PA_META_POOL_INIT(bytes)                                                                   \
	{                                                                                          \
		.lock = PA_LOCK_INIT, .size = ((bytes) + 63) & ~(size_t)63                         \
	}

/* A zeroed record, or NULL (errno = ENOMEM) when the OS refuses memory. */
void *meta_alloc(struct pa_meta_pool *p);
void meta_free(struct pa_meta_pool *p, void *rec);

#endif
