/*
 * wl_churn.c — many threads churning blocks of every size up to 4 MiB,
 * handed to other threads to be freed.
 *
 * The shape of a server whose requests carry buffers of any size: each of T
 * threads (default 8, four times this machine's 2 cores) keeps `slots` live
 * blocks of 16 B .. 4 MiB (log-uniform, so every size class, large blocks
 * and blocks past the large slots' reach all take part) and replaces one
 * picked at random, `ops` times. The replaced block is not freed by its
 * owner: it goes to a thread picked at random, which frees it when it next
 * looks at its queue (wl_queue.h: a batch of one block, as the blocks are
 * large on average and the queue's lock is cheap beside them); a thread
 * whose target's queue is full frees its own queue's blocks meanwhile. Each
 * new block gets one byte written in every 4 KiB, as a program fills the
 * buffers it asks for, so its pages are resident.
 *
 * The figure is peak RSS (tools/compare.sh's /usr/bin/time, and peak_mib as
 * the 50 ms sampler saw it) against peak_live_mib, the most bytes held at
 * once (slots and blocks in flight: at most QUEUE_BATCHES a thread, but how
 * many depends on how the threads are scheduled, hence the figure). wl-threads and wl-larson
 * churn small blocks only; this is the same kind of program with the large
 * sizes in.
 *
 * Self-check: each block holds (thread, sequence, size) at the front
 * and a byte at the end, checked by the thread that frees it; the frees must
 * equal the mallocs. Usage: wl-churn [--quick] [--trace FILE] [threads=8]
 * [ops=6000] [slots=16] [seed=1]
 */
#include <sched.h>

#include "wl_queue.h"

#define MIN_BLOCK 16
#define MAX_BLOCK (4 * 1024 * 1024)
#define TOUCH_STRIDE 4096
#define QUEUE_BATCHES 4 /* of one block: what is in flight stays small */
#define MAX_THREADS 1024

struct worker {
	/* Blocks this thread is to free; the record starts a cache line
	 * (wl_xmalloc_lines). */
	_Alignas(WL_LINE) struct wl_queue in;
	size_t id;
	uint64_t frees, checksum;
	pthread_t thread;
};

static struct worker *workers;
static size_t nthreads, nslots;
static uint64_t nops, seed;
static size_t done_pushing;  /* threads past their last push (__atomic) */
static volatile size_t live; /* bytes held, slots and in flight (__atomic) */
static size_t peak_live;     /* the largest live seen by a malloc (__atomic) */

struct tally {
	uint64_t frees, checksum;
};

/* The first 8 bytes: owner << 54 | seq << 23 | size (sizes fit in 23 bits,
 * sequences in 31, threads in 10); the last byte from the tag. */
#define SIZE_BITS 23

static void stamp(unsigned char *p, size_t owner, uint64_t seq, size_t size)
{
	uint64_t tag = (uint64_t)owner << 54 | seq << SIZE_BITS | size;
	memcpy(p, &tag, sizeof(tag));
	for (size_t off = TOUCH_STRIDE; off < size; off += TOUCH_STRIDE)
		p[off] = (unsigned char)seq;
	p[size - 1] = (unsigned char)(tag >> SIZE_BITS ^ 0x5a);
}

static void drop(struct tally *tl, unsigned char *p)
{
	uint64_t tag;
	memcpy(&tag, p, sizeof(tag));
	size_t size = (size_t)(tag & ((1u << SIZE_BITS) - 1));
	if (size < MIN_BLOCK || size > MAX_BLOCK ||
	    p[size - 1] != (unsigned char)(tag >> SIZE_BITS ^ 0x5a))
		wl_die("block %llx corrupted", (unsigned long long)tag);
	free(p);
	__atomic_sub_fetch(&live, size, __ATOMIC_RELAXED);
	tl->checksum += tag;
	tl->frees++;
}

static int drain_one(struct worker *w, struct tally *tl)
{
	struct wl_batch b;
	if (!wl_queue_try_pop(&w->in, &b))
		return 0;
	for (size_t k = 0; k < b.n; k++)
		drop(tl, (unsigned char *)b.p[k]);
	return 1;
}

/* Hands p to thread `to`, freeing this thread's own queue while that one's
 * is full. */
