/*
 * first_large.c — a thread whose first allocations are large blocks, for
 * profile_first_large (first_large.sh): the main thread's first eight
 * allocations are blocks of 1 MiB (first_blocks), then a new thread's
 * first eight are too (thread_first_blocks); all are kept, and the
 * profile is written to argv[1]. At prof_sample=64K each such block is
 * sampled with probability 1 - e^-16: the profile must hold 8 MiB at
 * each site, whether or not the thread had a cache before.
 */
#include <pthread.h>
#include <stdlib.h>

#include "prof_prog.h"

#define MiB ((size_t)1 << 20)

static void *main_keep[8];
static void *thread_keep[8];

PROG_NOINLINE static void first_blocks(void **keep)
{
	for (int i = 0; i < 8; i++)
		keep[i] = prog_check(malloc(MiB));
}

PROG_NOINLINE static void thread_first_blocks(void **keep)
{
	for (int i = 0; i < 8; i++)
		keep[i] = prog_check(malloc(MiB));
}

static void *thread_main(void *arg)
{
	thread_first_blocks(arg);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s PROFILE\n", argv[0]);
		return 2;
	}
	first_blocks(main_keep);
	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, thread_keep) != 0 || pthread_join(t, NULL) != 0) {
		fprintf(stderr, "pthread_create failed\n");
		return 1;
	}
	prog_dump(argv[1]);
	printf("checksum %lu\n", prog_checksum(main_keep, 8) + prog_checksum(thread_keep, 8));
	return 0;
}
