/*
 * layout.h — the geometry of the page heap, every constant derived from a few.
 *
 * The heap is managed in 8 KiB pages. Pages are grouped into chunks of 512
 * (4 MiB); each chunk owns a 512-bit allocation bitmap and a 512-bit scavenged
 * bitmap. Above the chunks sits a radix tree of packed 64-bit summaries
 * (summary.h) with PA_SUM_LEVELS levels over a PA_ADDR_BITS address space:
 *
 *     PA_SUM_L0_BITS + (PA_SUM_LEVELS - 1) * PA_SUM_LEVEL_BITS + PA_CHUNK_SHIFT
 *         = 14 + 4 * 3 + 22 = 48 = PA_ADDR_BITS
 *
 * so level 0 has 16384 entries of 16 GiB each, every level below multiplies
 * by a fanout of 8 (one 64-byte cache line of summaries), and level 4 has one
 * entry per chunk. One level-0 entry covers 2^21 pages, the largest count a
 * 21-bit summary field can hold (with the help of its top bit).
 *
 * Also here, at the bottom of the tree, the page level's defaults that
 * configuration (config.c) names: the growth's reservation, the per-CPU
 * page caches' modes and the NUMA modes.
 */
#ifndef PA_LAYOUT_H
#define PA_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define PA_PAGE_SHIFT 13u
#define PA_PAGE_SIZE ((uintptr_t)1 << PA_PAGE_SHIFT)

#define PA_CHUNK_PAGES_SHIFT 9u
#define PA_CHUNK_PAGES (1u << PA_CHUNK_PAGES_SHIFT)
#define PA_CHUNK_WORDS (PA_CHUNK_PAGES / 64u)
#define PA_CHUNK_SHIFT (PA_PAGE_SHIFT + PA_CHUNK_PAGES_SHIFT)
#define PA_CHUNK_SIZE ((uintptr_t)1 << PA_CHUNK_SHIFT)

#define PA_ADDR_BITS 48u
#define PA_SUM_LEVELS 5u
#define PA_SUM_LEVEL_BITS 3u
#define PA_SUM_FANOUT (1u << PA_SUM_LEVEL_BITS)
#define PA_SUM_L0_BITS (PA_ADDR_BITS - PA_CHUNK_SHIFT - (PA_SUM_LEVELS - 1u) * PA_SUM_LEVEL_BITS)

/* log2 of the pages one entry of level l summarizes (21 at level 0, 9 at the leaves). */
#define PA_LEVEL_LOG_PAGES(l)                                                                      \
	(PA_CHUNK_PAGES_SHIFT + (PA_SUM_LEVELS - 1u - (l)) * PA_SUM_LEVEL_BITS)
/* log2 of the bytes one entry of level l covers (34 at level 0, 22 at the leaves). */
#define PA_LEVEL_SHIFT(l) (PA_LEVEL_LOG_PAGES(l) + PA_PAGE_SHIFT)

/* The largest count a summary field holds: all pages under one level-0 entry. */
#define PA_SUM_MAX_PAGES_SHIFT PA_LEVEL_LOG_PAGES(0)
#define PA_SUM_MAX_PAGES (1u << PA_SUM_MAX_PAGES_SHIFT)

/*
 * The sparse chunk array: a chunk index splits into an L1 index (top bits)
 * and an L2 index (PA_CHUNK_L2_BITS); one L2 block of 256 chunks (38 KiB of
 * bitmaps, 1 GiB of heap) is mapped when the heap first grows into it.
 * Small blocks keep what a small heap maps small, which matters under an
 * address-space limit (1024 chunks a block, 152 KiB, cost a program filling
 * 64 MiB one 1 MiB block); the L1 array over the full window is 1 MiB of
 * address space, touched only where the heap is.
 */
#define PA_CHUNK_L2_BITS 8u
#define PA_CHUNK_L2_COUNT (1u << PA_CHUNK_L2_BITS)

/* Smallest address window the tree can cover: one level-0 entry. */
#define PA_WINDOW_MIN_BITS PA_LEVEL_SHIFT(0)

/* Address space reserved from the OS per growth, unless configured
 * (pageheap.h: arena_bytes; PAGEALLOC_CONF: arena_size). */
#define PA_ARENA_DEFAULT ((size_t)64 << 20)

/* How the per-CPU page caches run (pagecache.h); PAGEALLOC_CONF's
 * percpu_cache names them off, locked and on, in this order (config.c). */
enum pa_cache_mode {
	PA_CACHE_OFF = 0,
	PA_CACHE_LOCKED = 1, /* per-CPU lock (CAS), CPU from sched_getcpu */
	PA_CACHE_RSEQ = 2,   /* restartable sequences, no atomics on fast paths */
};

/* NUMA (node.h): the most per-node page heaps the default heap splits
 * into, and PAGEALLOC_CONF's numa=off|on|interleave, in this order. */
#define PA_NUMA_MAX_NODES 8u
enum pa_numa_mode {
	PA_NUMA_OFF = 0,
	PA_NUMA_ON = 1,         /* per-node heaps where the machine has several nodes */
	PA_NUMA_INTERLEAVE = 2, /* one heap, its pages spread over every node */
};

#define PA_ALIGN_UP(x, a) (((x) + (a)-1) & ~((uintptr_t)(a)-1))
#define PA_ALIGN_DOWN(x, a) ((x) & ~((uintptr_t)(a)-1))

/*
 * Heap addresses that the allocator keeps in its own metadata (the page
 * heap's hint and range lists, span records) are stored negated. memcheck's
 * leak check reads every word of that metadata as a possible pointer, and a
 * plain address of the page that starts a user's block would make a leaked
 * block look "still reachable". Minus a user-space address is a kernel-half
 * address, which no block has; minus 0 is 0, so zero still means "none".
 */
static inline uintptr_t pa_addr_hide(uintptr_t a)
{
	return -a;
}

static inline uintptr_t pa_addr_show(uintptr_t hidden)
{
	return -hidden;
}

_Static_assert(PA_SUM_L0_BITS == 14, "level 0 holds 16384 entries");
_Static_assert(PA_LEVEL_SHIFT(0) == 34, "a level-0 entry covers 16 GiB");
_Static_assert(PA_SUM_MAX_PAGES == 1u << 21, "summary fields are 21 bits");
_Static_assert(PA_ARENA_DEFAULT % PA_CHUNK_SIZE == 0, "a growth reserves whole chunks");

#endif
