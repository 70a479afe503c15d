/*
 * sweep.c — the stashes' decay, and releasing the free pages inside spans
 * (sweep.h).
 */
#include "sweep.h"

#include "bits.h"
#include "central.h"
#include "large.h"
#include "lock.h"
#include "os.h"
#include "pages.h"
#include "scavenger.h"
#include "span.h"
#include "vg.h"

/* The background sweep runs while free objects in spans hold more than
 * 1/SWEEP_SHARE of the pages in use (and at least SWEEP_MIN
 * bytes): below that, releasing them is not worth the huge pages it splits.
 * One step releases pages in at most SWEEP_SPANS spans. */
#define SWEEP_SHARE 32u
#define SWEEP_MIN ((size_t)1 << 20)
#define SWEEP_SPANS 64u
/* How often the stashes give back what they did not use (ms). */
#define SWEEP_STASH_DECAY_MS 250u

/* The 4 KiB pages of s that hold no object out of the span, only objects
 * that were handed out before (never-touched ones may not be resident), and
 * are not released already; lock held. */
static uint32_t sweepable(const struct pa_span *s)
{
	uint32_t m = 0;
	unsigned npg = (unsigned)(s->npages * PA_PAGE_SIZE / PA_SPAN_RELPAGE);
	const unsigned objects = span_objects(s), size = span_size(s);
	for (unsigned j = 0; j < npg; j++) {
		uintptr_t off = (uintptr_t)j * PA_SPAN_RELPAGE;
		unsigned first = (unsigned)(off / size);
		unsigned last = (unsigned)((off + PA_SPAN_RELPAGE - 1) / size);
		if (last >= objects)
			last = objects - 1u;
		if (first > last || last >= s->bump)
			continue; /* tail waste only, or not all handed out yet */
		if (bits_count_range(s->alloc, first, last - first + 1u) == 0)
			m |= (uint32_t)1 << j;
	}
	return m & ~s->relmap;
}

/* Release the pages of m in s, a madvise per run; lock held (an object on
 * them cannot be handed out meanwhile). Returns pages released. */
static unsigned release_pages(struct pa_span *s, uint32_t m, int lazy)
{
	/* pa_free's fast path stops trusting the free-keys before the pages
	 * (and the keys on them) go. */
	span_set_fbump(s, 0);
	uint32_t done = os_release_mask((void *)span_base(s), m, PA_SPAN_RELPAGE, lazy);
	s->relmap |= done;
	span_fbump_update(s);
	return bits_popcount(done);
}

/* Serialises sweeps (and their cursor); taken before any central lock. */
static pa_lock sweep_lock = PA_LOCK_INIT;

size_t sweep_spans(uint32_t now, uint32_t min_age, unsigned max_spans)
{
	static unsigned cursor = 1; /* the class to go on with */
	if (vg_active() || os_page_size() != PA_SPAN_RELPAGE)
		return 0;
	/* Ages in the records' unit (gave_epoch's, span.h), rounded up and
	 * capped at its range: a span is swept once its age, to within one
	 * unit, is min_age. */
	uint32_t age_min =
	    (min_age >> PA_SPAN_AGE_SHIFT) + ((min_age & ((1u << PA_SPAN_AGE_SHIFT) - 1)) != 0);
	if (age_min > UINT16_MAX)
		age_min = UINT16_MAX;
	const uint16_t now_unit = (uint16_t)(now >> PA_SPAN_AGE_SHIFT);
	int lazy = !pages_release_zeroes();
	/* A release inside a huge page the scavenger collapsed splits it: the
	 * page heap is told, so that its count stays the kernel's. */
	const int huge_heap = pages_huge_count() != 0;
	size_t done = 0;
	unsigned spans = 0;
	lock_acquire(&sweep_lock);
	for (unsigned k = 0; k < PA_SC_NUM_CLASSES - 1 && spans < max_spans; k++) {
		struct pa_central *c = &central[cursor];
		lock_acquire(&c->lock);
		for (unsigned b = 0; b < CENTRAL_BUCKETS * (c->dirty != 0); b++)
			for (struct pa_span *s = c->partial[b]; s != NULL && spans < max_spans;
			     s = s->next) {
				if (!s->dirty || (uint16_t)(now_unit - s->gave_epoch) < age_min)
					continue;
				__atomic_store_n(&s->dirty, 0, __ATOMIC_RELAXED);
				c->dirty--;
				uint32_t m = (size_t)s->nfree * span_size(s) < PA_SPAN_RELPAGE
				                 ? 0
				                 : sweepable(s);
				if (m == 0)
					continue;
				unsigned n = release_pages(s, m, lazy);
				/* Counted once the kernel took the release: one
				 * it refused splits nothing. */
				if (huge_heap && n != 0)
					pages_huge_in(span_base(s), s->npages * PA_PAGE_SIZE, 1);
				c->rel_pages += n;
				done += n;
				spans++;
			}
		lock_release(&c->lock);
		if (spans < max_spans)
			cursor = cursor + 1 < PA_SC_NUM_CLASSES ? cursor + 1 : 1;
	}
	lock_release(&sweep_lock);
	return done * PA_SPAN_RELPAGE;
}

