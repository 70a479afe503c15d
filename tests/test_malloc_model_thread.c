/*
 * test_malloc_model_thread.c — four threads run random malloc-family calls
 * against a model of what they hold, pass blocks to each other, and at the
 * end the statistics must say, exactly, that nothing is left.
 *
 * Each thread has its own xorshift generator (fixed seed) and a table of
 * slots. A step picks a slot: an empty one is filled by a random function
 * (pa_malloc, pa_calloc, pa_realloc, pa_aligned_alloc with a power-of-two
 * alignment up to 64 KiB, pa_posix_memalign), sized log-uniformly from 1 B
 * to 1 MiB, mostly small; a full one is freed (pa_free, pa_free_sized with
 * the requested size, or realloc-then-free), resized with pa_realloc, or
 * handed to another thread through that thread's mutex-protected inbox.
 * Every block carries a pattern derived from (thread, sequence) over its
 * whole requested size, written on allocation and checked byte for byte
 * before it is freed or moved (realloc: over the part that survives);
 * calloc memory is checked to be zero first. Every block's usable size
 * must hold the request and its address must have the alignment asked for
 * (16 at least).
 *
 * Halfway, the threads flush their caches and wait at a barrier while the
 * main thread reconciles the model with the statistics: live objects are
 * the blocks held (slots and inboxes), heap_alloc the sum of their usable
 * sizes, and after pa_cache_flush the malloc layer's heap_inuse equals the
 * page heap's. At the end every thread frees what it holds and exits
 * (handing its cache back); then every counter is zero and so is the page
 * heap's heap_inuse.
 *
 * Work: 10^7 operations (allocations, frees, reallocs) over the four
 * threads in an ordinary build; 10^6 under AddressSanitizer or
 * ThreadSanitizer, which run it 10-50 times slower. PA_TEST_SCALE
 * multiplies either.
 */
#include <pthread.h>

#include "testutil.h"

#include "pagealloc.h"

#if TU_UNDER_SANITIZER
#define TOTAL_OPS 1000000.0
#else
#define TOTAL_OPS 10000000.0
#endif

#define NTHREADS 4
#define SLOTS 1024
#define INBOX_CAP 256
#define MAX_BYTES ((size_t)1 << 20)
#define MAX_ALIGN_SHIFT 16 /* 64 KiB */

struct blk {
	unsigned char *p;
	size_t n;     /* requested bytes */
	size_t align; /* requested alignment: 16, or what aligned_alloc was given */
	uint64_t tag; /* (thread, sequence): seeds the pattern */
};

struct inbox {
	pthread_mutex_t mu;
	size_t len; /* under mu */
	struct blk v[INBOX_CAP];
};

struct worker {
	pthread_t thread;
	unsigned id;
	uint64_t rng, seq;
	uint64_t ops, quota;
	uint64_t sent, received, fallback_frees;
	struct blk slot[SLOTS];
	struct inbox in;
	/* The first failure, for the main thread to report (cmocka's
	 * assertions belong to the main thread). */
	unsigned failures;
	char why[256];
};

static struct worker workers[NTHREADS];
static pthread_barrier_t barrier; /* the workers and the main thread */
static unsigned done;             /* workers that will send no more (atomic) */

/* What the main thread saw at the midpoint. */
static struct {
	size_t held, held_usable;
	struct pa_malloc_stats ms;
	struct pa_stats ps;
} mid;

