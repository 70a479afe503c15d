/*
 * pa-demo — watch the page heap work, through the public API only.
 *
 * Four phases: allocate a mix of page runs (1 page up to 1 GiB) and write to
 * them; free every other run; allocate again and see address-ordered first
 * fit put each request into the lowest hole that holds it; free everything.
 * Small runs go through the calling CPU's page cache (a 64-page group the
 * cache took from the heap); the demo tells which path served each request
 * from the change in the cache counters. After each phase it prints the
 * heap's own counters (pa_stats) next to the OS's view (resident set size),
 * and it checks what it claims: the data written survives the frees of
 * neighbouring runs, every heap allocation is first fit, and inuse returns to
 * zero once the caches are flushed. Exit status 1 if any check fails.
 *
 * This is a user program, so it may use stdio; the allocator itself never does.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pagealloc.h>

#define MAX_RUNS 16
#define FULL_WRITE_PAGES 2048 /* runs up to 16 MiB are written in full */

struct run {
	unsigned char *p;
	size_t npages;
	int live;
};

static struct run runs[MAX_RUNS];
static size_t nruns;
static int failures;

static const char *size_str(size_t bytes, char *buf, size_t len)
{
	if (bytes >= ((size_t)1 << 30) * 10)
		snprintf(buf, len, "%.1f GiB", (double)bytes / (1 << 30));
	else if (bytes >= (size_t)1 << 20)
		snprintf(buf, len, "%.1f MiB", (double)bytes / (1 << 20));
	else
		snprintf(buf, len, "%.1f KiB", (double)bytes / (1 << 10));
	return buf;
}

/* Resident set size from /proc/self/statm (the OS's view), or 0. */
static size_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, resident = 0;
	if (f == NULL)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static void print_stats(const char *phase)
{
	struct pa_stats s;
	char b[8][32];
	if (pa_stats(&s) != 0) {
		printf("pa_stats failed: %s\n", strerror(errno));
		failures++;
		return;
	}
	printf("\n  [%s] pa_stats:\n", phase);
	printf("  %10s %10s %10s %10s %10s %10s %6s %5s | %10s\n", "reserved", "mapped", "inuse",
	       "free", "released", "metadata", "ranges", "grows", "OS RSS");
	printf("  %10s %10s %10s %10s %10s %10s %6zu %5" PRIu64 " | %10s\n",
	       size_str(s.heap_reserved, b[0], sizeof b[0]),
	       size_str(s.heap_mapped, b[1], sizeof b[1]),
	       size_str(s.heap_inuse, b[2], sizeof b[2]), size_str(s.heap_free, b[3], sizeof b[3]),
	       size_str(s.heap_released, b[4], sizeof b[4]),
	       size_str(s.metadata, b[5], sizeof b[5]), s.heap_ranges, s.grow_count,
	       size_str(rss_bytes(), b[6], sizeof b[6]));
	printf("  window 0x%" PRIxPTR " + %s%s, summary tree reservation %s, grow failures %" PRIu64
	       "\n",
	       s.window_base, size_str(s.window_bytes, b[0], sizeof b[0]),
	       s.window_fallback ? " (fallback: full 48-bit window refused)" : "",
	       size_str(s.summary_reserved, b[1], sizeof b[1]), s.grow_failures);
	static const char *const modes[] = {"off", "per-CPU locks", "restartable sequences"};
	printf("  per-CPU page caches: %s, %u CPUs; holding %zu free + %zu queued pages"
	       " (inside inuse); %" PRIu64 " refills, %" PRIu64 " drains\n\n",
	       s.cache_mode >= 0 && s.cache_mode <= 2 ? modes[s.cache_mode] : "?", s.cache_cpus,
	       s.cache_free / PA_PAGE_BYTES, s.cache_queued / PA_PAGE_BYTES, s.cache_refills,
	       s.cache_drains);
}

/* Pages the per-CPU caches hold (free or queued), and how often they refilled. */
struct cache_view {
	size_t held;
	uint64_t refills;
};

