/*
 * heap.h — heaps of the program's own (pa_heap_new): objects counted apart,
 * under a limit of their own, and freed all at once (pa_heap_destroy), as
 * mimalloc's heaps and jemalloc's arenas are.
 *
 * A heap owns small-object spans of its own, per size class, and large
 * objects of its own (large_span_new), taken from the page heap like the
 * default heap's and found through the page map like them, under one lock
 * per heap. No thread cache holds its objects: each malloc and free of a
 * heap's object takes the heap's lock (docs/design.md, heaps: what that
 * costs against mimalloc's and jemalloc's).
 *
 * pa_free finds a heap's objects without a new instruction on its fast
 * path: a heap's span has fbump 0 for its whole life, so the fast path's
 * bump check fails and sends the object to the slow path (free_other),
 * which checks it like any block and then reads the span's mark (span.h:
 * dirty is PA_SPAN_HEAPS, heap_id names the heap) and calls heap_free. The
 * same mark sends a heap's object from realloc, free_sized and
 * malloc_usable_size to its heap.
 *
 * Every span of a heap is on one of its lists, linked through the spans'
 * next/prevnext: per class the spans with a free object (partial), the
 * full ones (full, per class too), and the large objects (large).
 * pa_heap_destroy walks
 * the lists, unmapping each span from the page map and giving its pages to
 * the page heap (where the scavenger releases them), so it takes time in
 * proportion to spans and large objects, not objects; a later pa_free of
 * one of its objects finds no span (or another block) and is reported like
 * any foreign pointer. pa_heap_delete hands the spans over instead: small
 * ones to their central lists (central_adopt), large ones to the default
 * heap's counts (large_adopt), their marks cleared, so their live objects
 * stay valid and go through the default heap's paths from then on.
 *
 * Heap structs live in one table of HEAP_MAX slots, mapped at the first
 * pa_heap_new and never unmapped: a heap_id is a slot's index, a handle is
 * checked against the table (a destroyed heap's handle names a slot that
 * is not live: reported), and a thread that read a span's mark just before
 * the heap went takes a lock that still exists, finds the mark gone, and
 * frees the object into the default heap.
 *
 * Lock order: the registry lock, then a heap's lock, then a central lock
 * (central_adopt) or the page heap's locks (pages.h).
 */
#ifndef PA_HEAP_H
#define PA_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "lock.h"
#include "sizeclass_table.h"

struct pa_span;
struct pa_span_spares;
struct pa_heap_stats;

/* Heaps at once: jemalloc's arena indices stop at 4095 too. */
#define HEAP_MAX 4096u

struct pa_heap {
	pa_lock lock;
	uint32_t id; /* its slot in the table (span.h: heap_id); set once */
	/* Under lock (live: also read with relaxed atomics by heap_check). */
	int live;                                   /* 1 from heap_new to destroy/delete */
	struct pa_span *partial[PA_SC_NUM_CLASSES]; /* spans with a free object */
	struct pa_span *full[PA_SC_NUM_CLASSES];    /* spans with none */
	/* Per class, for the defrag contract (central.h's rule): partial
	 * spans, and their objects handed out. */
	uint32_t npartial[PA_SC_NUM_CLASSES];
	uint32_t partial_inuse[PA_SC_NUM_CLASSES];
	struct pa_span *large;                  /* large objects */
	size_t spans, large_objects;            /* on those lists */
	size_t page_bytes;                      /* their pages, in bytes */
	size_t live_bytes, live_objects;        /* objects handed out, not freed */
	uint64_t allocs, frees, limit_failures; /* over the heap's life */
	size_t limit;                           /* page_bytes may not pass it; 0: none */
	int numa_node; /* the page heap its new pages come from (pages.h), -1: the CPU's */
	struct pa_heap *next_free; /* the registry's free slots */
} __attribute__((aligned(64)));

/* A new empty heap, or NULL (errno = ENOMEM: out of memory, or HEAP_MAX
 * heaps live). */
struct pa_heap *heap_new(void);

/* h as a live heap, or the one line "pagealloc: FUNC(H): ..." and abort. */
struct pa_heap *heap_check(const void *h, const char *func);

/* The heap of marked span s (span_heaps). */
struct pa_heap *heap_of(const struct pa_span *s);

/* An object of class cls (its second word cleared), or NULL with errno
 * ENOMEM (out of memory) or EDQUOT (over h's limit: the caller reports
 * ENOMEM, but does not try to make room). sp: the calling thread's spare
 * span records (span.h), or NULL. */
void *heap_alloc_small(struct pa_heap *h, unsigned cls, struct pa_span_spares *sp);

/* A large block of n bytes (large_size_ok) at an `align`-aligned address
 * (with zero, reading as zero), or NULL (errno as heap_alloc_small's). */
void *heap_alloc_large(struct pa_heap *h, size_t n, size_t align, int zero,
                       struct pa_span_spares *sp);

/* Free checked block p of marked span s into its heap: 1, or 0 when s is
 * no heap's any more (deleted since the caller read the mark: the caller
 * frees p into the default heap). A block already free is reported as a
 * double free under FUNC's name. */
int heap_free(struct pa_span *s, void *p, const char *func, struct pa_span_spares *sp);

/*
 * The defrag contract within heap h (pagealloc.h: pa_heap_defrag_*), as the
 * central lists answer it for the default heap (central.h): is live block
 * p of h's small span s worth moving (s partial, at most 12.5% fuller than
 * h's partial spans of its class on average, and another of them at least
 * as full)? heap_defrag_take: an object of class cls from the fullest of
 * h's partial spans of that class (among the first few listed) other than
 * `from` and at least as full as `from`; NULL when there is none (with
 * `from` NULL, a new span: NULL then is errno ENOMEM or EDQUOT).
 */
int heap_defrag_hint(struct pa_heap *h, struct pa_span *s);
void *heap_defrag_take(struct pa_heap *h, unsigned cls, struct pa_span *from,
                       struct pa_span_spares *sp);

/* Is s's block p one that a block of n bytes fits in, where it is? */
int heap_fits(const struct pa_span *s, size_t n);

/* pa_heap_destroy and pa_heap_delete (h checked); h's slot is free after.
 * Destroy gives the records back to their pools in batches (span_delete_n);
 * delete retires empty spans' records into sp. */
void heap_destroy(struct pa_heap *h);
void heap_delete(struct pa_heap *h, struct pa_span_spares *sp);

void heap_stats(struct pa_heap *h, struct pa_heap_stats *st);
void heap_set_limit(struct pa_heap *h, size_t bytes);
/* pa_heap_set_numa_node (h checked): 0, or -1 (EINVAL: no such node). */
int heap_set_numa_node(struct pa_heap *h, int node);

/* The registry's and every live heap's locks around fork. */
void heap_fork(enum pa_fork_phase phase);

#endif
