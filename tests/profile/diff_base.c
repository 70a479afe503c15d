/*
 * diff_base.c — two profiles that differ at one site, for profile_diff_base
 * (diff_base.sh): run preloaded with prof_sample=64K, it keeps 16 MiB of
 * 1000-byte blocks at before_both and churns 64 MiB of 4 KiB blocks at
 * churn_before, writes the profile to argv[1] (A), then keeps 32 MiB more
 * at grow_here (128 blocks of 256 KiB) and allocates nothing else, and
 * writes argv[2] (B). Between the two dumps only grow_here samples.
 */
#include <stdlib.h>

#include "prof_prog.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define BEFORE_N (16 * MiB / 1000)
#define GROW_N 128

static void *before_keep[BEFORE_N];
static void *grow_keep[GROW_N];
static void *volatile sink;

PROG_NOINLINE static void before_both(void)
{
	for (size_t i = 0; i < BEFORE_N; i++)
		before_keep[i] = prog_check(malloc(1000));
}

PROG_NOINLINE static void churn_before(void)
{
	for (size_t i = 0; i < 64 * MiB / (4 * KiB); i++) {
		sink = prog_check(malloc(4 * KiB));
		free(sink);
	}
}

PROG_NOINLINE static void grow_here(void)
{
	for (size_t i = 0; i < GROW_N; i++)
		grow_keep[i] = prog_check(malloc(256 * KiB));
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s PROFILE_A PROFILE_B\n", argv[0]);
		return 2;
	}
	before_both();
	churn_before();
	prog_dump(argv[1]);
	grow_here();
	prog_dump(argv[2]);
	printf("checksum %lu\n",
	       prog_checksum(before_keep, BEFORE_N) + prog_checksum(grow_keep, GROW_N));
	return 0;
}
