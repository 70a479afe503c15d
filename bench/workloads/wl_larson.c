/*
 * wl_larson.c — a Larson-style server: objects die in other threads.
 *
 * Larson and Krishnan's benchmark models a server whose threads each hold a
 * set of live objects and replace them at random; here, as in a server that
 * hands requests between worker threads, the replaced object is not freed by
 * its owner but sent to another thread (picked at random) through that
 * thread's queue (wl_queue.h), and that thread frees it. T threads (default
 * 4, more than this machine's 2 cores), each with `slots` live objects of
 * 16 .. 1024 B (uniform), each doing `ops` replacements. A thread that finds
 * a queue full frees what is in its own queue and tries again, so nobody
 * waits on a thread that is waiting.
 *
 * Self-check: every object carries (thread, sequence, size) at the front and
 * a byte at the end, checked by the thread that frees it; the frees must
 * equal the mallocs. Figure: wall time (tools/compare.sh), and Mops/s.
 * Usage: wl-larson [--quick] [threads=4] [ops=3000000] [slots=1000]
 */
#include <sched.h>

#include "wl_queue.h"

#define MIN_OBJ 16
#define MAX_OBJ 1024
#define QUEUE_BATCHES 256
#define MAX_THREADS 1024

struct worker {
	/* Objects this thread is to free; the record starts a cache line
	 * (wl_xmalloc_lines). */
	_Alignas(WL_LINE) struct wl_queue in;
	size_t id;
	uint64_t frees, checksum;
	pthread_t thread;
};

static struct worker *workers;
static size_t nthreads, nslots;
static uint64_t nops;
static size_t done_pushing; /* threads past their last push (__atomic) */

/* A thread's frees and checksum, on its own stack until it ends: in the
 * worker array they would share cache lines with the next worker's queue,
 * which other threads lock (the harness's false sharing). */
struct tally {
	uint64_t frees, checksum;
};

static void free_batch(struct tally *tl, const struct wl_batch *b)
{
	for (size_t k = 0; k < b->n; k++) {
		tl->checksum += wl_tag_free(b->p[k], MIN_OBJ, MAX_OBJ);
		tl->frees++;
	}
}

static int drain_one(struct worker *w, struct tally *tl)
{
	struct wl_batch b;
	if (!wl_queue_try_pop(&w->in, &b))
		return 0;
	free_batch(tl, &b);
	return 1;
}

static void push_to(struct worker *w, struct tally *tl, size_t to, struct wl_batch *b)
{
	while (!wl_queue_try_push(&workers[to].in, b))
		if (!drain_one(w, tl))
			sched_yield();
	b->n = 0;
}

static void *work(void *arg)
{
	struct worker *w = (struct worker *)arg;
	wl_rng rng = wl_rng_seed(w->id + 100);
	void **slot = (void **)wl_xmalloc(nslots * sizeof(*slot));
	struct wl_batch *out = (struct wl_batch *)wl_xmalloc(nthreads * sizeof(*out));
	uint64_t seq = 0;
	struct tally tl = {0, 0};
	for (size_t t = 0; t < nthreads; t++)
		out[t].n = 0;

	for (uint64_t op = 0; op < nops + nslots; op++) {
		size_t i = op < nslots ? op : (size_t)wl_below(&rng, nslots);
		if (op >= nslots) {
			size_t to = (w->id + 1 + (size_t)wl_below(&rng, nthreads - 1)) % nthreads;
			out[to].p[out[to].n++] = slot[i];
			if (out[to].n == WL_BATCH)
				push_to(w, &tl, to, &out[to]);
		}
		size_t size = MIN_OBJ + (size_t)wl_below(&rng, MAX_OBJ - MIN_OBJ + 1);
		unsigned char *p = (unsigned char *)wl_xmalloc(size);
		wl_tag_new(p, w->id, seq++, size);
		slot[i] = p;
		if ((op & 63) == 0)
			drain_one(w, &tl);
	}
	/* Hand over everything still held, then free what others send until
	 * every thread has made its last push. */
	for (size_t i = 0; i < nslots; i++) {
		size_t to = (w->id + 1 + i % (nthreads - 1)) % nthreads;
		out[to].p[out[to].n++] = slot[i];
		if (out[to].n == WL_BATCH)
			push_to(w, &tl, to, &out[to]);
	}
	for (size_t t = 0; t < nthreads; t++)
		if (out[t].n > 0)
			push_to(w, &tl, t, &out[t]);
	__atomic_add_fetch(&done_pushing, 1, __ATOMIC_ACQ_REL);
	while (__atomic_load_n(&done_pushing, __ATOMIC_ACQUIRE) < nthreads)
		if (!drain_one(w, &tl))
			sched_yield();
	while (drain_one(w, &tl))
		;
	w->frees = tl.frees;
	w->checksum = tl.checksum;
	free(slot);
	free(out);
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {
	    {"threads", 4, 4}, {"ops", 3000000, 300000}, {"slots", 1000, 1000}};
	wl_parse(argc, argv, "wl-larson", params, 3);
	nthreads = (size_t)params[0].value;
	nops = (uint64_t)params[1].value;
	nslots = (size_t)params[2].value;
	if (nthreads < 2 || nthreads > MAX_THREADS || nslots < 1 || nops >= (1ull << 40))
		wl_die("need 2 <= threads <= %d, slots >= 1, ops < 2^40", MAX_THREADS);

	workers = (struct worker *)wl_xmalloc_lines(nthreads * sizeof(*workers));
	for (size_t t = 0; t < nthreads; t++) {
		wl_queue_init(&workers[t].in, QUEUE_BATCHES);
		workers[t].id = t;
		workers[t].frees = workers[t].checksum = 0;
	}
	uint64_t t0 = wl_now_ns();
	for (size_t t = 0; t < nthreads; t++)
		wl_thread_create(&workers[t].thread, work, &workers[t]);
	uint64_t frees = 0, checksum = 0;
	for (size_t t = 0; t < nthreads; t++) {
		pthread_join(workers[t].thread, NULL);
		frees += workers[t].frees;
		checksum += workers[t].checksum;
	}
	double secs = (double)(wl_now_ns() - t0) / 1e9;
	uint64_t mallocs = nthreads * (nops + nslots);
	if (frees != mallocs)
		wl_die("%llu frees for %llu mallocs", (unsigned long long)frees,
		       (unsigned long long)mallocs);
	for (size_t t = 0; t < nthreads; t++)
		wl_queue_destroy(&workers[t].in);
	free(workers);
	printf("wl-larson ok threads=%zu mallocs=%llu mops_per_s=%.2f checksum=%llx\n", nthreads,
	       (unsigned long long)mallocs, (double)mallocs / secs / 1e6,
	       (unsigned long long)checksum);
	return 0;
}
