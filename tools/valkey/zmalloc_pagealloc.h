/*
 * zmalloc_pagealloc.h: libpagealloc as the allocator of a Valkey server.
 *
 * tools/valkey/build-valkey.sh copies this file and zmalloc_pagealloc.c into a
 * Valkey checkout's src/ and makes zmalloc.h include this header when the
 * server is built with `make MALLOC=pagealloc` (which defines USE_PAGEALLOC).
 * It gives zmalloc what it asks of an allocator:
 *
 *   - ZMALLOC_LIB, the name INFO's mem_allocator shows ("libpagealloc-X.Y.Z");
 *   - zmalloc_size(p) from pa_malloc_usable_size (HAVE_MALLOC_SIZE: no size
 *     prefix in front of each allocation);
 *   - HAVE_DEFRAG: active defragmentation runs on libpagealloc's defrag
 *     contract (pa_defrag_hint, pa_defrag_malloc, pa_defrag_free).
 *
 * The defrag side is the five functions below, named and shaped as Valkey
 * 8.1's allocator interface (src/allocator_defrag.h there) names them, so a
 * port to 8.1 is zmalloc_pagealloc.c plus one #elif in allocator_defrag.c.
 * The fetched snapshot predates that interface: zmalloc_pagealloc.c also
 * defines the names its defrag.c and zmalloc.c call (je_get_defrag_hint,
 * zmalloc_get_allocator_info, jemalloc_purge, set_jemalloc_bg_thread) on top
 * of the five.
 */
#ifndef ZMALLOC_PAGEALLOC_H
#define ZMALLOC_PAGEALLOC_H

#include <pagealloc.h>
#include <stddef.h>

/* build-valkey.sh passes the library's version (CMakeLists.txt's project
 * VERSION) as -DPAGEALLOC_VERSION=X.Y.Z: a pp-number that __xstr spells. */
#ifndef PAGEALLOC_VERSION
#define PAGEALLOC_VERSION unknown
#endif
#define ZMALLOC_LIB ("libpagealloc-" __xstr(PAGEALLOC_VERSION))

#define HAVE_MALLOC_SIZE 1
#define zmalloc_size(p) pa_malloc_usable_size(p)

#define HAVE_DEFRAG

/* Valkey 8.1's allocator interface. 0 when the allocator can defragment. */
int allocatorDefragInit(void);
/* An allocation of `size` bytes from the fullest partial span of its class,
 * bypassing every cache: the new home of a block being moved. */
__attribute__((malloc)) void *allocatorDefragAlloc(size_t size);
/* The moved block's old copy, freed straight to its span (bypassing every
 * cache, so that the next allocation does not hand the same slot back).
 * `size` is the caller's figure; libpagealloc finds the size itself. */
void allocatorDefragFree(void *ptr, size_t size);
/* Bytes of free slots inside partial small-object spans: what a complete
 * defragmentation could give back (INFO's allocator_frag_bytes). */
unsigned long allocatorDefragGetFragSmallbins(void);
/* 1 when moving ptr now would help its span drain, else 0. */
int allocatorShouldDefrag(void *ptr);

/* MEMORY MALLOC-STATS: libpagealloc's heap story (pa_malloc_stats_print),
 * handed to write_cb in NUL-terminated pieces, as je_malloc_stats_print
 * does. */
void pagealloc_stats_print(void (*write_cb)(void *, const char *), void *cbopaque);

#endif /* ZMALLOC_PAGEALLOC_H */
