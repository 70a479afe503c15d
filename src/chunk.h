/*
 * chunk.h — one chunk: 512 pages (4 MiB), its allocation bitmap and its
 * scavenged bitmap.
 *
 * alloc: bit set = page in use (owned by a caller, or held by a per-CPU page
 *        cache). scav: bit set = page released to the OS (its contents are gone
 *        and reading it costs a page fault). A page is exactly one of:
 *        allocated (alloc=1, scav=0), free and resident (0,0), free and
 *        released (0,1). Allocation clears the scav bits of what it takes.
 *
 * Everything here is pure bit arithmetic on one chunk; the caller holds the
 * page heap lock.
 */
#ifndef PA_CHUNK_H
#define PA_CHUNK_H

#include <stdint.h>

#include "layout.h"
#include "summary.h"

struct pa_chunk {
	uint64_t alloc[PA_CHUNK_WORDS];
	uint64_t scav[PA_CHUNK_WORDS];
	/* For each 64-page group: 1 + the CPU whose page cache holds it, or 0.
	 * Lets a deferred free find the cache that owns a group (pagecache.c). */
	uint16_t cached_by[PA_CHUNK_WORDS];
	/* 0: nothing freed since the scavenger last cleared it; otherwise
	 * 1 + the heap's epoch at the chunk's last free. Written under the heap
	 * lock, read without it by the scavenger (atomics). */
	uint32_t free_stamp;
};

#define CHUNK_NOT_FOUND (~0u)

/* The summary (start, max, end of free pages) of a chunk's allocation bitmap. */
pa_sum chunk_summarize(const struct pa_chunk *c);

/*
 * First-fit: the index of the first run of npages free pages at or after page
 * search_idx (all pages below search_idx must be in use), or CHUNK_NOT_FOUND.
 * *first_free receives the index of the first free page at or after
 * search_idx (CHUNK_NOT_FOUND if none): the chunk's new search position.
 */
unsigned chunk_find(const struct pa_chunk *c, unsigned npages, unsigned search_idx,
		    unsigned *first_free);

/* Mark [start, start+n) in use; clear their scav bits; return how many were scavenged. */
unsigned chunk_alloc_range(struct pa_chunk *c, unsigned start, unsigned n);

/* Mark [start, start+n) free. Their scav bits are left as they are (zero). */
static inline void chunk_free_range(struct pa_chunk *c, unsigned start, unsigned n);

/*
 * The highest-addressed run of free, unreleased pages the scavenger should
 * release next, at most max_pages long; 0 if none. With hp_pages (the huge
 * page size in heap pages, 0 when transparent huge pages are off) and !force,
 * only huge pages that are entirely free qualify, and then as a whole, so a
 * huge page that is partly in use is never split; force (memory limit,
 * explicit release) takes any free run.
 */
unsigned chunk_scav_candidate(const struct pa_chunk *c, int force, unsigned hp_pages,
			      unsigned max_pages, unsigned *start);

/* Number of in-use pages in [start, start+n). */
unsigned chunk_count_alloc(const struct pa_chunk *c, unsigned start, unsigned n);

/* Number of scavenged pages in [start, start+n). */
unsigned chunk_count_scav(const struct pa_chunk *c, unsigned start, unsigned n);

#include "bits.h"

static inline void chunk_free_range(struct pa_chunk *c, unsigned start, unsigned n)
{
	bits_clear_range(c->alloc, start, n);
}

#endif
