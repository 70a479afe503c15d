/*
 * test_malloc_cache.c — how much a thread cache takes and keeps (cache.h):
 * slow start, and each cache's share of thread_cache_total.
 *
 * Each scenario runs in a thread of its own, so its cache starts empty with
 * its slow-path count at zero, and records pa_malloc_stats figures as it
 * goes; the main thread, its cache flushed and idle meanwhile, checks them.
 * The scavenger is off.
 */
#include <pthread.h>

#include "testutil.h"

#include "cache.h"
#include "pagealloc.h"
#include "sizeclass_table.h"
#include "span.h"

static size_t cached_objects(unsigned cls)
{
	struct pa_malloc_stats m;
	assert_int_equal(pa_malloc_stats(&m), 0);
	return m.classes[cls].cached;
}

static size_t cached_bytes(void)
{
	struct pa_malloc_stats m;
	assert_int_equal(pa_malloc_stats(&m), 0);
	return m.cached_bytes;
}

static void run_in_thread(void *(*fn)(void *), void *arg)
{
	pa_thread_cache_flush();
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* ---- slow start ------------------------------------------------------------ */

#define SS_MALLOCS 12

struct slow_start {
	size_t after_malloc[SS_MALLOCS]; /* objects of the class cached after each */
	size_t after_frees;
};

static void *slow_start_thread(void *arg)
{
	struct slow_start *r = arg;
	unsigned cls = pa_size_to_class(1024);
	void *p[SS_MALLOCS];
	for (int k = 0; k < SS_MALLOCS; k++) {
		p[k] = pa_malloc(1024);
		r->after_malloc[k] = cached_objects(cls);
	}
	for (int k = 0; k < SS_MALLOCS; k++)
		pa_free(p[k]);
	r->after_frees = cached_objects(cls);
	return NULL;
}

/* A new thread's list of a class takes 1 object at its first refill, 2 at
 * the second, 3 at the third (up to a batch: 16 objects of 1 KiB), and
 * hands back the one asked for: the cached counts after each malloc follow.
 * Frees past the bound grow it by one each rather than giving a batch back:
 * the 12 frees leave 3 + 12 objects cached. */
static void first_refills_take_one_two_three_objects(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(1024);
	TU_EQ(pa_sizeclasses[cls].size, 1024);
	TU_EQ(cache_batch(cls), 16);
	struct slow_start r;
	run_in_thread(slow_start_thread, &r);
	static const size_t want[SS_MALLOCS] = {0, 1, 0, 2, 1, 0, 3, 2, 1, 0, 4, 3};
	for (int k = 0; k < SS_MALLOCS; k++)
		TU_EQ(r.after_malloc[k], want[k]);
	TU_EQ(r.after_frees, 3 + SS_MALLOCS);
}

/* ---- each cache's share ---------------------------------------------------- */

#define LARGE_BYTES ((size_t)256 << 10)

struct share {
	size_t after_large_free;  /* cached bytes: the freed large block in a slot */
	size_t after_seven_slow;  /* ... after 7 slow paths */
	size_t after_eighth_slow; /* ... after the 8th, where the share is checked */
};

/* Free a large block into the thread's slots, then take 8 slow paths: first
 * mallocs of 8 classes, each refilling one object and handing it out. */
static void *share_thread(void *arg)
{
	struct share *r = arg;
	pa_free(pa_malloc(LARGE_BYTES));
	r->after_large_free = cached_bytes();
	void *p[8];
	for (int k = 0; k < 8; k++) {
		p[k] = pa_malloc(16 * (size_t)(k + 1));
		if (k == 6)
			r->after_seven_slow = cached_bytes();
	}
	r->after_eighth_slow = cached_bytes();
	for (int k = 0; k < 8; k++)
		pa_free(p[k]);
	pa_thread_cache_flush();
	return NULL;
}

/* With thread_cache_total=0 each cache's share is PA_TC_MIN_BUDGET
 * (32 KiB): the 8th slow path finds 256 KiB held and gives the large block
 * back, not before. */
static void over_its_share_a_cache_gives_back_at_the_eighth_slow_path(void **state)
{
	(void)state;
	assert_int_equal(pa_config_set("thread_cache_total", "0"), 0);
	struct share r;
	run_in_thread(share_thread, &r);
	assert_int_equal(pa_config_set("thread_cache_total", "8M"), 0);
	TU_EQ(PA_TC_MIN_BUDGET, 32 << 10);
	TU_EQ(r.after_large_free, LARGE_BYTES);
	TU_EQ(r.after_seven_slow, LARGE_BYTES);
	TU_EQ(r.after_eighth_slow, 0);
}

/* With the default 8 MiB and two caches (this thread's and the main
 * thread's), the share exceeds what a cache can hold: nothing is given
 * back. */
static void within_its_share_a_cache_keeps_what_it_holds(void **state)
{
	(void)state;
	struct share r;
	run_in_thread(share_thread, &r);
	TU_EQ(r.after_large_free, LARGE_BYTES);
	TU_EQ(r.after_seven_slow, LARGE_BYTES);
	TU_EQ(r.after_eighth_slow, LARGE_BYTES);
}

/* The share is thread_cache_total over the caches, at least
 * PA_TC_MIN_BUDGET, at most what one cache can hold. */
static void share_is_the_total_over_the_caches(void **state)
{
	(void)state;
	pa_free(pa_malloc(16)); /* the main thread's cache exists */
	struct pa_malloc_stats m;
	assert_int_equal(pa_malloc_stats(&m), 0);
	TU_EQ(m.thread_caches, 1);
	assert_int_equal(pa_config_set("thread_cache_total", "1M"), 0);
	TU_EQ(cache_share(), (size_t)1 << 20);
	assert_int_equal(pa_config_set("thread_cache_total", "16K"), 0);
	TU_EQ(cache_share(), PA_TC_MIN_BUDGET);
	assert_int_equal(pa_config_set("thread_cache_total", "1G"), 0);
	size_t cap = (size_t)PA_LARGE_SLOTS_MAX_PAGES * PA_PAGE_BYTES;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++)
		cap += 2 * (size_t)cache_batch(cls) * pa_sizeclasses[cls].size;
	TU_EQ(cache_share(), cap);
	assert_int_equal(pa_config_set("thread_cache_total", "8M"), 0);
}

