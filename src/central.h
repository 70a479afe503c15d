/*
 * central.h — one central list per size class: the spans of that class that
 * have free objects, behind a lock of their own (Go's mcentral).
 *
 * Thread caches (cache.h) take objects from here in batches when they run
 * dry and give batches back when they overflow; frees from any thread reach
 * their span through the page map, so a producer/consumer program returns
 * memory to the span that owns it, whoever frees it. Spans come from the
 * page heap (through the per-CPU page caches: every span is under 16 pages)
 * when no listed span has a free object, and go back to it the moment their
 * last object returns, where the scavenger can release them.
 *
 * Lock order: a central lock, then the page heap's locks (pages.h). No two
 * central locks are held at once except by fork handling, in class order.
 */
#ifndef PA_CENTRAL_H
#define PA_CENTRAL_H

#include <stddef.h>
#include <stdint.h>

#include "lock.h"
#include "sizeclass_table.h"

struct pa_span;

struct pa_central {
	pa_lock lock;
	/* Protected by lock. */
	struct pa_span *partial; /* spans with at least one free object */
	size_t spans;            /* spans of this class */
	size_t out;              /* objects out of their spans: in caches or live */
	size_t rel_pages;        /* 4 KiB pages of its spans released by central_sweep */
	size_t dirty;            /* spans with an object back since their last sweep */
} __attribute__((aligned(64)));

extern struct pa_central central[PA_SC_NUM_CLASSES];

/* Take up to n objects of class cls; they are linked through their first
 * word from *head. Returns how many (0: out of memory, errno = ENOMEM). */
unsigned central_take(unsigned cls, unsigned n, void **head);

/* Give n objects of class cls, linked through their first word, back to
 * their spans. An object whose span says it is free already is reported as
 * a double free (abort). */
void central_give(unsigned cls, void *head, unsigned n);

/*
 * Release the 4 KiB pages inside partly free spans that hold no object out
 * of the span (span.h), in spans that got an object back at least min_age
 * epochs (ms) before `now` and were not swept since; at most max_spans
 * spans get a release, from where the previous call stopped. Returns bytes
 * released. Sweeps take turns (a lock of their own, taken before any
 * central lock).
 */
size_t central_sweep(uint32_t now, uint32_t min_age, unsigned max_spans);

/* The scavenger's hook (pages_set_sweep): a central_sweep step of a few
 * spans, when free objects in spans are a large enough share of the heap's
 * pages in use to be worth splitting huge pages for. */
size_t central_sweep_background(uint32_t now, uint32_t min_age);

/* Bytes of span pages the sweep released and no object has touched since. */
size_t central_released_bytes(void);

/* fork: take every central lock (prepare), release them (parent), or reset
 * them (child). */
void central_lock_all(void);
void central_unlock_all(void);
void central_reset_locks(void);

#endif
