/*
 * test_heap_thread.c — heaps of the program's own (pa_heap_new) across
 * threads: threads allocating from one heap at once and freeing each
 * other's objects, and a heap destroyed while its objects are live in
 * other threads, whose thread caches hold default-heap objects meanwhile
 * (a heap's objects never enter a thread cache), and a heap deleted while
 * other threads free its objects. Run under ThreadSanitizer
 * too (tools/test.sh: the *thread* tests).
 */
#include <pthread.h>

#include "testutil.h"

#include "pagealloc.h"

#define THREADS 4
#define PER_THREAD 5000

static pa_heap_t *shared_heap;
static void *objs[THREADS][PER_THREAD];
static pthread_barrier_t barrier;

static size_t size_of(int t, int i)
{
	return (size_t)(1 + (t * 7919 + i * 31) % 2000) + (i % 500 == 0 ? 50000 : 0);
}

/* Allocate this thread's objects in the shared heap, wait, then free the
 * next thread's. */
static void *alloc_then_free_the_neighbours(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int i = 0; i < PER_THREAD; i++) {
		unsigned char *p = pa_heap_malloc(shared_heap, size_of(t, i));
		if (p == NULL)
			return (void *)1;
		p[0] = (unsigned char)t;
		objs[t][i] = p;
	}
	pthread_barrier_wait(&barrier);
	int u = (t + 1) % THREADS;
	for (int i = 0; i < PER_THREAD; i++) {
		unsigned char *p = objs[u][i];
		if (p[0] != (unsigned char)u)
			return (void *)2;
		pa_free(p);
	}
	return NULL;
}

static void threads_free_objects_of_another_threads_heap(void **state)
{
	(void)state;
	shared_heap = pa_heap_new();
	assert_non_null(shared_heap);
	pthread_barrier_init(&barrier, NULL, THREADS);
	pthread_t th[THREADS];
	for (int t = 0; t < THREADS; t++)
		assert_int_equal(pthread_create(&th[t], NULL, alloc_then_free_the_neighbours,
		                                (void *)(intptr_t)t),
		                 0);
	for (int t = 0; t < THREADS; t++) {
		void *r;
		pthread_join(th[t], &r);
		TU_EQ((uintptr_t)r, 0);
	}
	pthread_barrier_destroy(&barrier);
	struct pa_heap_stats st;
	assert_int_equal(pa_heap_stats(shared_heap, &st), 0);
	TU_EQ(st.allocs, THREADS * PER_THREAD);
	TU_EQ(st.frees, THREADS * PER_THREAD);
	TU_EQ(st.live_objects, 0);
	TU_EQ(st.live_bytes, 0);
	TU_EQ(st.large_objects, 0);
	pa_heap_destroy(shared_heap);
}

/* ---- destroy while other threads hold live objects -------------------------- */

static pthread_barrier_t built, destroyed;
static int cached_default[THREADS]; /* default-heap objects each thread kept */

static void *hold_and_churn(void *arg)
{
	int t = (int)(intptr_t)arg;
	void *mine[100], *deflt[64];
	for (int i = 0; i < 100; i++)
		mine[i] = pa_heap_malloc(shared_heap, (size_t)(16 + i * 8));
	for (int i = 0; i < 50; i++) /* half freed: to the heap, not this cache */
		pa_free(mine[i]);
	for (int i = 0; i < 64; i++)
		deflt[i] = pa_malloc(48);
	for (int i = 0; i < 64; i++) /* into this thread's cache */
		pa_free(deflt[i]);
	pthread_barrier_wait(&built);
	pthread_barrier_wait(&destroyed);
	/* The cache's objects are the default heap's and still good. */
	int ok = 0;
	for (int i = 0; i < 64; i++) {
		unsigned char *p = pa_malloc(48);
		if (p != NULL) {
			memset(p, t, 48);
			ok++;
		}
		deflt[i] = p;
	}
	for (int i = 0; i < 64; i++)
		pa_free(deflt[i]);
	cached_default[t] = ok;
	return NULL;
}

static void destroy_with_live_objects_in_other_threads(void **state)
{
	(void)state;
	pa_cache_flush();
	struct pa_stats s0, s1;
	shared_heap = pa_heap_new();
	pthread_barrier_init(&built, NULL, THREADS + 1);
	pthread_barrier_init(&destroyed, NULL, THREADS + 1);
	pthread_t th[THREADS];
	for (int t = 0; t < THREADS; t++)
		assert_int_equal(pthread_create(&th[t], NULL, hold_and_churn, (void *)(intptr_t)t),
		                 0);
	pthread_barrier_wait(&built);
	struct pa_heap_stats st;
	assert_int_equal(pa_heap_stats(shared_heap, &st), 0);
	TU_EQ(st.live_objects, THREADS * 50);
	pa_cache_flush();
	assert_int_equal(pa_stats(&s0), 0);
	size_t held = st.page_bytes;
	pa_heap_destroy(shared_heap);
	pa_cache_flush();
	assert_int_equal(pa_stats(&s1), 0);
	TU_EQ(s0.heap_inuse - s1.heap_inuse, held);
	pthread_barrier_wait(&destroyed);
	for (int t = 0; t < THREADS; t++) {
		pthread_join(th[t], NULL);
		TU_EQ(cached_default[t], 64);
	}
	pthread_barrier_destroy(&built);
	pthread_barrier_destroy(&destroyed);
}

/* ---- delete while other threads free the heap's objects ---------------------- */

#define RACERS 3
#define RACE_OBJS 20000
static void *race_objs[RACERS][RACE_OBJS];
static pthread_barrier_t race_start;

static void *free_mine_during_delete(void *arg)
{
	int t = (int)(intptr_t)arg;
	pthread_barrier_wait(&race_start);
	for (int i = 0; i < RACE_OBJS; i++)
		pa_free(race_objs[t][i]); /* into the heap, or the default heap after */
	return NULL;
}

static void delete_while_other_threads_free_its_objects(void **state)
{
	(void)state;
	pa_thread_cache_flush();
	struct pa_malloc_stats m0, m1;
	assert_int_equal(pa_malloc_stats(&m0), 0);
	pa_heap_t *h = pa_heap_new();
	for (int t = 0; t < RACERS; t++)
		for (int i = 0; i < RACE_OBJS; i++)
			assert_non_null(race_objs[t][i] =
			                    pa_heap_malloc(h, (size_t)(16 + (i * 13 + t) % 700)));
	pthread_barrier_init(&race_start, NULL, RACERS + 1);
	pthread_t th[RACERS];
	for (int t = 0; t < RACERS; t++)
		assert_int_equal(
		    pthread_create(&th[t], NULL, free_mine_during_delete, (void *)(intptr_t)t), 0);
	pthread_barrier_wait(&race_start);
	pa_heap_delete(h);
	for (int t = 0; t < RACERS; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&race_start);
	/* Every object freed, in the heap or after it went: the default heap
	 * holds none of them. */
	pa_thread_cache_flush();
	assert_int_equal(pa_malloc_stats(&m1), 0);
	TU_EQ(m1.live_objects, m0.live_objects);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(threads_free_objects_of_another_threads_heap),
	    TU_TEST(destroy_with_live_objects_in_other_threads),
	    TU_TEST(delete_while_other_threads_free_its_objects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
