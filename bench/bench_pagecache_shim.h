/*
 * bench_pagecache_shim.h — plain-C entry points for bench_pagecache.cc.
 *
 * src/ headers are C11 (_Static_assert, _Noreturn, asm goto) and do not
 * compile as C++, so the C++ benchmark sees the heap and the cache sets as
 * opaque pointers. Set-up goes through bench_pagecache_shim.c; the measured
 * calls are the library's own pagecache_alloc / pagecache_free, declared
 * here with ABI-identical prototypes, so no wrapper call sits on the timed
 * path.
 */
#ifndef BENCH_PAGECACHE_SHIM_H
#define BENCH_PAGECACHE_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pa_pageheap;
struct pa_pagecache_set;

/* Same values as enum pa_cache_mode (checked in the shim). */
enum { BPC_OFF = 0, BPC_LOCKED = 1, BPC_RSEQ = 2 };

/* A real heap (pageheap_init(h, NULL)): NULL on failure. */
struct pa_pageheap *bpc_heap_create(void);
void bpc_heap_destroy(struct pa_pageheap *h);

/* pagecache_init(set, h, want); NULL on failure. */
struct pa_pagecache_set *bpc_set_create(struct pa_pageheap *h, int want);
void bpc_set_destroy(struct pa_pagecache_set *pc);
int bpc_set_mode(const struct pa_pagecache_set *pc); /* the mode really selected */
unsigned bpc_set_ncpus(const struct pa_pagecache_set *pc);
void bpc_set_flush(struct pa_pagecache_set *pc);
/* pagecache_stats: refills and drains so far. */
void bpc_set_counts(const struct pa_pagecache_set *pc, uint64_t *refills, uint64_t *drains);

const char *bpc_mode_name(int mode);
/* glibc's __rseq_size (0: no rseq registration) and __rseq_offset. */
unsigned bpc_rseq_size(void);
long bpc_rseq_offset(void);
/* pageheap_alloc(h, npages, NULL): pages outside every cache's group. */
uintptr_t bpc_heap_alloc(struct pa_pageheap *h, size_t npages);
/* pageheap_verify; 0 when consistent. */
size_t bpc_heap_verify(struct pa_pageheap *h);

#ifdef __cplusplus
/* The library's fast paths (pagecache.h). enum pa_page_fault is int-sized
 * (checked in the shim); 0 == PA_PAGE_OK. */
uintptr_t pagecache_alloc(struct pa_pagecache_set *pc, size_t npages, size_t *scav);
int pagecache_free(struct pa_pagecache_set *pc, uintptr_t addr, size_t npages);
#endif

#ifdef __cplusplus
}
#endif

#endif
