/*
 * seed000_frag.c — seed 000's fragmentation examples, on pa_malloc.
 *
 * The article (an account of memory fragmentation in Go 1.21's non-moving
 * allocator: size classes, runtime.ReadMemStats, four examples) allocates 2^20
 * 16-byte objects one by one, keeps every 512th and drops the rest: each
 * 8 KiB page of the 16-byte class then holds a single live object, so 16 MiB
 * stay in use for 32 KiB of data. pa_malloc has the same shape (small objects
 * in spans of one size class, never moved), so the same program should show
 * the same pathology. This program replays:
 *
 *   Example 3  (1) start; (2) 2^20 16-byte objects and their 8 MiB pointer
 *              array; (3) every 512th kept, the rest and the big array freed;
 *              (4) 2^19 32-byte objects added (another class: no reuse).
 *   The table  (3) for steps 128 .. 2048, each from a fresh state, minus the
 *              state measured just before allocating.
 *   Example 4  compaction by copying: the kept objects are copied into new
 *              16-byte objects, then the old ones freed (the order a GC gives:
 *              copying and freeing one at a time would hand each copy the
 *              slot its original just left, and compact nothing).
 *
 * Each point first runs pa_thread_cache_flush() and pa_scavenge(0), as the
 * article's PrintMemoryStats runs the GC and returns memory to the OS, then
 * prints, in MiB:
 *   heapUsage         heap_sys - heap_released (pa_malloc_stats().heap_usage)
 *   maxFragmentation  heap_inuse - heap_alloc (.max_fragmentation)
 *   inuse, alloc      heap_inuse, heap_alloc
 *   rss               the process's resident set (/proc/self/statm): the OS's
 *                     view, which includes the program, libc and metadata
 * and the article's Go figures (heapUsage / maxFragmentation) beside them.
 *
 * Usage: seed000-frag (no arguments; tools/bench-malloc.sh runs it), or
 * seed000-frag --hold: example 3 stops after (3), every 512th kept, and
 * waits for a line on standard input, so that `pagealloc map PID -o
 * FILE.png` can draw the heap (the picture in README.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pagealloc.h>

#include "statm.h"

#define MIB (1024.0 * 1024.0)
#define NSMALL ((size_t)1 << 20)  /* 16-byte objects of examples 3 and 4 */
#define NLARGER ((size_t)1 << 19) /* 32-byte objects of example 3 step (4) */

struct point {
	double usage, frag, inuse, alloc, rss; /* MiB */
};

static void die(const char *what)
{
	fprintf(stderr, "seed000-frag: %s\n", what);
	exit(1);
}

/* The article's PrintMemoryStats: settle the heap, then read it. */
static struct point measure(void)
{
	struct pa_malloc_stats st;

	pa_thread_cache_flush();
	pa_scavenge(0);
	if (pa_malloc_stats(&st) != 0)
		die("pa_malloc_stats failed");
	return (struct point){
	    .usage = (double)st.heap_usage / MIB,
	    .frag = (double)st.max_fragmentation / MIB,
	    .inuse = (double)st.heap_inuse / MIB,
	    .alloc = (double)st.heap_alloc / MIB,
	    .rss = statm_rss_mib(),
	};
}

static void print_header(const char *title)
{
	printf("\n%s\n", title);
	printf("%-34s %9s %9s %9s %9s %9s   %s\n", "point (MiB)", "heapUsage", "maxFrag", "inuse",
	       "alloc", "rss", "go 1.21: heapUsage / maxFrag");
}

static void print_point(const char *label, struct point p, double go_usage, double go_frag)
{
	printf("%-34s %9.2f %9.2f %9.2f %9.2f %9.2f   go: %.2f / %.2f\n", label, p.usage, p.frag,
	       p.inuse, p.alloc, p.rss, go_usage, go_frag);
}

static void *xmalloc(size_t size)
{
	void *p = pa_malloc(size);
	if (p == NULL)
		die("pa_malloc returned NULL");
	return p;
}

