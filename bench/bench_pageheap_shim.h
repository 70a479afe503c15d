/*
 * bench_pageheap_shim.h — plain-C entry points for bench_pageheap.cc and
 * callgrind_pageheap.c.
 *
 * src/ headers are C11 (_Static_assert, _Noreturn) and do not compile as
 * C++, so the C++ benchmark sees the page heap as an opaque pointer. Building
 * heap states goes through bench_pageheap_shim.c; the measured calls are the
 * library's own pageheap_alloc / pageheap_free, declared below for C++ with
 * prototypes identical to pageheap.h's, so no wrapper sits on the timed path.
 *
 * The heaps are metadata-only (struct pa_pageheap_opts.metadata_only): one
 * range of address space at BPH_BASE, never mapped or touched, so a 256 GiB
 * heap costs ~10 MiB of bitmaps and summaries.
 */
#ifndef BENCH_PAGEHEAP_SHIM_H
#define BENCH_PAGEHEAP_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pa_pageheap;

/* Where the fake heap starts: 16 TiB, aligned to a level-0 entry (16 GiB). */
#define BPH_BASE ((uintptr_t)0x100000000000)
#define BPH_PAGE_SIZE ((uintptr_t)8192)

enum bph_state {
	BPH_EMPTY = 0,  /* every page free */
	BPH_FRAG50 = 1, /* each page independently allocated with probability 1/2 */
};

/*
 * A metadata-only heap of `bytes` (a multiple of 4 MiB) at BPH_BASE in the
 * given state; NULL (with a message on stderr) on failure. The state is built
 * by allocating the whole range and then freeing every page (BPH_EMPTY) or
 * the pages whose bit in a splitmix64 stream seeded with `seed` is set
 * (BPH_FRAG50), so in both states every free page is resident (scav bit
 * clear), as it is again after a benchmark frees what it allocated. The
 * building calls are the *_locked functions, so a callgrind run that toggles
 * collection on pageheap_alloc/pageheap_free does not count them.
 */
struct pa_pageheap *bph_heap_create(uint64_t bytes, int state, uint64_t seed);
void bph_heap_destroy(struct pa_pageheap *h);

/* pageheap_verify: 0 when every invariant holds. */
size_t bph_heap_verify(struct pa_pageheap *h);

/* Allocated pages, and the address such that no free page lies below it. */
size_t bph_inuse_pages(struct pa_pageheap *h);
uintptr_t bph_hint(struct pa_pageheap *h);

/* A hash of the allocation bitmaps of the whole heap, the hint and the page
 * count: equal before and after a benchmark iff it restored the exact state. */
uint64_t bph_fingerprint(struct pa_pageheap *h);

#ifdef __cplusplus
/* The library's page heap (pageheap.h), called directly on the timed path. */
uintptr_t pageheap_alloc(struct pa_pageheap *h, size_t npages, size_t *scav);
void pageheap_free(struct pa_pageheap *h, uintptr_t addr, size_t npages);
#endif

#ifdef __cplusplus
}
#endif

#endif
