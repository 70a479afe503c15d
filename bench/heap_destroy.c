/*
 * heap_destroy.c — pa_heap_destroy against freeing a heap's objects one by
 * one: SMALL small objects (16..512 bytes) and LARGE 64 KiB blocks in one
 * heap, then either pa_heap_destroy, or pa_free of each object (and the
 * destroy of the empty heap).
 *
 *   heap-destroy [ROUNDS] [SMALL] [LARGE]     (defaults 7, 1000000, 1000)
 *
 * Prints the median milliseconds of each way and their ratio. The destroy
 * takes time in proportion to the heap's spans and large objects
 * (docs/design.md, heaps).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pagealloc.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Fill a new heap; the objects into objs (when not NULL). */
static pa_heap_t *build(long small, long large, void **objs)
{
	pa_heap_t *h = pa_heap_new();
	uint32_t x = 12345;
	for (long i = 0; i < small + large; i++) {
		x = x * 1103515245u + 12345u;
		size_t n = i % (small / large + 1) == 0 && large > 0 ? (size_t)64 << 10
		                                                     : 16 + (x >> 16) % 497;
		char *p = pa_heap_malloc(h, n);
		if (p == NULL)
			abort();
		p[0] = (char)i;
		if (objs != NULL)
			objs[i] = p;
	}
	return h;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 7;
	long small = argc > 2 ? atol(argv[2]) : 1000000, large = argc > 3 ? atol(argv[3]) : 1000;
	void **objs = malloc((size_t)(small + large) * sizeof(void *));
	double destroy[64], onebyone[64];
	size_t spans = 0, nlarge = 0;
	if (rounds > 64)
		rounds = 64;
	for (int r = 0; r < rounds; r++) {
		/* Alternating, so both see the same state of the page heap. */
		pa_heap_t *h = build(small, large, NULL);
		struct pa_heap_stats st;
		pa_heap_stats(h, &st);
		spans = st.spans;
		nlarge = st.large_objects;
		double t0 = now_ms();
		pa_heap_destroy(h);
		destroy[r] = now_ms() - t0;
		h = build(small, large, objs);
		t0 = now_ms();
		for (long i = 0; i < small + large; i++)
			pa_free(objs[i]);
		pa_heap_destroy(h);
		onebyone[r] = now_ms() - t0;
	}
	qsort(destroy, (size_t)rounds, sizeof(double), cmp);
	qsort(onebyone, (size_t)rounds, sizeof(double), cmp);
	printf(
	    "objects=%ld+%ld spans=%zu large=%zu destroy_ms=%.3f one_by_one_ms=%.1f ratio=%.0f\n",
	    small, large, spans, nlarge, destroy[rounds / 2], onebyone[rounds / 2],
	    onebyone[rounds / 2] / destroy[rounds / 2]);
	free(objs);
	return 0;
}
