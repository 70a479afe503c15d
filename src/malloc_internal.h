/*
 * malloc_internal.h — what malloc.c shares with malloc_stats.c and the
 * modules it drives (fork phases).
 */
#ifndef PA_MALLOC_INTERNAL_H
#define PA_MALLOC_INTERNAL_H

#include <stddef.h>

/* Live large objects and their pages (atomics). */
extern size_t large_live_objects, large_live_pages;

enum pa_fork_phase { PA_FORK_PREPARE, PA_FORK_PARENT, PA_FORK_CHILD };

/* The span record pool's and the page map's locks around fork. */
void span_fork(enum pa_fork_phase phase);

#endif
