/*
 * test_malloc_tcache.c — how much a thread cache takes and keeps (tcache.h):
 * slow start, each cache's allowance out of thread_cache_total, and lists
 * that grow in a run of refills.
 *
 * Each scenario runs in a thread of its own, so its cache starts empty with
 * its slow-path count at zero, and records pa_malloc_stats figures as it
 * goes; the main thread, its cache flushed and idle meanwhile, checks them.
 * The scavenger is off.
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "testutil.h"

#include "central.h"
#include "large.h"
#include "os.h"
#include "pagealloc.h"
#include "pagemap.h"
#include "pages.h"
#include "sizeclass_table.h"
#include "span.h"
#include "sweep.h"
#include "tcache.h"
#include "vg.h"

/* Both stashes (sweep_stashes), with this thread's large slots and spare
 * span records. */
static size_t stashes_drain(int all)
{
	struct pa_tcache *tc = tcache_real();
	return sweep_stashes(all, tcache_large(tc), tcache_spares(tc));
}

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

/* run_in_thread with thread_cache_total set to total, then the default. */
static void run_in_thread_at_total(const char *total, void *(*fn)(void *), void *arg)
{
	assert_int_equal(pa_config_set("thread_cache_total", total), 0);
	run_in_thread(fn, arg);
	assert_int_equal(pa_config_set("thread_cache_total", "16M"), 0);
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
	TU_EQ(central_batch(cls), 16);
	struct slow_start r;
	run_in_thread(slow_start_thread, &r);
	static const size_t want[SS_MALLOCS] = {0, 1, 0, 2, 1, 0, 3, 2, 1, 0, 4, 3};
	for (int k = 0; k < SS_MALLOCS; k++)
		TU_EQ(r.after_malloc[k], want[k]);
	TU_EQ(r.after_frees, 3 + SS_MALLOCS);
}

/* ---- each cache's allowance ------------------------------------------------ */

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

/* With thread_cache_total=0 each cache's allowance is PA_TC_MIN_BUDGET
 * (32 KiB): the 8th slow path finds 256 KiB held and gives the large block
 * back, not before. */
static void over_its_allowance_a_cache_gives_back_at_the_eighth_slow_path(void **state)
{
	(void)state;
	struct share r;
	run_in_thread_at_total("0", share_thread, &r);
	TU_EQ(PA_TC_MIN_BUDGET, 32 << 10);
	TU_EQ(r.after_large_free, LARGE_BYTES);
	TU_EQ(r.after_seven_slow, LARGE_BYTES);
	TU_EQ(r.after_eighth_slow, 0);
}

/* With the default 16 MiB and two caches (this thread's and the main
 * thread's, which claims 512 KiB), the allowance is 15.5 MiB: nothing is
 * given back. */
static void within_its_allowance_a_cache_keeps_what_it_holds(void **state)
{
	(void)state;
	struct share r;
	run_in_thread(share_thread, &r);
	TU_EQ(r.after_large_free, LARGE_BYTES);
	TU_EQ(r.after_seven_slow, LARGE_BYTES);
	TU_EQ(r.after_eighth_slow, LARGE_BYTES);
}

/* A thread's allowance is thread_cache_total less the other caches'
 * claims (the main thread's: PA_TC_RESERVE, what it held at its last check
 * or flush being less), and at least the fair share (half the total over
 * the caches, at least PA_TC_MIN_BUDGET). */
struct allowance {
	size_t at_16m, at_1m, at_16k, claimed;
};

static void *allowance_thread(void *arg)
{
	struct allowance *r = arg;
	pa_free(pa_malloc(16)); /* this thread's cache exists */
	r->claimed = tcache_claimed();
	r->at_16m = tcache_allowance_self();
	assert_int_equal(pa_config_set("thread_cache_total", "1M"), 0);
	r->at_1m = tcache_allowance_self();
	assert_int_equal(pa_config_set("thread_cache_total", "16K"), 0);
	r->at_16k = tcache_allowance_self();
	assert_int_equal(pa_config_set("thread_cache_total", "16M"), 0);
	return NULL;
}

static void allowance_is_the_total_less_the_other_caches_claims(void **state)
{
	(void)state;
	pa_free(pa_malloc(16)); /* the main thread's cache exists */
	struct allowance r;
	run_in_thread(allowance_thread, &r);
	TU_EQ(PA_TC_RESERVE, 512 << 10);
	TU_EQ(r.claimed, 2 * PA_TC_RESERVE);                 /* main's and the thread's */
	TU_EQ(r.at_16m, ((size_t)16 << 20) - PA_TC_RESERVE); /* more than 16M / 2 / 2 */
	TU_EQ(r.at_1m, (size_t)512 << 10);                   /* 1M - 512K, more than 256K */
	TU_EQ(r.at_16k, PA_TC_MIN_BUDGET);                   /* more than 16K / 2 / 2 and 0 */
	TU_EQ(tcache_claimed(), PA_TC_RESERVE);              /* the thread's claim left with it */
}

/* ---- lists that grow -------------------------------------------------------- */

#define PAGE_OBJ 4096 /* class of 4 KiB: a batch of 4, four batches 16 */
#define NRUN 100
#define NFOREIGN 31

struct grow {
	void *foreign[NFOREIGN]; /* allocated by the main thread, freed by the test's */
	uint32_t max_after_run, count_after_run;
	int swing_after_run;
	uint32_t max_after_frees, count_after_frees;
	uint32_t max_after_foreign, count_after_foreign;
};

static uint32_t list_max(unsigned cls)
{
	return tcache_self->max[cls];
}

static uint32_t list_count(unsigned cls)
{
	return tcache_list_count(tcache_self, cls);
}

/* NRUN mallocs of 4 KiB into p: a run of refills. */
static void malloc_run(void **p)
{
	for (int k = 0; k < NRUN; k++)
		p[k] = pa_malloc(PAGE_OBJ);
}

static void free_run(void **p)
{
	for (int k = 0; k < NRUN; k++)
		pa_free(p[k]);
}

/* NRUN mallocs of 4 KiB, then their frees, then frees of NFOREIGN more
 * from another thread. */
static void *grow_thread(void *arg)
{
	struct grow *r = arg;
	unsigned cls = pa_size_to_class(PAGE_OBJ);
	void *p[NRUN];
	malloc_run(p);
	r->max_after_run = list_max(cls);
	r->count_after_run = list_count(cls);
	r->swing_after_run = tcache_self->swing[cls];
	free_run(p);
	r->max_after_frees = list_max(cls);
	r->count_after_frees = list_count(cls);
	for (int k = 0; k < NFOREIGN; k++)
		pa_free(r->foreign[k]);
	r->max_after_foreign = list_max(cls);
	r->count_after_foreign = list_count(cls);
	pa_thread_cache_flush();
	return NULL;
}

/* Refills 1-4 (mallocs 1, 2, 4, 7) take 1, 2, 3, 4 objects and bring the
 * bound to four batches (16); then one every 4 mallocs (11, 15, ...). Every
 * 8th refill (mallocs 23, 55, 87) adds a batch: 28 after refill 27 (malloc
 * 99), whose 3 objects malloc 100 leaves 2 of, and 3 refills toward the
 * next. The frees fill the list to 28 and overflow at free 27, then every
 * 4th: the 11th overflow (free 67) is the 8th more than the refills and
 * takes a batch off the bound (24) and gives two back, as does the 8th
 * after it (free 99: 20), leaving 18. The foreign frees overflow at the
 * 3rd and every 4th after, and the 8th (the 31st free) brings the bound
 * back to four batches. */
static void a_run_of_refills_grows_a_list_past_four_batches(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(PAGE_OBJ);
	TU_EQ(central_batch(cls), 4);
	TU_EQ(PA_TC_LIST_SWING, 8);
	struct grow r;
	for (int k = 0; k < NFOREIGN; k++)
		r.foreign[k] = pa_malloc(PAGE_OBJ);
	run_in_thread(grow_thread, &r);
	TU_EQ(r.swing_after_run, 3);
	TU_EQ(r.max_after_run, 28);
	TU_EQ(r.count_after_run, 2);
	TU_EQ(r.max_after_frees, 20);
	TU_EQ(r.count_after_frees, 18);
	TU_EQ(r.max_after_foreign, 16);
	TU_EQ(r.count_after_foreign, 13);
}

/* With thread_cache_total=0 the allowance (PA_TC_MIN_BUDGET) is less than
 * the lists' bounds already: the same run of refills leaves four batches. */
