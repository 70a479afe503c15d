/*
 * stats_print.h — the story of the heap (pa_malloc_stats_print) for the
 * other rooms of the API layer: the same text, into memory.
 */
#ifndef PA_STATS_PRINT_H
#define PA_STATS_PRINT_H

#include <stddef.h>
#include <stdint.h>

struct pa_malloc_stats;

/* The report pa_malloc_stats_print writes, into buf[0, cap) (cut at cap,
 * not NUL-terminated): its length. Allocates nothing; takes the heap's
 * locks as pa_malloc_stats does, so call it holding none. */
size_t stats_print_render(char *buf, size_t cap);

/* The small classes' partial spans and the bytes of their free slots
 * (pa_defrag_frag_bytes's figure) summed over ms's classes. */
void stats_partial_totals(const struct pa_malloc_stats *ms, uint64_t *spans, uint64_t *free_bytes);

#endif
