/*
 * pages.h — the process-wide default page heap as the malloc layer sees it.
 *
 * pages.c owns the default heap, its per-CPU page caches and its scavenger.
 * The malloc layer (span.c, malloc.c) takes runs of pages through here:
 * runs of fewer than PA_CACHE_MAX_PAGES pages through the calling CPU's page
 * cache, longer ones from the heap under its lock. Nothing here allocates.
 */
#ifndef PA_PAGES_H
#define PA_PAGES_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"

/* Build the default heap if needed, then, if *done is 0, run fn under the
 * lock that building the heap and fork handling take (so a fork never
 * catches fn half done), and set *done when fn returns 0. fn must not
 * allocate. Returns 0, or -1 when the heap cannot be built, or fn's error. */
int pages_once(int *done, int (*fn)(void));

/* Start (or, in a forked child, restart) the background scavenger if it is
 * wanted. It creates a thread, which allocates: call it holding no
 * allocator lock. pages_alloc does not, so that it may run under one. */
void pages_background(void);

/* npages contiguous pages, or 0 (errno = ENOMEM). *scav (if non-NULL) gets
 * how many of them were released to the OS and read as zero. They come
 * from the calling CPU's NUMA node (node.h). */
uintptr_t pages_alloc(size_t npages, size_t *scav);

/* The same from node's page heap (node < pa_numa_nodes(); -1: the calling
 * CPU's node): a heap pinned to a node (pa_heap_set_numa_node). */
uintptr_t pages_alloc_on(int node, size_t npages, size_t *scav);

/* Take the npages pages at addr if they are all free in the heap (not held
 * by a per-CPU cache): 1, else 0. */
int pages_alloc_at(uintptr_t addr, size_t npages);

/* Free a run that pages_alloc returned (or a sub-run of one). A bad range
 * aborts with the page heap's one-line message. It never starts the
 * scavenger thread (pages_background does), so it may run under a lock. */
void pages_free(uintptr_t addr, size_t npages);

/* The same, where bit i of released says that page addr + i was released
 * to the OS while the run was in use (a span's pages the sweep released):
 * the heap counts those as released, so its resident figure stays true and
 * a run handed out on them reports them as reading zero. */
void pages_free_released(uintptr_t addr, size_t npages, uint64_t released);

/* 1 when released pages read as zero (release=dontneed), else 0. */
int pages_release_zeroes(void);

/* Does any of [addr, addr + bytes) lie in a huge page the scavenger
 * collapsed? With split, those huge pages stop counting as huge (and count
 * a split each): the caller is about to release pages inside them.
 * [addr, addr + bytes) is heap memory, within one chunk. */
int pages_huge_in(uintptr_t addr, size_t bytes, int split);

/* How many huge pages of the heaps count as collapsed (under their locks). */
size_t pages_huge_count(void);

/* Count the huge page holding heap address addr as collapsed, as the
 * scavenger does after MADV_COLLAPSE; for tests, which record it without the
 * kernel (and, where the scavenger thread never ran, give the heap its huge
 * page size, hp_pages heap pages): 1, or 0 where a page of it is released. */
int pages_count_collapsed(uintptr_t addr, unsigned hp_pages);

/* Bytes of heap memory: mapped, and of those released to the OS, and the
 * page heap's count of allocated pages minus what the per-CPU page caches
 * hold (pages in spans and large objects, when nothing else uses pa_pages). */
/* memory_limit=auto: the name of the cgroup's limit file that binds (or
 * the cgroup's own when none does) into path (PA_CGROUP_PATH_MAX bytes,
 * cgroup.h). 0, or -1 ("" in path) when not auto or no cgroup was found. */
int pages_memory_limit_file(char *path);

void pages_totals(size_t *mapped, size_t *released, size_t *inuse_outside_caches);

/* One chunk of the heap as the heap map sees it (heapmap.h): its bitmaps
 * (chunk.h) and the pages per-CPU caches hold, copied under the heap lock. */
struct pages_chunk_view {
	uintptr_t base; /* the chunk's first page */
	uint64_t alloc[PA_CHUNK_WORDS], scav[PA_CHUNK_WORDS];
	uint64_t cached[PA_CHUNK_WORDS]; /* free in a cache, or queued in its frees */
	uint64_t huge[PA_CHUNK_WORDS];   /* in a huge page the scavenger collapsed */
};

/* The first chunk of the heap at or above address from, into v: 1, or 0
 * when there is none (or no heap: this never builds it). Takes the heap
 * lock: call it holding none, or only central locks (central.h: they come
 * before it). */
int pages_chunk_view(uintptr_t from, struct pages_chunk_view *v);

/* The heap's coarse clock: milliseconds since the scavenger thread started
 * (0 while it never ran). */
uint32_t pages_epoch(void);

/* Let the background scavenger call fn at every wake (scavenger.h: sweep).
 * Call from pages_once. */
void pages_set_sweep(size_t (*fn)(uint32_t now, uint32_t min_age, int heap_busy, uint32_t hold_ms));

/* Let the background scavenger call fn at every wake (scavenger.h:
 * publish); the live file's writer. Any time, from a thread that holds no
 * allocator lock. */
void pages_set_publish(uint64_t (*fn)(uint32_t **wake_word));

/* Fork handlers that run around the page heap's own: the malloc layer's
 * locks are taken before the heap's and reset after. Call from pages_once. */
void pages_set_fork_hooks(void (*prepare)(void), void (*parent)(void), void (*child)(void));

/* Let the default heap call fn(base, bytes) before a range joins it, with
 * the heap's lock held; nonzero refuses the growth. The malloc layer's page
 * map commits the range's leaves there: under an address-space limit a
 * range whose leaf cannot be had would be pages no span can be built on,
 * and first fit would hand them out again at every attempt. Call from
 * pages_once, before the heap first grows. */
void pages_set_grow_hook(int (*fn)(uintptr_t base, size_t bytes));

#endif