static void *run_thread(void *arg)
{
	struct grow *r = arg;
	unsigned cls = pa_size_to_class(PAGE_OBJ);
	void *p[NRUN];
	malloc_run(p);
	r->max_after_run = list_max(cls);
	r->swing_after_run = tcache_self->swing[cls];
	free_run(p);
	pa_thread_cache_flush();
	return NULL;
}

static void past_its_allowance_a_list_stays_at_four_batches(void **state)
{
	(void)state;
	struct grow r;
	run_in_thread_at_total("0", run_thread, &r);
	TU_EQ(r.swing_after_run, 27); /* the run was long enough */
	TU_EQ(r.max_after_run, 16);
}

/* Mallocs and frees of 20 at a time: each round refills twice (mallocs 15
 * and 19, after the 14 objects left by the round before) and overflows
 * twice (frees 15 and 19), so the refills never outnumber the overflows by
 * 8 and the list never grows past four batches, however many rounds. */
static void *walk_thread(void *arg)
{
	struct grow *r = arg;
	unsigned cls = pa_size_to_class(PAGE_OBJ);
	void *p[20];
	uint32_t most = 0;
	for (int round = 0; round < 50; round++) {
		for (int k = 0; k < 20; k++)
			p[k] = pa_malloc(PAGE_OBJ);
		most = list_max(cls) > most ? list_max(cls) : most;
		for (int k = 0; k < 20; k++)
			pa_free(p[k]);
	}
	r->max_after_run = most;
	r->count_after_frees = list_count(cls);
	pa_thread_cache_flush();
	return NULL;
}

static void a_thread_that_frees_what_it_takes_keeps_four_batches(void **state)
{
	(void)state;
	struct grow r;
	run_in_thread(walk_thread, &r);
	TU_EQ(r.max_after_run, 16);
	TU_EQ(r.count_after_frees, 14);
}

/* A thread that frees much more than it allocates: its 1024th overflow with
 * no refill of any class between cuts its grown lists back to four batches.
 * Its list of 128 bytes grows by one a free up to a batch (32, at the 32nd
 * foreign free) and overflows at free 33 and every 32nd after: the 1024th
 * at free 33 + 32 * 1023 = 32769. */
#define NDRAIN (33 + 32 * 1023)

struct drain {
	void **foreign; /* NDRAIN blocks of 128 bytes from the main thread */
	uint32_t grown, before, after, count_after;
};

static void *drain_thread(void *arg)
{
	struct drain *r = arg;
	unsigned cls = pa_size_to_class(PAGE_OBJ);
	void *p[NRUN];
	malloc_run(p);
	r->grown = list_max(cls);
	for (int k = 0; k < NDRAIN - 1; k++)
		pa_free(r->foreign[k]);
	r->before = list_max(cls);
	pa_free(r->foreign[NDRAIN - 1]);
	r->after = list_max(cls);
	r->count_after = list_count(cls);
	free_run(p);
	pa_thread_cache_flush();
	return NULL;
}

static void a_thread_that_drains_cuts_its_grown_lists(void **state)
{
	(void)state;
	TU_EQ(PA_TC_DRAIN, 1024);
	TU_EQ(central_batch(pa_size_to_class(128)), 32);
	struct drain r;
	r.foreign = pa_malloc(NDRAIN * sizeof(void *));
	assert_non_null(r.foreign);
	for (int k = 0; k < NDRAIN; k++) {
		r.foreign[k] = pa_malloc(128);
		assert_non_null(r.foreign[k]);
	}
	run_in_thread(drain_thread, &r);
	pa_free(r.foreign);
	TU_EQ(r.grown, 28); /* as in a_run_of_refills_grows_a_list_past_four_batches */
	TU_EQ(r.before, 28);
	TU_EQ(r.after, 16);
	TU_EQ(r.count_after, 2); /* the 2 it held fit */
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
	TU_EQ(PA_SPAN_SPARES, 8);
	struct spares r;
	run_in_thread(spares_thread, &r);
	TU_EQ(r.first, 4);
	TU_EQ(r.reused, 4);
	TU_EQ(r.nine, 12);
	TU_EQ(r.freed, 8);
	TU_EQ(r.flushed, 0);
}

/* A span of at most 128 objects (classes of 64 bytes and more, large
 * objects) takes a 64-byte record, the 16, 32 and 48-byte classes a
 * 128-byte one: the bitmap fits either way, and records of one length lie
 * side by side, 64 or 128 bytes apart. */
#define NRECS 40

static uintptr_t closest_pair(unsigned cls)
{
	struct pa_span *r[NRECS];
	for (unsigned k = 0; k < NRECS; k++) {
		r[k] = span_new(cls, tcache_spares(tcache_real()));
		assert_non_null(r[k]);
		TU_EQ(r[k]->cls, cls);
		TU_EQ(r[k]->next, NULL);
	}
	uintptr_t gap = UINTPTR_MAX;
	for (unsigned i = 0; i < NRECS; i++)
		for (unsigned j = 0; j < NRECS; j++)
			if (r[j] > r[i] && (uintptr_t)r[j] - (uintptr_t)r[i] < gap)
				gap = (uintptr_t)r[j] - (uintptr_t)r[i];
	for (unsigned k = 0; k < NRECS; k++)
		span_delete(r[k], tcache_spares(tcache_real()));
	return gap;
}

