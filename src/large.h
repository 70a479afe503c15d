/*
 * large.h — large objects: blocks of more than PA_SC_MAX_SMALL (32 KiB),
 * each a run of whole pages of its own.
 *
 * A large object comes from the page heap directly (pages.h), as Go and
 * tcmalloc serve theirs: npages pages at a page-aligned address (or, for
 * memalign, at a more aligned one, the pages around it given back), a span
 * record of class 0 (span.h: one object, whose alloc bit 0 is set while it
 * is live, so pa_free's checks serve it unchanged) and one page map entry,
 * for its first page. A freed large object does not go back to the page
 * heap at once: it waits for reuse, its pages still allocated in the heap
 * and its record still mapped, in one of two places.
 *
 *   - The freeing thread's large slots (struct pa_large_slots, in its thread
 *     cache, tcache.h): at most PA_LARGE_SLOTS objects, each at most
 *     PA_LARGE_SLOT_MAX_PAGES, together at most PA_LARGE_SLOTS_MAX_PAGES
 *     (tcmalloc's thread caches serve up to 256 KiB; glibc reuses its top
 *     chunk). A malloc takes the newest slot when it holds exactly as many
 *     pages (no search: a program freeing and allocating one size), else a
 *     slot of npages .. npages + npages / 8 pages. The oldest slot that
 *     makes room for a newer one goes to the large stash, or, over the
 *     stash's bounds, back to the page heap.
 *   - The large stash, per page count up to LARGE_STASH_PAGES (objects of
 *     32 KiB + 1 to 128 KiB): a large span that a thread's full large slots
 *     let go waits there for a large malloc of exactly as many pages in any
 *     thread, which takes it without the page heap, the page map or the
 *     record pool. That is a producer's next 48 KiB buffer when its consumer
 *     frees the last one (wl-prodcons: the heap lock and the per-CPU page
 *     caches were 11% of its CPU). At most LARGE_STASH_MAX spans and
 *     PA_STASH_BYTES of pages per page count (stash.h). Stashed spans the
 *     stash did not need for a while go to the page heap (large_stash_drain,
 *     at the stashes' decay).
 *
 * A waiting span's alloc bit 0 is clear, so a free of its object is a
 * double free, in the slots as in the stash.
 *
 * The functions below take what belongs to the calling thread handed in by
 * their caller (malloc.c, the thread cache): ls, its large slots, and sp,
 * its spare span records (span.h); both NULL while it has no thread cache.
 * Objects and pages made or given back are counted in ls (its deltas) or,
 * with ls NULL, in the shared large_held_objects and large_held_pages.
 *
 * Locking: a thread's slots are written only by that thread, n, pages and
 * the deltas with relaxed atomic stores (the stats read them through the
 * thread caches' registry). Each page count of the stash has a lock of its
 * own (large_fork takes them around fork); with one for all of them, two
 * producer/consumer pairs spent 13% of wl-prodcons's CPU in the stash's
 * take, most of it on that lock. The shared counts are atomics. A large
 * span's record belongs to the thread that allocates or frees its object
 * (or to the stash's lock while stashed).
 */
#ifndef PA_LARGE_H
#define PA_LARGE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hidden.h"
#include "layout.h"
#include "lock.h"
#include "span.h"
#include "vg.h"

#define PA_LARGE_SLOTS 4u
#define PA_LARGE_SLOT_MAX_PAGES 128u  /* 1 MiB */
#define PA_LARGE_SLOTS_MAX_PAGES 256u /* 2 MiB */

#define LARGE_STASH_PAGES 16u
#define LARGE_STASH_MAX 32u

/* The largest run we try for: 32 TiB, what a span's 32-bit page count holds. */
#define LARGE_MAX_PAGES ((size_t)UINT32_MAX)

/* A thread's large slots, and its counts of large objects. */
struct pa_large_slots {
	struct pa_span *span[PA_LARGE_SLOTS]; /* [0, n), oldest first */
	uint32_t n;
	uint32_t pages; /* pages in span[] */
	/* Large mallocs (over 32 KiB) that went to the page heap while span[]
	 * held blocks, none of which fit, and its value at the last give-back
	 * (large_give_back_idle), modulo 2^16. */
	uint16_t misses, misses_seen;
	/* Large objects and their pages this thread made minus those it gave
	 * back (either may be negative): added to large_held_objects and
	 * large_held_pages by the stats and when the thread exits
	 * (large_slots_fold), so a large malloc or free makes no atomic
	 * read-modify-write on a shared counter (that was 7.7% of wl-large's
	 * CPU). */
	int64_t objects_delta, pages_delta;
};

