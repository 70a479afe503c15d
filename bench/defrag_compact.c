/*
 * defrag_compact.c — survivors that pin memory, compacted with the defrag
 * contract (pagealloc.h: pa_defrag_hint, pa_defrag_move).
 *
 *   defrag-compact seed000   Seed 000's case in C: 2^20 16-byte objects, every
 *                            512th kept. Each span of the 16-byte class then
 *                            holds one live object: 16 MiB pinned by 32 KiB of
 *                            data. The program walks its own pointer array and
 *                            replaces each pointer with pa_defrag_move's answer
 *                            (the seed's "occasionally copy long-lived
 *                            objects", where only the objects that pin a
 *                            sparse span move).
 *   defrag-compact kv        A key-value shape: 2^20 values of 16-256 bytes,
 *                            each filled with bytes derived from its key, 90%
 *                            freed at random; the survivors that the hint
 *                            names are moved, pass after pass until a pass
 *                            moves nothing; every value's bytes are checked
 *                            afterwards.
 *
 * Before and after the compaction it prints the process's RSS, the live
 * bytes (pa_malloc_stats's heap_alloc: usable sizes, the program's pointer
 * arrays included), the pages the small spans hold, and, after, the
 * objects moved, the minimum that had to move, the passes and the
 * compaction's time. The last line is one `key=value` record for scripts.
 * Each measure runs pa_thread_cache_flush() and pa_scavenge(0) first (the
 * thread's cached objects would pin their spans; the scavenger would
 * release the emptied spans' pages within its delay anyway).
 *
 * Usage: defrag-compact seed000|kv [--no-move] [--seed N]
 *   --no-move  the same program without the compaction, for comparison.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pagealloc.h>

#include "statm.h"

#define MIB (1024.0 * 1024.0)
#define NOBJ ((size_t)1 << 20)

static void die(const char *what)
{
	fprintf(stderr, "defrag-compact: %s\n", what);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct point {
	double rss, live, small_pages; /* MiB */
	size_t spans, partial_free;    /* small spans; free slots in partial ones */
};

static struct point measure(void)
{
	struct pa_malloc_stats st;
	pa_thread_cache_flush();
	pa_scavenge(0);
	if (pa_malloc_stats(&st) != 0)
		die("pa_malloc_stats failed");
	struct point p = {.rss = statm_rss_mib(), .live = (double)st.heap_alloc / MIB};
	for (size_t c = 1; c < st.nclasses; c++) {
		p.small_pages += (double)st.classes[c].pages * PA_PAGE_BYTES / MIB;
		p.spans += st.classes[c].spans;
		p.partial_free += st.classes[c].partial_free;
	}
	return p;
}

static void print_point(const char *label, struct point p)
{
	printf("%-8s rss %8.2f MiB  live %8.2f MiB  small spans %6zu (%8.2f MiB)  free slots in "
	       "partial spans %8zu\n",
	       label, p.rss, p.live, p.spans, p.small_pages, p.partial_free);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rng(void) /* xorshift64* */
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1du;
}

/* Value i's bytes: a pattern of its key, checked after the moves. */
static void fill(unsigned char *v, size_t n, size_t i)
{
	for (size_t k = 0; k < n; k++)
		v[k] = (unsigned char)(i * 131u + k * 7u);
}

static int intact(const unsigned char *v, size_t n, size_t i)
{
	for (size_t k = 0; k < n; k++)
		if (v[k] != (unsigned char)(i * 131u + k * 7u))
			return 0;
	return 1;
}

/* Move every pointer of v[0, n) that the hint names (NULLs skipped), pass
 * after pass until one moves nothing: the objects moved. */
static size_t compact(void **v, size_t n, unsigned *passes)
{
	size_t moved = 0, this_pass;
	*passes = 0;
	do {
		this_pass = 0;
		for (size_t i = 0; i < n; i++) {
			if (v[i] == NULL)
				continue;
			void *q = pa_defrag_move(v[i]);
			if (q != v[i]) {
				v[i] = q;
				this_pass++;
			}
		}
		moved += this_pass;
		++*passes;
	} while (this_pass != 0 && *passes < 16);
	return moved;
}

int main(int argc, char **argv)
{
	int kv = 0, move = 1;
	for (int a = 1; a < argc; a++) {
		if (strcmp(argv[a], "seed000") == 0)
			kv = 0;
		else if (strcmp(argv[a], "kv") == 0)
			kv = 1;
		else if (strcmp(argv[a], "--no-move") == 0)
			move = 0;
		else if (strcmp(argv[a], "--seed") == 0 && a + 1 < argc)
			rng_state = strtoull(argv[++a], NULL, 0) | 1u;
		else
			die("usage: defrag-compact seed000|kv [--no-move] [--seed N]");
	}
	void **v = pa_calloc(NOBJ, sizeof(*v));
	size_t *len = kv ? pa_calloc(NOBJ, sizeof(*len)) : NULL;
	if (v == NULL || (kv && len == NULL))
		die("out of memory");
	size_t kept = 0;
	for (size_t i = 0; i < NOBJ; i++) {
		size_t n = kv ? 16 + rng() % 241 : 16;
		if ((v[i] = pa_malloc(n)) == NULL)
			die("out of memory");
		if (kv) {
			len[i] = n;
			fill(v[i], n, i);
		} else {
			memset(v[i], 0, n);
		}
	}
	/* seed 000: every 512th kept; kv: one in ten kept, at random */
	for (size_t i = 0; i < NOBJ; i++) {
		int keep = kv ? rng() % 10 == 0 : i % 512 == 0;
		if (keep) {
			kept++;
			continue;
		}
		pa_free(v[i]);
		v[i] = NULL;
	}
	struct point before = measure();
	print_point("before", before);
	size_t moved = 0;
	unsigned passes = 0;
	double t0 = now_s();
	if (move)
		moved = compact(v, NOBJ, &passes);
	double secs = now_s() - t0;
	struct point after = measure();
	print_point("after", after);
	/* The fewest moves that leave the survivors in ceil(kept / per span)
	 * spans, for seed 000 (one per span before: all but those spans' own). */
	size_t min_moves = kv ? 0 : kept - (kept + 511) / 512;
	size_t bad = 0;
	for (size_t i = 0; kv && i < NOBJ; i++)
		if (v[i] != NULL && !intact(v[i], len[i], i))
			bad++;
	printf("moved %zu of %zu survivors in %u passes, %.3f s%s\n", moved, kept, passes, secs,
	       kv ? "" : " (seed000: minimum needed below)");
	printf("shape=%s move=%d kept=%zu moved=%zu min_moves=%zu passes=%u seconds=%.3f "
	       "rss_before_mib=%.2f rss_after_mib=%.2f live_before_mib=%.2f live_after_mib=%.2f "
	       "small_before_mib=%.2f small_after_mib=%.2f corrupt=%zu\n",
	       kv ? "kv" : "seed000", move, kept, moved, min_moves, passes, secs, before.rss,
	       after.rss, before.live, after.live, before.small_pages, after.small_pages, bad);
	return bad != 0;
}