static void span_records_are_64_bytes_up_to_128_objects(void **state)
{
	(void)state;
	for (unsigned cls = 0; cls < PA_SC_NUM_CLASSES; cls++) {
		unsigned objects = cls != 0 ? pa_sizeclasses[cls].objects : 1;
		size_t want = objects <= 128 ? PA_SPAN_SHORT : PA_SPAN_LONG;
		TU_EQ(span_record_bytes(cls), want);
		TU_EQ(span_alloc_words(cls), (objects + 63) / 64);
		assert_true(offsetof(struct pa_span, alloc) + span_alloc_words(cls) * 8 <= want);
	}
	TU_EQ(span_record_bytes(3), 128); /* 48 bytes: 170 objects */
	TU_EQ(span_record_bytes(4), 64);  /* 64 bytes: 128 */
	TU_EQ(closest_pair(0), 64);
	TU_EQ(closest_pair(4), 64);
	TU_EQ(closest_pair(1), 128);
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

/* ---- the central lists' stashes -------------------------------------------- */

#define ST_OBJECTS 96

struct stash_run {
	size_t spans_before, spans_after_frees, spans_after_mallocs;
	size_t list_after_frees, stashed_after_frees, stashed_after_mallocs;
	size_t same; /* objects of the second round that the first round freed */
	size_t stashed_bytes, cached_bytes; /* pa_malloc_stats after the frees */
};

static size_t class_spans(unsigned cls)
{
	struct pa_malloc_stats m;
	assert_int_equal(pa_malloc_stats(&m), 0);
	return m.classes[cls].spans;
}

/* 96 objects of 1 KiB, freed into an empty list, then 96 again. */
static void *stash_thread(void *arg)
{
	struct stash_run *r = arg;
	unsigned cls = pa_size_to_class(1024);
	static void *a[ST_OBJECTS], *b[ST_OBJECTS];
	for (int k = 0; k < ST_OBJECTS; k++)
		a[k] = pa_malloc(1024);
	pa_thread_cache_flush(); /* the objects of the last refill not handed out */
	r->spans_before = class_spans(cls);
	for (int k = 0; k < ST_OBJECTS; k++)
		pa_free(a[k]);
	r->spans_after_frees = class_spans(cls);
	r->list_after_frees = tcache_list_count(tcache_self, cls);
	r->stashed_after_frees = central_stashed(cls);
	struct pa_malloc_stats m;
	assert_int_equal(pa_malloc_stats(&m), 0);
	r->stashed_bytes = m.stashed_bytes;
	r->cached_bytes = m.cached_bytes;
	for (int k = 0; k < ST_OBJECTS; k++)
		b[k] = pa_malloc(1024);
	r->spans_after_mallocs = class_spans(cls);
	r->stashed_after_mallocs = central_stashed(cls);
	r->same = 0;
	for (int k = 0; k < ST_OBJECTS; k++)
		for (int j = 0; j < ST_OBJECTS; j++)
			r->same += b[k] == a[j];
	for (int k = 0; k < ST_OBJECTS; k++)
		pa_free(b[k]);
	return NULL;
}

/* The batches a full list gives back wait in the stash, every one of them
 * (96 KiB is far below the stash's 1 MiB), so no span empties; the second
 * round refills from the stash whole batches at a time and gets back
 * exactly the 96 objects the first round freed, with no new span. */
static void stashed_batches_come_back_whole_to_the_next_refill(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(1024), batch = central_batch(cls);
	TU_EQ(batch, 16);
	struct stash_run r;
	run_in_thread(stash_thread, &r);
	TU_EQ(r.spans_after_frees, r.spans_before);
	TU_EQ(r.list_after_frees + r.stashed_after_frees, ST_OBJECTS);
	TU_EQ(r.stashed_after_frees % batch, 0);
	TU_EQ(r.stashed_bytes, r.stashed_after_frees * 1024);
	TU_EQ(r.cached_bytes, ST_OBJECTS * 1024);
	assert_true(r.stashed_after_frees >= 2 * batch);
	TU_EQ(r.stashed_after_mallocs, 0);
	TU_EQ(r.spans_after_mallocs, r.spans_before);
	TU_EQ(r.same, ST_OBJECTS);
	pa_thread_cache_flush();
	TU_EQ(central_stashed(cls), 0);
}

/* A stash holds at most 1 MiB of a class: a thread whose 4 mallocs of
 * 32 KiB (batch 1) brought its list's bound to PA_TC_LIST_BATCHES = 4 frees
 * them and 40 more from the main thread: 4 stay in the list, 32 wait in the
 * stash, and the other 8 go back to their spans. */
static void *foreign_40[40];

static void *stash_cap_thread(void *arg)
{
	size_t *stashed = arg;
	void *own[4];
	for (int k = 0; k < 4; k++)
		own[k] = pa_malloc(32768);
	for (int k = 0; k < 4; k++)
		pa_free(own[k]);
	for (int k = 0; k < 40; k++)
		pa_free(foreign_40[k]);
	unsigned cls = pa_size_to_class(32768);
	stashed[0] = central_stashed(cls);
	stashed[1] = tcache_list_count(tcache_self, cls);
	return NULL;
}

static void a_stash_holds_at_most_one_mib_of_its_class(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(32768);
	TU_EQ(central_batch(cls), 1);
	size_t got[2];
	for (int k = 0; k < 40; k++)
		foreign_40[k] = pa_malloc(32768);
	run_in_thread(stash_cap_thread, got);
	TU_EQ(got[0], 32);
	TU_EQ(got[1], PA_TC_LIST_BATCHES);
	pa_thread_cache_flush();
	TU_EQ(central_stashed(cls), 0);
}

/* The decay: each call gives the spans the batches the stash held
 * throughout the period since the previous one (the fewest it held). */
static void *decay_thread(void *arg)
{
	size_t *moved = arg;
	unsigned cls = pa_size_to_class(32768);
	static void *a[8];
	stashes_drain(1);
	for (int k = 0; k < 8; k++)
		a[k] = pa_malloc(32768);
	for (int k = 0; k < 8; k++)
		pa_free(a[k]);       /* PA_TC_LIST_BATCHES (4) in the list, 4 stashed */
	moved[0] = stashes_drain(0); /* a period starts: 0 */
	for (unsigned k = 0; k < PA_TC_LIST_BATCHES; k++)
		a[k] = pa_malloc(32768); /* from the list */
	/* The list is empty: a stashed one (3 left). */
	a[PA_TC_LIST_BATCHES] = pa_malloc(32768);
	moved[1] = central_stashed(cls);
	moved[2] = stashes_drain(0); /* 3: none used since */
	moved[3] = central_stashed(cls);
	for (unsigned k = 0; k <= PA_TC_LIST_BATCHES; k++)
		pa_free(a[k]);
	return NULL;
}

static void the_decay_gives_back_what_the_stash_did_not_use(void **state)
{
	(void)state;
	size_t moved[4];
	run_in_thread(decay_thread, moved);
	_Static_assert(PA_TC_LIST_BATCHES < 7, "the test needs a stashed object left");
	TU_EQ(moved[0], 0);
	TU_EQ(moved[1], 8 - PA_TC_LIST_BATCHES - 1);
	TU_EQ(moved[2], 8 - PA_TC_LIST_BATCHES - 1);
	TU_EQ(moved[3], 0);
	pa_thread_cache_flush();
}

/* While the scavenger holds a steady heap's free pages (its page-heap
 * wait, hold_ms, is past scavenge_delay_ms), the decay waits the hold's
 * wait; otherwise SWEEP_STASH_DECAY_MS (250 ms). The scavenger's calls,
 * made here with a clock of the test's own (heap_busy: the decay alone). */
static void *held_decay_thread(void *arg)
{
	size_t *got = arg;
	unsigned cls = pa_size_to_class(32768);
	struct pa_tcache *tc = tcache_real();
	static void *a[8];
	stashes_drain(1);
	for (int k = 0; k < 8; k++)
		a[k] = pa_malloc(32768);
	for (int k = 0; k < 8; k++)
		pa_free(a[k]); /* some in the list, the rest stashed */
	got[6] = central_stashed(cls);
	const uint32_t t = 1000000;
	sweep_background(t, 1000, 1, 4000, tcache_large(tc),
	                 tcache_spares(tc)); /* a period starts */
	got[0] = central_stashed(cls);
	sweep_background(t + 3999, 1000, 1, 4000, tcache_large(tc), tcache_spares(tc));
	got[1] = central_stashed(cls);
	sweep_background(t + 4000, 1000, 1, 4000, tcache_large(tc), tcache_spares(tc));
	got[2] = central_stashed(cls);
	/* Not held: the short period. */
	for (unsigned k = 0; k < 8; k++)
		a[k] = pa_malloc(32768);
	for (int k = 0; k < 8; k++)
		pa_free(a[k]);
	got[3] = central_stashed(cls);
	sweep_background(t + 4249, 1000, 1, 1000, tcache_large(tc), tcache_spares(tc));
	sweep_background(t + 4250, 1000, 1, 1000, tcache_large(tc), tcache_spares(tc));
	got[4] = central_stashed(cls);
	sweep_background(t + 4500, 1000, 1, 1000, tcache_large(tc), tcache_spares(tc));
	got[5] = central_stashed(cls);
	return NULL;
}

static void the_decay_waits_the_hold_while_the_scavenger_holds(void **state)
{
	(void)state;
	TU_EQ(sweep_decay_period(1000, 4000), 4000);
	TU_EQ(sweep_decay_period(1000, 1000), 250);
	TU_EQ(sweep_decay_period(0, 0), 250);
	TU_EQ(sweep_decay_period(50, 200), 250);
	size_t got[7];
	run_in_thread(held_decay_thread, got);
	const size_t stashed = got[6];
	assert_true(stashed > 0);
	TU_EQ(got[0], stashed); /* seen, kept */
	TU_EQ(got[1], stashed); /* 3,999 ms: within the hold */
	TU_EQ(got[2], 0);       /* 4,000 ms: unused all period */
	TU_EQ(got[3], stashed);
	TU_EQ(got[4], stashed); /* 249 ms: nothing; 250 ms: seen */
	TU_EQ(got[5], 0);
	pa_thread_cache_flush();
}

/* The sweep's age (sweep_span_age): while the scavenger holds the page
 * heap's pages (hold_ms past scavenge_delay_ms) and the free objects in
 * spans are within the hold's band, an eighth of the bytes in use plus
 * 32 MiB, a span waits the hold's 4 s (rptest's phases); past the band
 * (survivors pinning spans after a mass free), or without the hold, it
 * waits scavenge_delay_ms. */
static void the_sweep_waits_the_hold_within_its_band(void **state)
{
	(void)state;
	const size_t mib = (size_t)1 << 20, inuse = 16 * mib, band = inuse / 8 + 32 * mib;
	TU_EQ(band, 34 * mib);
	TU_EQ(sweep_span_age(1000, 4000, 2 * mib, inuse), 4000);
	TU_EQ(sweep_span_age(1000, 4000, band, inuse), 4000);
	TU_EQ(sweep_span_age(1000, 4000, band + 1, inuse), 1000);
	TU_EQ(sweep_span_age(1000, 4000, 300 * mib, 330 * mib), 1000); /* wl-turnover's */
	TU_EQ(sweep_span_age(1000, 1000, 2 * mib, inuse), 1000);       /* the heap shrank */
	TU_EQ(sweep_span_age(0, 0, 2 * mib, inuse), 0);                /* scavenge_delay_ms=0 */
	TU_EQ(sweep_span_age(3600000, 3600000, 2 * mib, inuse), 3600000);
}

/* ---- the large stash ------------------------------------------------------ */

#define LS_SIZE (48u << 10) /* 6 pages */

struct large_run {
	void *a[7], *b[5];
	size_t stashed_spans, stashed_pages, stashed_bytes, cached_bytes;
};

static size_t large_stash_spans(void)
{
	size_t spans, pages;
	large_stashed(&spans, &pages);
	return spans;
}

/* Five 48 KiB blocks written and freed: four wait in the thread's slots,
 * the oldest, a[0], goes to the large stash when the fifth needs a slot. */
static void *large_giver(void *arg)
{
	struct large_run *r = arg;
	for (int k = 0; k < 5; k++) {
		r->a[k] = pa_malloc(LS_SIZE);
		memset(r->a[k], 0xab, LS_SIZE);
	}
	for (int k = 0; k < 5; k++)
		pa_free(r->a[k]);
	large_stashed(&r->stashed_spans, &r->stashed_pages);
	struct pa_malloc_stats m;
	assert_int_equal(pa_malloc_stats(&m), 0);
	r->stashed_bytes = m.stashed_bytes;
	r->cached_bytes = m.cached_bytes;
	return NULL; /* the thread's exit gives its slots to the page heap */
}

/* Another thread's calloc of as many pages gets a[0] from the stash, zeroed;
 * one of a page more (7) or fewer (5) does not. */
static void *large_taker(void *arg)
{
	struct large_run *r = arg;
	r->b[0] = pa_malloc(LS_SIZE + PA_PAGE_BYTES);
	r->b[1] = pa_malloc(LS_SIZE - PA_PAGE_BYTES);
	r->stashed_spans = large_stash_spans();
	r->b[2] = pa_calloc(1, LS_SIZE);
	r->stashed_pages = large_stash_spans();
	size_t nonzero = 0;
	for (size_t i = 0; i < LS_SIZE; i++)
		nonzero += ((unsigned char *)r->b[2])[i] != 0;
	r->stashed_bytes = nonzero;
	for (int k = 0; k < 3; k++)
		pa_free(r->b[k]);
	return NULL;
}

static void a_large_block_let_go_by_full_slots_serves_another_thread(void **state)
{
	(void)state;
	stashes_drain(1);
	struct large_run r;
	run_in_thread(large_giver, &r);
	TU_EQ(r.stashed_spans, 1);
	TU_EQ(r.stashed_pages, 6);
	TU_EQ(r.stashed_bytes, LS_SIZE);
	TU_EQ(r.cached_bytes, 5 * LS_SIZE);
	void *first = r.a[0];
	pthread_t t; /* not run_in_thread: its flush would empty the stash */
	assert_int_equal(pthread_create(&t, NULL, large_taker, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_ptr_not_equal(r.b[0], first);
	assert_ptr_not_equal(r.b[1], first);
	TU_EQ(r.stashed_spans, 1); /* still there after the 7- and 5-page mallocs */
	assert_ptr_equal(r.b[2], first);
	TU_EQ(r.stashed_pages, 0); /* the calloc took it */
	TU_EQ(r.stashed_bytes, 0); /* nonzero bytes in it */
	pa_thread_cache_flush();
}

/* Large blocks that fit none of the thread's large mallocs since their free
 * go back to the heap when a new small span has taken released pages, at
 * the thread's next refill; a block freed since keeps its slot, and the
 * large stash is left to its decay. Here a thread frees five 48 KiB blocks
 * (the first goes to the stash when the fifth's free makes room), takes a
 * 256 KiB block (none of the waiting blocks fits: a miss) and frees it (the
 * oldest slot goes to the stash), then takes 32 KiB objects until a refill's
 * new span took released pages; its first 64-byte malloc after that (a
 * refill) gives back the three 48 KiB blocks in the slots, but neither the
 * 256 KiB block nor the two stashed ones. */
struct idle_run {
	size_t fresh_moved, misses, slots_before, stashed_before, slots_after, stashed_after;
	size_t large_cached_before, large_cached_after;
	int newest_kept;
};

#define FRESH_OBJS 4096

/* Bytes of free large blocks held aside (in slots and the stash): cached_bytes
 * less the small classes' cached objects. */
static size_t large_cached_bytes(void)
{
	struct pa_malloc_stats m;
	assert_int_equal(pa_malloc_stats(&m), 0);
	size_t small = 0;
	for (unsigned cls = 1; cls < m.nclasses; cls++)
		small += m.classes[cls].cached * pa_sizeclasses[cls].size;
	return m.cached_bytes - small;
}

/* Free five LS_SIZE blocks: four wait in the slots, one in the stash. */
static void five_large_freed(struct idle_run *r)
{
	void *a[5];
	for (int k = 0; k < 5; k++)
		a[k] = pa_malloc(LS_SIZE);
	for (int k = 0; k < 5; k++)
		pa_free(a[k]);
	r->slots_before = tcache_self->large.n;
	size_t spans, pages;
	large_stashed(&spans, &pages);
	r->stashed_before = spans;
}

/* Take 32 KiB objects into objs (at most FRESH_OBJS, *n of them) until a
 * refill's new span took released pages; then what the slots and the stash
 * hold around the thread's next refill (a 64-byte malloc, *small). */
static void grow_then_refill(struct idle_run *r, void **objs, size_t *n, void **small)
{
	uint64_t fresh = central_fresh_count();
	while (*n < FRESH_OBJS && central_fresh_count() == fresh)
		objs[(*n)++] = pa_malloc(32u << 10);
	r->fresh_moved = (size_t)(central_fresh_count() - fresh);
	r->large_cached_before = large_cached_bytes();
	*small = pa_malloc(64);
	r->large_cached_after = large_cached_bytes();
	r->slots_after = tcache_self->large.n;
	size_t spans, pages;
	large_stashed(&spans, &pages);
	r->stashed_after = spans;
}

static void free_all(void **objs, size_t n, void *small)
{
	pa_free(small);
	while (n > 0)
		pa_free(objs[--n]);
}

static void *idle_thread(void *arg)
{
	struct idle_run *r = arg;
	five_large_freed(r);
	uint16_t misses = tcache_self->large.misses;
	void *newest = pa_malloc(256u << 10);
	pa_free(newest);
	r->misses = (uint16_t)(tcache_self->large.misses - misses);
	static void *objs[FRESH_OBJS];
	size_t n = 0;
	void *small;
	grow_then_refill(r, objs, &n, &small);
	r->newest_kept =
	    tcache_self->large.n == 1 && span_base(tcache_self->large.span[0]) == (uintptr_t)newest;
	free_all(objs, n, small);
	return NULL;
}

/* Run fn (idle_thread, serving_thread) in a thread of its own, the stashes
 * empty, into *r; both start from four slots and one stashed block and grow
 * once. */
static void run_five_then_grow(void *(*fn)(void *), struct idle_run *r)
{
	stashes_drain(1);
	run_in_thread(fn, r);
	TU_EQ(r->slots_before, PA_LARGE_SLOTS);
	TU_EQ(r->stashed_before, 1);
	TU_EQ(r->fresh_moved, 1);
}

static void large_blocks_that_fit_no_large_malloc_go_back_when_the_heap_grows(void **state)
{
	(void)state;
	struct idle_run r;
	run_five_then_grow(idle_thread, &r);
	TU_EQ(r.misses, 1);
	TU_EQ(r.slots_after, 1);
	TU_EQ(r.stashed_after, 2);
	TU_EQ(r.large_cached_before - r.large_cached_after, 3 * LS_SIZE);
	TU_EQ(r.newest_kept, 1);
}

/* Large blocks that served every large malloc since their free stay, however
 * the small classes grow (espresso: its four 40-56 KiB buffers, taken and
 * freed again each round, while new spans take released pages). Here the
 * thread frees five 48 KiB blocks, takes one back from its slots and frees
 * it (a hit), then grows as above: the refill after it keeps the slots and
 * the stash. */
static void *serving_thread(void *arg)
{
	struct idle_run *r = arg;
	five_large_freed(r);
	uint16_t misses = tcache_self->large.misses;
	pa_free(pa_malloc(LS_SIZE));
	r->misses = (uint16_t)(tcache_self->large.misses - misses);
	static void *objs[FRESH_OBJS];
	size_t n = 0;
	void *small;
	grow_then_refill(r, objs, &n, &small);
	free_all(objs, n, small);
	return NULL;
}

static void large_blocks_that_serve_the_large_mallocs_stay_when_the_heap_grows(void **state)
{
	(void)state;
	struct idle_run r;
	run_five_then_grow(serving_thread, &r);
	TU_EQ(r.misses, 0);
	TU_EQ(r.slots_after, PA_LARGE_SLOTS);
	TU_EQ(r.stashed_after, 1);
	TU_EQ(r.large_cached_before, 5 * LS_SIZE);
	TU_EQ(r.large_cached_after, 5 * LS_SIZE);
}

/* At most 1 MiB of one page count: of 13 freed 128 KiB blocks (16 pages), 4
 * stay in the slots, 8 are stashed and the ninth the slots let go goes back
 * to the page heap. */
static void *large_cap_thread(void *arg)
{
	size_t *got = arg;
	static void *a[13];
	for (int k = 0; k < 13; k++)
		a[k] = pa_malloc(128 << 10);
	for (int k = 0; k < 13; k++)
		pa_free(a[k]);
	large_stashed(&got[0], &got[1]);
	got[2] = tcache_self->large.n;
	got[3] = pagemap_lookup((uintptr_t)a[8]) == NULL; /* the ninth let go: released */
	got[4] = pagemap_lookup((uintptr_t)a[0]) != NULL; /* the first: stashed */
	return NULL;
}

static void the_large_stash_holds_at_most_one_mib_of_a_page_count(void **state)
{
	(void)state;
	stashes_drain(1);
	size_t got[5];
	run_in_thread(large_cap_thread, got);
	TU_EQ(got[0], 8);
	TU_EQ(got[1], 8 * 16);
	TU_EQ(got[2], PA_LARGE_SLOTS);
	TU_EQ(got[3], 1);
	TU_EQ(got[4], 1);
	pa_thread_cache_flush();
	TU_EQ(large_stash_spans(), 0);
}

/* The decay, as for the batches: spans the large stash held all period. */
static void *large_decay_thread(void *arg)
{
	struct large_run *r = arg;
	size_t *moved = (size_t *)r->b; /* b[] reused for the counts */
	stashes_drain(1);
	for (int k = 0; k < 7; k++)
		r->a[k] = pa_malloc(LS_SIZE);
	for (int k = 0; k < 7; k++)
		pa_free(r->a[k]);    /* slots: a[3..6]; stash: a[0..2] */
	moved[0] = stashes_drain(0); /* a period starts: 0 */
	void *c[5];
	for (int k = 0; k < 5; k++)
		c[k] = pa_malloc(LS_SIZE); /* four from the slots, then a[2] */
	moved[1] = large_stash_spans();
	moved[2] = stashes_drain(0); /* 2: none used since */
	moved[3] = large_stash_spans();
	moved[4] = c[4] == r->a[2];
	for (int k = 0; k < 5; k++)
		pa_free(c[k]);
	return NULL;
}

static void the_large_stash_decays_too(void **state)
{
	(void)state;
	struct large_run r;
	run_in_thread(large_decay_thread, &r);
	size_t *moved = (size_t *)r.b;
	TU_EQ(moved[0], 0);
	TU_EQ(moved[1], 2);
	TU_EQ(moved[2], 2);
	TU_EQ(moved[3], 0);
	TU_EQ(moved[4], 1);
	pa_thread_cache_flush();
}

/* ---- thread-affine spans -------------------------------------------------- */

#define CV_THREADS ((int)CENTRAL_CARVE_SLOTS) /* with the main thread's cache, one too many */
#define CV_SIZE 3456 /* a class no other test here uses: 7 objects in 3 pages */

struct carve_run {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, leave;     /* threads that allocated; all may exit */
	void *p[CV_THREADS]; /* each thread's object, freed by the test */
	uintptr_t span[CV_THREADS];
};

static void *carve_thread(void *arg)
{
	struct carve_run *r = arg;
	pthread_mutex_lock(&r->mu);
	int k = r->done;
	void *p = pa_malloc(CV_SIZE); /* the cache's first refill of the class */
	r->p[k] = p;
	r->span[k] = span_base(pagemap_lookup((uintptr_t)p));
	r->done++;
	pthread_cond_broadcast(&r->cv);
	while (!r->leave)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	return NULL; /* the cache goes: its carve flag is cleared */
}

/* Live threads refilling one class carve spans of their own while there
 * are at most CENTRAL_CARVE_SLOTS caches: with the main thread's, the first
 * three threads each get a new span and a carve slot; the fourth, a fifth
 * cache, does not carve and shares the newest span (the first listed).
 * When the threads exit their slots are free. */
static void live_threads_refill_from_spans_of_their_own(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(CV_SIZE);
	TU_EQ(pa_sizeclasses[cls].size, CV_SIZE);
	pa_thread_cache_flush();
	TU_EQ(central[cls].nonempty == 0, 1);
	struct pa_malloc_stats m;
	assert_int_equal(pa_malloc_stats(&m), 0);
	TU_EQ(m.thread_caches, 1);
	static struct carve_run r;
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	pthread_t t[CV_THREADS];
	for (int k = 0; k < CV_THREADS; k++) {
		assert_int_equal(pthread_create(&t[k], NULL, carve_thread, &r), 0);
		pthread_mutex_lock(&r.mu); /* one at a time, in order */
		while (r.done == k)
			pthread_cond_wait(&r.cv, &r.mu);
		pthread_mutex_unlock(&r.mu);
	}
	for (int k = 0; k < CV_THREADS - 1; k++) {
		TU_EQ(span_base(central[cls].carve[k].span), r.span[k]);
		assert_true(central[cls].carve[k].owner != NULL);
		for (int j = 0; j < k; j++)
			assert_true(r.span[k] != r.span[j]);
	}
	TU_EQ(r.span[CV_THREADS - 1], r.span[CV_THREADS - 2]);
	TU_EQ(central[cls].spans, CV_THREADS - 1);
	TU_EQ(central[cls].carve[CV_THREADS - 1].owner == NULL, 1);
	pthread_mutex_lock(&r.mu);
	r.leave = 1;
	pthread_cond_broadcast(&r.cv);
	pthread_mutex_unlock(&r.mu);
	for (int k = 0; k < CV_THREADS; k++)
		assert_int_equal(pthread_join(t[k], NULL), 0);
	for (int k = 0; k < CV_THREADS - 1; k++) {
		TU_EQ(central[cls].carve[k].owner == NULL, 1);
		TU_EQ(central[cls].carve[k].span == NULL, 1);
	}
	for (int k = 0; k < CV_THREADS; k++)
		pa_free(r.p[k]);
	pa_thread_cache_flush();
	TU_EQ(central[cls].spans, 0);
}

/* ---- pa_free's fast bound (span.h: fbump) ------------------------------------ */

#define FB_BLOCKS 512 /* a span of 16-byte blocks: 8 KiB, two 4 KiB pages */

struct fast_bound {
	int one_span;        /* the 512 blocks filled one fresh span */
	unsigned fbump_full; /* fbump once all were handed out */
	unsigned entry_full; /* ... and the page map's entry's (pagemap.h) */
	uint32_t relmap;     /* after the trim released the free second page */
	unsigned fbump_rel;  /* ... and fbump then */
	unsigned entry_rel;
	uint32_t list_after;  /* the thread's list after freeing the kept block */
	int keyed;            /* that block holds its free-key */
	int refound;          /* a block of the second page was handed out again */
	uint32_t relmap_back; /* ... relmap then */
	unsigned fbump_back;  /* ... and fbump, against bump */
	unsigned entry_back;
	unsigned bump_back;
};

/* FB_BLOCKS 16-byte blocks into b (a fresh span's, in a thread whose list
 * of the class is empty); returns the lowest address. */
static uintptr_t fill_span_of_16(void **b)
{
	uintptr_t base = UINTPTR_MAX;
	for (unsigned k = 0; k < FB_BLOCKS; k++) {
		b[k] = pa_malloc(16);
		if ((uintptr_t)b[k] < base)
			base = (uintptr_t)b[k];
	}
	return base;
}

static void free_all_but(void **b, uintptr_t keep)
{
	for (unsigned k = 0; k < FB_BLOCKS; k++)
		if ((uintptr_t)b[k] != keep)
			pa_free(b[k]);
}

/* 16-byte blocks into more[] until one is on the second 4 KiB page of span
 * s (at base); *found says whether one was. Returns how many were taken. */
static unsigned take_until_second_page(void **more, const struct pa_span *s, uintptr_t base,
                                       int *found)
{
	unsigned n = 0;
	*found = 0;
	while (n < FB_BLOCKS && !*found) {
		more[n] = pa_malloc(16);
		*found = pagemap_lookup((uintptr_t)more[n]) == s &&
		         (uintptr_t)more[n] >= base + PA_SPAN_RELPAGE;
		n++;
	}
	return n;
}

/* fbump as pa_free's fast path reads it: in the page map's entry of a's
 * page. */
static unsigned entry_fbump(uintptr_t a)
{
	return pagemap_leaf_fbump(pagemap_leaf(a >> PA_PAGEMAP_LEAF_SHIFT), a);
}

static void *fast_bound_thread(void *arg)
{
	struct fast_bound *r = arg;
	unsigned cls = pa_size_to_class(16);
	static void *b[FB_BLOCKS], *more[FB_BLOCKS];
	uintptr_t base = fill_span_of_16(b);
	struct pa_span *s = pagemap_lookup(base);
	r->one_span = 1;
	for (unsigned k = 0; k < FB_BLOCKS; k++)
		r->one_span &= pagemap_lookup((uintptr_t)b[k]) == s;
	r->fbump_full = s->fbump;
	r->entry_full = entry_fbump(base);
	free_all_but(b, base);
	pa_malloc_trim(0); /* caches and stash back to the spans; the sweep */
	r->relmap = s->relmap;
	r->fbump_rel = s->fbump;
	r->entry_rel = entry_fbump(base);
	pa_free((void *)base); /* live, in a span with a released page */
	r->list_after = tcache_list_count(tcache_self, cls);
	r->keyed = ((void **)base)[1] == (void *)span_free_key((void *)base);
	unsigned n = take_until_second_page(more, s, base, &r->refound);
	r->relmap_back = s->relmap;
	r->fbump_back = s->fbump;
	r->entry_back = entry_fbump(base);
	r->bump_back = s->bump;
	for (unsigned k = 0; k < n; k++)
		pa_free(more[k]);
	return NULL;
}

/* fbump follows bump while no page of the span is released; the sweep's
 * release sets it to 0, so every free in the span takes the full checks
 * (which still free a live block); a block of the released page handed out
 * again brings it back. */
static void fbump_is_bump_until_a_page_is_released(void **state)
{
	(void)state;
	struct fast_bound r;
	memset(&r, 0, sizeof(r));
	run_in_thread(fast_bound_thread, &r);
	TU_EQ(r.one_span, 1);
	TU_EQ(r.fbump_full, FB_BLOCKS);
	TU_EQ(r.entry_full, FB_BLOCKS);
	TU_EQ(r.relmap, 2); /* the second 4 KiB page; the first holds the kept block */
	TU_EQ(r.fbump_rel, 0);
	TU_EQ(r.entry_rel, 0);
	TU_EQ(r.list_after, 1);
	TU_EQ(r.keyed, 1);
	TU_EQ(r.refound, 1);
	TU_EQ(r.relmap_back, 0);
	TU_EQ(r.fbump_back, r.bump_back);
	TU_EQ(r.entry_back, r.bump_back);
	assert_true(r.bump_back > FB_BLOCKS / 2);
	pa_thread_cache_flush();
}

/* ---- pa_free's page-map leaf (tcache.h: leaf; pagemap.h: class bytes) -------- */

struct free_leaf {
	int cached;            /* the thread has a cache (not under memcheck) */
	unsigned cls_pages;    /* every page of a multi-page span: class, span, index, fbump */
	unsigned large_cls;    /* a large block's first page's class */
	int empty_leaf_r_kept; /* a cacheless thread's free left the placeholder alone */
	int first_misses, refreshed; /* a free with no leaf held: takes the root's, pushes */
	int other_misses, other_ok;  /* a free with another GiB's leaf held: the same */
	int hit_pushes;              /* a free in the held leaf pushes */
};

/* A class of at least two pages (sizeclass_table.h). */
static unsigned multi_page_class(void)
{
	for (unsigned c = 1; c < PA_SC_NUM_CLASSES; c++)
		if (pa_sizeclasses[c].pages >= 2)
			return c;
	return 0;
}

static void *cacheless_free_thread(void *arg)
{
	pa_free(arg);
	return NULL;
}

static void *free_leaf_thread(void *arg)
{
	struct free_leaf *r = arg;
	unsigned c = multi_page_class();
	void *m = pa_malloc(pa_sizeclasses[c].size);
	struct pa_span *s = pagemap_lookup((uintptr_t)m);
	uintptr_t base = span_base(s);
	for (unsigned k = 0; k < s->npages; k++) {
		uintptr_t a = base + k * PA_PAGE_SIZE;
		size_t cls = 99;
		struct pa_span *got =
		    pagemap_leaf_lookup(pagemap_leaf(a >> PA_PAGEMAP_LEAF_SHIFT), a, &cls);
		struct pa_span **leaf = pagemap_leaf(a >> PA_PAGEMAP_LEAF_SHIFT);
		r->cls_pages += got == s && cls == c && pagemap_leaf_page(leaf, a) == k &&
		                pagemap_leaf_fbump(leaf, a) == s->fbump;
	}
	void *big = pa_malloc(100000);
	size_t big_cls = 99;
	uintptr_t b = (uintptr_t)big;
	pagemap_leaf_lookup(pagemap_leaf(b >> PA_PAGEMAP_LEAF_SHIFT), b, &big_cls);
	r->large_cls = (unsigned)big_cls;
	pa_free(big);
	pa_free(m);

	struct pa_tcache *tc = tcache_real();
	r->cached = tc != NULL;
	if (tc == NULL)
		return NULL;
	unsigned c16 = pa_size_to_class(16);
	void *p[3];
	for (int k = 0; k < 3; k++)
		p[k] = pa_malloc(16);
	uintptr_t leaf_r = (uintptr_t)p[0] >> PA_PAGEMAP_LEAF_SHIFT;
	struct pa_span **leaf = pagemap_leaf(leaf_r);

	tc->leaf_r = TCACHE_NO_LEAF;
	uint32_t n = tcache_list_count(tc, c16);
	pa_free(p[0]);
	r->first_misses = tcache_list_count(tc, c16) == n + 1;
	r->refreshed = tc->leaf_r == leaf_r && tc->leaf == leaf;

	tc->leaf_r = leaf_r ^ 1; /* as if the last free had been in the next GiB */
	pa_free(p[1]);
	r->other_misses = tcache_list_count(tc, c16) == n + 2;
	r->other_ok = tc->leaf_r == leaf_r && tc->leaf == leaf;

	pa_free(p[2]);
	r->hit_pushes = tcache_list_count(tc, c16) == n + 3 && tc->leaf_r == leaf_r;

	void *q = pa_malloc(16);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, cacheless_free_thread, q), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	r->empty_leaf_r_kept = tcache_empty.leaf_r == TCACHE_NO_LEAF;
	return NULL;
}

static void pa_free_takes_the_class_from_the_leaf_it_last_used(void **state)
{
	(void)state;
	struct free_leaf r;
	memset(&r, 0, sizeof(r));
	unsigned c = multi_page_class();
	assert_true(c != 0);
	run_in_thread(free_leaf_thread, &r);
	TU_EQ(r.cls_pages, pa_sizeclasses[c].pages);
	TU_EQ(r.large_cls, 0);
	if (r.cached) {
		TU_EQ(r.first_misses, 1);
		TU_EQ(r.refreshed, 1);
		TU_EQ(r.other_misses, 1);
		TU_EQ(r.other_ok, 1);
		TU_EQ(r.hit_pushes, 1);
		TU_EQ(r.empty_leaf_r_kept, 1);
	}
	pa_thread_cache_flush();
}

/* A leaf (pagemap.h) is committed when the heap grows over its GiB, before
 * any span there (pages.h: the grow hook): under an address-space limit a
 * leaf the heap could not get later made its pages ones no span could use,
 * handed out again and again (a small malloc after the heap filled failed
 * where glibc's succeeded, once in ~300 runs at ulimit -v 1 GiB).
 * pagemap_prepare commits each leaf a range covers, once; a range past the
 * map's 47 bits is refused. */
static void the_leaves_of_a_range_are_committed_once_before_its_spans(void **state)
{
	(void)state;
	void *m = pa_malloc(100000); /* the heap is built and has grown */
	uintptr_t a = (uintptr_t)m;
	TU_EQ(pagemap_leaf(a >> PA_PAGEMAP_LEAF_SHIFT) != NULL, 1);
	/* Two GiBs the heap has not reached: the fifth and sixth of the
	 * map's last 8 (the heap grows in a 64 GiB window far below). */
	uintptr_t g = (PA_PAGEMAP_LEAVES - 4) << PA_PAGEMAP_LEAF_SHIFT;
	uintptr_t r = g >> PA_PAGEMAP_LEAF_SHIFT;
	TU_EQ(pagemap_leaf(r - 1) == NULL, 1);
	TU_EQ(pagemap_leaf(r) == NULL, 1);
	/* Their middle array too, where the heap has none there (its own 4 TiB
	 * is the last, where the kernel maps, but not under every tool). */
	size_t leaf = PA_PAGEMAP_LEAF_LEN * 9, mid = PA_PAGEMAP_MID_LEN * sizeof(void *);
	size_t before = pagemap_committed_bytes();
	size_t grew = 2 * leaf + (pagemap_root[g >> PA_PAGEMAP_MID_SHIFT] == NULL ? mid : 0);
	errno = 0;
	TU_EQ(pagemap_prepare(g - PA_CHUNK_SIZE, 2 * PA_CHUNK_SIZE), 0);
	TU_EQ(pagemap_committed_bytes() - before, grew);
	TU_EQ(pagemap_leaf(r - 1) != NULL, 1);
	TU_EQ(pagemap_leaf(r) != NULL, 1);
	TU_EQ(pagemap_lookup(g), NULL); /* committed, and empty */
	TU_EQ(pagemap_prepare(g, PA_CHUNK_SIZE), 0);
	TU_EQ(pagemap_committed_bytes() - before, grew);
	TU_EQ(pagemap_prepare(g, 0), 0);
	TU_EQ(errno, 0);
	uintptr_t top = PA_PAGEMAP_LEAVES << PA_PAGEMAP_LEAF_SHIFT;
	TU_EQ(pagemap_prepare(top - PA_CHUNK_SIZE, 2 * PA_CHUNK_SIZE), -1);
	TU_EQ(errno, ENOMEM);
	pa_free(m);
}

/* ---- the page map's levels (pagemap.h) ---------------------------------------- */

static void page_map_reads_null_off_the_heap_at_every_level(void **state)
{
	(void)state;
	void *m = pa_malloc(16);
	uintptr_t p = (uintptr_t)m;
	uintptr_t r = p >> PA_PAGEMAP_LEAF_SHIFT;
	struct pa_span *s = pagemap_lookup(p);
	assert_non_null(s);
	TU_EQ(pagemap_leaf_lookup(pagemap_leaf(r), p, &(size_t){0}) == s, 1);

	/* Where no middle array is (the 4 TiB range 2^46 away from p's: the
	 * heap of a test lies within 2^46 bytes), where a middle array has no
	 * leaf (the GiB 2^11 GiB away from p's, in p's middle array), and
	 * where nothing can be (from 2^47 up; pagemap_leaf masks those). */
	uintptr_t far = p ^ ((uintptr_t)1 << 46);
	uintptr_t no_leaf = p ^ ((uintptr_t)1 << 41);
	TU_EQ(pagemap_root[far >> PA_PAGEMAP_MID_SHIFT] == NULL, 1); /* the setup as meant */
	TU_EQ(pagemap_root[no_leaf >> PA_PAGEMAP_MID_SHIFT] != NULL, 1);
	TU_EQ(pagemap_leaf(no_leaf >> PA_PAGEMAP_LEAF_SHIFT) == NULL, 1);
	TU_EQ(pagemap_leaf(far >> PA_PAGEMAP_LEAF_SHIFT) == NULL, 1);
	const uintptr_t off[] = {0,
	                         PA_PAGE_SIZE,
	                         far,
	                         no_leaf,
	                         ((uintptr_t)1 << 42) - 1,
	                         (uintptr_t)1 << 42,
	                         ((uintptr_t)1 << 47) - 1,
	                         (uintptr_t)1 << 47,
	                         p + ((uintptr_t)1 << 47),
	                         UINTPTR_MAX};
	for (size_t k = 0; k < sizeof(off) / sizeof(off[0]); k++)
		TU_EQ(pagemap_lookup(off[k]) == NULL, 1);
	TU_EQ(pagemap_leaf((p + ((uintptr_t)1 << 47)) >> PA_PAGEMAP_LEAF_SHIFT) == pagemap_leaf(r),
	      1);

	/* Committed: 32 KiB per middle array, 1.125 MiB per leaf. */
	size_t mids = 0, leaves = 0;
	for (size_t t = 0; t < PA_PAGEMAP_ROOT_LEN; t++) {
		if (pagemap_root[t] == NULL)
			continue;
		mids++;
		for (size_t i = 0; i < PA_PAGEMAP_MID_LEN; i++)
			leaves += pagemap_root[t][i] != NULL;
	}
	TU_EQ(pagemap_committed_bytes(), mids * 32768 + leaves * 1179648);
	assert_true(mids >= 1 && leaves >= 1);
	pa_free(m);
}

/* Threads that race to commit the same GiB in a range the map has no
 * middle array for each map both and install them by compare-and-exchange:
 * one middle array and one leaf stay (the losers unmap theirs). */
#define RACERS 4

struct map_race {
	pthread_barrier_t *go;
	uintptr_t g;
	int rc;
};

static void *map_race_thread(void *arg)
{
	struct map_race *r = arg;
	pthread_barrier_wait(r->go);
	r->rc = pagemap_prepare(r->g, PA_CHUNK_SIZE);
	return NULL;
}

static void racing_threads_commit_one_middle_array_and_one_leaf(void **state)
{
	(void)state;
	void *m = pa_malloc(16);
	uintptr_t t = ((uintptr_t)m >> PA_PAGEMAP_MID_SHIFT) ^ (PA_PAGEMAP_ROOT_LEN / 2);
	uintptr_t g = (t << PA_PAGEMAP_MID_SHIFT) + ((uintptr_t)7 << PA_PAGEMAP_LEAF_SHIFT);
	TU_EQ(pagemap_root[t] == NULL, 1); /* the setup as meant: a range far from the heap */
	size_t before = pagemap_committed_bytes();
	pthread_barrier_t go;
	assert_int_equal(pthread_barrier_init(&go, NULL, RACERS), 0);
	pthread_t th[RACERS];
	struct map_race r[RACERS];
	for (int k = 0; k < RACERS; k++) {
		r[k] = (struct map_race){.go = &go, .g = g, .rc = 1};
		assert_int_equal(pthread_create(&th[k], NULL, map_race_thread, &r[k]), 0);
	}
	for (int k = 0; k < RACERS; k++) {
		assert_int_equal(pthread_join(th[k], NULL), 0);
		TU_EQ(r[k].rc, 0);
	}
	pthread_barrier_destroy(&go);
	TU_EQ(pagemap_committed_bytes() - before,
	      PA_PAGEMAP_MID_LEN * sizeof(void *) + PA_PAGEMAP_LEAF_LEN * 9);
	TU_EQ(pagemap_root[t] != NULL && pagemap_root[t] != pagemap_home_mid, 1);
	TU_EQ(pagemap_leaf(g >> PA_PAGEMAP_LEAF_SHIFT) != NULL, 1);
	TU_EQ(pagemap_lookup(g), NULL);
	pa_free(m);
}

/* ---- the sweep's age (span.h: gave_epoch) ------------------------------------- */

struct sweep_age {
	int ran;                            /* 4 KiB pages and not valgrind: the sweep works */
	uint32_t young, old;                /* relmap after a sweep 500 ms, then 1.1 s on (1 s) */
	uint32_t half_hour, past_hour;      /* the same, 30 and 61 minutes on (1 hour) */
	unsigned fresh_span, kept_on_page0; /* the setup as meant */
};

static void *sweep_age_thread(void *arg)
{
	struct sweep_age *r = arg;
	static void *b[FB_BLOCKS];
	uintptr_t base = fill_span_of_16(b);
	struct pa_span *s = pagemap_lookup(base);
	r->fresh_span = s->bump == FB_BLOCKS && s->relmap == 0;
	free_all_but(b, base);
	pa_thread_cache_flush(); /* every block but base back in the span: dirty now */
	uint32_t e = pages_epoch();
	r->ran = os_page_size() == PA_SPAN_RELPAGE && !vg_active();
	sweep_spans(e + 500, 1000, UINT_MAX);
	r->young = s->relmap;
	sweep_spans(e + 1100, 1000, UINT_MAX);
	r->old = s->relmap;
	/* A block of the second page out and back: the page is back, the
	 * span dirty again. */
	int found;
	unsigned n = take_until_second_page(b, s, base, &found);
	r->kept_on_page0 = found && s->relmap == 0;
	for (unsigned k = 0; k < n; k++)
		pa_free(b[k]);
	pa_thread_cache_flush();
	e = pages_epoch();
	sweep_spans(e + 30u * 60000u, 3600000, UINT_MAX);
	r->half_hour = s->relmap;
	sweep_spans(e + 61u * 60000u, 3600000, UINT_MAX);
	r->past_hour = s->relmap;
	pa_free((void *)base);
	return NULL;
}

/* A span an object came back to is swept once it is min_age old (the
 * scavenger passes scavenge_delay_ms, up to an hour): not 500 ms after with
 * 1 s, at 1.1 s; not 30 minutes after with an hour, at 61 minutes. The
 * sweep releases its second 4 KiB page (the first holds a live block). */
static void the_sweep_waits_for_a_span_s_age_up_to_an_hour(void **state)
{
	(void)state;
	struct sweep_age r;
	memset(&r, 0, sizeof(r));
	run_in_thread(sweep_age_thread, &r);
	if (!r.ran)
		skip();
	TU_EQ(r.fresh_span, 1);
	TU_EQ(r.kept_on_page0, 1);
	TU_EQ(r.young, 0);
	TU_EQ(r.old, 2);
	TU_EQ(r.half_hour, 0);
	TU_EQ(r.past_hour, 2);
	pa_thread_cache_flush();
}

struct sweep_huge {
	int ran;                    /* the huge page counted as collapsed, 4 KiB pages */
	uint32_t early, swept;      /* relmap after a sweep 0.5 s on, then 1.1 s on (1 s) */
	int huge_early, huge_swept; /* the span in a collapsed huge page after each */
	size_t splits;              /* collapsed huge pages fewer after the second */
};

static void *sweep_huge_thread(void *arg)
{
	struct sweep_huge *r = arg;
	static void *b[FB_BLOCKS];
	uintptr_t base = fill_span_of_16(b);
	struct pa_span *s = pagemap_lookup(base);
	free_all_but(b, base);
	pa_thread_cache_flush();
	/* 4 MiB of large blocks: first fit fills the rest of the span's huge
	 * page, which is then dense and none of it released, as the scavenger
	 * collapses them. */
	static void *fill[64];
	for (unsigned k = 0; k < 64; k++)
		fill[k] = pa_malloc(64 << 10);
	r->ran = os_page_size() == PA_SPAN_RELPAGE && !vg_active() &&
	         pages_count_collapsed(base, (2u << 20) / PA_PAGE_SIZE);
	if (r->ran) {
		size_t huge = pages_huge_count();
		uint32_t e = pages_epoch();
		sweep_spans(e + 500, 1000, UINT_MAX);
		r->early = s->relmap;
		r->huge_early = pages_huge_in(base, PA_PAGE_SIZE, 0);
		sweep_spans(e + 1100, 1000, UINT_MAX);
		r->swept = s->relmap;
		r->huge_swept = pages_huge_in(base, PA_PAGE_SIZE, 0);
		r->splits = huge - pages_huge_count();
	}
	for (unsigned k = 0; k < 64; k++)
		pa_free(fill[k]);
	pa_free((void *)base);
	return NULL;
}

/* A sweep that releases pages inside a huge page the scavenger collapsed
 * tells the page heap, which stops counting it as huge (the kernel split
 * it): nothing at 0.5 s with a 1 s age, the span's second page and the
 * split at 1.1 s. */
static void the_sweep_counts_the_huge_page_it_splits(void **state)
{
	(void)state;
	struct sweep_huge r;
	memset(&r, 0, sizeof(r));
	run_in_thread(sweep_huge_thread, &r);
	if (!r.ran)
		skip();
	TU_EQ(r.early, 0);
	TU_EQ(r.huge_early, 1);
	TU_EQ(r.swept, 2);
	TU_EQ(r.huge_swept, 0);
	TU_EQ(r.splits, 1);
	pa_thread_cache_flush();
}

/* ---- malloc_usable_size's fast checks ----------------------------------------- */

/* Two blocks of every class (its size, and one byte less), asked for their
 * usable size in this thread and in another. */
#define US_BLOCKS (2 * (PA_SC_NUM_CLASSES - 1))
static void *us_blocks[US_BLOCKS];

static void *usable_thread(void *arg)
{
	size_t *got = arg;
	for (unsigned i = 0; i < US_BLOCKS; i++)
		got[i] = pa_malloc_usable_size(us_blocks[i]);
	return NULL;
}

static void usable_size_through_the_fast_checks_is_the_class_size(void **state)
{
	(void)state;
	size_t here[US_BLOCKS], there[US_BLOCKS];
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++)
		for (unsigned d = 0; d < 2; d++)
			us_blocks[2 * (cls - 1) + d] = pa_malloc(pa_sizeclasses[cls].size - d);
	for (unsigned i = 0; i < US_BLOCKS; i++)
		here[i] = pa_malloc_usable_size(us_blocks[i]);
	/* Another thread: its leaf is not this one's (free_leaf_miss). */
	run_in_thread(usable_thread, there);
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++)
		for (unsigned d = 0; d < 2; d++) {
			unsigned i = 2 * (cls - 1) + d;
			struct pa_span *s = pagemap_lookup((uintptr_t)us_blocks[i]);
			assert_non_null(s);
			/* The class the record says, not merely one that fits. */
			TU_EQ(s->cls, cls);
			TU_EQ(here[i], pa_sizeclasses[cls].size);
			TU_EQ(there[i], pa_sizeclasses[cls].size);
		}
	for (unsigned i = 0; i < US_BLOCKS; i++)
		pa_free(us_blocks[i]);
}

