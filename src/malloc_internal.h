/*
 * malloc_internal.h — what malloc.c shares with malloc_stats.c and the
 * modules it drives.
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
struct pa_span_spares;
/* Give large span s's pages back to the page heap and drop its record (into
 * sp, the calling thread's spare records, or the pool when NULL). */
void large_release(struct pa_span *s, struct pa_span_spares *sp);

#endif