static struct cache_view cache_view(void)
{
	struct pa_stats s;
	struct cache_view v = {0, 0};
	if (pa_stats(&s) == 0) {
		v.held = (s.cache_free + s.cache_queued) / PA_PAGE_BYTES;
		v.refills = s.cache_refills;
	}
	return v;
}

/* Did the request between before and after go through a CPU's page cache? */
static int via_cache(struct cache_view before, struct cache_view after)
{
	return after.refills != before.refills || after.held != before.held;
}

static size_t inuse_bytes(void)
{
	struct pa_stats s;
	return pa_stats(&s) == 0 ? s.heap_inuse : (size_t)-1;
}

/* Fill a run with a pattern derived from its index: every byte of small runs,
 * the first and last page of big ones (the rest is never touched, so the
 * kernel never supplies it: compare mapped with the OS's RSS). */
static void fill(struct run *r, size_t idx)
{
	size_t bytes = r->npages * PA_PAGE_BYTES;
	unsigned char v = (unsigned char)(0xA0 + idx);
	if (r->npages <= FULL_WRITE_PAGES) {
		memset(r->p, v, bytes);
	} else {
		memset(r->p, v, PA_PAGE_BYTES);
		memset(r->p + bytes - PA_PAGE_BYTES, v, PA_PAGE_BYTES);
	}
}

static int intact(const struct run *r, size_t idx)
{
	size_t bytes = r->npages * PA_PAGE_BYTES;
	unsigned char v = (unsigned char)(0xA0 + idx);
	size_t check = r->npages <= FULL_WRITE_PAGES ? bytes : PA_PAGE_BYTES;
	for (size_t i = 0; i < check; i++)
		if (r->p[i] != v || r->p[bytes - 1 - i] != v)
			return 0;
	return 1;
}

/* Allocate a run and write to it; *cached says whether a CPU cache served it. */
static struct run *alloc_run(size_t npages, int *cached)
{
	if (nruns == MAX_RUNS) {
		printf("  too many runs\n");
		exit(1);
	}
	struct run *r = &runs[nruns];
	struct cache_view before = cache_view();
	r->p = pa_pages_alloc(npages);
	if (r->p == NULL) {
		printf("  pa_pages_alloc(%zu) failed: %s\n", npages, strerror(errno));
		exit(1);
	}
	*cached = via_cache(before, cache_view());
	r->npages = npages;
	r->live = 1;
	fill(r, nruns);
	nruns++;
	return r;
}

/* Free a run; returns whether the pages went to a CPU cache (not the heap). */
static int free_run(struct run *r)
{
	struct cache_view before = cache_view();
	pa_pages_free(r->p, r->npages);
	r->live = 0;
	return via_cache(before, cache_view());
}

/* Holes the demo freed into the heap itself, in address order. The heap may
 * hold more free space that the demo cannot see (the rest of its last growth,
 * right above the highest run); first fit may use that too, where it is lower. */
struct hole {
	uintptr_t base;
	size_t npages;
	char runs[32]; /* the runs whose frees made it, "#4" or "#4+#6" */
};
static struct hole holes[MAX_RUNS];
static size_t nholes;

/* "run #4" or "runs #0+#2" */
static const char *hole_runs(const struct hole *h, char *buf, size_t len)
{
	snprintf(buf, len, "run%s %s", strchr(h->runs, '+') ? "s" : "", h->runs);
	return buf;
}

static uintptr_t hole_end(const struct hole *h)
{
	return h->base + h->npages * PA_PAGE_BYTES;
}

/* Merge holes[i + 1] into holes[i]. */
static void hole_merge_next(size_t i)
{
	char joined[sizeof holes[0].runs];
	/* A label too long for the field is cut, its last kept character '~'. */
	if (snprintf(joined, sizeof joined, "%s+%s", holes[i].runs, holes[i + 1].runs) >=
	    (int)sizeof joined)
		joined[sizeof joined - 2] = '~';
	memcpy(holes[i].runs, joined, sizeof joined);
	holes[i].npages += holes[i + 1].npages;
	memmove(&holes[i + 1], &holes[i + 2], (nholes - i - 2) * sizeof holes[0]);
	nholes--;
}

