/*
 * heap_grow.c — a heap growing from nothing: what its first writes cost.
 *
 * A program's heap is fresh memory until it has grown: every page of it is
 * faulted in at its first write. Where a fault is dear (a virtual machine
 * whose every page-table write traps: 10.6 us a 4 KiB page on the AMD EPYC
 * VM of docs/benchmarks.md, build/fault-cost) the growth is mostly faults,
 * and an allocator that faults a span's pages in with one call
 * (MADV_POPULATE_WRITE) before handing out its objects grows faster than
 * one whose program takes a fault a page (central.c: populate_taken).
 *
 * The program mallocs N MiB of B-byte blocks and writes each block whole,
 * timing the loop, then prints the seconds, its minor faults (populated
 * pages count as faults too) and its peak RSS. It calls plain malloc, so
 * LD_PRELOAD picks the allocator:
 *
 *   LD_PRELOAD=<lib> heap-grow [--size B] [--mib N]      (64 bytes, 256 MiB)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int usage(void)
{
	fprintf(stderr, "usage: heap-grow [--size BYTES] [--mib N]\n");
	return 2;
}

int main(int argc, char **argv)
{
	size_t size = 64, mib = 256;
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--size") == 0)
			size = strtoul(argv[++i], NULL, 10);
		else if (i + 1 < argc && strcmp(argv[i], "--mib") == 0)
			mib = strtoul(argv[++i], NULL, 10);
		else
			return usage();
	}
	if (size == 0 || mib == 0)
		return usage();
	size_t n = (mib << 20) / size;
	char **blocks = malloc(n * sizeof(*blocks));
	if (blocks == NULL) {
		perror("heap-grow: malloc");
		return 1;
	}
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	double t0 = now_s();
	for (size_t i = 0; i < n; i++) {
		blocks[i] = malloc(size);
		if (blocks[i] == NULL) {
			perror("heap-grow: malloc");
			return 1;
		}
		memset(blocks[i], (int)(i & 0xff), size);
	}
	double t1 = now_s();
	getrusage(RUSAGE_SELF, &r1);
	printf("%zu MiB of %zu-byte blocks: %.3f s, %ld minor faults, peak RSS %ld KiB\n", mib,
	       size, t1 - t0, r1.ru_minflt - r0.ru_minflt, r1.ru_maxrss);
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
	free(blocks);
	return 0;
}
