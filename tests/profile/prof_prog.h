/*
 * prof_prog.h — for the heap-profile test programs (tests/profile.cmake):
 * the profiler's functions as a preloaded program reaches them, and a place
 * to keep blocks.
 *
 * The programs are plain programs on the C library's malloc, run with
 * LD_PRELOAD=libpagealloc-preload.so. They call pa_prof_dump through a weak
 * reference, as a program that may or may not be preloaded would: without
 * the preload the symbol is NULL and prog_dump says so and exits 1.
 *
 * Blocks are kept in static arrays (never malloc'd: the array would be a
 * site of its own) that prog_checksum reads at the end, so that the
 * compiler cannot delete a malloc whose result is otherwise unused.
 */
#ifndef PROF_PROG_H
#define PROF_PROG_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

int pa_prof_dump(const char *path);
#pragma weak pa_prof_dump

/* A site stays a function of its own: not inlined, cloned, or folded with
 * another of the same code (gcc's identical code folding, -fipa-icf, made
 * two such functions one). */
#if defined(__clang__)
#define PROG_NOINLINE __attribute__((noinline))
#else
#define PROG_NOINLINE __attribute__((noinline, noipa))
#endif

/* Write the heap profile to path; exit 1 when that fails or the program is
 * not on the preload. */
static inline void prog_dump(const char *path)
{
	if (pa_prof_dump == NULL) {
		fprintf(
		    stderr,
		    "pa_prof_dump is not there: run me with LD_PRELOAD=libpagealloc-preload.so\n");
		exit(1);
	}
	if (pa_prof_dump(path) != 0) {
		perror("pa_prof_dump");
		exit(1);
	}
}

/* Exit 1 unless p is a block (the program is out of memory). */
static inline void *prog_check(void *p)
{
	if (p == NULL) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return p;
}

/* A value that depends on every pointer of keep[0..n): read at the end. */
static inline unsigned long prog_checksum(void *const *keep, size_t n)
{
	unsigned long sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += (unsigned long)keep[i] >> 4;
	return sum;
}

#ifdef __cplusplus
}
#endif

#endif
