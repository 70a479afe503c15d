/*
 * malloc_stats.c — pa_malloc_stats: the heap in the Go runtime's terms.
 *
 * Nothing here is counted on a fast path. Per class, the central list knows
 * its spans and how many objects are out of them (`out`: in thread caches or
 * live); the caches' registry knows how many each cache holds; live objects
 * are the difference. Large objects are counted on their own (slow) paths.
 * The page heap's figures come from pages.h. pa_thread_stats: the calling
 * thread's figures, from its cache (threadstats.h).
 */
#include <errno.h>
#include <string.h>

#include "central.h"
#include "large.h"
#include "layout.h"
#include "pagealloc.h"
#include "pages.h"
#include "sweep.h"
#include "tcache.h"
#include "threadstats.h"

_Static_assert(PA_SC_NUM_CLASSES <= PA_MALLOC_MAX_CLASSES,
               "pa_malloc_stats has room for every class");
_Static_assert(PA_SC_MAX_SMALL == PA_MALLOC_MAX_SMALL, "the public bound matches the table");

int pa_malloc_stats(struct pa_malloc_stats *out)
{
	if (out == NULL) {
		errno = EINVAL;
		return -1;
	}
	memset(out, 0, sizeof(*out));
	size_t held[PA_SC_NUM_CLASSES], slot_objects, slot_pages, ncaches, held_objects, held_pages;
	/* The large counts with no drain between them (large.h). */
	size_t stash_spans, stash_pages;
	large_counts_lock(1);
	tcache_totals(held, &slot_objects, &slot_pages, &ncaches, &held_objects, &held_pages);
	large_stashed(&stash_spans, &stash_pages);
	large_counts_lock(0);
	out->thread_caches = ncaches;
	out->nclasses = PA_SC_NUM_CLASSES;
	size_t small_pages = 0;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++) {
		struct pa_central *c = &central[cls];
		struct pa_class_stats *k = &out->classes[cls];
		lock_acquire(&c->lock);
		size_t spans = c->spans, objects_out = c->out, stashed = central_stashed(cls);
		lock_release(&c->lock);
		struct central_occupancy occ;
		central_occupancy(cls, &occ);
		k->partial_spans = occ.partial;
		k->partial_free = occ.partial_free;
		k->size = pa_sizeclasses[cls].size;
		k->spans = spans;
		k->pages = spans * pa_sizeclasses[cls].pages;
		held[cls] += stashed;
		out->stashed_bytes += stashed * pa_sizeclasses[cls].size;
		k->cached = held[cls] < objects_out ? held[cls] : objects_out;
		k->objects = objects_out - k->cached;
		k->bytes = k->objects * k->size;
		small_pages += k->pages;
		out->live_objects += k->objects;
		out->heap_alloc += k->bytes;
		out->cached_bytes += k->cached * k->size;
	}
	/* Large: objects and pages held by large spans, less those waiting in
	 * thread slots or the large stash (racy while threads free; exact when
	 * they are quiet, whatever the scavenger's drains do meanwhile). */
	slot_objects += stash_spans;
	slot_pages += stash_pages;
	out->stashed_bytes += stash_pages * PA_PAGE_SIZE;
	if (slot_objects > held_objects)
		slot_objects = held_objects;
	if (slot_pages > held_pages)
		slot_pages = held_pages;
	out->large_objects = held_objects - slot_objects;
	out->large_bytes = (held_pages - slot_pages) * PA_PAGE_SIZE;
	out->live_objects += out->large_objects;
	out->heap_alloc += out->large_bytes;
	out->cached_bytes += slot_pages * PA_PAGE_SIZE;
	out->heap_inuse = (small_pages + held_pages) * PA_PAGE_SIZE;
	size_t inuse_pages_outside_caches;
	pages_totals(&out->heap_sys, &out->heap_released, &inuse_pages_outside_caches);
	out->heap_idle = out->heap_sys > out->heap_inuse ? out->heap_sys - out->heap_inuse : 0;
	out->span_released = sweep_released_bytes();
	out->heap_usage = out->heap_sys - out->heap_released - out->span_released;
	out->max_fragmentation = out->heap_inuse - out->heap_alloc;
	return 0;
}

int pa_thread_stats(struct pa_thread_stats *out)
{
	if (out == NULL) {
		errno = EINVAL;
		return -1;
	}
	memset(out, 0, sizeof(*out));
	struct pa_tcache *tc = tcache_real();
	if (tc == NULL)
		return 0;
	struct threadstats_figures f;
	tcache_figures(tc, &f);
	out->allocated = f.alloc_bytes;
	out->freed = f.free_bytes;
	out->requested = f.requested;
	out->mallocs = f.alloc_count;
	out->frees = f.free_count;
	return 0;
}
