/*
 * prof_cost.c — what one heap-profile sample costs: stack capture, the
 * record, the sampled block's own page, and its free.
 *
 *   prof-cost [DEPTH [PAIRS]]
 *
 * Calls itself DEPTH frames deep (default 16: a service's request handler
 * is often deeper than main's), then times PAIRS (default 200,000)
 * pa_malloc(64) + pa_free pairs two ways in one run, alternating, nine
 * rounds, and prints the median ns per pair of each:
 *   off     prof off;
 *   every   prof_sample=1: every pair is sampled. The first sample reads
 *           the unwind tables for each return address; the rest find the
 *           rules in the stack cache (stack.h), as samples of a program's
 *           usual sites do.
 * The cost of a sample (capture, record, its block's page, its free) is
 * every - off.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pagealloc.h"

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *volatile sink;

static __attribute__((noinline)) double pairs(long n)
{
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		void *p = pa_malloc(64);
		sink = p;
		pa_free(p);
	}
	return (now_ns() - t0) / (double)n;
}

/* Run f's pairs `depth` frames below here. */
static __attribute__((noinline)) double at_depth(int depth, long n)
{
	double r = depth > 0 ? at_depth(depth - 1, n) : pairs(n);
	__asm__ volatile("" ::: "memory"); /* not a tail call: a frame per level */
	return r;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

#define ROUNDS 9

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 16;
	long n = argc > 2 ? atol(argv[2]) : 200000;
	double off[ROUNDS], every[ROUNDS];
	/* prof_sample=1 throughout: with prof off a thread's count is 64
	 * bytes, so the "off" pairs take the sampling branch too, and find
	 * sampling off: what is measured is the sample itself. */
	pa_config_set("prof_sample", "1");
	pa_free(pa_malloc(1));
	struct pa_prof_stats st;
	size_t missed = 0;
	for (int r = 0; r < ROUNDS; r++) {
		pa_config_set("prof", "off");
		off[r] = at_depth(depth, n);
		pa_config_set("prof", "on");
		pa_prof_stats(&st);
		size_t before = st.samples_total;
		every[r] = at_depth(depth, n);
		pa_prof_stats(&st);
		missed += (size_t)n - (st.samples_total - before);
	}
	qsort(off, ROUNDS, sizeof(double), cmp);
	qsort(every, ROUNDS, sizeof(double), cmp);
	printf("depth %d, %ld pairs x %d rounds (medians)\n", depth, n, ROUNDS);
	printf("  off    %8.1f ns per pair\n", off[ROUNDS / 2]);
	printf("  every  %8.1f ns per pair: %.1f ns per sample\n", every[ROUNDS / 2],
	       every[ROUNDS / 2] - off[ROUNDS / 2]);
	printf("  sites %zu, samples %zu, pairs not sampled %zu\n", st.sites, st.samples_total,
	       missed);
	return 0;
}
