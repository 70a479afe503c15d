/*
 * pageheap.h — the page heap: address-ordered first-fit allocation of runs of
 * 8 KiB pages, after the Go runtime's 2019 page allocator
 * (the design document "Scaling the Go page allocator", 2019).
 *
 * Data structures (see docs/design.md for the picture):
 *
 *  - chunks: every 4 MiB of heap has a struct pa_chunk (bitmaps, chunk.h),
 *    reached through a sparse two-level array; an L2 block is mapped when the
 *    heap first grows into the 32 GiB it covers.
 *  - summaries: PA_SUM_LEVELS arrays of packed summaries (summary.h), one per
 *    tree level, indexed by (addr - window_base) >> PA_LEVEL_SHIFT(level).
 *    All levels are reserved PROT_NONE in one mapping at init; when the heap
 *    grows, the pages of every level that cover the new range are committed,
 *    widened to whole fanout blocks of 8 so that a search that reads one
 *    entry of a block may read its siblings. Uncommitted or unused summaries
 *    are 0 (fully allocated) and are never read: searches only descend into
 *    a nonzero parent, and the level-0 scan stops at the heap's end.
 *  - ranges: the sorted, disjoint, chunk-aligned address ranges that are heap.
 *  - hint: an address such that no free page lies below it. It always points
 *    into a heap range, or equals `limit_hint` when nothing is free, so a read
 *    of the leaf summary at the hint is always a committed read. It is stored
 *    hidden (layout.h): the hint is often the first page of a user's block.
 *
 * Invariants (checked by pageheap_verify):
 *  1. every leaf summary equals chunk_summarize of its chunk;
 *  2. every inner summary equals sum_merge of its 8 children;
 *  3. no free page lies below the hint;
 *  4. alloc and scav bits are never both set; scav_pages equals the count of
 *     scav bits, inuse_pages the count of alloc bits over the heap ranges.
 *
 * The address window: normally the tree covers the whole 48-bit space
 * (window_base 0, ~585 MiB of PROT_NONE reservation). Under an address-space
 * limit (RLIMIT_AS, ulimit -v), which that reservation counts against,
 * pageheap_init takes a window 16 times the limit (at least 64 GiB, a tree
 * under 1/10000 of the limit) around where the kernel places mappings, and
 * reserves at most 1/16 of the limit per growth; if a reservation is refused
 * it retries with narrower windows down to 64 GiB. The heap only ever
 * places memory inside its window.
 *
 * Locking: every field below `lock` is protected by it. Functions named
 * *_locked expect the caller to hold it; the others take it.
 */
#ifndef PA_PAGEHEAP_H
#define PA_PAGEHEAP_H

#include <stddef.h>
#include <stdint.h>

#include "chunk.h"
#include "layout.h"
#include "lock.h"
#include "summary.h"

/* [base, limit), chunk-aligned; both stored hidden (pa_addr_hide): the
 * first range's base is the address of the heap's first page. */
struct pa_addr_range {
	uintptr_t hidden_base, hidden_limit;
};

static inline uintptr_t range_base(const struct pa_addr_range *r)
{
	return pa_addr_show(r->hidden_base);
}

static inline uintptr_t range_limit(const struct pa_addr_range *r)
{
	return pa_addr_show(r->hidden_limit);
}

static inline void range_set_base(struct pa_addr_range *r, uintptr_t base)
{
	r->hidden_base = pa_addr_hide(base);
}

static inline void range_set_limit(struct pa_addr_range *r, uintptr_t limit)
{
	r->hidden_limit = pa_addr_hide(limit);
}

/* A growable array kept in its own anonymous mapping (never libc malloc). */
struct pa_range_list {
	struct pa_addr_range *v;
	size_t n, cap;
};

struct pa_pageheap_opts {
	/* Metadata-only heap for tests and benchmarks: memory enters only through
	 * pageheap_grow_range at any chunk-aligned address; pages are never
	 * mapped or touched, and an exhausted heap fails instead of growing. */
	int metadata_only;
	/* 0: try the full 48-bit window, then narrower ones. Otherwise cover only
	 * the 2^window_bits bytes at window_base (aligned to that size). */
	unsigned window_bits;
	uintptr_t window_base;
	/* Address space reserved from the OS per growth (0: PA_ARENA_DEFAULT). */
	size_t arena_bytes;
	/* 1: the caller has reserved the whole window (PROT_NONE, os_reserve)
	 * and keeps it: arenas are carved from it bottom up, no system call,
	 * and the heap never maps outside it (a NUMA node's heap, pages.c). */
	int window_reserved;
	/* NUMA policy of every new arena, set before its first touch
	 * (os_mbind): 0 none, else an enum os_mpol over mpol_nodes. */
	int mpol;
	unsigned long mpol_nodes;
	/* Called, lock held, before [base, base + bytes) joins the heap; a
	 * nonzero return refuses the growth (ENOMEM). NULL: none. The malloc
	 * layer commits its page map's leaves here (pages.h). */
	int (*grow_prepare)(uintptr_t base, size_t bytes);
};

