// clang-format off
//go:build cgo

/*
 * gopa.c — the C side of Calloc and Free: one cgo crossing each.
 *
 * A block of Calloc holds the caller's n bytes, then its trailer (tag,
 * size, sampled: the meta word of pagealloc.go) in the last 8 bytes of the
 * block's usable size, so the caller's first byte is the block's and
 * pa_free checks the caller's pointer itself.
 *
 * gopa_calloc is the frame every sample the library takes of a Calloc
 * block starts in (the library trims its own frames): profile.go leaves
 * those samples to the Go side, which knows the Go stack. It finds them by
 * address, from gopa_calloc to gopa_free, which follows it here; keep the
 * two together and in this order, and keep anything that allocates out of
 * this file.
 */
#include <pagealloc.h>
#include <stdint.h>
#include <string.h>

void *gopa_calloc(size_t n, uint64_t meta)
{
	void *p = pa_calloc(1, n + sizeof meta);
	if (p == NULL)
		return NULL;
	memcpy((char *)p + pa_malloc_usable_size(p) - sizeof meta, &meta, sizeof meta);
	return p;
}

/* pa_malloc_usable_size reports a pointer the heap did not hand out (one
 * line naming it, then abort) before anything is read. */
uint64_t gopa_free(void *p)
{
	uint64_t meta;
	memcpy(&meta, (char *)p + pa_malloc_usable_size(p) - sizeof meta, sizeof meta);
	pa_free(p);
	return meta;
}
