/*
 * A stand-in for Valkey's src/zmalloc.h, for tests/test_valkey_backend.c:
 * what tools/valkey/zmalloc_pagealloc.c needs of it in a server built with
 * USE_PAGEALLOC (the stringifying macros, the allocator branch's header) and
 * the functions of the pre-8.1 server that the backend defines.
 */
#ifndef TEST_VALKEY_ZMALLOC_H
#define TEST_VALKEY_ZMALLOC_H

#include <stddef.h>

#define __xstr(s) __str(s)
#define __str(s) #s

#include "zmalloc_pagealloc.h"

int zmalloc_get_allocator_info(size_t *allocated, size_t *active, size_t *resident,
                               size_t *retained, size_t *muzzy, size_t *frag_smallbins_bytes);
void set_jemalloc_bg_thread(int enable);
int jemalloc_purge(void);
/* Declared by defrag.c in the server. */
int je_get_defrag_hint(void *ptr);

#endif