/* A heap under an address-space limit of at most PA_PLACE_LIMIT_MAX stays in
 * one aligned PA_PLACE_REGION, the span of one pagemap leaf (pagemap.h):
 * a second leaf, needed where a heap straddles two, would cost 1 MiB of a
 * 64 MiB limit's address space. */
#define PA_PLACE_REGION_SHIFT 30u
#define PA_PLACE_REGION ((uintptr_t)1 << PA_PLACE_REGION_SHIFT)
#define PA_PLACE_LIMIT_MAX ((size_t)512 << 20)

/* Why a range handed to pa_pages_free is not a live allocation. */
enum pa_page_fault {
	PA_PAGE_OK = 0,
	PA_PAGE_UNALIGNED,     /* not a multiple of the 8 KiB page size */
	PA_PAGE_NOT_HEAP,      /* not (wholly) inside the page heap */
	PA_PAGE_NOT_ALLOCATED, /* some page of it is already free: double free */
	PA_PAGE_BAD_SIZE,      /* zero pages, or more than the address space */
};

struct pa_pageheap {
	pa_lock lock;

	/* Set at init, then read-only. */
	uintptr_t window_base;
	unsigned window_bits;
	int window_fallback; /* 1: narrower than 48 bits (address-space limit) */
	int metadata_only;
	size_t arena_bytes;
	int window_reserved; /* arenas are carved from a window the owner reserved */
	int mpol;            /* NUMA policy of new arenas (enum os_mpol; 0: none) */
	unsigned long mpol_nodes;
	int (*grow_prepare)(uintptr_t base, size_t bytes); /* (the opts' own) */
	/* Under a limit of at most PA_PLACE_LIMIT_MAX, arenas are placed in
	 * one aligned PA_PLACE_REGION: this is its address over the region's
	 * size, plus 1 (a number, not an address: memcheck must not see a
	 * pointer to a block at its base); 0: anywhere in the window. */
	uintptr_t place_region;
	pa_sum *sum[PA_SUM_LEVELS]; /* level arrays inside one reservation */
	size_t sum_len[PA_SUM_LEVELS];
	void *sum_reservation;
	size_t sum_reservation_bytes;
	struct pa_chunk **chunks; /* L1 array of L2 blocks */
	size_t chunks_l1_len;
	size_t chunks_l2_blocks; /* L2 blocks mapped (under lock): the stats count
	                          * them without reading the whole L1 array */
	uintptr_t limit_hint;    /* window end: the hint when nothing is free */

	/* Protected by lock. */
	uintptr_t hidden_hint;           /* no free page below this address (pageheap_hint) */
	size_t start_ci, end_ci;         /* chunk indices bounding all ranges: [start, end) */
	struct pa_range_list ranges;     /* heap address ranges, sorted */
	struct pa_range_list arenas;     /* OS reservations, for destroy */
	uintptr_t arena_next, arena_end; /* uncommitted tail of the last arena */
	size_t mapped_pages;             /* pages inside heap ranges */
	size_t inuse_pages;              /* alloc bits set */
	size_t scav_pages;               /* scav bits set (free and released) */
	size_t reserved_bytes;           /* OS address space reserved for heap pages */
	uint64_t grow_count;             /* successful growths (atomic stores, as free_count) */
	uint64_t grow_failures;          /* growths the OS refused */
	uint64_t mpol_failures;          /* arenas whose NUMA policy the kernel refused */
	size_t releasing_pages;          /* taken by the scavenger while it releases them */
	uint64_t free_count;             /* frees that stamped chunks (scavenger bookkeeping;
	                                  * atomic stores: pages.c reads it unlocked) */

