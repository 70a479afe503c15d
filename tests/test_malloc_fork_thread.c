/*
 * test_malloc_fork_thread.c — fork while other threads are inside the
 * allocator, and a thread's cache going back when the thread exits.
 *
 * The fork test has the shape of glibc's tst-malloc-fork-deadlock: four
 * threads allocate and free mixed sizes (small classes and large objects)
 * without pause while the main thread forks again and again. Whatever lock
 * a thread held at the instant of fork, the child must be able to allocate:
 * each child allocates a few hundred blocks of mixed sizes, large ones
 * included, fills and checks them, frees them, and exits 0. A child that
 * deadlocks is killed by its own alarm() (SIGALRM), so a hang shows up as a
 * failed wait status instead of a stuck test. 2000 forks in an ordinary
 * build, 200 under a sanitizer (each fork of an instrumented process costs
 * far more); PA_TEST_SCALE multiplies either.
 *
 * A first test forks while the threads make the process's first mallocs,
 * so that the fork meets the heap being built; it must run before anything
 * else here touches the allocator.
 *
 * The scavenger is switched off here: a forked child would restart its
 * thread on its next heap call, and ThreadSanitizer kills a child of a
 * multi-threaded process that starts a thread (die_after_fork).
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include "testutil.h"

#include "pagealloc.h"

#if TU_UNDER_SANITIZER
#define FORKS 200.0
#else
#define FORKS 2000.0
#endif

#define BUSY_THREADS 4
#define BUSY_SLOTS 64
#define CHILD_BLOCKS 300
#define CHILD_ALARM_S 20

/* A size for block k of a mix: mostly small, every 16th large (up to
 * 256 KiB), so children and busy threads use both paths. */
static size_t mixed_size(uint64_t r)
{
	if (r % 16 == 0)
		return PA_MALLOC_MAX_SMALL + 1 + (size_t)(r >> 8) % (256 << 10);
	return 1 + (size_t)(r >> 8) % (r % 3 == 0 ? 4096 : 256);
}

static int stop; /* atomic */

struct busy {
	pthread_t thread;
	uint64_t rng, rounds;
	unsigned bad;
};

static void *busy_loop(void *arg)
{
	struct busy *b = arg;
	unsigned char *p[BUSY_SLOTS] = {0};
	unsigned char fill[BUSY_SLOTS] = {0};
	size_t n[BUSY_SLOTS] = {0};
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		unsigned k = (unsigned)(tu_xorshift(&b->rng) % BUSY_SLOTS);
		if (p[k] != NULL) {
			b->bad += p[k][0] != fill[k] || p[k][n[k] - 1] != fill[k];
			pa_free(p[k]);
			p[k] = NULL;
		} else {
			uint64_t r = tu_xorshift(&b->rng);
			n[k] = mixed_size(r);
			p[k] = pa_malloc(n[k]);
			if (p[k] == NULL) {
				b->bad++;
				continue;
			}
			fill[k] = (unsigned char)(r | 1);
			p[k][0] = p[k][n[k] - 1] = fill[k];
		}
		b->rounds++;
	}
	for (unsigned k = 0; k < BUSY_SLOTS; k++)
		pa_free(p[k]);
	pa_thread_cache_flush();
	return NULL;
}

/* The child: allocate, fill, check and free CHILD_BLOCKS mixed blocks.
 * Exit status: 0 good, 2 out of memory, 3 a pattern broke. */
static void child_work(uint64_t seed)
{
	alarm(CHILD_ALARM_S);
	static unsigned char *p[CHILD_BLOCKS];
	static size_t n[CHILD_BLOCKS];
	uint64_t rng = seed | 1;
	for (unsigned k = 0; k < CHILD_BLOCKS; k++) {
		n[k] = mixed_size(tu_xorshift(&rng));
		p[k] = pa_malloc(n[k]);
		if (p[k] == NULL)
			_exit(2);
		memset(p[k], (int)(k & 0xff), n[k]);
	}
	for (unsigned k = 0; k < CHILD_BLOCKS; k++) {
		for (size_t i = 0; i < n[k]; i++)
			if (p[k][i] != (unsigned char)(k & 0xff))
				_exit(3);
		pa_free(p[k]);
	}
	_exit(0);
}

static void fork_while_four_threads_allocate_leaves_every_child_able_to_allocate(void **state)
{
	(void)state;
	assert_int_equal(pa_config_set("scavenger", "off"), 0);
	static struct busy b[BUSY_THREADS];
	for (unsigned t = 0; t < BUSY_THREADS; t++) {
		b[t].rng = 0x9e3779b97f4a7c15ull * (t + 1);
		assert_int_equal(pthread_create(&b[t].thread, NULL, busy_loop, &b[t]), 0);
	}
	unsigned forks = (unsigned)(FORKS * tu_scale()), failed = 0;
	int first_status = 0;
	for (unsigned i = 0; i < forks; i++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			child_work(0x2545f4914f6cdd1dull * (i + 1));
		int status;
		while (waitpid(pid, &status, 0) < 0)
			assert_int_equal(errno, EINTR);
		if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && failed++ == 0)
			first_status = status;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	uint64_t rounds = 0;
	for (unsigned t = 0; t < BUSY_THREADS; t++) {
		assert_int_equal(pthread_join(b[t].thread, NULL), 0);
		TU_EQ(b[t].bad, 0);
		rounds += b[t].rounds;
	}
	print_message("%u forks while the threads made %" PRIu64 " calls\n", forks, rounds);
	if (failed != 0)
		fail_msg("%u of %u children failed; the first: %s %d", failed, forks,
		         WIFSIGNALED(first_status) ? "signal" : "exit status",
		         WIFSIGNALED(first_status) ? WTERMSIG(first_status)
		                                   : WEXITSTATUS(first_status));
	assert_int_equal(pa_config_set("scavenger", "on"), 0);
}