/* Add the hole run #run leaves; one that touches another merges with it, as
 * free pages do in the heap. Returns the hole it ended up in. */
static const struct hole *hole_add(uintptr_t base, size_t npages, size_t run)
{
	size_t i = nholes++;
	while (i > 0 && holes[i - 1].base > base) {
		holes[i] = holes[i - 1];
		i--;
	}
	holes[i] = (struct hole){.base = base, .npages = npages};
	snprintf(holes[i].runs, sizeof holes[i].runs, "#%zu", run);
	if (i + 1 < nholes && hole_end(&holes[i]) == holes[i + 1].base)
		hole_merge_next(i);
	if (i > 0 && hole_end(&holes[i - 1]) == holes[i].base)
		hole_merge_next(--i);
	return &holes[i];
}

static const char *run_size(size_t npages, char *buf, size_t len)
{
	char b[32];
	snprintf(buf, len, "%zu page%s (%s)", npages, npages == 1 ? "" : "s",
	         size_str(npages * PA_PAGE_BYTES, b, sizeof b));
	return buf;
}

/* The 64-page group (a per-CPU cache's unit) that holds address a. */
static uintptr_t group_of(uintptr_t a)
{
	return a & ~(64 * PA_PAGE_BYTES - 1);
}

/* A CPU cache's refill took the free pages of the group at g out of the
 * heap: they leave the holes (a hole it cut through goes on above it). */
static void hole_carve_group(uintptr_t g)
{
	uintptr_t ge = g + 64 * PA_PAGE_BYTES;
	for (size_t i = 0; i < nholes; i++) {
		struct hole *h = &holes[i];
		uintptr_t he = hole_end(h);
		if (he <= g || h->base >= ge)
			continue;
		if (h->base < g && he > ge && nholes < MAX_RUNS) { /* the group is inside: split */
			memmove(h + 1, h, (nholes - i) * sizeof holes[0]);
			nholes++;
			h[1].base = ge;
			h[1].npages = (he - ge) / PA_PAGE_BYTES;
			h->npages = (g - h->base) / PA_PAGE_BYTES;
			return;
		}
		if (h->base < g) {
			h->npages = (g - h->base) / PA_PAGE_BYTES;
		} else if (he > ge) {
			h->npages = (he - ge) / PA_PAGE_BYTES;
			h->base = ge;
		} else {
			memmove(h, h + 1, (nholes - i - 1) * sizeof holes[0]);
			nholes--;
			i--;
		}
	}
}

/* Say where run i landed relative to the runs before it. */
static void describe_placement(size_t i, int cached)
{
	uintptr_t a = (uintptr_t)runs[i].p;
	size_t below = MAX_RUNS; /* the earlier run closest below a */
	for (size_t j = 0; j < i; j++) {
		if ((uintptr_t)runs[j].p < a && (below == MAX_RUNS || runs[j].p > runs[below].p))
			below = j;
	}
	if (i == 0)
		return;
	if (below == MAX_RUNS) {
		printf("  below every earlier run: the heap grew into a new, lower arena");
		return;
	}
	uintptr_t end = (uintptr_t)runs[below].p + runs[below].npages * PA_PAGE_BYTES;
	if (a == end)
		printf("  right after run #%zu", below);
	else if (!cached && group_of(end - 1) == group_of(a - 1))
		printf("  above the 64-page group the CPU cache took");
	else
		printf("  %zu pages above run #%zu", (a - end) / PA_PAGE_BYTES, below);
}