/* The article's Allocate: an array of n pointers to distinct zeroed objects. */
static void **allocate(size_t n, size_t size)
{
	void **v = xmalloc(n * sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		v[i] = xmalloc(size);
		memset(v[i], 0, size);
	}
	return v;
}

/* The article's Copy(slice, 0, n, step) followed by dropping slice: keep
 * objects 0, step, 2*step ... in a new small array, free the rest and v. */
static void **keep_every(void **v, size_t n, size_t step, size_t *kept)
{
	*kept = (n + step - 1) / step;
	void **out = xmalloc(*kept * sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		if (i % step == 0)
			out[i / step] = v[i];
		else
			pa_free(v[i]);
	}
	pa_free(v);
	return out;
}

static void free_all(void **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pa_free(v[i]);
	pa_free(v);
}

static void example3(int hold)
{
	size_t kept;

	print_header("Example 3: keep every 512th of 2^20 16-byte objects");
	print_point("(1) start", measure(), 0.41, 0.25);

	void **slice = allocate(NSMALL, 16);
	print_point("(2) 2^20 x 16 B allocated", measure(), 24.41, 0.24);

	void **bad = keep_every(slice, NSMALL, 512, &kept);
	print_point("(3) every 512th kept", measure(), 16.41, 16.19);
	if (hold) {
		char line[16];
		printf("holding: pagealloc map %d -o FILE.png draws this heap; Enter goes on\n",
		       (int)getpid());
		fflush(stdout);
		if (fgets(line, sizeof(line), stdin) == NULL)
			return;
	}

	void **fresh = allocate(NLARGER, 32);
	print_point("(4) + 2^19 x 32 B allocated", measure(), 36.39, 16.17);

	free_all(fresh, NLARGER);
	free_all(bad, kept);
	print_point("(5) all freed (not in the article)", measure(), 0.41, 0.25);
}

static void step_table(void)
{
	static const struct {
		size_t step;
		double go_usage, go_frag;
	} rows[] = {
	    {128, 16.07, 15.88}, {256, 16.03, 15.94}, {512, 16.00, 15.94},
	    {1024, 8.04, 8.00},  {2048, 4.03, 3.99},
	};

	print_header("Step table: 2^20 x 16 B, every step-th kept, minus the state before");
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		size_t kept;
		struct point base = measure();
		void **bad = keep_every(allocate(NSMALL, 16), NSMALL, rows[r].step, &kept);
		struct point p = measure();
		struct point d = {
		    .usage = p.usage - base.usage,
		    .frag = p.frag - base.frag,
		    .inuse = p.inuse - base.inuse,
		    .alloc = p.alloc - base.alloc,
		    .rss = p.rss - base.rss,
		};
		char label[64];
		snprintf(label, sizeof(label), "step %zu (%zu kept)", rows[r].step, kept);
		print_point(label, d, rows[r].go_usage, rows[r].go_frag);
		free_all(bad, kept);
	}
}

static void example4(void)
{
	size_t kept;

	print_header("Example 4: compaction by copying");
	print_point("(1) start", measure(), 0.41, 0.24);

	void **bad = keep_every(allocate(NSMALL, 16), NSMALL, 512, &kept);
	print_point("(2) every 512th kept", measure(), 16.42, 16.20);

	void **copy = xmalloc(kept * sizeof(*copy));
	for (size_t i = 0; i < kept; i++) {
		copy[i] = xmalloc(16);
		memcpy(copy[i], bad[i], 16);
	}
	free_all(bad, kept);
	print_point("(3) copied, originals freed", measure(), 0.47, 0.25);

	free_all(copy, kept);
}

int main(int argc, char **argv)
{
	int hold = argc > 1 && strcmp(argv[1], "--hold") == 0;
	printf("seed 000 (Go memory fragmentation) on pa_malloc; Go figures are the article's\n");
	example3(hold);
	if (hold)
		return 0;
	step_table();
	example4();
	return 0;
}