/* ---- fork during the first malloc ------------------------------------------- */

static int forked; /* atomic: the main thread has forked */

/* The first malloc, then wait for the fork: a thread that had finished
 * before it would be, to ThreadSanitizer in the child, a leaked thread. */
static void *first_malloc(void *arg)
{
	(void)arg;
	void *p = pa_malloc(64);
	pa_free(p);
	while (!__atomic_load_n(&forked, __ATOMIC_ACQUIRE))
		sched_yield();
	return p != NULL ? NULL : (void *)1;
}

/* Runs first in this process: nothing has touched the allocator yet, so
 * the threads' first pa_malloc builds the heap, and the fork lands while one
 * of them holds the initialisation lock (it did, every time, when the fork
 * handlers were registered only after the build). */
static void
fork_while_another_thread_builds_the_heap_leaves_the_child_able_to_allocate(void **state)
{
	(void)state;
	assert_int_equal(pa_config_set("scavenger", "off"), 0);
	pthread_t t[BUSY_THREADS];
	for (unsigned i = 0; i < BUSY_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, first_malloc, NULL), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(CHILD_ALARM_S);
		void *p = pa_malloc(64), *q = pa_malloc(100000);
		if (p == NULL || q == NULL)
			_exit(2);
		pa_free(p);
		pa_free(q);
		_exit(0);
	}
	__atomic_store_n(&forked, 1, __ATOMIC_RELEASE);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	for (unsigned i = 0; i < BUSY_THREADS; i++) {
		void *rc;
		assert_int_equal(pthread_join(t[i], &rc), 0);
		assert_null(rc);
	}
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		fail_msg("child %s %d", WIFSIGNALED(status) ? "killed by signal" : "exited with",
		         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* ---- thread exit ------------------------------------------------------------- */

#define EXIT_BLOCKS 1000

/* The exiting thread waits here (twice) so the main thread can look at its
 * cache while it is alive. */
static pthread_barrier_t exit_barrier;

static void *alloc_then_free_into_cache(void *arg)
{
	(void)arg;
	static void *p[EXIT_BLOCKS];
	for (unsigned k = 0; k < EXIT_BLOCKS; k++)
		if ((p[k] = pa_malloc(16 + 16 * (k % 64))) == NULL)
			return (void *)1;
	for (unsigned k = 0; k < EXIT_BLOCKS; k++)
		pa_free(p[k]);
	pthread_barrier_wait(&exit_barrier);
	pthread_barrier_wait(&exit_barrier);
	return NULL;
}

static void thread_exit_hands_its_cache_back(void **state)
{
	(void)state;
	struct pa_malloc_stats before, during, after;
	pa_thread_cache_flush(); /* this cache and the stashes: empty */
	assert_int_equal(pa_malloc_stats(&before), 0);
	assert_int_equal(pthread_barrier_init(&exit_barrier, NULL, 2), 0);
	pthread_t t;
	void *rc;
	assert_int_equal(pthread_create(&t, NULL, alloc_then_free_into_cache, NULL), 0);
	pthread_barrier_wait(&exit_barrier);
	assert_int_equal(pa_malloc_stats(&during), 0);
	pthread_barrier_wait(&exit_barrier);
	assert_int_equal(pthread_join(t, &rc), 0);
	assert_null(rc);
	pa_thread_cache_flush(); /* the stashes: batches its cache gave back */
	assert_int_equal(pa_malloc_stats(&after), 0);
	pthread_barrier_destroy(&exit_barrier);

	/* While it lived, the thread had a cache holding freed blocks. */
	TU_EQ(during.thread_caches, before.thread_caches + 1);
	TU_EQ(during.live_objects, before.live_objects);
	assert_true(during.cached_bytes > before.cached_bytes);
	/* Its exit gave every one of them back. */
	TU_EQ(after.thread_caches, before.thread_caches);
	TU_EQ(after.cached_bytes, before.cached_bytes);
	TU_EQ(after.live_objects, before.live_objects);
	TU_EQ(after.heap_alloc, before.heap_alloc);
	TU_EQ(after.heap_inuse, before.heap_inuse);
	for (size_t c = 1; c < after.nclasses; c++) {
		TU_EQ(after.classes[c].cached, before.classes[c].cached);
		TU_EQ(after.classes[c].spans, before.classes[c].spans);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(fork_while_another_thread_builds_the_heap_leaves_the_child_able_to_allocate),
	    TU_TEST(fork_while_four_threads_allocate_leaves_every_child_able_to_allocate),
	    TU_TEST(thread_exit_hands_its_cache_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
