/*
 * peaks.c — a live heap that grows in steps, for profile_peaks (peaks.sh
 * says what its profiles must be). Run preloaded with prof_sample=64K: a
 * block of 1 MiB or more is then sampled with probability 1 - e^-16 and
 * weight 1.0000001, so the profiler's estimates are the exact sizes.
 *
 *   grow_header   one block of 1.5 MiB
 *   grow_step     1 MiB blocks until there are 8, then 16, 32, 64 of them
 *                 (65.5 MiB live)
 *                 then every block is freed
 *   regrow_step   40 blocks of 1 MiB, kept until exit
 *
 * 105.5 MiB allocated in all. The program makes no other allocation (no
 * stdio): nothing else is sampled. Its first allocation is large, before
 * the thread has a cache (profile_first_large pins that it is sampled).
 */
#include <stdlib.h>
#include <unistd.h>

#include "prof_prog.h"

#define MiB ((size_t)1 << 20)

static void *header;
static void *blocks[64];
static void *again[40];

PROG_NOINLINE static void *grow_header(void)
{
	return prog_check(malloc(MiB + MiB / 2));
}

PROG_NOINLINE static void *grow_step(void)
{
	return prog_check(malloc(MiB));
}

PROG_NOINLINE static void *regrow_step(void)
{
	return prog_check(malloc(MiB));
}

int main(void)
{
	static const unsigned steps[] = {8, 16, 32, 64};
	unsigned n = 0;
	header = grow_header();
	for (unsigned s = 0; s < sizeof(steps) / sizeof(steps[0]); s++)
		while (n < steps[s])
			blocks[n++] = grow_step();
	free(header);
	for (unsigned i = 0; i < n; i++)
		free(blocks[i]);
	for (unsigned i = 0; i < 40; i++)
		again[i] = regrow_step();
	/* Read what is kept, so that no malloc above is optimised away. */
	if (prog_checksum(again, 40) == 1)
		(void)!write(2, "?\n", 2);
	return 0;
}
