/*
 * large.c — large objects: allocation, release, the per-thread large slots
 * and the large stash (large.h explains them).
 *
 * Lock order: a page count's stash lock, alone (a push or a pop), then the
 * page heap's locks (pages.h): spans leave the stash under its lock and go
 * back to the page heap after it is released. The slots take no lock.
 */
#include <string.h>

#include "large.h"
#include "lock.h"
#include "pagemap.h"
#include "pages.h"
#include "span.h"
#include "stash.h"
#include "vg.h"

size_t large_held_objects, large_held_pages;

/* The large stash (large.h): per page count, under its own lock, the spans
 * oldest first, and the fewest held since the last decay (stash.h). A lock
 * (and cache line) per page count. */
static struct large_stash {
	pa_lock lock;
	uint32_t n, low;
	void *span[LARGE_STASH_MAX];
} __attribute__((aligned(64))) large_stash[LARGE_STASH_PAGES + 1];

/* Held by a drain from before its cut to after its last release: spans on
 * their way to the page heap are neither stashed nor given back, and the
 * stats (large_counts_lock) must not read them as live objects. */
static pa_lock drain_lock;

/* Count large objects and pages made (positive) or given back (negative)
 * by the calling thread: in its slots' deltas, or in the shared counters
 * when it has none (ls NULL). */
