/*
 * bench_pageheap_shim.c — builds the heap states of bench_pageheap.cc and
 * callgrind_pageheap.c (see bench_pageheap_shim.h). Linked into those
 * programs; not a benchmark itself.
 */
#include "bench_pageheap_shim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pageheap.h"

_Static_assert(BPH_PAGE_SIZE == PA_PAGE_SIZE, "shim page size matches layout.h");
_Static_assert(BPH_BASE % ((uintptr_t)1 << PA_LEVEL_SHIFT(0)) == 0,
               "the fake heap starts on a level-0 boundary");

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

/* Free every page whose bit in the random stream is set, run by run. */
static void free_random_half(struct pa_pageheap *h, size_t npages, uint64_t seed)
{
	size_t run = 0; /* free pages ending just before page p */
	for (size_t p = 0; p < npages; p += 64) {
		uint64_t r = splitmix64(&seed);
		for (unsigned b = 0; b < 64; b++) {
			if (r >> b & 1) {
				run++;
				continue;
			}
			if (run != 0)
				pageheap_free_locked(h, BPH_BASE + (p + b - run) * PA_PAGE_SIZE,
				                     run);
			run = 0;
		}
	}
	if (run != 0)
		pageheap_free_locked(h, BPH_BASE + (npages - run) * PA_PAGE_SIZE, run);
}

struct pa_pageheap *bph_heap_create(uint64_t bytes, int state, uint64_t seed)
{
	const struct pa_pageheap_opts opts = {.metadata_only = 1};
	size_t npages = bytes / PA_PAGE_SIZE;
	struct pa_pageheap *h = calloc(1, sizeof(*h));
	if (h == NULL || bytes % PA_CHUNK_SIZE != 0) {
		fprintf(stderr,
		        "bph_heap_create: %llu bytes: not a multiple of 4 MiB, or no memory\n",
		        (unsigned long long)bytes);
		free(h);
		return NULL;
	}
	if (pageheap_init(h, &opts) != 0) {
		fprintf(stderr, "bph_heap_create: pageheap_init: %s\n", strerror(errno));
		free(h);
		return NULL;
	}
	if (pageheap_grow_range(h, BPH_BASE, npages) != 0) {
		fprintf(stderr,
		        "bph_heap_create: pageheap_grow_range(%#llx, %zu pages): %s (window %#llx, "
		        "2^%u bytes)\n",
		        (unsigned long long)BPH_BASE, npages, strerror(errno),
		        (unsigned long long)h->window_base, h->window_bits);
		bph_heap_destroy(h);
		return NULL;
	}
	lock_acquire(&h->lock);
	uintptr_t all = pageheap_alloc_locked(h, npages, NULL);
	if (all == BPH_BASE) {
		if (state == BPH_EMPTY)
			pageheap_free_locked(h, BPH_BASE, npages);
		else
			free_random_half(h, npages, seed);
	}
	lock_release(&h->lock);
	if (all != BPH_BASE) {
		fprintf(stderr, "bph_heap_create: allocating the whole heap returned %#llx\n",
		        (unsigned long long)all);
		bph_heap_destroy(h);
		return NULL;
	}
	return h;
}

void bph_heap_destroy(struct pa_pageheap *h)
{
	if (h != NULL) {
		pageheap_destroy(h);
		free(h);
	}
}

size_t bph_heap_verify(struct pa_pageheap *h)
{
	return pageheap_verify(h);
}
size_t bph_inuse_pages(struct pa_pageheap *h)
{
	return h->inuse_pages;
}
uintptr_t bph_hint(struct pa_pageheap *h)
{
	return pageheap_hint(h);
}

uint64_t bph_fingerprint(struct pa_pageheap *h)
{
	uint64_t x = 0xcbf29ce484222325u; /* FNV-1a over 64-bit words */
	lock_acquire(&h->lock);
	for (size_t r = 0; r < h->ranges.n; r++) {
		for (uintptr_t a = range_base(&h->ranges.v[r]); a < range_limit(&h->ranges.v[r]);
		     a += PA_CHUNK_SIZE) {
			const struct pa_chunk *c = pageheap_chunk(h, a);
			for (unsigned w = 0; w < PA_CHUNK_WORDS; w++)
				x = (x ^ c->alloc[w]) * 0x100000001b3u;
		}
	}
	x = (x ^ pageheap_hint(h)) * 0x100000001b3u;
	x = (x ^ h->inuse_pages) * 0x100000001b3u;
	lock_release(&h->lock);
	return x;
}