/* Large objects that hold pages of the heap (live, or waiting in a thread's
 * large slots or the stash), and their pages (atomics): with every thread
 * cache's deltas added (tcache_totals), as threads without a cache count
 * here. */
extern size_t large_held_objects PA_HIDDEN, large_held_pages PA_HIDDEN;

/* Pages that hold n bytes. */
static inline size_t large_pages_of(size_t n)
{
	return (n >> PA_PAGE_SHIFT) + ((n & (PA_PAGE_SIZE - 1)) != 0);
}

/* May a request for npages pages be served by a free large block of
 * `have` pages? Up to an eighth more (the large slots' reuse, large.c). A
 * sized free accepts the same sizes for a block. */
static inline int large_pages_fit(size_t have, size_t npages)
{
	return have >= npages && have <= npages + npages / 8;
}

/* May a large block of n bytes at an `align`-aligned address (a power of
 * two) be tried for: n at most PTRDIFF_MAX, its pages and the extra pages
 * of its alignment at most LARGE_MAX_PAGES? */
static inline int large_size_ok(size_t n, size_t align)
{
	size_t extra = align > PA_PAGE_SIZE ? (align >> PA_PAGE_SHIFT) - 1 : 0;
	return n <= PTRDIFF_MAX && large_pages_of(n) <= LARGE_MAX_PAGES && extra <= LARGE_MAX_PAGES;
}

/* Remove and return slot k of ls (later slots move down). */
static inline struct pa_span *large_slot_remove(struct pa_large_slots *ls, uint32_t k)
{
	struct pa_span *s = ls->span[k];
	uint32_t n = ls->n;
	for (uint32_t j = k + 1; j < n; j++)
		ls->span[j - 1] = ls->span[j];
	__atomic_store_n(&ls->n, n - 1, __ATOMIC_RELAXED);
	__atomic_store_n(&ls->pages, ls->pages - (uint32_t)s->npages, __ATOMIC_RELAXED);
	return s;
}

/* Append freed large span s as the newest slot of ls (there is room),
 * marking its one object free, and noting ls's misses so far
 * (large_give_back_idle). */
static inline void large_slot_append(struct pa_large_slots *ls, struct pa_span *s)
{
	uint32_t n = ls->n;
	span_bit_set(s, 0, 0);
	s->gave_epoch = ls->misses;
	ls->span[n] = s;
	__atomic_store_n(&ls->n, n + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&ls->pages, ls->pages + (uint32_t)s->npages, __ATOMIC_RELAXED);
}

/* The newest slot of ls, if it holds exactly the pages of n bytes: taken
 * without a search, marked live, and returned as a block of n bytes (zeroed
 * with zero, else its free-key cleared). NULL otherwise. ls may be a
 * placeholder cache's (no slots, never NULL): malloc.c's fast path. */
static inline void *large_take_newest(struct pa_large_slots *ls, size_t n, int zero)
{
	size_t npages = large_pages_of(n);
	uint32_t k = ls->n;
	if (k == 0 || ls->span[k - 1]->npages != npages)
		return NULL;
	struct pa_span *s = large_slot_remove(ls, k - 1);
	void **base = (void **)span_base(s);
	span_bit_set(s, 0, 1);
	if (zero)
		memset(base, 0, n);
	else
		base[1] = NULL; /* its free-key */
	return base;
}

/* Keep freed large span s in a free slot of ls when there is room without
 * evicting (1), else 0. ls NULL: no slots. */
static inline int large_put_room(struct pa_large_slots *ls, struct pa_span *s)
{
	if (ls == NULL || ls->n == PA_LARGE_SLOTS || s->npages > PA_LARGE_SLOT_MAX_PAGES ||
	    ls->pages + s->npages > PA_LARGE_SLOTS_MAX_PAGES)
		return 0;
	large_slot_append(ls, s);
	return 1;
}

/* May a thread's slots keep freed large span s (large_keep)? A thread
 * without a cache builds one for it (malloc.c); otherwise s goes back to
 * the page heap (large_release). */
