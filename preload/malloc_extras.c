/*
 * malloc_extras.c — the rest of glibc's <malloc.h> for the preload library:
 * mallinfo2, mallinfo, mallopt and malloc_stats, in terms of the pa_ API.
 * (malloc_trim is an alias of pa_malloc_trim: preload/malloc_names.c.)
 *
 * mallinfo2 describes the heap in glibc's terms, where memory from mmap'ed
 * chunks is counted apart from the arenas: arena + hblkhd is everything
 * taken from the OS, uordblks + hblkhd everything in use, and
 * uordblks + fordblks == arena. Our large objects (more than
 * PA_MALLOC_MAX_SMALL bytes, whole pages) play the mmap'ed chunks:
 *
 *   arena     heap_sys - large_bytes     heap memory obtained from the OS,
 *                                        large objects' pages excluded
 *   ordblks   0                          (free chunks: no such thing here)
 *   smblks    0                          (fastbin chunks: none)
 *   hblks     large_objects              live large objects
 *   hblkhd    large_bytes                their pages, in bytes
 *   usmblks   0                          (always 0 in glibc too)
 *   fsmblks   cached_bytes               free objects in thread caches, the
 *                                        fastbins' counterpart (in fordblks)
 *   uordblks  heap_alloc - large_bytes   bytes in live small objects
 *                                        (their size-class size)
 *   fordblks  arena - uordblks           free: pages never handed out or
 *                                        released (heap_idle) and free object
 *                                        slots in spans, thread caches included
 *   keepcost  0                          (glibc: top chunk malloc_trim could
 *                                        release; pa_malloc_trim releases any
 *                                        free page, there is no top)
 *
 * mallinfo has int fields: each is the mallinfo2 figure clamped to INT_MAX
 * (glibc lets them wrap).
 *
 * mallopt accepts every parameter and returns 1 (success), changing
 * nothing: glibc's knobs (M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD,
 * M_MMAP_MAX, M_ARENA_MAX, M_ARENA_TEST, M_PERTURB, M_MXFAST, ...) describe
 * mechanisms this allocator does not have. Its own settings are
 * PAGEALLOC_CONF and pa_config_set (include/pagealloc.h).
 */
#include <limits.h>
#include <malloc.h>
#include <unistd.h>

#include "pagealloc.h"

#define PA_EXPORT __attribute__((visibility("default")))

static struct mallinfo2 mallinfo2_fill(void)
{
	struct pa_malloc_stats ms;
	struct mallinfo2 mi = {0};
	if (pa_malloc_stats(&ms) != 0)
		return mi;
	mi.arena = ms.heap_sys - ms.large_bytes;
	mi.hblks = ms.large_objects;
	mi.hblkhd = ms.large_bytes;
	mi.fsmblks = ms.cached_bytes;
	mi.uordblks = ms.heap_alloc - ms.large_bytes;
	mi.fordblks = mi.arena - mi.uordblks;
	return mi;
}

PA_EXPORT struct mallinfo2 mallinfo2(void)
{
	return mallinfo2_fill();
}

static int clamp_int(size_t v)
{
	return v > (size_t)INT_MAX ? INT_MAX : (int)v;
}

PA_EXPORT struct mallinfo mallinfo(void)
{
	struct mallinfo2 m2 = mallinfo2_fill();
	struct mallinfo mi = {
	    .arena = clamp_int(m2.arena),
	    .ordblks = clamp_int(m2.ordblks),
	    .smblks = clamp_int(m2.smblks),
	    .hblks = clamp_int(m2.hblks),
	    .hblkhd = clamp_int(m2.hblkhd),
	    .usmblks = clamp_int(m2.usmblks),
	    .fsmblks = clamp_int(m2.fsmblks),
	    .uordblks = clamp_int(m2.uordblks),
	    .fordblks = clamp_int(m2.fordblks),
	    .keepcost = clamp_int(m2.keepcost),
	};
	return mi;
}

PA_EXPORT int mallopt(int param, int value)
{
	(void)param;
	(void)value;
	return 1;
}

/* glibc prints its arenas to standard error; we print the heap's story. */
PA_EXPORT void malloc_stats(void)
{
	pa_malloc_stats_print(STDERR_FILENO);
}
