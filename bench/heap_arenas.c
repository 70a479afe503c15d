/*
 * heap_arenas.c — an arena-style workload on three allocators' heaps: build
 * a heap of many small objects and some 64 KiB blocks, then free it all at
 * once, round after round (a compiler's per-function arena, a server's
 * per-request heap).
 *
 *   heap-arenas [ROUNDS] [SMALL] [LARGE]     (defaults 7, 1000000, 1000)
 *
 * One source, three programs (bench/malloc.cmake): heap-arenas on
 * pa_heap_new / pa_heap_malloc / pa_heap_destroy; heap-arenas-mimalloc on
 * mi_heap_new / mi_heap_malloc / mi_heap_destroy (Debian's libmimalloc-dev);
 * heap-arenas-jemalloc on an arena of arenas.create, mallocx with
 * MALLOCX_ARENA and MALLOCX_TCACHE_NONE (as pagealloc's heaps, no thread
 * cache: arena.<i>.destroy requires none of its objects be cached) and
 * arena.<i>.destroy (libjemalloc-dev). Small sizes are 16..512 bytes from a
 * fixed generator, the same in every program.
 *
 * Prints one line: the allocator, median build and destroy milliseconds,
 * and resident memory (VmRSS) after the last build and after the last
 * destroy, in MiB. tools/bench-heaps.sh runs the three alternately.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(ARENA_MIMALLOC)
#include <mimalloc.h>
#define NAME "mimalloc"
typedef mi_heap_t *heap_t;
static heap_t heap_make(void)
{
	return mi_heap_new();
}
static void *heap_alloc(heap_t h, size_t n)
{
	return mi_heap_malloc(h, n);
}
static void heap_drop(heap_t h)
{
	mi_heap_destroy(h);
}
#elif defined(ARENA_JEMALLOC)
#include <jemalloc/jemalloc.h>
#define NAME "jemalloc"
typedef unsigned heap_t;
static heap_t heap_make(void)
{
	unsigned a;
	size_t sz = sizeof(a);
	if (mallctl("arenas.create", &a, &sz, NULL, 0) != 0)
		abort();
	return a;
}
static void *heap_alloc(heap_t h, size_t n)
{
	return mallocx(n, MALLOCX_ARENA(h) | MALLOCX_TCACHE_NONE);
}
static void heap_drop(heap_t h)
{
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.destroy", h);
	if (mallctl(name, NULL, NULL, NULL, 0) != 0)
		abort();
}
#else
#include "pagealloc.h"
#define NAME "pagealloc"
typedef pa_heap_t *heap_t;
static heap_t heap_make(void)
{
	return pa_heap_new();
}
static void *heap_alloc(heap_t h, size_t n)
{
	return pa_heap_malloc(h, n);
}
static void heap_drop(heap_t h)
{
	pa_heap_destroy(h);
}
#endif

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double rss_mib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	double kib = 0;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "VmRSS:", 6) == 0)
			kib = strtod(line + 6, NULL);
	if (f != NULL)
		fclose(f);
	return kib / 1024;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 7;
	long small = argc > 2 ? atol(argv[2]) : 1000000, large = argc > 3 ? atol(argv[3]) : 1000;
	double build[64], drop[64], rss_built = 0, rss_dropped = 0;
	if (rounds > 64)
		rounds = 64;
	for (int r = 0; r < rounds; r++) {
		uint32_t x = 12345;
		double t0 = now_ms();
		heap_t h = heap_make();
		for (long i = 0; i < small + large; i++) {
			x = x * 1103515245u + 12345u;
			size_t n = i % (small / large + 1) == 0 && large > 0 ? (size_t)64 << 10
			                                                     : 16 + (x >> 16) % 497;
			char *p = heap_alloc(h, n);
			if (p == NULL)
				abort();
			p[0] = (char)i; /* touched, as an arena's objects are */
		}
		double t1 = now_ms();
		rss_built = rss_mib();
		heap_drop(h);
		double t2 = now_ms();
		rss_dropped = rss_mib();
		build[r] = t1 - t0;
		drop[r] = t2 - t1;
	}
	qsort(build, (size_t)rounds, sizeof(double), cmp);
	qsort(drop, (size_t)rounds, sizeof(double), cmp);
	printf("%-9s build_ms=%.1f destroy_ms=%.3f rss_built_mib=%.1f rss_destroyed_mib=%.1f\n",
	       NAME, build[rounds / 2], drop[rounds / 2], rss_built, rss_dropped);
	return 0;
}
