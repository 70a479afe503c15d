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
	/* Bit k: the chunk's k-th huge page was collapsed (MADV_COLLAPSE) by
	 * the scavenger and not released in part since: the kernel backs it
	 * with one huge page. Under the heap lock. */
	uint8_t huge;
	/* Bit k: the scavenger's last pass over the chunk found its k-th huge
	 * page dense (and not huge). A huge page is collapsed only when two
	 * passes in a row, a second apart at least, find it dense: a region a
	 * program fills and frees at once is never collapsed. Under the heap
	 * lock. */
	uint8_t dense_seen;
	/* Bit k: the chunk's k-th huge page was split (pages released inside
	 * it) after a collapse, and every pass since found it dense: it is not
	 * collapsed again until a pass finds it not dense, or the heap's
	 * split_epoch moves on (the scavenger's, every 30 s). A program whose
	 * spans keep free objects in a dense region (the sweep releases their
	 * pages) would otherwise have it copied into a huge page and split
	 * again every few seconds. split_epoch: the heap's when a bit was last
	 * set. Under the heap lock. */
	uint8_t split_seen, split_epoch;
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

/*
 * The highest-addressed run of free, unreleased pages the scavenger should
 * release next, at most max_pages long; 0 if none. With hp_pages (the huge
 * page size in heap pages; 0: plain runs) and !force, huge pages that are
 * entirely free come first, each as a whole (the highest first); then free
 * runs inside the huge pages that `keep` does not name (bit k: the k-th
 * huge page of the chunk, which is backed by a huge page and must not be
 * split), each run within one huge page. force (memory limit, explicit
 * release) takes any free run.
 */
unsigned chunk_scav_candidate(const struct pa_chunk *c, int force, unsigned hp_pages, unsigned keep,
                              unsigned max_pages, unsigned *start);

/*
 * Collapse support: the k-th huge page of hp_pages pages (a multiple of 64
 * that divides the chunk) is dense when none of its pages is released and at
 * least min_alloc of them are allocated: backing it whole costs no memory
 * that the heap counts as given back. chunk_dense_huge: the mask of the
 * chunk's dense huge pages that are not huge already.
 */
unsigned chunk_dense_huge(const struct pa_chunk *c, unsigned hp_pages, unsigned min_alloc);

/* The mask of the chunk's huge pages with at least min_alloc pages allocated
 * (0 where hp_pages does not tile the chunk). */
unsigned chunk_used_huge(const struct pa_chunk *c, unsigned hp_pages, unsigned min_alloc);

/* Number of in-use pages in [start, start+n). */
unsigned chunk_count_alloc(const struct pa_chunk *c, unsigned start, unsigned n);

/* Number of scavenged pages in [start, start+n). */
unsigned chunk_count_scav(const struct pa_chunk *c, unsigned start, unsigned n);

#include "bits.h"

/*
 * Mark [start, start+n) in use like chunk_alloc_range, adding the scavenged
 * count to *scav. Returns the pages of the range that were in use already
 * (ORed over its words; 0 when the range was wholly free), which tells the
 * caller whether the incremental summary (chunk_sum_after_alloc) applies.
 * popcount is a libcall without -mpopcnt, so it runs only on released pages.
 */
static inline uint64_t chunk_mark_used(struct pa_chunk *c, unsigned start, unsigned n,
                                       unsigned *scav)
{
	uint64_t clash = 0;
	while (n > 0) {
		unsigned i = start / 64, b = start % 64;
		unsigned k = 64 - b < n ? 64 - b : n;
		uint64_t m = bits_mask(b, k), x = c->alloc[i], s = c->scav[i] & m;
		clash |= x & m;
		bits_store(&c->alloc[i], x | m);
		if (s != 0) {
			*scav += bits_popcount(s);
			c->scav[i] &= ~m;
		}
		start += k;
		n -= k;
	}
	return clash;
}

/* Mark [start, start+n) free (their scav bits stay as they are: zero); returns
 * the pages of it that were free already (ORed over its words; 0 when the
 * range was wholly in use). */
static inline uint64_t chunk_mark_free(struct pa_chunk *c, unsigned start, unsigned n)
{
	uint64_t clash = 0;
	while (n > 0) {
		unsigned i = start / 64, b = start % 64;
		unsigned k = 64 - b < n ? 64 - b : n;
		uint64_t m = bits_mask(b, k), x = c->alloc[i];
		clash |= ~x & m;
		bits_store(&c->alloc[i], x & ~m);
		start += k;
		n -= k;
	}
	return clash;
}

