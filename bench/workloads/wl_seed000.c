/*
 * wl_seed000.c — seed 000's fragmentation example on plain malloc.
 *
 * The article (Go 1.21) allocates 2^20 16-byte objects one by one, keeps every
 * 512th and drops the rest: an allocator that puts objects of one size class
 * on their own pages then keeps every page alive for 32 KiB of data. Then
 * 2^19 32-byte objects (another class) cannot reuse those pages. This is the
 * same program on malloc, measured as the OS sees it: RSS from
 * /proc/self/statm, each point after malloc_trim(0) where the allocator has
 * it (glibc, libpagealloc; not jemalloc, tcmalloc, mimalloc: for them the
 * point is read as it is), as the article's PrintMemoryStats returns memory
 * to the OS first. Points, in MiB of RSS:
 *
 *   base_mib        before anything
 *   ex3_alloc_mib   2^20 x 16 B and the 8 MiB pointer array allocated
 *   ex3_kept_mib    every 512th kept, the rest and the array freed
 *   ex3_more_mib    2^19 x 32 B added
 *   ex3_freed_mib   all freed
 *   stepN_mib       the step table: from the freed state, 2^20 x 16 B,
 *                   every N-th kept (N = 128 .. 2048), the rest freed
 *
 * Self-check: every object holds its index, checked when freed.
 * Usage: wl-seed000 [--quick] [objects=1048576]
 */
#include "wl_common.h"

static const size_t steps[] = {128, 256, 512, 1024, 2048};
#define NSTEPS (sizeof(steps) / sizeof(steps[0]))

static double point(void)
{
	wl_trim();
	return wl_rss_mib();
}

/* The article's Allocate: an array of n pointers to distinct objects, each
 * holding its own index. */
static uint64_t **allocate(size_t n, size_t size)
{
	uint64_t **v = (uint64_t **)wl_xmalloc(n * sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		v[i] = (uint64_t *)wl_xmalloc(size);
		memset(v[i], 0, size);
		v[i][0] = i;
	}
	return v;
}

static void check_free(uint64_t *p, size_t i)
{
	if (p[0] != i)
		wl_die("object %zu holds %llu", i, (unsigned long long)p[0]);
	free(p);
}

/* Copy(slice, 0, n, step) and drop slice: keep 0, step, 2*step, ... */
static uint64_t **keep_every(uint64_t **v, size_t n, size_t step, size_t *kept)
{
	*kept = (n + step - 1) / step;
	uint64_t **out = (uint64_t **)wl_xmalloc(*kept * sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		if (i % step == 0)
			out[i / step] = v[i];
		else
			check_free(v[i], i);
	}
	free(v);
	return out;
}

static void free_kept(uint64_t **v, size_t kept, size_t step)
{
	for (size_t k = 0; k < kept; k++)
		check_free(v[k], k * step);
	free(v);
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {{"objects", 1 << 20, 1 << 16}};
	wl_parse(argc, argv, "wl-seed000", params, 1);
	size_t n = (size_t)params[0].value;
	size_t kept;
	if (n < 2048)
		wl_die("objects must be >= 2048");

	double base = point();
	uint64_t **slice = allocate(n, 16);
	double alloc = point();
	uint64_t **bad = keep_every(slice, n, 512, &kept);
	double kept_rss = point();
	uint64_t **more = allocate(n / 2, 32);
	double more_rss = point();
	for (size_t i = 0; i < n / 2; i++)
		check_free(more[i], i);
	free(more);
	free_kept(bad, kept, 512);
	double freed = point();

	double step_rss[NSTEPS];
	for (size_t s = 0; s < NSTEPS; s++) {
		bad = keep_every(allocate(n, 16), n, steps[s], &kept);
		step_rss[s] = point();
		free_kept(bad, kept, steps[s]);
		point();
	}

	printf("wl-seed000 ok trim=%s base_mib=%.2f ex3_alloc_mib=%.2f ex3_kept_mib=%.2f "
	       "ex3_more_mib=%.2f ex3_freed_mib=%.2f",
	       wl_trim() ? "yes" : "no", base, alloc, kept_rss, more_rss, freed);
	for (size_t s = 0; s < NSTEPS; s++)
		printf(" step%zu_mib=%.2f", steps[s], step_rss[s]);
	printf("\n");
	return 0;
}
