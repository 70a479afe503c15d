/*
 * wl_threads.c — many more threads than cores, then all of them idle.
 *
 * `threads` threads (default 64, on this machine's 2 cores) each replace
 * objects of 16 .. 2048 B (log-uniform) in a working set of `slots`, `ops`
 * times, free everything they hold, and wait at a barrier. While they idle,
 * the main thread reads RSS at once (idle0_mib) and after idle_s seconds
 * (idle_mib): what is left is memory the allocator keeps in per-thread or
 * per-CPU caches and has not given back. Then the threads exit and RSS is
 * read once more (exit_mib). peak_mib: the largest RSS sampled (50 ms).
 *
 * Self-check: each object holds its thread, sequence and size, checked when
 * freed. Usage: wl-threads [--quick] [threads=64] [ops=200000] [slots=256] [idle_s=2]
 */
#include "wl_common.h"

#define MIN_OBJ 16
#define MAX_OBJ 2048
#define MAX_THREADS 4096

struct worker {
	_Alignas(WL_LINE) size_t id; /* a line each: see wl_xmalloc_lines */
	uint64_t checksum;
	pthread_t thread;
};

static uint64_t nops;
static size_t nslots;
static pthread_barrier_t idle_start, idle_end;

static uint64_t drop(void *obj)
{
	return wl_tag_free(obj, MIN_OBJ, MAX_OBJ);
}

static void *work(void *arg)
{
	struct worker *w = (struct worker *)arg;
	wl_rng rng = wl_rng_seed(w->id + 9);
	void **slot = (void **)wl_xmalloc(nslots * sizeof(*slot));
	/* Summed here and stored once at the end: the workers sit side by side
	 * in one array, and a store to w->checksum on every op made the threads
	 * share a cache line (the harness's false sharing, not the allocator's). */
	uint64_t seq = 0, checksum = 0;
	for (uint64_t op = 0; op < nops + nslots; op++) {
		size_t i = op < nslots ? op : (size_t)wl_below(&rng, nslots);
		if (op >= nslots)
			checksum += drop(slot[i]);
		size_t size = wl_logsize(&rng, MIN_OBJ, MAX_OBJ);
		unsigned char *p = (unsigned char *)wl_xmalloc(size);
		wl_tag_new(p, w->id, seq++, size);
		slot[i] = p;
	}
	for (size_t i = 0; i < nslots; i++)
		checksum += drop(slot[i]);
	w->checksum = checksum;
	free(slot);
	pthread_barrier_wait(&idle_start);
	pthread_barrier_wait(&idle_end);
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {
	    {"threads", 64, 64}, {"ops", 200000, 10000}, {"slots", 256, 256}, {"idle_s", 2, 0.2}};
	wl_parse(argc, argv, "wl-threads", params, 4);
	size_t nthreads = (size_t)params[0].value;
	nops = (uint64_t)params[1].value;
	nslots = (size_t)params[2].value;
	unsigned idle_ms = (unsigned)(params[3].value * 1000);
	if (nthreads < 1 || nthreads > MAX_THREADS || nslots < 1 || nops >= (1ull << 37))
		wl_die("need 1 <= threads <= %d, slots >= 1, ops < 2^37", MAX_THREADS);

	struct worker *w = (struct worker *)wl_xmalloc_lines(nthreads * sizeof(*w));
	wl_barrier_init(&idle_start, (unsigned)nthreads + 1);
	wl_barrier_init(&idle_end, (unsigned)nthreads + 1);
	struct wl_tracer tr;
	wl_tracer_start(&tr, NULL, NULL);
	for (size_t t = 0; t < nthreads; t++) {
		w[t].id = t;
		w[t].checksum = 0;
		wl_thread_create(&w[t].thread, work, &w[t]);
	}
	pthread_barrier_wait(&idle_start);
	double idle0 = wl_rss_mib();
	wl_sleep_ms(idle_ms);
	double idle = wl_rss_mib();
	pthread_barrier_wait(&idle_end);
	uint64_t checksum = 0;
	for (size_t t = 0; t < nthreads; t++) {
		pthread_join(w[t].thread, NULL);
		checksum += w[t].checksum;
	}
	double exit_mib = wl_rss_mib();
	wl_tracer_stop(&tr);
	pthread_barrier_destroy(&idle_start);
	pthread_barrier_destroy(&idle_end);
	free(w);
	printf("wl-threads ok threads=%zu peak_mib=%.1f idle0_mib=%.1f idle_mib=%.1f exit_mib=%.1f "
	       "checksum=%llx\n",
	       nthreads, (double)tr.peak_rss / WL_MIB, idle0, idle, exit_mib,
	       (unsigned long long)checksum);
	return 0;
}