static inline void large_count(struct pa_large_slots *ls, int64_t objects, int64_t pages)
{
	if (ls == NULL) {
		__atomic_add_fetch(&large_held_objects, (size_t)objects, __ATOMIC_RELAXED);
		__atomic_add_fetch(&large_held_pages, (size_t)pages, __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&ls->objects_delta, ls->objects_delta + objects, __ATOMIC_RELAXED);
	__atomic_store_n(&ls->pages_delta, ls->pages_delta + pages, __ATOMIC_RELAXED);
}

/* ---- the large stash --------------------------------------------------------- */

/* Keep freed large span s (alloc bit 0 clear) in the stash (1), or not (0:
 * the caller releases it). */
static int stash_put(struct pa_span *s)
{
	size_t np = s->npages;
	if (np > LARGE_STASH_PAGES)
		return 0;
	struct large_stash *st = &large_stash[np];
	lock_acquire(&st->lock);
	int ok = st->n < stash_cap_of(np * PA_PAGE_SIZE, LARGE_STASH_MAX);
	if (ok)
		stash_push(st->span, &st->n, s);
	lock_release(&st->lock);
	return ok;
}

/* A stashed large span of exactly npages pages, marked live, or NULL. */
static struct pa_span *stash_take(size_t npages)
{
	if (npages > LARGE_STASH_PAGES ||
	    __atomic_load_n(&large_stash[npages].n, __ATOMIC_RELAXED) == 0)
		return NULL;
	struct large_stash *st = &large_stash[npages];
	struct pa_span *s = NULL;
	lock_acquire(&st->lock);
	if (st->n != 0)
		s = stash_pop(st->span, &st->n, &st->low);
	lock_release(&st->lock);
	/* Live again: after the lock, as the bit's line is likely in the cache
	 * of the thread that freed the block (a miss not to take under it). */
	if (s != NULL)
		span_bit_set(s, 0, 1);
	return s;
}

void large_stashed(size_t *spans, size_t *pages)
{
	*spans = *pages = 0;
	for (size_t np = 1; np <= LARGE_STASH_PAGES; np++) {
		size_t n = __atomic_load_n(&large_stash[np].n, __ATOMIC_RELAXED);
		*spans += n;
		*pages += n * np;
	}
}

/* The page heap's work after the stash's lock is released. */
size_t large_stash_drain(int all, struct pa_large_slots *ls, struct pa_span_spares *sp)
{
	void *out[LARGE_STASH_MAX];
	size_t moved = 0;
	lock_acquire(&drain_lock);
	for (size_t np = 1; np <= LARGE_STASH_PAGES; np++) {
		struct large_stash *st = &large_stash[np];
		if (__atomic_load_n(&st->n, __ATOMIC_RELAXED) == 0)
			continue;
		lock_acquire(&st->lock);
		uint32_t n = stash_cut_oldest(st->span, &st->n, &st->low, all, out);
		lock_release(&st->lock);
		for (uint32_t k = 0; k < n; k++) /* the oldest first */
			large_release(out[k], ls, sp);
		moved += n;
	}
	lock_release(&drain_lock);
	return moved;
}

void large_counts_lock(int take)
{
	if (take)
		lock_acquire(&drain_lock);
	else
		lock_release(&drain_lock);
}

void large_fork(enum pa_fork_phase phase)
{
	switch (phase) {
	case PA_FORK_PREPARE:
		lock_acquire(&drain_lock);
		for (unsigned np = 1; np <= LARGE_STASH_PAGES; np++)
			lock_acquire(&large_stash[np].lock);
		break;
	case PA_FORK_PARENT:
		for (unsigned np = LARGE_STASH_PAGES; np > 0; np--)
			lock_release(&large_stash[np].lock);
		lock_release(&drain_lock);
		break;
	case PA_FORK_CHILD:
		for (unsigned np = 1; np <= LARGE_STASH_PAGES; np++)
			lock_init(&large_stash[np].lock);
		lock_init(&drain_lock);
		break;
	}
}

/* ---- a thread's large slots --------------------------------------------------- */

/* A large span of npages .. npages + npages / 8 pages from ls (no longer
 * marked cached), or NULL. */
static struct pa_span *slots_take(struct pa_large_slots *ls, size_t npages)
{
	if (ls == NULL)
		return NULL;
	for (unsigned k = ls->n; k-- > 0;) {
		struct pa_span *s = ls->span[k];
		if (!large_pages_fit(s->npages, npages))
			continue;
		large_slot_remove(ls, k);
		span_bit_set(s, 0, 1);
		return s;
	}
	return NULL;
}

void large_keep(struct pa_span *s, struct pa_large_slots *ls, struct pa_span_spares *sp)
{
	while (ls->n > 0 &&
	       (ls->n == PA_LARGE_SLOTS || ls->pages + s->npages > PA_LARGE_SLOTS_MAX_PAGES)) {
		/* Make room: the oldest goes to the large stash, for any
		 * thread, or back to the page heap. */
		struct pa_span *old = large_slot_remove(ls, 0);
		if (!stash_put(old))
			large_release(old, ls, sp);
	}
	large_slot_append(ls, s);
}

void large_give_back_idle(struct pa_large_slots *ls, struct pa_span_spares *sp)
{
	if (ls->misses == ls->misses_seen)
		return; /* the waiting blocks served every large malloc */
	ls->misses_seen = ls->misses;
	uint32_t kept = 0, pages = 0;
	for (uint32_t k = 0; k < ls->n; k++) {
		struct pa_span *s = ls->span[k];
		if (s->gave_epoch == ls->misses) {
			ls->span[kept++] = s;
			pages += (uint32_t)s->npages;
		} else {
			large_release(s, ls, sp);
		}
	}
	__atomic_store_n(&ls->n, kept, __ATOMIC_RELAXED);
	__atomic_store_n(&ls->pages, pages, __ATOMIC_RELAXED);
}

void large_slots_release(struct pa_large_slots *slots, struct pa_large_slots *ls,
                         struct pa_span_spares *sp)
{
	for (unsigned k = 0; k < slots->n; k++)
		large_release(slots->span[k], ls, sp);
	__atomic_store_n(&slots->n, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&slots->pages, 0, __ATOMIC_RELAXED);
}

void large_slots_fold(struct pa_large_slots *ls)
{
	__atomic_add_fetch(&large_held_objects, (size_t)ls->objects_delta, __ATOMIC_RELAXED);
	__atomic_add_fetch(&large_held_pages, (size_t)ls->pages_delta, __ATOMIC_RELAXED);
	__atomic_store_n(&ls->objects_delta, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ls->pages_delta, 0, __ATOMIC_RELAXED);
}

/* ---- allocation and release ------------------------------------------------ */

void *large_alloc(size_t n, size_t align, int zero, struct pa_large_slots *ls,
                  struct pa_span_spares *sp)
{
	size_t npages = large_pages_of(n);
	size_t extra = align > PA_PAGE_SIZE ? (align >> PA_PAGE_SHIFT) - 1 : 0;
	if (npages == 0)
		npages = 1;
	struct pa_span *s = NULL;
	if (extra == 0 && !vg_active() && (s = slots_take(ls, npages)) == NULL)
		s = stash_take(npages);
	if (s == NULL && ls != NULL && ls->n != 0 && n > PA_SC_MAX_SMALL)
		ls->misses++; /* large_give_back_idle */
	if (s != NULL) {
		if (zero)
			memset((void *)span_base(s), 0, n);
		else
			((void **)span_base(s))[1] = NULL; /* its free-key */
		return (void *)span_base(s);
	}
	s = large_span_new(n, align, zero, sp, -1);
	if (s == NULL)
		return NULL;
	large_count(ls, 1, (int64_t)s->npages);
	return (void *)span_base(s);
}

struct pa_span *large_span_new(size_t n, size_t align, int zero, struct pa_span_spares *sp,
                               int node)
{
	size_t npages = large_pages_of(n);
	size_t extra = align > PA_PAGE_SIZE ? (align >> PA_PAGE_SHIFT) - 1 : 0;
	if (npages == 0)
		npages = 1;
	struct pa_span *s = span_new(0, sp);
	if (s == NULL)
		return NULL;
	size_t scav = 0, total = npages + extra;
	uintptr_t raw = pages_alloc_on(node, total, &scav);
	if (raw == 0) {
		span_delete(s, sp);
		return NULL;
	}
	uintptr_t base = PA_ALIGN_UP(raw, align), end = base + npages * PA_PAGE_SIZE;
	if (base > raw)
		pages_free(raw, (base - raw) >> PA_PAGE_SHIFT);
	if (raw + total * PA_PAGE_SIZE > end)
		pages_free(end, (raw + total * PA_PAGE_SIZE - end) >> PA_PAGE_SHIFT);
	span_set_base(s, base);
	s->npages = npages;
	/* class 0: one object, live */
	s->magic = PA_SPAN_LARGE_MAGIC;
	s->bump = 1;
	s->fbump = 1;
	span_bit_set(s, 0, 1);
	if (pagemap_set(base, 1, s) != 0) {
		pages_free(base, npages);
		span_delete(s, sp);
		return NULL;
	}
	/* Pages the kernel just zeroed need no memset: only when all of the
	 * run was released (we do not know which pages were). */
	int zeroed = scav == total && pages_release_zeroes();
	if (vg_active()) {
		VALGRIND_MAKE_MEM_NOACCESS((void *)base, npages * PA_PAGE_SIZE);
		VALGRIND_MAKE_MEM_UNDEFINED((void *)base, 2 * sizeof(void *));
		((void **)base)[1] = NULL;
		vg_block_live((void *)base, n, 0);
		s->vg_req = n;
		if (zero)
			memset((void *)base, 0, n);
		return s;
	}
	if (zero && !zeroed)
		memset((void *)base, 0, n);
	else if (!zeroed)
		((void **)base)[1] = NULL; /* a free-key left by an earlier block here */
	return s;
}

void large_span_drop(struct pa_span *s, struct pa_span_spares *sp)
{
	size_t npages = s->npages;
	uintptr_t base = span_base(s);
	pagemap_set(base, 1, NULL);
	span_delete(s, sp);
	pages_free(base, npages);
}

void large_release(struct pa_span *s, struct pa_large_slots *ls, struct pa_span_spares *sp)
{
	large_count(ls, -1, -(int64_t)s->npages);
	large_span_drop(s, sp);
}

void large_adopt(struct pa_span *s)
{
	large_count(NULL, 1, (int64_t)s->npages);
}

int large_resize(struct pa_span *s, size_t n, struct pa_large_slots *ls)
{
	if (n > (size_t)s->npages * PA_PAGE_SIZE) {
		/* Grow into free pages right after it. */
		if (n > PTRDIFF_MAX || large_pages_of(n) > LARGE_MAX_PAGES)
			return 0;
		size_t want = large_pages_of(n);
		if (!pages_alloc_at(span_base(s) + s->npages * PA_PAGE_SIZE, want - s->npages))
			return 0;
		large_count(ls, 0, (int64_t)(want - s->npages));
		s->npages = want;
		return 1;
	}
	if (n <= PA_SC_MAX_SMALL)
		return 0; /* small now: a class's object, not pages */
	size_t keep = large_pages_of(n);
	if (keep < s->npages) {
		/* Shrink: its tail pages go back. */
		size_t tail = s->npages - keep;
		s->npages = keep;
		large_count(ls, 0, -(int64_t)tail);
		pages_free(span_base(s) + keep * PA_PAGE_SIZE, tail);
	}
	return 1;
}
