/*
 * sweep.h — what the malloc layer gives back in the background: stashed
 * objects no one took, the pages of span records no one uses, and the free
 * 4 KiB pages inside spans that are partly in use.
 *
 * The scavenger (scavenger.h) releases the page heap's free pages; memory
 * the malloc layer holds beyond them is this file's. At every wake the
 * scavenger calls the malloc layer's hook (malloc.c's, pages_set_sweep),
 * which runs sweep_background:
 *
 *   - every SWEEP_STASH_DECAY_MS, the stashes' decay (sweep_stashes(0)):
 *     batches and large spans the stashes kept unused for a whole period
 *     go to their spans, which may empty and go to the page heap, or to the
 *     page heap (central.h, large.h). While the scavenger holds a steady
 *     heap's free pages (scavenger.h: the hold), the period is the hold's
 *     wait instead: a program that idles between phases takes its batches
 *     back whole rather than carving them again from the spans
 *     (sweep_decay_period);
 *   - unless the heap is busy (the scavenger says so): the span records'
 *     quiet blocks (span_meta_trim), then, while free objects in spans are
 *     a large enough share of the pages in use, a sweep step (sweep_spans)
 *     of a few spans. Spans swept are those an object came back to
 *     scavenge_delay_ms ago, or the hold's wait ago while the scavenger
 *     holds the page heap's free pages and the free objects in spans are
 *     within the same band (sweep_span_age): what a steady heap frees
 *     inside its spans it takes back too, and each page released would be
 *     a fault later and a huge page split. Survivors that pin spans after
 *     a mass free leave far more free inside them, and that goes at
 *     scavenge_delay_ms.
 *
 * A sweep releases the 4 KiB pages inside partly free spans that hold no
 * object out of the span (span.h: relmap), in spans that got an object back
 * long enough ago (span.h: gave_epoch) and were not swept since. The span
 * keeps them: when an object on a released page is handed out again the
 * central list clears its bit, and the first touch faults the page back in
 * as zeroes. pa_malloc_trim sweeps every span at once, and
 * pa_thread_cache_flush empties the stashes (sweep_stashes(1)).
 *
 * Locking: sweeps take turns under a lock of their own (and their cursor
 * with it), taken before any central lock; a span's pages are released
 * under its class's central lock, so no object on them can be handed out
 * meanwhile.
 */
#ifndef PA_SWEEP_H
#define PA_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "lock.h"

struct pa_large_slots;
struct pa_span_spares;

/*
 * Release the 4 KiB pages inside partly free spans that hold no object out
 * of the span (span.h), in spans that got an object back at least min_age
 * epochs (ms) before `now` and were not swept since; at most max_spans
 * spans get a release, from where the previous call stopped. A release
 * inside a huge page the scavenger collapsed splits it, and the page heap
 * counts the split. Returns bytes released.
 */
size_t sweep_spans(uint32_t now, uint32_t min_age, unsigned max_spans);

/* Send stashed large spans to the page heap (large_stash_drain), then the
 * stashed batches of every class to their spans (central_stash_drain): all
 * of them (all != 0), or those the stashes kept unused since the previous
 * call. ls and sp: the calling thread's large slots and spare span
 * records, or NULL. Returns spans and objects moved. */
size_t sweep_stashes(int all, struct pa_large_slots *ls, struct pa_span_spares *sp);

/* What the scavenger's hook does at every wake (the top of this file). */
size_t sweep_background(uint32_t now, uint32_t min_age, int heap_busy, uint32_t hold_ms,
                        struct pa_large_slots *ls, struct pa_span_spares *sp);

/* The stashes' decay period for a scavenger step whose page-heap wait is
 * hold_ms after a scavenge_delay_ms of min_age (sweep_background). */
uint32_t sweep_decay_period(uint32_t min_age, uint32_t hold_ms);

/* The age a span must reach to be swept in such a step, with `spare` bytes
 * of free objects in spans against `inuse` bytes of pages in use: hold_ms
 * where it is past min_age and spare is within the hold's band
 * (scav_within_hold), else min_age (sweep_background). */
uint32_t sweep_span_age(uint32_t min_age, uint32_t hold_ms, size_t spare, size_t inuse);

/* Bytes of span pages the sweep released and no object has touched since. */
size_t sweep_released_bytes(void);

/* The sweeps' lock around fork (taken before every central lock). */
void sweep_fork(enum pa_fork_phase phase);

#endif
