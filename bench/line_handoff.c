/*
 * line_handoff.c — what it costs one CPU to read a cache line another CPU
 * has just written: the price of every object a producer/consumer program
 * hands across (docs/benchmarks.md §22).
 *
 * Two threads, pinned to CPUs A and B, pass a counter back and forth in
 * one cache line: each waits until the line holds its number, then writes
 * the next. Each step is one line moving from the writer's cache to the
 * reader's, so the time per step is the one-way hand-off's latency. On a
 * virtual machine it says where the host put the two virtual CPUs (two
 * hardware threads of a core, two cores sharing a cache, or further).
 *
 *   line-handoff [--cpus A,B] [--steps N]
 *
 * Prints the nanoseconds per one-way hand-off.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pin.h"

static struct {
	long turn;
} __attribute__((aligned(64))) line;
static long steps = 2000000;
static int cpu_a, cpu_b = 1;

/* Take every turn of this parity: wait for it, then hand the next over. */
static void play(long first)
{
	for (long i = first; i < steps; i += 2) {
		while (__atomic_load_n(&line.turn, __ATOMIC_ACQUIRE) != i)
			;
		__atomic_store_n(&line.turn, i + 1, __ATOMIC_RELEASE);
	}
}

static void *second(void *arg)
{
	(void)arg;
	bench_pin("line-handoff", cpu_b);
	play(1);
	return NULL;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--cpus") == 0) {
			if (sscanf(argv[++i], "%d,%d", &cpu_a, &cpu_b) != 2 || cpu_a == cpu_b)
				goto usage;
		} else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) {
			steps = atol(argv[++i]);
			if (steps < 2)
				goto usage;
		} else {
			goto usage;
		}
	}
	bench_pin("line-handoff", cpu_a);
	pthread_t t;
	struct timespec a, b;
	if (pthread_create(&t, NULL, second, NULL) != 0)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &a);
	play(0);
	pthread_join(t, NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	printf("CPUs %d and %d: %.1f ns per one-way hand-off of a written line\n", cpu_a, cpu_b,
	       ns / (double)steps);
	return 0;
usage:
	fprintf(stderr, "usage: line-handoff [--cpus A,B] [--steps N]\n");
	return 2;
}
