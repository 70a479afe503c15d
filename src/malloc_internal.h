/*
 * malloc_internal.h — what malloc.c shares with malloc_stats.c and the
 * modules it drives (fork phases).
 */
#ifndef PA_MALLOC_INTERNAL_H
#define PA_MALLOC_INTERNAL_H

#include <stddef.h>

#include "hidden.h"

/* Large objects that hold pages of the heap (live, or waiting in a thread's
 * large slots), and their pages (atomics): with every thread cache's
 * deltas added (cache_totals), as threads without a cache count here. */
extern size_t large_held_objects PA_HIDDEN, large_held_pages PA_HIDDEN;

struct pa_span;
/* Give large span s's pages back to the page heap and drop its record. */
void large_release(struct pa_span *s);

enum pa_fork_phase { PA_FORK_PREPARE, PA_FORK_PARENT, PA_FORK_CHILD };

/* The span record pool's and the page map's locks around fork. */
void span_fork(enum pa_fork_phase phase);

#endif
