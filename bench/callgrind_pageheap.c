/*
 * callgrind_pageheap.c — instruction counts of the page heap's 1-page paths.
 *
 * A standalone program (it has its own main: build it as its own executable
 * with bench_pageheap_shim.c, not into the bench_* programs). On the 1 GiB
 * frag50 heap of bench_pageheap.cc (metadata-only, each page allocated with
 * probability 1/2, same seed) it does N 1-page allocations and N frees:
 *
 *   callgrind_pageheap batch N   as Alloc1/Free1: allocate 4096 pages, free
 *                                them in address order, repeat
 *   callgrind_pageheap pair N    as AllocFree1: alloc one page, free it
 *
 * Count with
 *
 *   valgrind --tool=callgrind --toggle-collect=pageheap_alloc \
 *            --toggle-collect=pageheap_free ./callgrind_pageheap batch 1000000
 *   callgrind_annotate --inclusive=yes callgrind.out.PID
 *
 * and divide the inclusive Ir of pageheap_alloc and of pageheap_free by N.
 * Building the heap uses the *_locked functions, so it is not counted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_pageheap_shim.h"
#include "pageheap.h"

#define BATCH 4096

int main(int argc, char **argv)
{
	int pair = argc == 3 && strcmp(argv[1], "pair") == 0;
	if (argc != 3 || (!pair && strcmp(argv[1], "batch") != 0)) {
		fprintf(stderr, "usage: %s batch|pair N\n", argv[0]);
		return 2;
	}
	unsigned long n = strtoul(argv[2], NULL, 10);
	struct pa_pageheap *h = bph_heap_create((uint64_t)1 << 30, BPH_FRAG50, 0x2019);
	if (h == NULL)
		return 1;
	uint64_t before = bph_fingerprint(h);
	static uintptr_t buf[BATCH];
	for (unsigned long done = 0; done < n;) {
		unsigned long k = pair ? 1 : n - done < BATCH ? n - done : BATCH;
		for (unsigned long i = 0; i < k; i++)
			if ((buf[i] = pageheap_alloc(h, 1, NULL)) == 0)
				return fprintf(stderr, "heap exhausted\n"), 1;
		for (unsigned long i = 0; i < k; i++)
			pageheap_free(h, buf[i], 1);
		done += k;
	}
	int ok = bph_fingerprint(h) == before && bph_heap_verify(h) == 0;
	printf("%s: %lu allocs, %lu frees of 1 page; heap state %s\n", argv[1], n, n,
	       ok ? "restored" : "CHANGED");
	bph_heap_destroy(h);
	return ok ? 0 : 1;
}