/* ---- incremental summaries ------------------------------------------------
 *
 * Recomputing a chunk's summary from its 512 bits after every change costs
 * hundreds of instructions; a change to one wholly free (or wholly used)
 * range only moves the summary through the free run around that range:
 *
 *   alloc of [s, s+n): start drops to s if the range cut into the free
 *     prefix, end likewise at the top; max is unchanged unless the run that
 *     held the range (found by scanning out from it) was a longest one: if
 *     it was the whole chunk, max is the larger of start and end; otherwise,
 *     and only then, the chunk is summarized from scratch.
 *   free of [s, s+n): the run now holding the range is the only new run;
 *     it is the new start if it reaches page 0, the new end if it reaches
 *     page 511, and max is the larger of it and the old max.
 *
 * The result is exactly chunk_summarize's (test_chunk pins it).
 */

/* Free pages directly below page p (0 <= p <= 512). */
static inline unsigned chunk_free_below(const struct pa_chunk *c, unsigned p)
{
	unsigned run = 0;
	while (p > 0) {
		unsigned w = (p - 1) / 64, b = p - w * 64; /* word w has b pages below p */
		unsigned k = bits_clz(c->alloc[w] << (64 - b));
		if (k < b)
			return run + k;
		run += b;
		p -= b;
	}
	return run;
}

/* Free pages from page p upwards (0 <= p <= 512). */
static inline unsigned chunk_free_from(const struct pa_chunk *c, unsigned p)
{
	unsigned run = 0;
	while (p < PA_CHUNK_PAGES) {
		unsigned b = p % 64, k = bits_ctz(c->alloc[p / 64] >> b);
		if (k < 64 - b)
			return run + k;
		run += 64 - b;
		p += 64 - b;
	}
	return run;
}

/* The free run a change touched, for the levels above (pageheap.c): its
 * length inside the chunk and whether it reaches the chunk's first (lo) and
 * last (hi) page, so that it may continue into the neighbours. */
struct chunk_run {
	unsigned len;
	int lo, hi;
};

/* The free run around [start, lim): the pages of that range plus the free
 * pages next to it. */
static inline struct chunk_run chunk_run_around(const struct pa_chunk *c, unsigned start,
                                                unsigned lim)
{
	unsigned below = chunk_free_below(c, start), above = chunk_free_from(c, lim);
	struct chunk_run r = {below + (lim - start) + above, below == start,
	                      above == PA_CHUNK_PAGES - lim};
	return r;
}

/* The summary of c now that [start, start+n), wholly free under summary
 * old, has been marked in use; *run receives the free run that held it. */
static inline pa_sum chunk_sum_after_alloc(const struct pa_chunk *c, pa_sum old, unsigned start,
                                           unsigned n, struct chunk_run *run)
{
	unsigned os = sum_sub_start(old), om = sum_sub_max(old), oe = sum_sub_end(old);
	unsigned lim = start + n;
	*run = chunk_run_around(c, start, lim);
	unsigned ns = start < os ? start : os;
	unsigned ne = lim > PA_CHUNK_PAGES - oe ? PA_CHUNK_PAGES - lim : oe;
	if (run->lo && run->hi) /* the chunk was free: what is left is start and end */
		return sum_sub_pack(ns, ns > ne ? ns : ne, ne);
	if (run->len == om)
		return chunk_summarize(c); /* a longest run shrank: is another as long? */
	return sum_sub_pack(ns, om, ne);
}

/* The summary of c now that [start, start+n), wholly in use under summary
 * old, has been marked free; *run receives the free run now holding it. */
static inline pa_sum chunk_sum_after_free(const struct pa_chunk *c, pa_sum old, unsigned start,
                                          unsigned n, struct chunk_run *run)
{
	*run = chunk_run_around(c, start, start + n);
	unsigned om = sum_sub_max(old);
	unsigned ns = run->lo ? run->len : sum_sub_start(old);
	unsigned ne = run->hi ? run->len : sum_sub_end(old);
	return sum_sub_pack(ns, run->len > om ? run->len : om, ne);
}

#endif
