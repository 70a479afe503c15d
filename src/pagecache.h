/*
 * pagecache.h — per-CPU page caches: page allocation without a shared lock.
 *
 * After the design's "Allow a P to cache bits from the bitmap", with a CPU in
 * place of a P. Each CPU owns a 64-page-aligned group of the heap (base), a
 * 64-bit map of the group's pages it may hand out (free) and which of those
 * were released to the OS (scav). Requests for fewer than PA_CACHE_MAX_PAGES
 * pages try the current CPU's group first; an empty cache refills with the
 * first group holding a free page at the heap's hint. A free that falls in
 * the current CPU's group goes back into its bits; other small frees are
 * queued per CPU and handed to the heap PA_CACHE_BATCH at a time, under one
 * heap-lock acquisition.
 *
 * Concurrency. Every cache has a 64-bit `gen` word: even = idle, odd = a slow
 * path (refill, drain, flush) owns the cache. Slow paths take it with a CAS
 * and release it with gen + 2. Fast paths, in rseq mode, read gen and the
 * words they need, compute the result in C, then commit with a restartable
 * sequence (rseq.h) that re-checks the CPU, gen and the target word and then
 * stores: no atomic instruction, and preemption or migration in between
 * simply retries. A slow path that owns the cache of a CPU it is not running
 * on fences that CPU with membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ)
 * first, so no sequence that read the old gen can still commit. Without rseq
 * (kernel or glibc without it, GLIBC_TUNABLES=glibc.pthread.rseq=0, or a TSan
 * build, which cannot see rseq commits) every access takes gen with a CAS:
 * a per-CPU lock, contended only after a migration.
 *
 * Pages held by caches are allocated in the heap's bitmaps; pagecache stats
 * report them on their own line.
 */
#ifndef PA_PAGECACHE_H
#define PA_PAGECACHE_H

#include <stddef.h>
#include <stdint.h>

#include "pageheap.h"

/* Requests of fewer pages than this use the caches (today's Go runtime:
 * npages < pageCachePages/4). 15 pages also pack into the low bits of a
 * page-aligned address in the free batch. */
#define PA_CACHE_MAX_PAGES 16u
#define PA_CACHE_BATCH 15u
#define PA_CACHE_MAX_CPUS 4096u

struct pa_pagecache {
	uint64_t gen;                   /* even: idle; odd: a slow path owns the cache */
	uint64_t base;                  /* 64-page group (0: none) */
	uint64_t free;                  /* pages of the group the cache may hand out */
	uint64_t scav;                  /* of those, released to the OS (valid where free is set) */
	uint64_t nbatch;                /* queued frees */
	uint64_t batch[PA_CACHE_BATCH]; /* address | npages */
	/* statistics, written under gen or by the owning fast path */
	uint64_t refills, drains;
} __attribute__((aligned(64)));

struct pa_pagecache_set {
	struct pa_pageheap *heap;
	enum pa_cache_mode mode;
	unsigned ncpus;            /* caches for CPU ids below this */
	struct pa_pagecache *cpus; /* ncpus entries, own mapping */
};

/* Set up caches over heap. mode is the most wanted: PA_CACHE_RSEQ falls back
 * to PA_CACHE_LOCKED where rseq or its membarrier fence is unavailable.
 * 0, or -1 (ENOMEM). */
int pagecache_init(struct pa_pagecache_set *pc, struct pa_pageheap *heap, enum pa_cache_mode mode);
/* Flush everything and unmap the caches (the heap stays). */
void pagecache_destroy(struct pa_pagecache_set *pc);

/* Allocate npages (1 .. PA_CACHE_MAX_PAGES-1) through the current CPU's
 * cache, falling back to the heap. 0 when out of memory. */
uintptr_t pagecache_alloc(struct pa_pagecache_set *pc, size_t npages, size_t *scav);

/* Free npages (1 .. PA_CACHE_MAX_PAGES-1) at addr through the current CPU's
 * cache. Faults found at once (misaligned, double free in the CPU's group)
 * return nonzero without freeing; faults in queued frees are found when
 * the queue drains and reported through pagecache_fault_hook. */
enum pa_page_fault pagecache_free(struct pa_pagecache_set *pc, uintptr_t addr, size_t npages);

/* Free any run of heap pages (large ones included) after checking it is a
 * live allocation: in the heap's bitmap and not sitting free in a cache.
 * Bit i of released: page addr + i was released to the OS while allocated
 * (pageheap_mark_released_locked); 0 for none. */
enum pa_page_fault pagecache_heap_free(struct pa_pagecache_set *pc, uintptr_t addr, size_t npages,
                                       uint64_t released);

/* Called (then the process aborts) when a queued free turns out bad. */
extern void (*pagecache_fault_hook)(uintptr_t addr, size_t npages, enum pa_page_fault f);

/* The CPU id the calling thread runs on as the caches see it (rseq's, or
 * getcpu's), -1 if unknown. */
int pagecache_current_cpu(const struct pa_pagecache_set *pc);

/* Give every cache's pages and queued frees back to the heap. */
void pagecache_flush_all(struct pa_pagecache_set *pc);

/* fork(): own every cache before (so none is mid-update), release after in
 * the parent, reset in the child (where the owners' threads do not exist). */
void pagecache_own_all(struct pa_pagecache_set *pc);
void pagecache_release_all(struct pa_pagecache_set *pc);
void pagecache_after_fork_child(struct pa_pagecache_set *pc);

struct pa_pagecache_stats {
	size_t cached_pages; /* free pages held by caches */
	size_t queued_pages; /* freed pages waiting in per-CPU free queues */
	uint64_t refills, drains;
};
/* The pages of the chunk at chunk_base that caches hold: free in a cache's
 * group, or queued in a cache's frees; a bit per page into held (ORed in).
 * Heap lock held; the caches' words are read as pagecache_stats reads them. */
void pagecache_held_locked(const struct pa_pagecache_set *pc, uintptr_t chunk_base,
                           uint64_t held[PA_CHUNK_WORDS]);

/* A racy but per-field sane sum over all caches. */
void pagecache_stats(const struct pa_pagecache_set *pc, struct pa_pagecache_stats *out);

#endif