static inline int large_slots_may_keep(const struct pa_span *s)
{
	return s->npages <= PA_LARGE_SLOT_MAX_PAGES && !vg_active();
}

/* A large block of n bytes (with zero, reading as zero) at an
 * `align`-aligned address (a power of two): from ls or the stash when one
 * fits and align is at most a page, else new pages and a record from sp;
 * NULL when out of memory (errno is the caller's to set). n and align
 * passed large_size_ok, and malloc is initialised. */
void *large_alloc(size_t n, size_t align, int zero, struct pa_large_slots *ls,
                  struct pa_span_spares *sp);

/* A new large span for a live block of n bytes (with zero, reading as
 * zero) at an `align`-aligned address: new pages, mapped, its record from
 * sp; counted nowhere (large_alloc counts its own; a heap's are the heap's,
 * heap.h). Its pages come from node's page heap (-1: the calling CPU's;
 * pages.h). NULL when out of memory. */
struct pa_span *large_span_new(size_t n, size_t align, int zero, struct pa_span_spares *sp,
                               int node);

/* Unmap large span s, give its pages back to the page heap and its record
 * to sp; counted nowhere (large_release counts). */
void large_span_drop(struct pa_span *s, struct pa_span_spares *sp);

/* Count large span s, made by large_span_new, as one of the default heap's
 * live large objects (a deleted heap's, heap.h). */
void large_adopt(struct pa_span *s);

/* Keep freed (checked) large span s, which large_slots_may_keep, in ls (not
 * NULL) as its newest slot, making room by evicting its oldest slots to
 * the stash or, over the stash's bounds, to the page heap. */
void large_keep(struct pa_span *s, struct pa_large_slots *ls, struct pa_span_spares *sp);

/* Give large span s's pages back to the page heap, unmap it and drop its
 * record (into sp). */
void large_release(struct pa_span *s, struct pa_large_slots *ls, struct pa_span_spares *sp);

/* Make the live large block of s hold n bytes where it is (realloc):
 * growing into free pages right after it, or giving back its tail pages
 * when n is still large. 1, or 0: it must move. */
int large_resize(struct pa_span *s, size_t n, struct pa_large_slots *ls);

/* Release every span in slots (a thread cache being flushed or handed
 * back): ls and sp are the calling thread's, which may be other than the
 * owner of slots (NULL at thread exit). */
void large_slots_release(struct pa_large_slots *slots, struct pa_large_slots *ls,
                         struct pa_span_spares *sp);

/* A new small span took released pages (central.h: central_fresh moved)
 * since the calling thread last looked. If a large malloc of the thread has
 * since found no waiting block that fits (ls->misses moved), give back to
 * the page heap the spans of ls, its large slots, freed before that miss
 * (each notes ls->misses at its free, in gave_epoch), so that the heap's
 * next allocations reuse their pages instead of growing RSS. python3 -c
 * pass: start-up buffers of 32 KiB - 1 MiB, each of a size asked for once,
 * waited in the slots while new spans took fresh pages (15,176 -> 14,664
 * KiB). Blocks that served every large malloc since their free stay,
 * however the heap grows: espresso takes its four 40-56 KiB buffers from
 * the slots each round, and giving them back at each growth cost it 256
 * KiB. A block freed after the last miss keeps its slot, and with it the
 * double-free check of a free that follows its free. The large stash is
 * left to its decay. */
void large_give_back_idle(struct pa_large_slots *ls, struct pa_span_spares *sp);

/* Move ls's deltas into the shared counts (the thread caches' registry
 * lock held, so the stats see them in one place or the other). */
void large_slots_fold(struct pa_large_slots *ls);

/* Spans and pages in the large stash (racy: for the stats). */
void large_stashed(size_t *spans, size_t *pages);

/* Take (take != 0) or release the drains' lock: between the two, no span is
 * on its way from the stash to the page heap, so the held counts and the
 * stash's agree (the stats read both under it, the thread caches' registry
 * lock inside it). */
void large_counts_lock(int take);

/* Send stashed large spans to the page heap: all of them (all != 0), or
 * those the stash kept unused since the previous call (its low-water
 * mark). Returns spans moved. */
size_t large_stash_drain(int all, struct pa_large_slots *ls, struct pa_span_spares *sp);

/* The large stash's locks and the drains' around fork. */
void large_fork(enum pa_fork_phase phase);

#endif