static void hand_over(struct worker *w, struct tally *tl, size_t to, void *p)
{
	struct wl_batch b;
	b.n = 1;
	b.p[0] = p;
	while (!wl_queue_try_push(&workers[to].in, &b))
		if (!drain_one(w, tl))
			sched_yield();
}

static void *work(void *arg)
{
	struct worker *w = (struct worker *)arg;
	wl_rng rng = wl_rng_seed(seed * 1000 + w->id);
	void **slot = (void **)wl_xmalloc(nslots * sizeof(*slot));
	uint64_t seq = 0;
	struct tally tl = {0, 0};

	for (uint64_t op = 0; op < nops + nslots; op++) {
		size_t i = op < nslots ? op : (size_t)wl_below(&rng, nslots);
		if (op >= nslots) {
			size_t to = (w->id + 1 + (size_t)wl_below(&rng, nthreads - 1)) % nthreads;
			hand_over(w, &tl, to, slot[i]);
		}
		size_t size = wl_logsize(&rng, MIN_BLOCK, MAX_BLOCK);
		unsigned char *p = (unsigned char *)wl_xmalloc(size);
		size_t now = __atomic_add_fetch(&live, size, __ATOMIC_RELAXED);
		size_t peak = __atomic_load_n(&peak_live, __ATOMIC_RELAXED);
		while (now > peak &&
		       !__atomic_compare_exchange_n(&peak_live, &peak, now, 1, __ATOMIC_RELAXED,
		                                    __ATOMIC_RELAXED))
			;
		stamp(p, w->id, seq++, size);
		slot[i] = p;
		drain_one(w, &tl);
	}
	/* Hand over everything still held, then free what others send until
	 * every thread has made its last push. */
	for (size_t i = 0; i < nslots; i++)
		hand_over(w, &tl, (w->id + 1 + i % (nthreads - 1)) % nthreads, slot[i]);
	__atomic_add_fetch(&done_pushing, 1, __ATOMIC_ACQ_REL);
	while (__atomic_load_n(&done_pushing, __ATOMIC_ACQUIRE) < nthreads)
		if (!drain_one(w, &tl))
			sched_yield();
	while (drain_one(w, &tl))
		;
	w->frees = tl.frees;
	w->checksum = tl.checksum;
	free(slot);
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {
	    {"threads", 8, 4}, {"ops", 6000, 500}, {"slots", 16, 8}, {"seed", 1, 1}};
	struct wl_args args = wl_parse(argc, argv, "wl-churn", params, 4);
	nthreads = (size_t)params[0].value;
	nops = (uint64_t)params[1].value;
	nslots = (size_t)params[2].value;
	seed = (uint64_t)params[3].value;
	if (nthreads < 2 || nthreads > MAX_THREADS || nslots < 1 || nops + nslots >= (1ull << 31))
		wl_die("need 2 <= threads <= %d, slots >= 1, ops + slots < 2^31", MAX_THREADS);

	workers = (struct worker *)wl_xmalloc_lines(nthreads * sizeof(*workers));
	for (size_t t = 0; t < nthreads; t++) {
		wl_queue_init(&workers[t].in, QUEUE_BATCHES);
		workers[t].id = t;
		workers[t].frees = workers[t].checksum = 0;
	}
	struct wl_tracer tr;
	wl_tracer_start(&tr, args.trace, &live);
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
	wl_tracer_stop(&tr);
	uint64_t mallocs = nthreads * (nops + nslots);
	if (frees != mallocs || live != 0)
		wl_die("%llu frees for %llu mallocs, %zu bytes left", (unsigned long long)frees,
		       (unsigned long long)mallocs, (size_t)live);
	for (size_t t = 0; t < nthreads; t++)
		wl_queue_destroy(&workers[t].in);
	free(workers);
	printf("wl-churn ok threads=%zu mallocs=%llu peak_mib=%.1f peak_live_mib=%.1f "
	       "kops_per_s=%.1f checksum=%llx\n",
	       nthreads, (unsigned long long)mallocs, (double)tr.peak_rss / WL_MIB,
	       (double)peak_live / WL_MIB, (double)mallocs / secs / 1e3,
	       (unsigned long long)checksum);
	return 0;
}
