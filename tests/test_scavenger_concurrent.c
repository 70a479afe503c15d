/*
 * test_scavenger_concurrent.c — a page in use is never released.
 *
 * Worker threads (more than the machine's cores) allocate runs through the
 * per-CPU caches (1..15 pages) and the heap (16..300 pages), write a pattern
 * into every 4 KiB OS page they own, and re-check their live runs again and
 * again before freeing them. Meanwhile three releasers run as hard as they
 * can: the background scavenger at scavenge_percent=100 with no delay, a
 * thread calling pa_scavenge(0) (which also flushes every CPU's cache) and
 * pa_scavenge(1 MiB) in a loop, and the memory limit, switched on (16 MiB,
 * below what the workers hold) and off, so allocating threads release
 * synchronously too. A released page reads back as zero (release=dontneed),
 * so one released while in use shows up as a broken pattern.
 *
 * Runs for a fixed wall time (PA_TEST_SECONDS, default 2) so that it stays
 * a few seconds under ThreadSanitizer too; nothing about time is asserted.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "pagealloc.h"

#define WORKERS 6
#define SLOTS 24
#define OS_PAGE 4096u

static int stop; /* atomics */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static unsigned seconds(void)
{
	const char *s = getenv("PA_TEST_SECONDS");
	return s != NULL && atoi(s) > 0 ? (unsigned)atoi(s) : 2;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The pattern: three words in every 4 KiB page, each depending on the tag
 * and the offset, never zero. */
static uint64_t word_at(uint64_t tag, size_t off, unsigned k)
{
	return (tag ^ (off * 0x9e3779b97f4a7c15ull) ^ k) | 1;
}

static void write_pattern(char *p, size_t len, uint64_t tag)
{
	for (size_t off = 0; off < len; off += OS_PAGE) {
		volatile uint64_t *w = (volatile uint64_t *)(p + off);
		w[0] = word_at(tag, off, 0);
		w[OS_PAGE / 16] = word_at(tag, off, 1);
		w[OS_PAGE / 8 - 1] = word_at(tag, off, 2);
	}
}

static unsigned check_pattern(const char *p, size_t len, uint64_t tag)
{
	unsigned bad = 0;
	for (size_t off = 0; off < len; off += OS_PAGE) {
		const volatile uint64_t *w = (const volatile uint64_t *)(p + off);
		bad += w[0] != word_at(tag, off, 0);
		bad += w[OS_PAGE / 16] != word_at(tag, off, 1);
		bad += w[OS_PAGE / 8 - 1] != word_at(tag, off, 2);
	}
	return bad;
}

struct worker {
	pthread_t thread;
	unsigned id;
	uint64_t ops, checks;
	unsigned bad_words, failed_allocs;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	char *p[SLOTS] = {0};
	size_t n[SLOTS] = {0};
	uint64_t tag[SLOTS] = {0};
	uint64_t seed = 0x2545f4914f6cdd1dull * (w->id + 1);
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		unsigned k = (unsigned)(xorshift(&seed) % SLOTS);
		if (p[k] != NULL) {
			w->bad_words += check_pattern(p[k], n[k] * PA_PAGE_BYTES, tag[k]);
			w->checks++;
			if (xorshift(&seed) % 4 != 0)
				continue; /* keep it a while longer, re-checking */
			pa_pages_free(p[k], n[k]);
			p[k] = NULL;
			w->ops++;
			continue;
		}
		n[k] = xorshift(&seed) % 4 == 0 ? 16 + xorshift(&seed) % 285
		                                : 1 + xorshift(&seed) % 15;
		p[k] = pa_pages_alloc(n[k]);
		if (p[k] == NULL) {
			w->failed_allocs++;
			continue;
		}
		tag[k] = ((uint64_t)w->id << 56) ^ (w->ops << 8) ^ k;
		write_pattern(p[k], n[k] * PA_PAGE_BYTES, tag[k]);
		w->ops++;
	}
	for (unsigned k = 0; k < SLOTS; k++) {
		if (p[k] == NULL)
			continue;
		w->bad_words += check_pattern(p[k], n[k] * PA_PAGE_BYTES, tag[k]);
		pa_pages_free(p[k], n[k]);
	}
	return NULL;
}

