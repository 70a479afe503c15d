/*
 * vg.h — telling valgrind's memcheck what malloc does.
 *
 * Under memcheck (RUNNING_ON_VALGRIND and memcheck's preload in
 * LD_PRELOAD, read once at malloc init into vg_on) every block handed out is announced with
 * MALLOCLIKE (its requested size: bytes past it are invalid), every free with FREELIKE (the block
 * becomes NOACCESS), and the allocator's own reads and writes of free
 * objects' link words are bracketed by DEFINED/NOACCESS. So a program
 * linked to libpagealloc, or preloaded with it, gets "definitely lost" with
 * the allocating stack for a leaked block and "invalid read" for a use
 * after free (blocks under 16 bytes are announced as 16: the allocator keeps
 * two link words in every block). In that mode thread caches and large slots are off (every
 * malloc and free takes the slow path, where the requests are) and realloc
 * always moves the block. Span records hold minus their base address
 * (span.h), so no record looks like a pointer to a block.
 *
 * Without Debian's valgrind headers every macro here is empty.
 */
#ifndef PA_VG_H
#define PA_VG_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hidden.h"

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define PA_HAVE_VALGRIND 1
#endif
#endif

#ifndef PA_HAVE_VALGRIND
#define PA_HAVE_VALGRIND 0
#define RUNNING_ON_VALGRIND 0
#define VALGRIND_MALLOCLIKE_BLOCK(p, n, rz, zeroed) ((void)0)
#define VALGRIND_FREELIKE_BLOCK(p, rz) ((void)0)
#define VALGRIND_MAKE_MEM_NOACCESS(p, n) ((void)0)
#define VALGRIND_MAKE_MEM_UNDEFINED(p, n) ((void)0)
#define VALGRIND_MAKE_MEM_DEFINED(p, n) ((void)0)
#define VALGRIND_DISABLE_ERROR_REPORTING ((void)0)
#define VALGRIND_ENABLE_ERROR_REPORTING ((void)0)
#endif

/* 1 when running under valgrind (set once, at malloc init). */
extern int vg_on PA_HIDDEN;

/* Running under valgrind's memcheck (other tools, callgrind included,
 * ignore the requests, and the fast paths stay on): valgrind preloads
 * vgpreload_TOOL-*.so into every process it runs. */
static inline int vg_memcheck_running(void)
{
	if (!RUNNING_ON_VALGRIND)
		return 0;
	const char *pre = getenv("LD_PRELOAD");
	return pre != NULL && strstr(pre, "vgpreload_memcheck") != NULL;
}

static inline int vg_active(void)
{
	return PA_HAVE_VALGRIND && __builtin_expect(vg_on, 0);
}

/* Announce block p of n requested bytes, whose second word the allocator
 * has set to NULL. memcheck is told of at least the two link words (free
 * reads the second, the free-key, before it knows anything), and that word
 * is marked defined; with zeroed, the whole block reads as defined. */
static inline void vg_block_live(void *p, size_t n, int zeroed)
{
	if (!vg_active())
		return;
	size_t links = 2 * sizeof(void *);
	VALGRIND_MALLOCLIKE_BLOCK(p, n < links ? links : n, 0, zeroed);
	VALGRIND_MAKE_MEM_DEFINED((void **)p + 1, sizeof(void *));
}

/* realloc copies a block's usable size, which under memcheck may run past
 * the requested size it announced: copy without reports. */
static inline void vg_copy(void *dst, const void *src, size_t n)
{
	if (vg_active())
		VALGRIND_DISABLE_ERROR_REPORTING;
	memcpy(dst, src, n);
	if (vg_active())
		VALGRIND_ENABLE_ERROR_REPORTING;
}

/* The allocator is about to read or write the link words of free object o. */
static inline void vg_links_open(void *o)
{
	if (vg_active())
		VALGRIND_MAKE_MEM_DEFINED(o, 2 * sizeof(void *));
}

/* ... and is done with them. */
static inline void vg_links_close(void *o)
{
	if (vg_active())
		VALGRIND_MAKE_MEM_NOACCESS(o, 2 * sizeof(void *));
}

#endif