/* Allocate npages and explain where it landed. */
static void alloc_and_explain(size_t npages)
{
	char b[48];
	int cached;
	uint64_t refills = cache_view().refills;
	struct run *r = alloc_run(npages, &cached);
	uintptr_t a = (uintptr_t)r->p;
	printf("  run #%-2zu %-25s -> %p  ", nruns - 1, run_size(npages, b, sizeof b),
	       (void *)r->p);
	if (cached && cache_view().refills != refills) {
		/* This CPU's cache was empty (the thread may have moved to another
		 * CPU): it refilled with the first group holding a free page. */
		uintptr_t g = group_of(a);
		printf("CPU cache, refilled with group 0x%" PRIxPTR, g);
		if (nholes > 0 && holes[0].base < g) {
			printf("  FIRST FIT VIOLATED: the hole at 0x%" PRIxPTR
			       " has a free page in a lower group\n",
			       holes[0].base);
			failures++;
			return;
		}
		printf(", the lowest group with a free page\n");
		hole_carve_group(g);
		return;
	}
	if (cached) {
		printf("CPU cache: the lowest free pages of its group 0x%" PRIxPTR "\n",
		       group_of(a));
		return;
	}

	/* First fit: no hole below the result may have had room. */
	for (size_t i = 0; i < nholes && holes[i].base < a; i++) {
		if (holes[i].npages >= npages && hole_end(&holes[i]) <= a) {
			printf("FIRST FIT VIOLATED: the hole of %zu pages at 0x%" PRIxPTR
			       " is lower and has room\n",
			       holes[i].npages, holes[i].base);
			failures++;
			return;
		}
	}
	for (size_t i = 0; i < nholes; i++) {
		struct hole *h = &holes[i];
		if (a < h->base || a >= hole_end(h))
			continue;
		if (a != h->base) {
			printf("FIRST FIT VIOLATED: inside the hole left by %s, not at its start\n",
			       hole_runs(h, b, sizeof b));
			failures++;
			return;
		}
		if (npages <= h->npages) {
			printf("heap: lowest hole with room, left by %s (%zu pages, %zu left)\n",
			       hole_runs(h, b, sizeof b), h->npages, h->npages - npages);
			h->base += npages * PA_PAGE_BYTES; /* the rest stays free, just above */
			h->npages -= npages;
		} else {
			/* Only possible where the hole runs on into free heap above it. */
			printf("heap: lowest free space with room = the hole left by %s (%zu pages)"
			       " and the free heap above it\n",
			       hole_runs(h, b, sizeof b), h->npages);
			memmove(h, h + 1, (nholes - i - 1) * sizeof holes[0]);
			nholes--;
		}
		return;
	}
	printf("heap: no hole has room; free heap above the runs\n");
}