struct releaser {
	pthread_t thread;
	uint64_t rounds, released;
	unsigned config_failures;
};

static void *release_loop(void *arg)
{
	struct releaser *r = arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		r->released += pa_scavenge(0);
		r->released += pa_scavenge((size_t)1 << 20);
		/* The limit on and off: allocating threads release synchronously
		 * while it is on. */
		r->config_failures +=
		    pa_config_set("memory_limit", r->rounds % 2 ? "16M" : "0") != 0;
		r->rounds++;
	}
	r->config_failures += pa_config_set("memory_limit", "0") != 0;
	return NULL;
}

static void page_in_use_is_never_released(void **state)
{
	(void)state;
	pa_cache_flush();
	struct pa_stats s0;
	assert_int_equal(pa_stats(&s0), 0);
	/* The background thread starts on the first heap call. */
	void *x = pa_pages_alloc(1);
	assert_non_null(x);
	pa_pages_free(x, 1);

	static struct worker w[WORKERS];
	static struct releaser r;
	for (unsigned i = 0; i < WORKERS; i++) {
		w[i].id = i;
		assert_int_equal(pthread_create(&w[i].thread, NULL, work, &w[i]), 0);
	}
	assert_int_equal(pthread_create(&r.thread, NULL, release_loop, &r), 0);
	uint64_t end = now_ns() + (uint64_t)seconds() * 1000000000u;
	while (now_ns() < end) {
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < WORKERS; i++)
		assert_int_equal(pthread_join(w[i].thread, NULL), 0);
	assert_int_equal(pthread_join(r.thread, NULL), 0);

	struct pa_stats s1;
	assert_int_equal(pa_stats(&s1), 0);
	for (unsigned i = 0; i < WORKERS; i++) {
		print_message("worker %u: %llu ops, %llu checks\n", i, (unsigned long long)w[i].ops,
		              (unsigned long long)w[i].checks);
		assert_int_equal(w[i].bad_words, 0);
		assert_int_equal(w[i].failed_allocs, 0);
		assert_true(w[i].ops > 0);
	}
	print_message("pa_scavenge: %llu rounds, %llu KiB; background: %llu us CPU; total released "
	              "%llu KiB in %llu madvise calls\n",
	              (unsigned long long)r.rounds, (unsigned long long)(r.released >> 10),
	              (unsigned long long)(s1.scavenger_cpu_ns / 1000),
	              (unsigned long long)((s1.released_total - s0.released_total) >> 10),
	              (unsigned long long)(s1.release_calls - s0.release_calls));
	assert_int_equal(r.config_failures, 0);
	assert_true(r.rounds > 0);
	assert_int_equal(s1.scavenger_running, 1);
	/* Every release is counted: the explicit ones are part of the total. */
	assert_true(s1.released_total - s0.released_total >= r.released);
	assert_true(r.released > 0);

	/* Afterwards: everything the workers held is free again, and one full
	 * release leaves nothing free resident and the caches empty. */
	pa_scavenge(0);
	struct pa_stats s2;
	assert_int_equal(pa_stats(&s2), 0);
	assert_int_equal(s2.heap_inuse, s0.heap_inuse);
	assert_int_equal(s2.cache_free, 0);
	assert_int_equal(s2.cache_queued, 0);
	assert_int_equal(s2.heap_released, s2.heap_free);
	assert_int_equal(s2.memory_limit, 0);
}

int main(void)
{
	/* Before the first pa_ call: the default heap reads it once. */
	setenv("PAGEALLOC_CONF", "scavenge_percent=100,scavenge_delay_ms=0", 1);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(page_in_use_is_never_released),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
