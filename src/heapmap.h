/*
 * heapmap.h — the heap map: every page of the heap, what it is, in a file
 * that `pagealloc map` draws.
 *
 * The picture people have of a heap is the heap's own: chunks of 512 pages
 * in address order, each page free or holding something. The map is that
 * picture as data, written by the process on request (the live file's
 * map_request, live.h: PATH.map beside the live file; or at exit with
 * map_prefix=PREFIX: PREFIX.PID.map, when it has a heap) and drawn by tools/pagealloc_map.py,
 * never here: the process only walks and writes.
 *
 * What a page is, and how the walk knows it (heapmap.c):
 *
 *   free, resident     alloc bit 0, scav bit 0 in its chunk (chunk.h)
 *   free, released     alloc bit 0, scav bit 1: the OS has its memory back
 *   per-CPU cache      alloc bit 1, and free in a CPU's page cache or in
 *                      its queue of frees not yet given back (pagecache.h)
 *   small span         the page map names a span of class cls != 0
 *                      (span.h): its objects in use, from the span's view
 *                      (objects - nfree: an object in a thread cache or a
 *                      central stash counts as in use), and its capacity
 *   large object       the page map names a large span at its first page
 *                      (large.h); the following npages - 1 pages are its
 *   cached large       the same, its object freed and waiting for reuse in
 *                      a thread's large slots or the large stash (alloc
 *                      bit 0 of its span clear): pages a large malloc of
 *                      that size may take, drawn apart from live ones
 *   other              allocated and none of the above: pages of the page
 *                      API's callers (pa_pages_alloc), the central reserve
 *                      under an address-space limit, a span being made or
 *                      retired while the walk passed. Allocator metadata
 *                      never lives in heap pages (meta.h: its own mappings).
 *
 * Consistency: one chunk at a time, under every central lock (small spans
 * are made, changed and retired only under their class's) and the page
 * heap's lock while its bitmaps and the caches' words are copied, so a
 * chunk's small spans agree with its bitmaps. Large spans belong to the
 * thread that allocates or frees their object, which rewrites and recycles
 * their records without a lock: the walk reads one as a snapshot
 * (heapmap.c: span_read), believes it only when its base is the page it
 * was found at and follows it only over pages the page map leaves
 * unmapped, so one changing during the walk is drawn as it was a moment
 * before, never over another span. Between
 * chunks the locks are let go: a walk holds no lock for longer than 512
 * page-map lookups.
 *
 * File (version HEAPMAP_VERSION; native byte order, which is the reader's):
 *
 *     struct heapmap_header                     header_bytes bytes
 *     uint32_t class_size[nclasses]             bytes per object of each size
 *                                               class (0: the large objects'),
 *                                               padded to 8 bytes with zeros
 *     nchunks times, in address order:
 *       uint64_t base                           the chunk's first page
 *       struct heapmap_page page[chunk_pages]   its pages in order
 *
 * The header is written last (its totals are the walk's): a file whose
 * magic is zero is not finished.
 */
#ifndef PA_HEAPMAP_H
#define PA_HEAPMAP_H

#include <stdint.h>

#define HEAPMAP_MAGIC "PAHEAPMP" /* 8 bytes */
#define HEAPMAP_VERSION 1u

enum heapmap_kind {
	HEAPMAP_FREE = 0,       /* free, resident */
	HEAPMAP_RELEASED = 1,   /* free, released to the OS */
	HEAPMAP_CACHED = 2,     /* held by a per-CPU page cache */
	HEAPMAP_SMALL = 3,      /* a span of small objects */
	HEAPMAP_LARGE = 4,      /* a live large object */
	HEAPMAP_LARGE_FREE = 5, /* a freed large object waiting for reuse */
	HEAPMAP_OTHER = 6,      /* allocated, none of the above */
	HEAPMAP_KINDS = 7
};

/* heapmap_page.flags */
#define HEAPMAP_FIRST 1u   /* the first page of a span or large object */
#define HEAPMAP_SAMPLED 2u /* a large object the heap profile sampled (prof.h) */
#define HEAPMAP_HUGE 4u    /* in a huge page the scavenger collapsed (scavenger.h) */

struct heapmap_page {
	uint8_t kind;     /* enum heapmap_kind */
	uint8_t cls;      /* HEAPMAP_SMALL: the size class; else 0 */
	uint8_t flags;    /* HEAPMAP_FIRST, HEAPMAP_SAMPLED, HEAPMAP_HUGE */
	uint8_t pad;      /* 0 */
	uint16_t inuse;   /* HEAPMAP_SMALL: objects of its span out of it */
	uint16_t objects; /* HEAPMAP_SMALL: objects its span holds */
};

struct heapmap_header {
	char magic[8];               /* HEAPMAP_MAGIC */
	uint32_t version;            /* HEAPMAP_VERSION; a reader refuses another */
	uint32_t header_bytes;       /* sizeof(struct heapmap_header) */
	uint32_t page_size;          /* PA_PAGE_SIZE */
	uint32_t chunk_pages;        /* PA_CHUNK_PAGES */
	uint32_t nchunks;            /* chunks that follow */
	uint32_t nclasses;           /* entries of class_size */
	uint64_t pid;                /* the process */
	uint64_t time_ns;            /* CLOCK_REALTIME when the walk ended */
	uint64_t pages[8];           /* pages of each kind (HEAPMAP_KINDS used); pages[7]:
	                              * pages with HEAPMAP_HUGE */
	uint64_t small_objects;      /* objects out of their spans, over all spans */
	uint64_t small_bytes;        /* those objects' bytes (their class sizes) */
	uint64_t large_objects;      /* live large objects */
	uint64_t large_free_objects; /* freed large objects waiting for reuse */
};

_Static_assert(sizeof(struct heapmap_page) == 8, "a page is 8 bytes");
_Static_assert(HEAPMAP_KINDS < 8, "pages[HEAPMAP_KINDS] counts huge pages' pages");
_Static_assert(sizeof(struct heapmap_header) == 144, "the header is 144 bytes");

/* Walk the heap and write its map to path (created 0644, truncated): 0, or
 * -1 with errno set. One walk at a time (the others wait); allocates
 * nothing. */
int heapmap_write(const char *path);

#endif
