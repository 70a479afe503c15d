/*
 * map_target.c — a heap of known shape for `pagealloc map` (tests/live/map_check.py).
 *
 *     map_target
 *
 * A plain program on the C library's malloc, run with
 * LD_PRELOAD=libpagealloc-preload.so (and prof=off: a sampled small block
 * is a span of its own). It starts the scavenger thread first, then builds seed 000's
 * keep-every-512th heap: 2^17 16-byte objects, of which it keeps those at the start of a page (a
 * 16-byte span is one 8 KiB page of 512 objects, so one per span) and
 * frees the rest and their pointer array; keeps large blocks of 1 MiB
 * (128 pages) and 6 MiB (768 pages, across a chunk's end), and one of
 * 256 KiB (32 pages) that it frees after malloc_trim(0), which gives every
 * cached object and page back and releases every free page: that block
 * then waits in the thread's large slots. Prints
 *
 *     kept ADDR ADDR ...        the 16-byte objects kept
 *     large ADDR PAGES          each live large block
 *     freed ADDR PAGES          the freed large block
 *     after ADDR                the page after the freed block: free and
 *                               released (the heap's first fit puts what
 *                               comes after malloc_trim lower)
 *     ready
 *
 * and waits for a line on standard input (or its end), then exits. While
 * it waits only the scavenger thread runs.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSMALL ((size_t)1 << 17)
#define PAGE 8192u

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL) {
		fprintf(stderr, "map_target: malloc(%zu) failed\n", n);
		exit(1);
	}
	memset(p, 1, n < 64 ? n : 64);
	return p;
}

int main(void)
{
	/* stdout's buffer first, so that printing allocates nothing later;
	 * then a large block back to the page heap, so the heap has work for
	 * the scavenger thread, which the next large malloc starts (and makes
	 * the live file): what starting it allocates is allocated now. */
	printf("start\n");
	fflush(stdout);
	free(xmalloc((size_t)1 << 20));
	malloc_trim(0);
	free(xmalloc((size_t)1 << 20));
	void **v = xmalloc(NSMALL * sizeof(*v));
	for (size_t i = 0; i < NSMALL; i++)
		v[i] = xmalloc(16);
	static void *kept[NSMALL / 512 + 16];
	size_t nkept = 0;
	for (size_t i = 0; i < NSMALL; i++) {
		if (((uintptr_t)v[i] & (PAGE - 1)) == 0 && nkept < sizeof(kept) / sizeof(kept[0]))
			kept[nkept++] = v[i];
		else
			free(v[i]);
	}
	/* The array goes after the large blocks, which would take its pages. */
	void *large1 = xmalloc((size_t)128 * PAGE);
	void *large6 = xmalloc((size_t)768 * PAGE);
	void *freed = xmalloc((size_t)32 * PAGE);
	free(v);
	malloc_trim(0);
	uintptr_t freed_at = (uintptr_t)freed;
	free(freed);
	printf("kept");
	for (size_t i = 0; i < nkept; i++)
		printf(" %#lx", (unsigned long)(uintptr_t)kept[i]);
	printf("\nlarge %#lx 128\nlarge %#lx 768\nfreed %#lx 32\nafter %#lx\nready\n",
	       (unsigned long)(uintptr_t)large1, (unsigned long)(uintptr_t)large6,
	       (unsigned long)freed_at, (unsigned long)(freed_at + (size_t)32 * PAGE));
	fflush(stdout);
	char line[64];
	if (fgets(line, sizeof(line), stdin) == NULL)
		return 0;
	return 0;
}