static void failf(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void failf(struct worker *w, const char *fmt, ...)
{
	if (w->failures++ != 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->why, sizeof(w->why), fmt, ap);
	va_end(ap);
}

/* ---- the pattern ---------------------------------------------------------- */

/* Word k of the pattern of `tag` is h(tag) + k * odd: every byte depends
 * on the block and on its position. */
static uint64_t pattern_base(uint64_t tag)
{
	uint64_t x = tag + 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#define PATTERN_STEP 0x2545f4914f6cdd1dull

static void pattern_write(unsigned char *p, size_t n, uint64_t tag)
{
	uint64_t w = pattern_base(tag);
	size_t k = 0;
	for (; k + 8 <= n; k += 8, w += PATTERN_STEP)
		memcpy(p + k, &w, 8);
	if (k < n)
		memcpy(p + k, &w, n - k);
}

/* The first byte of p[0, n) that differs from the pattern, or n. */
static size_t pattern_check(const unsigned char *p, size_t n, uint64_t tag)
{
	uint64_t w = pattern_base(tag);
	unsigned char want[8];
	for (size_t k = 0; k < n; k += 8, w += PATTERN_STEP) {
		size_t len = n - k < 8 ? n - k : 8;
		memcpy(want, &w, 8);
		if (memcmp(p + k, want, len) != 0) {
			for (size_t i = 0; i < len; i++)
				if (p[k + i] != want[i])
					return k + i;
		}
	}
	return n;
}

static void verify(struct worker *w, const struct blk *b, size_t n, const char *when)
{
	size_t bad = pattern_check(b->p, n, b->tag);
	if (bad != n)
		failf(w,
		      "thread %u, %s: block %p (%zu bytes, tag %#" PRIx64 ") differs at byte %zu",
		      w->id, when, (void *)b->p, b->n, b->tag, bad);
}

/* ---- sizes and alignments -------------------------------------------------- */

static uint64_t rnd(struct worker *w)
{
	return tu_xorshift(&w->rng);
}

/* Log-uniform in [1, 1 MiB], mostly small: 90% below 1 KiB, 9.5% up to
 * 32 KiB (the largest class), 0.5% large objects up to 1 MiB. */
static size_t random_size(struct worker *w)
{
	unsigned r = (unsigned)(rnd(w) % 1000), e;
	if (r < 900)
		e = (unsigned)(rnd(w) % 10);
	else if (r < 995)
		e = 10 + (unsigned)(rnd(w) % 5);
	else
		e = 15 + (unsigned)(rnd(w) % 5);
	size_t lo = (size_t)1 << e;
	size_t n = lo + (size_t)(rnd(w) % lo);
	return n > MAX_BYTES ? MAX_BYTES : n;
}

/* Check a block the allocator just returned for n bytes at `align`. */
static int check_new(struct worker *w, const char *fn, const void *p, size_t n, size_t align)
{
	if (p == NULL) {
		failf(w, "thread %u: %s(%zu) returned NULL (errno %d)", w->id, fn, n, errno);
		return 0;
	}
	if (align < 16)
		align = 16;
	if ((uintptr_t)p % align != 0)
		failf(w, "thread %u: %s(%zu, align %zu) returned %p", w->id, fn, n, align, p);
	size_t usable = pa_malloc_usable_size((void *)p);
	if (usable < n)
		failf(w, "thread %u: %s(%zu) returned %p with usable size %zu", w->id, fn, n, p,
		      usable);
	return 1;
}

/* ---- the operations -------------------------------------------------------- */

static void new_tag(struct worker *w, struct blk *b)
{
	b->tag = (uint64_t)w->id << 48 | w->seq++;
	pattern_write(b->p, b->n, b->tag);
}

/* Fill the empty slot b with a fresh block from a random function. */
static void alloc_into(struct worker *w, struct blk *b)
{
	size_t n = random_size(w), align = 16;
	void *p = NULL;
	const char *fn;
	switch (rnd(w) % 5) {
	case 0:
		fn = "pa_malloc";
		p = pa_malloc(n);
		break;
	case 1:
		fn = "pa_calloc";
		p = rnd(w) % 2 ? pa_calloc(n, 1) : pa_calloc(1, n);
		if (p != NULL) {
			const unsigned char *c = p;
			for (size_t i = 0; i < n; i++) {
				if (c[i] != 0) {
					failf(w, "thread %u: pa_calloc(%zu) byte %zu is %#x", w->id,
					      n, i, c[i]);
					break;
				}
			}
		}
		break;
	case 2:
		fn = "pa_realloc(NULL)";
		p = pa_realloc(NULL, n);
		break;
	case 3:
		fn = "pa_aligned_alloc";
		align = (size_t)1 << (rnd(w) % (MAX_ALIGN_SHIFT + 1));
		p = pa_aligned_alloc(align, n);
		break;
	default: {
		fn = "pa_posix_memalign";
		align = (size_t)8 << (rnd(w) % (MAX_ALIGN_SHIFT - 2));
		int rc = pa_posix_memalign(&p, align, n);
		if (rc != 0) {
			failf(w, "thread %u: pa_posix_memalign(%zu, %zu) = %d", w->id, align, n,
			      rc);
			return;
		}
		break;
	}
	}
	w->ops++;
	if (!check_new(w, fn, p, n, align))
		return;
	b->p = p;
	b->n = n;
	b->align = align;
	new_tag(w, b);
}

/* Resize b with pa_realloc: the common prefix must survive. */
static void realloc_slot(struct worker *w, struct blk *b)
{
	size_t n = random_size(w);
	verify(w, b, b->n, "before realloc");
	void *p = pa_realloc(b->p, n);
	w->ops++;
	if (!check_new(w, "pa_realloc", p, n, 16))
		return; /* the old block is still ours and still in b */
	b->p = p;
	verify(w, b, b->n < n ? b->n : n, "after realloc");
	b->n = n;
	b->align = 16; /* realloc's block is malloc's */
	new_tag(w, b);
}

/* Check b's pattern and free it one of three ways. */
static void free_blk(struct worker *w, struct blk *b)
{
	verify(w, b, b->n, "before free");
	switch (rnd(w) % 3) {
	case 0:
		pa_free(b->p);
		break;
	case 1:
		/* C23: free_sized for malloc's blocks, free_aligned_sized with
		 * the alignment asked for for aligned_alloc's (a 1-byte block
		 * aligned to 8 KiB is an 8 KiB one) */
		if (b->align > 16)
			pa_free_aligned_sized(b->p, b->align, b->n);
		else
			pa_free_sized(b->p, b->n);
		break;
	default: {
		/* Realloc (to any size), then free. */
		size_t n = random_size(w);
		void *p = pa_realloc(b->p, n);
		w->ops++;
		if (!check_new(w, "pa_realloc before free", p, n, 16))
			return;
		b->p = p;
		verify(w, b, b->n < n ? b->n : n, "after realloc before free");
		pa_free(p);
		break;
	}
	}
	w->ops++;
	b->p = NULL;
}

/* Give b to another thread; 0 when its inbox is full. */
static int send_blk(struct worker *w, struct blk *b)
{
	unsigned to = (w->id + 1 + (unsigned)(rnd(w) % (NTHREADS - 1))) % NTHREADS;
	struct inbox *in = &workers[to].in;
	int ok = 0;
	pthread_mutex_lock(&in->mu);
	if (in->len < INBOX_CAP) {
		in->v[in->len++] = *b;
		ok = 1;
	}
	pthread_mutex_unlock(&in->mu);
	if (ok) {
		b->p = NULL;
		w->sent++;
	}
	return ok;
}

/* Free everything other threads sent us. */
static void drain_inbox(struct worker *w)
{
	struct blk got[INBOX_CAP];
	size_t n;
	pthread_mutex_lock(&w->in.mu);
	n = w->in.len;
	memcpy(got, w->in.v, n * sizeof(got[0]));
	w->in.len = 0;
	pthread_mutex_unlock(&w->in.mu);
	for (size_t i = 0; i < n; i++)
		free_blk(w, &got[i]);
	w->received += n;
}

static void step(struct worker *w)
{
	struct blk *b = &w->slot[rnd(w) % SLOTS];
	if (b->p == NULL) {
		alloc_into(w, b);
		return;
	}
	unsigned r = (unsigned)(rnd(w) % 8);
	if (r < 4)
		free_blk(w, b);
	else if (r < 6)
		realloc_slot(w, b);
	else if (!send_blk(w, b)) {
		w->fallback_frees++;
		free_blk(w, b);
	}
}

/* Halfway: stop, flush, let the main thread count, go on. */
static void midpoint(void)
{
	pthread_barrier_wait(&barrier); /* nobody sends or frees any more */
	pa_thread_cache_flush();
	pthread_barrier_wait(&barrier); /* every cache is empty: main counts */
	pthread_barrier_wait(&barrier); /* main is done */
}

static void *work(void *arg)
{
	struct worker *w = arg;
	int mid_done = 0;
	for (uint64_t steps = 1; w->ops < w->quota; steps++) {
		step(w);
		if (steps % 16 == 0)
			drain_inbox(w);
		if (!mid_done && w->ops >= w->quota / 2) {
			midpoint();
			mid_done = 1;
		}
	}
	if (!mid_done)
		midpoint();
	for (unsigned k = 0; k < SLOTS; k++)
		if (w->slot[k].p != NULL)
			free_blk(w, &w->slot[k]);
	__atomic_add_fetch(&done, 1, __ATOMIC_ACQ_REL);
	/* Others may still send: drain until all have stopped, then once more. */
	while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < NTHREADS)
		drain_inbox(w);
	drain_inbox(w);
	pa_thread_cache_flush();
	return NULL;
}

/* Meanwhile a fifth thread reads the statistics without pause. Racy reads
 * need not add up, but each class's figures are read together, so live
 * bytes never exceed the pages that hold them. */
static int stats_stop; /* atomic */

struct reader {
	pthread_t thread;
	uint64_t snapshots;
	unsigned failures;
	char why[256];
};

static void *read_stats(void *arg)
{
	struct reader *r = arg;
	while (!__atomic_load_n(&stats_stop, __ATOMIC_ACQUIRE)) {
		struct pa_malloc_stats m;
		struct pa_stats p;
		pa_malloc_stats(&m);
		pa_stats(&p);
		r->snapshots++;
		if ((m.heap_alloc > m.heap_inuse || m.heap_released > m.heap_sys ||
		     m.max_fragmentation != m.heap_inuse - m.heap_alloc ||
		     m.live_objects < m.large_objects) &&
		    r->failures++ == 0)
			snprintf(r->why, sizeof(r->why),
			         "heap_alloc %zu heap_inuse %zu heap_released %zu heap_sys %zu "
			         "live %zu large %zu",
			         m.heap_alloc, m.heap_inuse, m.heap_released, m.heap_sys,
			         m.live_objects, m.large_objects);
	}
	return NULL;
}

/* At the midpoint (workers parked): what the model holds, and the stats. */
static void count_midpoint(void)
{
	mid.held = mid.held_usable = 0;
	for (unsigned t = 0; t < NTHREADS; t++) {
		struct worker *w = &workers[t];
		for (unsigned k = 0; k < SLOTS; k++) {
			if (w->slot[k].p != NULL) {
				mid.held++;
				mid.held_usable += pa_malloc_usable_size(w->slot[k].p);
			}
		}
		pthread_mutex_lock(&w->in.mu);
		for (size_t i = 0; i < w->in.len; i++) {
			mid.held++;
			mid.held_usable += pa_malloc_usable_size(w->in.v[i].p);
		}
		pthread_mutex_unlock(&w->in.mu);
	}
	pa_cache_flush();
	pa_malloc_stats(&mid.ms);
	pa_stats(&mid.ps);
}

static void random_calls_from_four_threads_match_the_model_and_leave_nothing(void **state)
{
	(void)state;
	/* The main thread never allocates through pa_: no cache of its own. */
	struct pa_malloc_stats before;
	assert_int_equal(pa_malloc_stats(&before), 0);
	TU_EQ(before.thread_caches, 0);

	uint64_t quota = (uint64_t)(TOTAL_OPS * tu_scale() / NTHREADS);
	assert_int_equal(pthread_barrier_init(&barrier, NULL, NTHREADS + 1), 0);
	for (unsigned t = 0; t < NTHREADS; t++) {
		struct worker *w = &workers[t];
		w->id = t;
		w->rng = 0x853c49e6748fea9bull * (t + 1);
		w->quota = quota;
		assert_int_equal(pthread_mutex_init(&w->in.mu, NULL), 0);
	}
	static struct reader reader;
	for (unsigned t = 0; t < NTHREADS; t++)
		assert_int_equal(pthread_create(&workers[t].thread, NULL, work, &workers[t]), 0);
	assert_int_equal(pthread_create(&reader.thread, NULL, read_stats, &reader), 0);
	pthread_barrier_wait(&barrier);
	pthread_barrier_wait(&barrier);
	count_midpoint();
	pthread_barrier_wait(&barrier);
	uint64_t ops = 0;
	for (unsigned t = 0; t < NTHREADS; t++) {
		struct worker *w = &workers[t];
		assert_int_equal(pthread_join(w->thread, NULL), 0);
		print_message("thread %u: %" PRIu64 " ops, sent %" PRIu64 ", received %" PRIu64
		              ", inbox full %" PRIu64 "\n",
		              t, w->ops, w->sent, w->received, w->fallback_frees);
		if (w->failures != 0)
			fail_msg("%u failures; the first: %s", w->failures, w->why);
		ops += w->ops;
	}
	assert_true(ops >= NTHREADS * quota);
	__atomic_store_n(&stats_stop, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(reader.thread, NULL), 0);
	print_message("stats reader: %" PRIu64 " snapshots\n", reader.snapshots);
	if (reader.failures != 0)
		fail_msg("%u inconsistent snapshots; the first: %s", reader.failures, reader.why);

	/* The midpoint. */
	print_message("midpoint: %zu blocks held, %zu bytes\n", mid.held, mid.held_usable);
	TU_EQ(mid.ms.live_objects, mid.held);
	TU_EQ(mid.ms.heap_alloc, mid.held_usable);
	TU_EQ(mid.ms.cached_bytes, 0);
	TU_EQ(mid.ms.thread_caches, NTHREADS);
	TU_EQ(mid.ps.cache_free, 0);
	TU_EQ(mid.ps.cache_queued, 0);
	TU_EQ(mid.ms.heap_inuse, mid.ps.heap_inuse);

	/* The end: the threads' caches went back when they exited. */
	struct pa_malloc_stats ms;
	assert_int_equal(pa_malloc_stats(&ms), 0);
	TU_EQ(ms.live_objects, 0);
	TU_EQ(ms.heap_alloc, 0);
	TU_EQ(ms.heap_inuse, 0);
	TU_EQ(ms.large_objects, 0);
	TU_EQ(ms.large_bytes, 0);
	TU_EQ(ms.cached_bytes, 0);
	TU_EQ(ms.thread_caches, 0);
	TU_EQ(ms.max_fragmentation, 0);
	char name[32];
	for (size_t c = 1; c < ms.nclasses; c++) {
		snprintf(name, sizeof(name), "class %zu", c);
		tu_case = name;
		TU_EQ(ms.classes[c].spans, 0);
		TU_EQ(ms.classes[c].objects, 0);
		TU_EQ(ms.classes[c].cached, 0);
	}
	tu_case = "";
	pa_cache_flush();
	struct pa_stats ps;
	assert_int_equal(pa_stats(&ps), 0);
	TU_EQ(ps.heap_inuse, 0);
	pthread_barrier_destroy(&barrier);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(random_calls_from_four_threads_match_the_model_and_leave_nothing),
	};
	/* heap_alloc must equal the blocks' usable sizes: a sampled small block
	 * (heap profiles) holds a page. test_prof_thread.c runs threads with
	 * sampling on. */
	if (pa_config_set("prof", "off") != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
