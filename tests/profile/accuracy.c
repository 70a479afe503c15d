/*
 * accuracy.c — allocation sites whose truth is known, for profile_accuracy
 * (accuracy.sh has the statistics): run preloaded with prof_sample=64K, it
 * allocates at each site below, writes the heap profile to argv[1] with
 * pa_prof_dump, and prints the truth, one line a site:
 *
 *     site FUNCTION inuse_space N inuse_objects N alloc_space N alloc_objects N
 *
 * Sizes are the requested ones (what the profiler weights its samples by).
 *
 *   keep_small       64-byte blocks, 128 MiB, all kept
 *   keep_large       100,000-byte blocks, 1342 of them (~128 MiB), kept
 *   churn            256-byte blocks, 512 MiB allocated, each freed at once
 *   keep_calloc      calloc(1, 1000), 134,218 blocks (~128 MiB), kept
 *   grow_by_realloc  32,768 blocks, each malloc(64) then realloc'd to 128,
 *                    256, ..., 4096 bytes, kept at 4096 (128 MiB)
 *   new_nodes        (accuracy_new.cc) `new` of a 128-byte struct, 1 Mi of
 *                    them (128 MiB), kept
 *
 * The truth of a realloc: a realloc that moves the block is an allocation
 * of the new size at the caller of realloc (and a free of the old block);
 * one that resizes the block where it is allocates nothing, and the profile
 * cannot see it (malloc.c: pa_realloc samples only through the pa_malloc of
 * a move). So the program counts what the profiler should have counted:
 * alloc_space sums the sizes of the malloc and of every realloc that
 * returned a new pointer, and inuse_space sums each block's size at its
 * last move. The doubling sizes are chosen so that each realloc leaves its
 * size class and moves: then that truth is also each block's final size,
 * and the program says "grow_by_realloc resized in place N times" when it
 * is not (N is 0 in every run so far).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_prog.h"

#define MiB ((size_t)1 << 20)

void *new_nodes(void **keep, size_t n); /* accuracy_new.cc */

enum {
	SMALL_SIZE = 64,
	LARGE_SIZE = 100000,
	CHURN_SIZE = 256,
	CALLOC_SIZE = 1000,
	REALLOC_FIRST = 64,
	REALLOC_LAST = 4096,
	NODE_SIZE = 128,
};
#define SMALL_N (128 * MiB / SMALL_SIZE)
#define LARGE_N (128 * MiB / LARGE_SIZE)
#define CHURN_N (512 * MiB / CHURN_SIZE)
#define CALLOC_N (128 * MiB / CALLOC_SIZE + 1)
#define REALLOC_N (128 * MiB / REALLOC_LAST)
#define NODE_N (128 * MiB / NODE_SIZE)

static void *small_keep[SMALL_N];
static void *large_keep[LARGE_N];
static void *calloc_keep[CALLOC_N];
static void *realloc_keep[REALLOC_N];
static void *node_keep[NODE_N];
static void *volatile churn_sink;

struct truth {
	size_t inuse_space, inuse_objects, alloc_space, alloc_objects;
};

static void print_truth(const char *site, const struct truth *t)
{
	printf("site %s inuse_space %zu inuse_objects %zu alloc_space %zu alloc_objects %zu\n",
	       site, t->inuse_space, t->inuse_objects, t->alloc_space, t->alloc_objects);
}

static void kept(const char *site, size_t n, size_t size)
{
	struct truth t = {n * size, n, n * size, n};
	print_truth(site, &t);
}

PROG_NOINLINE static void keep_small(void)
{
	for (size_t i = 0; i < SMALL_N; i++)
		small_keep[i] = prog_check(malloc(SMALL_SIZE));
}

PROG_NOINLINE static void keep_large(void)
{
	for (size_t i = 0; i < LARGE_N; i++)
		large_keep[i] = prog_check(malloc(LARGE_SIZE));
}

PROG_NOINLINE static void churn(void)
{
	for (size_t i = 0; i < CHURN_N; i++) {
		churn_sink = prog_check(malloc(CHURN_SIZE));
		free(churn_sink);
	}
}

PROG_NOINLINE static void keep_calloc(void)
{
	for (size_t i = 0; i < CALLOC_N; i++)
		calloc_keep[i] = prog_check(calloc(1, CALLOC_SIZE));
}

/* Returns the number of reallocs that resized in place. */
PROG_NOINLINE static size_t grow_by_realloc(struct truth *t)
{
	size_t in_place = 0;
	for (size_t i = 0; i < REALLOC_N; i++) {
		char *p = prog_check(malloc(REALLOC_FIRST));
		size_t at_move = REALLOC_FIRST;
		t->alloc_space += REALLOC_FIRST;
		t->alloc_objects++;
		for (size_t n = 2 * REALLOC_FIRST; n <= REALLOC_LAST; n *= 2) {
			uintptr_t old = (uintptr_t)p;
			p = prog_check(realloc(p, n));
			if ((uintptr_t)p != old) {
				t->alloc_space += n;
				t->alloc_objects++;
				at_move = n;
			} else {
				in_place++;
			}
		}
		t->inuse_space += at_move;
		t->inuse_objects++;
		realloc_keep[i] = p;
	}
	return in_place;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s PROFILE\n", argv[0]);
		return 2;
	}
	struct truth grow = {0, 0, 0, 0};
	keep_small();
	keep_large();
	churn();
	keep_calloc();
	size_t in_place = grow_by_realloc(&grow);
	new_nodes(node_keep, NODE_N);
	prog_dump(argv[1]);

	kept("keep_small", SMALL_N, SMALL_SIZE);
	kept("keep_large", LARGE_N, LARGE_SIZE);
	struct truth c = {0, 0, CHURN_N * (size_t)CHURN_SIZE, CHURN_N};
	print_truth("churn", &c);
	kept("keep_calloc", CALLOC_N, CALLOC_SIZE);
	print_truth("grow_by_realloc", &grow);
	kept("new_nodes", NODE_N, NODE_SIZE);
	if (in_place != 0)
		printf("grow_by_realloc resized in place %zu times\n", in_place);
	unsigned long sum =
	    prog_checksum(small_keep, SMALL_N) + prog_checksum(large_keep, LARGE_N) +
	    prog_checksum(calloc_keep, CALLOC_N) + prog_checksum(realloc_keep, REALLOC_N) +
	    prog_checksum(node_keep, NODE_N);
	printf("checksum %lu\n", sum);
	return 0;
}
