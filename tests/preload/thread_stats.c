/*
 * thread_stats.c — pa_thread_stats reached through the preload library (a
 * weak reference, as a preloaded program would call it) counts what this
 * thread did through the C library's names: 10 mallocs of 100 bytes, one
 * calloc of 5000, one malloc of 200000 (large), the large one and 4 of the
 * small ones freed. Sizes are usable sizes (malloc_usable_size), the bytes
 * requested what was asked for. Exits 0 when every figure is exact, else 1
 * with a line per figure that is not; 77 (skipped) when the function is
 * missing (the program not preloaded).
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pagealloc.h"
#include "preload_check.h"

#pragma weak pa_thread_stats

static int bad;

static void check(const char *what, uint64_t got, uint64_t want)
{
	if (got != want) {
		fprintf(stderr, "thread_stats: %s is %llu, want %llu\n", what,
		        (unsigned long long)got, (unsigned long long)want);
		bad = 1;
	}
}

int main(void)
{
	PRELOAD_CHECK_MALLOC();
	if (pa_thread_stats == NULL) {
		fprintf(stderr,
		        "thread_stats: no pa_thread_stats in the process (not preloaded)\n");
		return 77;
	}
	struct pa_thread_stats before, after;
	pa_thread_stats(&before);
	void *small[10];
	for (int k = 0; k < 10; k++)
		small[k] = malloc(100);
	void *zeroed = calloc(1, 5000), *big = malloc(200000);
	uint64_t u_small = malloc_usable_size(small[0]), u_zeroed = malloc_usable_size(zeroed),
	         u_big = malloc_usable_size(big);
	free(big);
	for (int k = 0; k < 4; k++)
		free(small[k]);
	pa_thread_stats(&after);
	check("mallocs", after.mallocs - before.mallocs, 12);
	check("frees", after.frees - before.frees, 5);
	check("allocated", after.allocated - before.allocated, 10 * u_small + u_zeroed + u_big);
	check("freed", after.freed - before.freed, 4 * u_small + u_big);
	check("requested", after.requested - before.requested, 10 * 100 + 5000 + 200000);
	for (int k = 4; k < 10; k++)
		free(small[k]);
	free(zeroed);
	if (!bad)
		printf("thread_stats ok\n");
	return bad;
}
