/*
 * live_target.c — a process for `pagealloc stat` to read (tests/live/stat.sh).
 *
 *     live_target NLARGE LARGE_BYTES NSMALL SMALL_BYTES [NFREE]
 *
 * A plain program on the C library's malloc, run with
 * LD_PRELOAD=libpagealloc-preload.so. It grows the heap past its first
 * arena first, so the heap has work for the scavenger thread, which starts
 * and makes the live file; prints "ready 0" and waits for a line on standard input; then
 * allocates NLARGE blocks of LARGE_BYTES and NSMALL of SMALL_BYTES, writes
 * to each, prints "ready 1" and waits for another line; then, given NFREE,
 * frees the first NFREE large blocks, prints "ready 2" and waits for
 * another line; then exits.
 * Between two readies only the scavenger thread runs, so the reader's
 * figures before and after differ by exactly what was allocated.
 *
 * Built a second time as live_target_linked (LIVE_TARGET_LINKED): a program
 * linked with -lpagealloc whose blocks are pa_malloc's, not preloaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LIVE_TARGET_LINKED
#include "pagealloc.h"
#define malloc pa_malloc
#define free pa_free
#endif

static void wait_line(void)
{
	char line[64];
	if (fgets(line, sizeof(line), stdin) == NULL)
		exit(0);
}

int main(int argc, char **argv)
{
	if (argc != 5 && argc != 6) {
		fprintf(stderr,
		        "usage: live_target NLARGE LARGE_BYTES NSMALL SMALL_BYTES [NFREE]\n");
		return 2;
	}
	size_t nlarge = strtoul(argv[1], NULL, 10), large = strtoul(argv[2], NULL, 10);
	size_t nsmall = strtoul(argv[3], NULL, 10), small = strtoul(argv[4], NULL, 10);
	size_t nfree = argc == 6 ? strtoul(argv[5], NULL, 10) : 0;
	static void *keep[1 << 16];
	if (nlarge + nsmall > sizeof(keep) / sizeof(keep[0]) || nfree > nlarge)
		return 2;
	/* 96 MiB past the heap's first arena (64 MiB) grow it again, and
	 * their pages go back to it: the scavenger thread has work, starts at
	 * the next large allocation and makes the live file. */
	for (int i = 0; i < 96; i++) {
		keep[i] = malloc((size_t)1 << 20);
		memset(keep[i], 1, 4096);
	}
	for (int i = 0; i < 96; i++)
		free(keep[i]);
	free(malloc((size_t)1 << 20));
	printf("ready 0\n");
	fflush(stdout);
	wait_line();
	for (size_t i = 0; i < nlarge; i++) {
		keep[i] = malloc(large);
		memset(keep[i], 2, large);
	}
	for (size_t i = 0; i < nsmall; i++) {
		keep[nlarge + i] = malloc(small);
		memset(keep[nlarge + i], 3, small);
	}
	printf("ready 1\n");
	fflush(stdout);
	wait_line();
	if (argc == 6) {
		for (size_t i = 0; i < nfree; i++)
			free(keep[i]);
		printf("ready 2\n");
		fflush(stdout);
		wait_line();
	}
	return 0;
}