/* ---- spare span records ---------------------------------------------------- */

#define HUGE_BYTES ((size_t)2 << 20) /* over a large slot's 1 MiB: retired at free */
#define NHUGE 9

struct spares {
	size_t first, reused, nine, freed, flushed; /* pool records live, less at start */
};

static size_t records_live(void)
{
	size_t mapped, released, live;
	span_meta_stats(&mapped, &released, &live);
	return live;
}

static void *spares_thread(void *arg)
{
	struct spares *r = arg;
	pa_free(pa_malloc(16));  /* this thread's cache exists */
	pa_thread_cache_flush(); /* and holds no spare records */
	size_t live0 = records_live();
	void *p = pa_malloc(HUGE_BYTES);
	r->first = records_live() - live0;
	pa_free(p);
	for (int k = 0; k < 5; k++)
		pa_free(pa_malloc(HUGE_BYTES));
	r->reused = records_live() - live0;
	void *v[NHUGE];
	for (int k = 0; k < NHUGE; k++)
		v[k] = pa_malloc(HUGE_BYTES);
	r->nine = records_live() - live0;
	for (int k = 0; k < NHUGE; k++)
		pa_free(v[k]);
	r->freed = records_live() - live0;
	pa_thread_cache_flush();
	r->flushed = records_live() - live0;
	return NULL;
}

/* A thread takes span records from the pool 4 at a time and keeps up to 8
 * of those its spans leave: the first large block takes 4 (1 used, 3
 * spare), its record is reused by the next 5; 9 blocks at once take 8 more
 * (in two refills); freeing them fills the 8 spares, then gives the older 4
 * back; the flush gives back the rest. */
static void span_records_move_four_at_a_time(void **state)
{
	(void)state;
	TU_EQ(PA_TC_SPARE_SPANS, 8);
	struct spares r;
	run_in_thread(spares_thread, &r);
	TU_EQ(r.first, 4);
	TU_EQ(r.reused, 4);
	TU_EQ(r.nine, 12);
	TU_EQ(r.freed, 8);
	TU_EQ(r.flushed, 0);
}

/* ---- large objects counted per thread ---------------------------------------- */

static void *v_large[3];

static void *make_three_large(void *arg)
{
	(void)arg;
	pa_free(pa_malloc(16)); /* this thread's cache exists: it counts in it */
	for (int k = 0; k < 3; k++)
		v_large[k] = pa_malloc(HUGE_BYTES);
	return NULL;
}

/* Large objects are counted in the cache of the thread that makes or frees
 * them; the counts of an exited thread move to the shared ones: 3 blocks
 * made by a thread that is gone stay counted until this thread frees them. */
static void large_objects_outlive_the_thread_that_counted_them(void **state)
{
	(void)state;
	struct pa_malloc_stats m0, m1, m2;
	pa_thread_cache_flush();
	assert_int_equal(pa_malloc_stats(&m0), 0);
	run_in_thread(make_three_large, NULL);
	assert_int_equal(pa_malloc_stats(&m1), 0);
	TU_EQ(m1.large_objects - m0.large_objects, 3);
	TU_EQ(m1.large_bytes - m0.large_bytes, 3 * HUGE_BYTES);
	TU_EQ(m1.heap_inuse - m0.heap_inuse, 3 * HUGE_BYTES);
	for (int k = 0; k < 3; k++)
		pa_free(v_large[k]);
	assert_int_equal(pa_malloc_stats(&m2), 0);
	TU_EQ(m2.large_objects, m0.large_objects);
	TU_EQ(m2.large_bytes, m0.large_bytes);
	TU_EQ(m2.heap_inuse, m0.heap_inuse);
}

static int setup(void **state)
{
	(void)state;
	return pa_config_set("scavenger", "off");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(first_refills_take_one_two_three_objects),
	    TU_TEST(over_its_share_a_cache_gives_back_at_the_eighth_slow_path),
	    TU_TEST(within_its_share_a_cache_keeps_what_it_holds),
	    TU_TEST(share_is_the_total_over_the_caches),
	    TU_TEST(span_records_move_four_at_a_time),
	    TU_TEST(large_objects_outlive_the_thread_that_counted_them),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