	/* Scavenger coupling; atomics, so it can look without the lock. */
	size_t scav_ci;     /* no chunk at or above this index needs scavenging */
	uint32_t epoch;     /* coarse clock (ms), advanced by the scavenger */
	size_t limit_pages; /* memory limit in pages, 0: none (set by scavenger) */
	/* Under lock: mapped_pages never passes hard_limit_pages (memory_limit_hard,
	 * rounded down to pages; 0: none; set by the scavenger's configure):
	 * a growth that would is refused, and counted. */
	size_t hard_limit_pages;
	uint64_t hard_limit_refusals;
	/* Huge pages (under lock). hp_pages: the huge page in heap pages, 0
	 * until the scavenger sets it (then chunks' huge bits may be set);
	 * huge_pages: those bits set; the rest count events over the heap's
	 * life: collapses the scavenger made, huge pages released whole, and
	 * huge pages split by a release of part of them. */
	unsigned hp_pages;
	int hugepage_arenas; /* thp=always: new arenas get MADV_HUGEPAGE (scav_configure) */
	size_t huge_pages;
	uint64_t huge_collapses, huge_freed, huge_splits;
	/* The chunks' split_seen bits set in another epoch are forgotten
	 * (chunk.h); the scavenger moves it on. */
	uint8_t split_epoch;
	int pressure;                   /* 1: resident pages passed limit_pages */
	void (*on_pressure)(void *arg); /* called after unlock when pressure is set */
	void *pressure_arg;
};

static inline uintptr_t pageheap_hint(const struct pa_pageheap *h)
{
	return pa_addr_show(h->hidden_hint);
}

int pageheap_init(struct pa_pageheap *h, const struct pa_pageheap_opts *opts);
void pageheap_destroy(struct pa_pageheap *h);

/* First-fit allocation of npages; grows the heap when nothing fits. Returns
 * 0 when out of memory. *scav (if non-NULL) receives how many of the pages
 * were released to the OS (and therefore read as zero). */
uintptr_t pageheap_alloc(struct pa_pageheap *h, size_t npages, size_t *scav);
uintptr_t pageheap_alloc_locked(struct pa_pageheap *h, size_t npages, size_t *scav);

/* Allocate exactly [addr, addr + npages pages) if all of it is free heap
 * (realloc growing a large block in place). 1 if done, else 0. */
int pageheap_alloc_at(struct pa_pageheap *h, uintptr_t addr, size_t npages, size_t *scav);

/* Free a live allocation. The caller has validated it (pageheap_check). */
void pageheap_free(struct pa_pageheap *h, uintptr_t addr, size_t npages);
void pageheap_free_locked(struct pa_pageheap *h, uintptr_t addr, size_t npages);

/* Count the free pages of [addr, addr + npages pages) that bit i of
 * released names (page addr + i) as released to the OS: pages a layer above
 * released while it held them (the span sweep), freed just now. Pages
 * allocated or released already are left as they are. */
void pageheap_mark_released_locked(struct pa_pageheap *h, uintptr_t addr, size_t npages,
                                   uint64_t released);

/* Is [addr, addr + npages pages) a range of allocated heap pages? */
enum pa_page_fault pageheap_check(struct pa_pageheap *h, uintptr_t addr, size_t npages);
enum pa_page_fault pageheap_check_locked(const struct pa_pageheap *h, uintptr_t addr,
                                         size_t npages);

/* The one-line message for a bad free of npages at addr, then abort. */
_Noreturn void pageheap_report_fault(uintptr_t addr, size_t npages, enum pa_page_fault f,
                                     const char *when);

/* Mark an exact free range allocated (tests building heap states; refills).
 * Returns how many of the pages were scavenged. */
size_t pageheap_alloc_range_locked(struct pa_pageheap *h, uintptr_t addr, size_t npages);

/*
 * Per-CPU page cache support. take_group: find the first free page at the
 * hint (growing the heap if needed), and take every free page of its
 * 64-page-aligned group: they become allocated in the heap. *free gets the
 * group's free pages (bit i = page base + i), *scav which of those were
 * released. 0, or -1 when out of memory. return_group gives free pages of a
 * group back (their released state in scav).
 */
int pageheap_take_group_locked(struct pa_pageheap *h, uintptr_t *base, uint64_t *free,
                               uint64_t *scav);
void pageheap_return_group_locked(struct pa_pageheap *h, uintptr_t base, uint64_t free,
                                  uint64_t scav);

/*
 * Scavenger support.
 * scav_next: without the lock, the highest heap chunk below `below` whose
 *   free stamp is set and at least min_age epochs old; SIZE_MAX if none.
 *   *recent gets 1 + the highest chunk skipped for being too young (or 0).
 * prev_chunk_locked: the highest heap chunk index below `below` (SIZE_MAX).
 * scav_reserve_locked: in chunk ci, take the candidate run of
 *   chunk_scav_candidate out of circulation (allocated, counted as
 *   releasing) and return its length (0: none; then, unless force, the
 *   chunk's stamp is cleared). *addr receives its address, *fresh how many
 *   of its pages were not released already (a whole free huge page may be).
 *   With hp_pages set, whole free huge pages come first, and huge pages
 *   backed whole (keep_all: every one, as under THP "always"; else those
 *   the scavenger collapsed, while at least half of it is in use) are
 *   never split, unless the chunk has fewer
 *   than split_below pages allocated: then any run is a candidate (a
 *   sparse chunk's huge pages are worth less than its free memory).
 *   Releasing part of a collapsed huge page counts a split.
 * scav_commit_locked: free the reserved run again, as released pages if
 *   `released`, else as resident ones (the kernel refused the madvise).
 * resident_pages_locked: pages of the heap that may be resident.
 */
