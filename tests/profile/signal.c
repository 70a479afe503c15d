/*
 * signal.c — a profile on prof_signal, for profile_signal (signal.sh): run
 * preloaded with prof_signal=SIGUSR2, prof_prefix set and prof_sample=64K,
 * it keeps a block of 1 MiB at before_signal, sends itself
 * SIGUSR2 (raise), then one more at after_signal: the handler only
 * sets a flag, and the next sample (or the scavenger's tick) writes the
 * profile (prof.c). It leaves the signal at its default disposition, as
 * prof_signal requires.
 * At prof_sample=64K a 1 MiB block is sampled with probability 1 - e^-16.
 */
#include <signal.h>
#include <stdlib.h>

#include "prof_prog.h"

#define KiB ((size_t)1 << 10)

static void *keep[2];

PROG_NOINLINE static void before_signal(void)
{
	keep[0] = prog_check(malloc(1024 * KiB));
}

PROG_NOINLINE static void after_signal(void)
{
	keep[1] = prog_check(malloc(1024 * KiB));
}

int main(void)
{
	before_signal();
	if (raise(SIGUSR2) != 0)
		return 1;
	after_signal();
	return prog_checksum(keep, 2) == 1;
}