/* Exact lists and counts: no scavenger, and no heap-profile samples (a
 * sampled block leaves its list's object there, at random). */
static int setup(void **state)
{
	(void)state;
	return pa_config_set("scavenger", "off") | pa_config_set("prof", "off");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(the_sweep_counts_the_huge_page_it_splits),
	    TU_TEST(usable_size_through_the_fast_checks_is_the_class_size),
	    TU_TEST(first_refills_take_one_two_three_objects),
	    TU_TEST(over_its_allowance_a_cache_gives_back_at_the_eighth_slow_path),
	    TU_TEST(within_its_allowance_a_cache_keeps_what_it_holds),
	    TU_TEST(allowance_is_the_total_less_the_other_caches_claims),
	    TU_TEST(a_run_of_refills_grows_a_list_past_four_batches),
	    TU_TEST(past_its_allowance_a_list_stays_at_four_batches),
	    TU_TEST(a_thread_that_frees_what_it_takes_keeps_four_batches),
	    TU_TEST(a_thread_that_drains_cuts_its_grown_lists),
	    TU_TEST(span_records_move_four_at_a_time),
	    TU_TEST(span_records_are_64_bytes_up_to_128_objects),
	    TU_TEST(large_objects_outlive_the_thread_that_counted_them),
	    TU_TEST(stashed_batches_come_back_whole_to_the_next_refill),
	    TU_TEST(a_stash_holds_at_most_one_mib_of_its_class),
	    TU_TEST(the_decay_gives_back_what_the_stash_did_not_use),
	    TU_TEST(the_decay_waits_the_hold_while_the_scavenger_holds),
	    TU_TEST(the_sweep_waits_the_hold_within_its_band),
	    TU_TEST(a_large_block_let_go_by_full_slots_serves_another_thread),
	    TU_TEST(large_blocks_that_fit_no_large_malloc_go_back_when_the_heap_grows),
	    TU_TEST(large_blocks_that_serve_the_large_mallocs_stay_when_the_heap_grows),
	    TU_TEST(the_large_stash_holds_at_most_one_mib_of_a_page_count),
	    TU_TEST(the_large_stash_decays_too),
	    TU_TEST(live_threads_refill_from_spans_of_their_own),
	    TU_TEST(fbump_is_bump_until_a_page_is_released),
	    TU_TEST(pa_free_takes_the_class_from_the_leaf_it_last_used),
	    TU_TEST(the_leaves_of_a_range_are_committed_once_before_its_spans),
	    TU_TEST(page_map_reads_null_off_the_heap_at_every_level),
	    TU_TEST(racing_threads_commit_one_middle_array_and_one_leaf),
	    TU_TEST(the_sweep_waits_for_a_span_s_age_up_to_an_hour),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
