/*
 * pa_as_malloc.h — make a program's malloc family calls go to libpagealloc.
 *
 * Force-include it ahead of everything else (`cc -include bench/pa_as_malloc.h`,
 * as bench/malloc.cmake does for malloc-pairs): the same source then measures
 * pa_malloc when linked with libpagealloc, and the C library's malloc (or a
 * preloaded jemalloc, tcmalloc, mimalloc) when built without this header.
 *
 * The system headers that declare the malloc family come first, before the
 * renaming macros, so their prototypes keep the C library's names and a later
 * #include of them is a no-op (their include guards are already set). Only
 * calls written in the program are renamed: memory that the C library
 * allocates itself (strdup, asprintf, getline, fopen's buffers) still belongs
 * to the C library's malloc, and freeing it here would hand a foreign pointer
 * to pa_free, which aborts. Programs built this way must not do that.
 */
#ifndef PA_AS_MALLOC_H
#define PA_AS_MALLOC_H

#include <malloc.h>
#include <stdlib.h>

#include <pagealloc.h>

#define malloc pa_malloc
#define free pa_free
#define calloc pa_calloc
#define realloc pa_realloc
#define aligned_alloc pa_aligned_alloc
#define posix_memalign pa_posix_memalign
#define malloc_usable_size pa_malloc_usable_size

#endif