size_t pageheap_scav_next(struct pa_pageheap *h, size_t below, uint32_t min_age, size_t *recent);
size_t pageheap_prev_chunk_locked(const struct pa_pageheap *h, size_t below);
unsigned pageheap_scav_reserve_locked(struct pa_pageheap *h, size_t ci, int force,
                                      unsigned hp_pages, int keep_all, unsigned split_below,
                                      unsigned max_pages, uintptr_t *addr, unsigned *fresh);
void pageheap_scav_commit_locked(struct pa_pageheap *h, uintptr_t addr, unsigned npages,
                                 int released);

/*
 * Collapse support (the scavenger backs dense huge pages; scavenger.h).
 * collapse_find_locked: going down from chunk *cursor (exclusive; SIZE_MAX:
 *   the top), at most max_chunks heap chunks, the first that has huge
 *   pages (h->hp_pages long) that are dense (chunk_dense_huge, min_alloc),
 *   not huge yet, and were dense when the previous call found them too
 *   (each call records what it finds dense in the chunks it looks at, and
 *   forgets a huge page that is no longer dense), and not split since a
 *   collapse while dense throughout, in the heap's split_epoch (chunk.h's
 *   split_seen): their mask (bit k: the k-th of the chunk), *base the
 *   chunk's address, *cursor that chunk. 0: none; *cursor is where the
 *   search stopped, SIZE_MAX when it passed the bottom of the heap.
 * collapse_done_locked: the huge page at addr was collapsed: it counts as
 *   huge from now, unless a page of it was released meanwhile (then 0).
 */
unsigned pageheap_collapse_find_locked(struct pa_pageheap *h, size_t *cursor, size_t max_chunks,
                                       unsigned min_alloc, uintptr_t *base);
int pageheap_collapse_done_locked(struct pa_pageheap *h, uintptr_t addr);

static inline size_t pageheap_resident_pages_locked(const struct pa_pageheap *h)
{
	return h->mapped_pages - h->scav_pages;
}

/* After dropping the heap lock on an allocation path: run the memory-limit
 * hook if that allocation pushed resident memory past the limit. */
static inline void pageheap_after_alloc(struct pa_pageheap *h)
{
	if (__builtin_expect(__atomic_load_n(&h->pressure, __ATOMIC_RELAXED), 0) &&
	    h->on_pressure != NULL)
		h->on_pressure(h->pressure_arg);
}

/* Add [base, base + npages pages) to the heap as free, released memory.
 * base and the size must be chunk-aligned and inside the window and not
 * already heap. Commits the metadata that covers it. 0, or -1 (ENOMEM). */
int pageheap_grow_range_locked(struct pa_pageheap *h, uintptr_t base, size_t npages);
int pageheap_grow_range(struct pa_pageheap *h, uintptr_t base, size_t npages);

/* The chunk that holds address addr (which must be inside the heap). */
static inline struct pa_chunk *pageheap_chunk(const struct pa_pageheap *h, uintptr_t addr)
{
	size_t ci = (addr - h->window_base) >> PA_CHUNK_SHIFT;
	return &h->chunks[ci >> PA_CHUNK_L2_BITS][ci & (PA_CHUNK_L2_COUNT - 1)];
}

/* Does addr lie in a huge page the scavenger collapsed (h->hp_pages long)?
 * With split, one that does stops counting as huge and counts a split: the
 * caller is about to release pages inside it. addr in the heap; lock held. */
int pageheap_huge_at_locked(struct pa_pageheap *h, uintptr_t addr, int split);

/* Is addr inside a heap range? (binary search; lock held) */
int pageheap_contains_locked(const struct pa_pageheap *h, uintptr_t addr);

/* Check invariants 1-4; returns 0 or the number of violations, writing a
 * line about the first few to stderr. For tests and debug builds. */
size_t pageheap_verify(struct pa_pageheap *h);

/* Bytes of committed summary and chunk metadata (derived from the ranges). */
size_t pageheap_metadata_bytes_locked(const struct pa_pageheap *h);

#endif
