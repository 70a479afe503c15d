/*
 * wl_chase.c — a pointer chase over a large heap of small malloc'd objects:
 * what a heap larger than the TLB's reach costs in page walks, and what
 * huge pages under it save.
 *
 *   fill: malloc N objects of S bytes (heap_mib of them), writing each as it
 *         comes; each malloc + first write is timed (the mallocs that take
 *         fresh memory: their slowest 0.1% and 0.01% are reported);
 *   link: one random cycle through all of them (a Fisher-Yates shuffle of
 *         the indices, so consecutive steps land anywhere in the heap);
 *   settle: wait up to settle_s seconds, sampling the kernel's AnonHugePages
 *         (/proc/self/smaps_rollup) every 100 ms: huge_ratio is its share of
 *         the objects' bytes at the end, huge90_s when it first reached 90%;
 *   chase: steps dependent loads along the cycle; step_ns is the time per
 *         step, step_cpu_ns the thread's CPU time per step (what the chase
 *         costs without the time it waited for a CPU on a shared machine).
 *
 * order=1 links the cycle in allocation order instead (each step the next
 * object: what the prefetchers make cheap), a control for the random one.
 * The index arrays are mmap'd, not malloc'd: only the objects are heap.
 *
 * Usage: wl-chase [--quick] [heap_mib=1024] [size=64] [steps=30000000]
 *                 [settle_s=5] [order=0] [seed=1]
 * Prints: wl-chase ok step_ns=... step_cpu_ns=... huge_ratio=... huge90_s=... fill_s=...
 *         p999_ns=... p9999_ns=... max_ns=... rss_mib=... checksum=X
 */
#include <sys/mman.h>

#include "wl_common.h"

#define WL_MADV_COLLAPSE 25 /* Linux 6.1; glibc 2.36's headers lack it */

struct obj {
	struct obj *next;
	uint64_t id;
};

static void *map_array(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		wl_die("mmap(%zu): %s", bytes, strerror(errno));
	return p;
}

/* The kernel's huge-page-backed anonymous bytes of this process. */
static size_t anon_huge_bytes(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	if (f == NULL)
		return 0;
	char line[256];
	size_t kb = 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
			break;
	fclose(f);
	return kb << 10;
}

/* The calling thread's CPU time: on a shared machine the chase's wall time
 * also counts the time it waited for a CPU. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {
	    {"heap_mib", 1024, 64}, {"size", 64, 64}, {"steps", 30e6, 1e6}, {"settle_s", 5, 1},
	    {"order", 0, 0},        {"seed", 1, 1},   {"raw", 0, 0},
	};
	wl_parse(argc, argv, "wl-chase", params, sizeof(params) / sizeof(params[0]));
	size_t heap = (size_t)params[0].value << 20, size = (size_t)params[1].value;
	uint64_t steps = (uint64_t)params[2].value;
	double settle_s = params[3].value;
	int order = params[4].value != 0;
	wl_rng rng = wl_rng_seed((uint64_t)params[5].value);
	int raw = (int)params[6].value;
	if (size < sizeof(struct obj))
		wl_die("size must be at least %zu", sizeof(struct obj));
	size_t n = heap / size;

	struct obj **objs = map_array(n * sizeof(*objs));
	uint32_t *lat = map_array(n * sizeof(*lat));
	/* Faulted in now, so that the timed loop's faults are the heap's. */
	memset(objs, 0, n * sizeof(*objs));
	memset(lat, 0, n * sizeof(*lat));
	const size_t hp = (size_t)2 << 20;
	char *cells = NULL;
	if (raw != 0) {
		cells = map_array(n * size + hp);
		cells += (hp - (uintptr_t)cells % hp) % hp;
	}
	uint64_t t0 = wl_now_ns(), prev = t0;
	for (size_t i = 0; i < n; i++) {
		struct obj *o = raw != 0 ? (struct obj *)(cells + i * size) : wl_xmalloc(size);
		o->next = NULL;
		o->id = i;
		uint64_t t = wl_now_ns();
		lat[i] = t - prev > UINT32_MAX ? UINT32_MAX : (uint32_t)(t - prev);
		prev = t;
		objs[i] = o;
	}
	double fill_s = (double)(wl_now_ns() - t0) / 1e9;
	for (size_t off = 0; raw == 2 && off + hp <= n * size; off += hp)
		if (madvise(cells + off, hp, WL_MADV_COLLAPSE) != 0)
			wl_die("MADV_COLLAPSE: %s", strerror(errno));
	qsort(lat, n, sizeof(*lat), cmp_u32);
	uint32_t p999 = lat[n - 1 - n / 1000], p9999 = lat[n - 1 - n / 10000], mx = lat[n - 1];
	munmap(lat, n * sizeof(*lat));

	/* The cycle: a random permutation of the objects (or allocation order). */
	uint32_t *perm = map_array(n * sizeof(*perm));
	for (size_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	for (size_t i = n - 1; !order && i > 0; i--) {
		size_t j = wl_below(&rng, i + 1);
		uint32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		objs[perm[i]]->next = objs[perm[(i + 1) % n]];
	struct obj *start = objs[perm[0]];
	munmap(perm, n * sizeof(*perm));

	/* Settle: the heap as the allocator and the kernel leave it. */
	uint64_t s0 = wl_now_ns();
	double huge90 = -1;
	size_t huge = anon_huge_bytes();
	for (;;) {
		double t = (double)(wl_now_ns() - s0) / 1e9;
		if (huge90 < 0 && (double)huge >= 0.9 * (double)(n * size))
			huge90 = t;
		if (t >= settle_s)
			break;
		wl_sleep_ms(100);
		huge = anon_huge_bytes();
	}

	uint64_t c0 = wl_now_ns(), u0 = thread_cpu_ns();
	struct obj *p = start;
	uint64_t sum = 0;
	for (uint64_t k = 0; k < steps; k++) {
		p = p->next;
		sum += p->id;
	}
	double step_ns = (double)(wl_now_ns() - c0) / (double)steps;
	double step_cpu_ns = (double)(thread_cpu_ns() - u0) / (double)steps;
	printf("wl-chase ok step_ns=%.1f step_cpu_ns=%.1f huge_ratio=%.3f huge90_s=%.1f "
	       "fill_s=%.2f p999_ns=%u "
	       "p9999_ns=%u max_ns=%u rss_mib=%.0f huge_mib=%.0f checksum=%llx\n",
	       step_ns, step_cpu_ns, (double)huge / (double)(n * size), huge90, fill_s, p999, p9999,
	       mx, wl_rss_mib(), (double)huge / WL_MIB, (unsigned long long)sum);
	for (size_t i = 0; raw == 0 && i < n; i++)
		free(objs[i]);
	munmap(objs, n * sizeof(*objs));
	return 0;
}
