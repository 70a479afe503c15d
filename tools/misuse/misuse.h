/*
 * misuse.h — what the suite's programs took from hardened_malloc's own
 * headers (util.h's UNUSED, h_malloc.h's free_sized and free_aligned_sized),
 * so that they build against any allocator: C23's free_sized and
 * free_aligned_sized are called when the allocator in the process has them
 * (weak references, resolved at load time: libpagealloc's preload library
 * exports both) and free otherwise (glibc 2.36 has neither).
 */
#ifndef MISUSE_H
#define MISUSE_H

#include <stddef.h>
#include <stdlib.h>

#define UNUSED __attribute__((unused))

extern void free_sized(void *p, size_t size) __attribute__((weak));
extern void free_aligned_sized(void *p, size_t alignment, size_t size) __attribute__((weak));

static inline void misuse_free_sized(void *p, size_t size)
{
	if (free_sized != NULL)
		free_sized(p, size);
	else
		free(p);
}

static inline void misuse_free_aligned_sized(void *p, size_t alignment, size_t size)
{
	if (free_aligned_sized != NULL)
		free_aligned_sized(p, alignment, size);
	else
		free(p);
}

#define free_sized(p, size) misuse_free_sized(p, size)
#define free_aligned_sized(p, alignment, size) misuse_free_aligned_sized(p, alignment, size)

#endif