int main(void)
{
	/* The 1 GiB run is #1, so it stays live through phase 2: it may need an
	 * arena of its own, wherever the OS puts it, and leaves no hole there. */
	static const size_t sizes[] = {1, (size_t)1 << 17 /* 1 GiB */, 3, 16, 100, 512, 2048};
	const size_t nsizes = sizeof sizes / sizeof sizes[0];
	char b[48];

	/* Until phase 5 the scavenger leaves free runs alone: while it releases
	 * a run, the run is out of circulation, and an allocation in that moment
	 * lands above the hole, which the first-fit checks below would report as
	 * a violation. Under valgrind every phase takes seconds, so the holes
	 * outlive the 1 s delay. */
	pa_config_set("scavenge_delay_ms", "3600000");
	printf("libpagealloc page-heap demo: %zu KiB pages, address-ordered first fit\n",
	       PA_PAGE_BYTES / 1024);
	print_stats("0: before any allocation");

	/* Phase 1: one run of each size. */
	printf("phase 1: allocate %zu runs and write to them\n", nsizes);
	for (size_t i = 0; i < nsizes; i++) {
		int cached;
		struct run *r = alloc_run(sizes[i], &cached);
		printf("  run #%-2zu %-25s at %p  %s", i, run_size(sizes[i], b, sizeof b),
		       (void *)r->p, cached ? "CPU cache" : "heap     ");
		describe_placement(i, cached);
		printf("%s\n", r->npages > FULL_WRITE_PAGES ? "  [wrote first+last page]" : "");
	}
	print_stats("1: after allocating");

	/* Phase 2: free every other run, leaving holes between live runs. */
	printf("phase 2: free every other run (#0, #2, #4, #6)\n");
	size_t freed_pages = 0;
	for (size_t i = 0; i < nsizes; i += 2) {
		int cached = free_run(&runs[i]);
		freed_pages += runs[i].npages;
		printf("  freed run #%-2zu %-25s at %p  -> ", i,
		       run_size(runs[i].npages, b, sizeof b), (void *)runs[i].p);
		if (cached) {
			printf("back into the CPU cache\n");
			continue;
		}
		char hb[48];
		const struct hole *h = hole_add((uintptr_t)runs[i].p, runs[i].npages, i);
		if (h->npages == runs[i].npages)
			printf("heap: a free hole\n");
		else
			printf("heap: merges with its free neighbour: one hole of %zu pages, left "
			       "by %s\n",
			       h->npages, hole_runs(h, hb, sizeof hb));
	}
	int ok = 1;
	for (size_t i = 1; i < nsizes; i += 2)
		ok &= intact(&runs[i], i);
	printf("  freed %zu pages; the live runs #1, #3, #5 kept their bytes: %s\n", freed_pages,
	       ok ? "yes" : "NO");
	if (!ok)
		failures++;
	print_stats("2: after freeing every other run");

	/* Phase 3: new requests fill the lowest hole that holds them. */
	printf("phase 3: allocate again; first fit puts each run in the lowest hole with room\n");
	static const size_t again[] = {1, 10, 6, 16, 64, 300, 600, 4096};
	size_t first_new = nruns;
	for (size_t i = 0; i < sizeof again / sizeof again[0]; i++)
		alloc_and_explain(again[i]);
	if (runs[first_new].p == runs[0].p)
		printf("  -> the next 1-page request reused %p, the lowest free page (run #0's)\n",
		       (void *)runs[0].p);
	print_stats("3: after reusing holes");

	/* Phase 4: free everything that is live, checking every run's bytes first. */
	printf("phase 4: free everything, then flush the per-CPU caches\n");
	size_t nfree = 0;
	for (size_t i = 0; i < nruns; i++) {
		if (!runs[i].live)
			continue;
		if (!intact(&runs[i], i)) {
			printf("  run #%zu at %p lost its bytes\n", i, (void *)runs[i].p);
			failures++;
		}
		free_run(&runs[i]);
		nfree++;
	}
	size_t inuse = inuse_bytes();
	printf("  freed %zu runs; inuse %s (the caches' pages count as in use)\n", nfree,
	       size_str(inuse, b, sizeof b));
	pa_cache_flush();
	inuse = inuse_bytes();
	printf("  after pa_cache_flush(): inuse %zu bytes%s\n", inuse,
	       inuse == 0 ? "" : "  (EXPECTED 0)");
	if (inuse != 0)
		failures++;
	print_stats("4: everything free");

	pa_config_set("scavenge_delay_ms", "1000");
	printf("\nphase 5: the scavenger gives free memory back to the OS\n");
	printf("  'released' counts free pages given back (or never handed out since the heap\n"
	       "  grew); the background thread releases memory that stayed free for\n"
	       "  scavenge_delay_ms (1 s), highest addresses first, at ~1%% of one CPU.\n");
	struct pa_stats before, after;
	pa_stats(&before);
	sleep(2);
	pa_stats(&after);
	printf("  after 2 s of background scavenging: released %s more in %llu madvise calls,\n"
	       "  using %.2f ms of CPU\n",
	       size_str(after.heap_released - before.heap_released, b, sizeof b),
	       (unsigned long long)(after.release_calls - before.release_calls),
	       (after.scavenger_cpu_ns - before.scavenger_cpu_ns) / 1e6);
	size_t got = pa_scavenge(0);
	pa_stats(&after);
	printf("  pa_scavenge(0) released the remaining %s: released == free: %s\n",
	       size_str(got, b, sizeof b), after.heap_released == after.heap_free ? "yes" : "NO");
	if (after.heap_released != after.heap_free)
		failures++;
	print_stats("5: final");

	if (failures) {
		printf("%d check(s) FAILED\n", failures);
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}
