/*
 * valgrind_alloc.h — the allocator the valgrind_*.c programs call. Built
 * as they are, they call the C library's names (malloc, free, ...), which
 * LD_PRELOAD of libpagealloc-preload.so replaces; built with -DPA_LINKED
 * and linked with libpagealloc, they call pa_malloc and friends directly.
 * Either way memcheck learns of the blocks only through libpagealloc's
 * client requests (src/vg.h): the tests run valgrind with
 * --soname-synonyms=somalloc=nouserintercepts, so that memcheck does not
 * replace the preloaded malloc with its own.
 */
#ifndef VALGRIND_ALLOC_H
#define VALGRIND_ALLOC_H

#include <stdlib.h>

#ifdef PA_LINKED
#include "pagealloc.h"
#define t_malloc pa_malloc
#define t_calloc pa_calloc
#define t_realloc pa_realloc
#define t_free pa_free
#define t_aligned_alloc pa_aligned_alloc
#define t_posix_memalign pa_posix_memalign
#else
#define t_malloc malloc
#define t_calloc calloc
#define t_realloc realloc
#define t_free free
#define t_aligned_alloc aligned_alloc
#define t_posix_memalign posix_memalign
#endif

/* Keeps the compiler from dropping an allocation whose result it can see
 * is unused (GCC removes a malloc/free pair, and a malloc that leaks). */
static inline void escape(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

#endif
