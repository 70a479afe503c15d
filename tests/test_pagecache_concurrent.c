/*
 * test_pagecache_concurrent.c — per-CPU page caches under threads >> CPUs.
 *
 * Threads allocate and free runs of 1..15 pages through the caches and
 * larger runs straight from the heap, write an owner tag into every page
 * they hold and check it before freeing: a page handed out twice shows up as
 * a foreign tag. Afterwards a full flush must leave the heap entirely free
 * with consistent summaries. Runs in every cache mode the machine supports.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "pagecache.h"
#include "pageheap.h"
#include "testutil.h"

#define THREADS 32
#define SLOTS 64

struct worker {
	struct pa_pagecache_set *pc;
	unsigned id;
	unsigned ops;
	unsigned bad_tags;
	unsigned failures;
};

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void tag(uintptr_t a, size_t n, uint64_t t)
{
	for (size_t i = 0; i < n; i++)
		*(volatile uint64_t *)(a + i * PA_PAGE_SIZE) = t;
}

static unsigned check_tag(uintptr_t a, size_t n, uint64_t t)
{
	unsigned bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += *(volatile uint64_t *)(a + i * PA_PAGE_SIZE) != t;
	return bad;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uintptr_t addr[SLOTS] = {0};
	size_t len[SLOTS] = {0};
	uint64_t seed = 0x9e3779b97f4a7c15ull * (w->id + 1);
	for (unsigned op = 0; op < w->ops; op++) {
		unsigned k = (unsigned)(xorshift(&seed) % SLOTS);
		uint64_t t = ((uint64_t)w->id << 48) | k;
		if (addr[k] != 0) {
			w->bad_tags += check_tag(addr[k], len[k], t);
			if (len[k] < PA_CACHE_MAX_PAGES)
				w->failures += pagecache_free(w->pc, addr[k], len[k]) != PA_PAGE_OK;
			else
				pageheap_free(w->pc->heap, addr[k], len[k]);
			addr[k] = 0;
			continue;
		}
		size_t n = xorshift(&seed) % 8 == 0
		               ? 16 + xorshift(&seed) % 100
		               : 1 + xorshift(&seed) % (PA_CACHE_MAX_PAGES - 1);
		uintptr_t a = n < PA_CACHE_MAX_PAGES ? pagecache_alloc(w->pc, n, NULL)
		                                     : pageheap_alloc(w->pc->heap, n, NULL);
		if (a == 0) {
			w->failures++;
			continue;
		}
		tag(a, n, t);
		addr[k] = a;
		len[k] = n;
	}
	for (unsigned k = 0; k < SLOTS; k++) {
		if (addr[k] == 0)
			continue;
		w->bad_tags += check_tag(addr[k], len[k], ((uint64_t)w->id << 48) | k);
		if (len[k] < PA_CACHE_MAX_PAGES)
			w->failures += pagecache_free(w->pc, addr[k], len[k]) != PA_PAGE_OK;
		else
			pageheap_free(w->pc->heap, addr[k], len[k]);
	}
	return NULL;
}

static void run_threads(enum pa_cache_mode mode)
{
	struct pa_pageheap h;
	struct pa_pagecache_set pc;
	assert_int_equal(pageheap_init(&h, NULL), 0);
	assert_int_equal(pagecache_init(&pc, &h, mode), 0);
	assert_int_equal(
	    pc.mode, mode == PA_CACHE_RSEQ && pc.mode != PA_CACHE_RSEQ ? PA_CACHE_LOCKED : mode);

	pthread_t tid[THREADS];
	struct worker w[THREADS];
	for (unsigned i = 0; i < THREADS; i++) {
		w[i] =
		    (struct worker){.pc = &pc, .id = i + 1, .ops = (unsigned)(150000 * tu_scale())};
		assert_int_equal(pthread_create(&tid[i], NULL, work, &w[i]), 0);
	}
	for (unsigned i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(tid[i], NULL), 0);
		assert_int_equal(w[i].bad_tags, 0);
		assert_int_equal(w[i].failures, 0);
	}
	/* Everything was freed: after a flush nothing is in use or cached. */
	pagecache_flush_all(&pc);
	struct pa_pagecache_stats cs;
	pagecache_stats(&pc, &cs);
	assert_int_equal(cs.cached_pages, 0);
	assert_int_equal(cs.queued_pages, 0);
	assert_int_equal(h.inuse_pages, 0);
	assert_int_equal(pageheap_verify(&h), 0);
	if (mode != PA_CACHE_OFF)
		assert_true(cs.refills > 0);
	pagecache_destroy(&pc);
	pageheap_destroy(&h);
}

static void threads_never_share_a_page_rseq(void **state)
{
	(void)state;
	run_threads(PA_CACHE_RSEQ);
}

static void threads_never_share_a_page_locked(void **state)
{
	(void)state;
	run_threads(PA_CACHE_LOCKED);
}

static void threads_never_share_a_page_cache_off(void **state)
{
	(void)state;
	run_threads(PA_CACHE_OFF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(threads_never_share_a_page_rseq),
	    cmocka_unit_test(threads_never_share_a_page_locked),
	    cmocka_unit_test(threads_never_share_a_page_cache_off),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