/* Bytes of free objects in spans, less what the sweep released (each class
 * under its lock, one at a time). */
static size_t free_in_spans(void)
{
	size_t bytes = 0;
	for (unsigned i = 1; i < PA_SC_NUM_CLASSES; i++) {
		struct pa_central *c = &central[i];
		lock_acquire(&c->lock);
		size_t total = c->spans * pa_sizeclasses[i].objects, out = c->out;
		size_t rel = c->rel_pages * PA_SPAN_RELPAGE;
		lock_release(&c->lock);
		size_t b = total > out ? (total - out) * pa_sizeclasses[i].size : 0;
		bytes += b > rel ? b - rel : 0;
	}
	return bytes;
}

size_t sweep_stashes(int all, struct pa_large_slots *ls, struct pa_span_spares *sp)
{
	size_t moved = large_stash_drain(all, ls, sp);
	return moved + central_stash_drain(all, sp);
}

uint32_t sweep_decay_period(uint32_t min_age, uint32_t hold_ms)
{
	return hold_ms > min_age && hold_ms > SWEEP_STASH_DECAY_MS ? hold_ms : SWEEP_STASH_DECAY_MS;
}

/* The hold for the pages inside spans too (sweep.h). rptest's phases freed
 * and took back 1-4 MiB inside spans every few seconds, each release a
 * fault later and a huge page split (docs/benchmarks.md §22). */
uint32_t sweep_span_age(uint32_t min_age, uint32_t hold_ms, size_t spare, size_t inuse)
{
	return hold_ms > min_age && scav_within_hold(spare, inuse) ? hold_ms : min_age;
}

size_t sweep_background(uint32_t now, uint32_t min_age, int heap_busy, uint32_t hold_ms,
                        struct pa_large_slots *ls, struct pa_span_spares *sp)
{
	/* Stashed batches unused for a decay period go to their spans (which
	 * may empty and go to the page heap, for the scavenger). */
	static uint32_t last_decay;
	if ((uint32_t)(now - last_decay) >= sweep_decay_period(min_age, hold_ms)) {
		last_decay = now;
		sweep_stashes(0, ls, sp);
	}
	if (heap_busy)
		return 0;
	/* Descriptor pages first: cheap to look at, and quiet blocks only. */
	size_t meta = span_meta_trim(0);
	size_t mapped, released, inuse;
	pages_totals(&mapped, &released, &inuse);
	size_t want = inuse / SWEEP_SHARE, spare = free_in_spans();
	if (want < SWEEP_MIN)
		want = SWEEP_MIN;
	if (spare < want)
		return meta;
	return meta + sweep_spans(now, sweep_span_age(min_age, hold_ms, spare, inuse), SWEEP_SPANS);
}

size_t sweep_released_bytes(void)
{
	size_t n = 0;
	for (unsigned i = 1; i < PA_SC_NUM_CLASSES; i++) {
		lock_acquire(&central[i].lock);
		n += central[i].rel_pages;
		lock_release(&central[i].lock);
	}
	return n * PA_SPAN_RELPAGE;
}

void sweep_fork(enum pa_fork_phase phase)
{
	switch (phase) {
	case PA_FORK_PREPARE:
		lock_acquire(&sweep_lock);
		break;
	case PA_FORK_PARENT:
		lock_release(&sweep_lock);
		break;
	case PA_FORK_CHILD:
		lock_init(&sweep_lock);
		break;
	}
}
