/*
 * stats_print.h — the story of the heap (pa_malloc_stats_print) for the
 * other rooms of the API layer: the same text, into memory.
 */
#ifndef PA_STATS_PRINT_H
#define PA_STATS_PRINT_H

#include <stddef.h>

/* The report pa_malloc_stats_print writes, into buf[0, cap) (cut at cap,
 * not NUL-terminated): its length. Allocates nothing; takes the heap's
 * locks as pa_malloc_stats does, so call it holding none. */
size_t stats_print_render(char *buf, size_t cap);

#endif
