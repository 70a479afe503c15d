/*
 * wl_small.c — small-object churn, in one thread or several.
 *
 * Each thread keeps `slots` live objects of 16 .. 512 B (uniform) and
 * replaces one picked at random `ops` times: the fast path of every
 * allocator's per-thread (or per-CPU) cache, with a working set of ~1 MiB per
 * thread. threads=1 and threads=2 (this machine's core count) are the two
 * cases tools/compare.sh runs.
 *
 * Self-check: each object holds its thread and sequence number at the front
 * and a byte at the end, checked when freed. Figure: wall time.
 * Usage: wl-small [--quick] [threads=1] [ops=20000000] [slots=4096] (ops per thread)
 */
#include "wl_common.h"

#define MIN_OBJ 16
#define MAX_OBJ 512
#define MAX_THREADS 1024

struct worker {
	_Alignas(WL_LINE) size_t id; /* a line each: see wl_xmalloc_lines */
	uint64_t checksum;
	pthread_t thread;
};

static uint64_t nops;
static size_t nslots;

static uint64_t drop(void *obj)
{
	return wl_tag_free(obj, MIN_OBJ, MAX_OBJ);
}

static void *work(void *arg)
{
	struct worker *w = (struct worker *)arg;
	wl_rng rng = wl_rng_seed(w->id + 7);
	void **slot = (void **)wl_xmalloc(nslots * sizeof(*slot));
	/* Summed here and stored once at the end: the workers sit side by side
	 * in one array, and a store to w->checksum on every op made the threads
	 * share a cache line (the harness's false sharing, not the allocator's). */
	uint64_t seq = 0, checksum = 0;
	for (uint64_t op = 0; op < nops + nslots; op++) {
		size_t i = op < nslots ? op : (size_t)wl_below(&rng, nslots);
		if (op >= nslots)
			checksum += drop(slot[i]);
		size_t size = MIN_OBJ + (size_t)wl_below(&rng, MAX_OBJ - MIN_OBJ + 1);
		unsigned char *p = (unsigned char *)wl_xmalloc(size);
		wl_tag_new(p, w->id, seq++, size);
		slot[i] = p;
	}
	for (size_t i = 0; i < nslots; i++)
		checksum += drop(slot[i]);
	w->checksum = checksum;
	free(slot);
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {
	    {"threads", 1, 1}, {"ops", 20000000, 1000000}, {"slots", 4096, 4096}};
	wl_parse(argc, argv, "wl-small", params, 3);
	size_t nthreads = (size_t)params[0].value;
	nops = (uint64_t)params[1].value;
	nslots = (size_t)params[2].value;
	if (nthreads < 1 || nthreads > MAX_THREADS || nslots < 1 || nops >= (1ull << 38))
		wl_die("need 1 <= threads <= %d, slots >= 1, ops < 2^38", MAX_THREADS);

	struct worker *w = (struct worker *)wl_xmalloc_lines(nthreads * sizeof(*w));
	uint64_t t0 = wl_now_ns(), checksum = 0;
	for (size_t t = 0; t < nthreads; t++) {
		w[t].id = t;
		w[t].checksum = 0;
		wl_thread_create(&w[t].thread, work, &w[t]);
	}
	for (size_t t = 0; t < nthreads; t++) {
		pthread_join(w[t].thread, NULL);
		checksum += w[t].checksum;
	}
	double secs = (double)(wl_now_ns() - t0) / 1e9;
	free(w);
	printf("wl-small ok threads=%zu mops_per_s=%.2f checksum=%llx\n", nthreads,
	       (double)(nops * nthreads) / secs / 1e6, (unsigned long long)checksum);
	return 0;
}
