/*
 * test_malloc_stats.c — pa_malloc_stats, exactly, in single-threaded
 * scenarios whose every figure can be computed by hand from the size-class
 * table (sizeclass_table.h).
 *
 * Every snapshot is also checked against itself and against the page heap
 * (snap): the derived fields are what pagealloc.h defines them to be
 * (heap_usage = heap_sys - heap_released - span_released, max_fragmentation = heap_inuse -
 * heap_alloc, heap_idle = heap_sys - heap_inuse), the totals are the sums
 * of the per-class rows plus the large objects, and after pa_cache_flush
 * the page heap's pa_stats agree: its heap_inuse is the malloc layer's (no
 * pa_pages_alloc user here), heap_mapped is heap_sys, heap_released is
 * heap_released. The scavenger is off, so nothing moves between the two
 * snapshots.
 *
 * Each test starts from a flushed cache and checks its class is empty, so
 * span counts are absolute; other figures are deltas. Objects taken from a
 * fresh class are contiguous and handed out in address order: the central
 * list fills one span before it opens the next, and a refill (at most
 * central_batch: 32 objects) comes lowest address first.
 */
#include <sys/mman.h>

#include "testutil.h"

#include "pagealloc.h"
#include "sizeclass_table.h"

#define PG PA_PAGE_BYTES

/* A snapshot after pa_cache_flush, checked for consistency. */
static struct pa_malloc_stats snap(void)
{
	struct pa_malloc_stats m;
	struct pa_stats p;
	pa_cache_flush();
	assert_int_equal(pa_malloc_stats(&m), 0);
	assert_int_equal(pa_stats(&p), 0);
	TU_EQ(m.heap_usage, m.heap_sys - m.heap_released - m.span_released);
	TU_EQ(m.max_fragmentation, m.heap_inuse - m.heap_alloc);
	TU_EQ(m.heap_idle, m.heap_sys - m.heap_inuse);
	size_t live = m.large_objects, alloc = m.large_bytes, pages = 0, small_cached = 0;
	TU_EQ(m.nclasses, PA_SC_NUM_CLASSES);
	for (size_t c = 1; c < m.nclasses; c++) {
		const struct pa_class_stats *k = &m.classes[c];
		TU_EQ(k->size, pa_sizeclasses[c].size);
		TU_EQ(k->pages, k->spans * pa_sizeclasses[c].pages);
		TU_EQ(k->bytes, k->objects * k->size);
		live += k->objects;
		alloc += k->bytes;
		pages += k->pages;
		small_cached += k->cached * k->size;
	}
	TU_EQ(m.live_objects, live);
	TU_EQ(m.heap_alloc, alloc);
	/* Span pages, live large objects, and large objects waiting in thread
	 * slots (the cached bytes that are not small objects). */
	assert_true(m.cached_bytes >= small_cached);
	TU_EQ(m.heap_inuse, pages * PG + m.large_bytes + (m.cached_bytes - small_cached));
	TU_EQ(p.cache_free, 0);
	TU_EQ(p.cache_queued, 0);
	TU_EQ(p.heap_inuse, m.heap_inuse);
	TU_EQ(p.heap_mapped, m.heap_sys);
	TU_EQ(p.heap_released, m.heap_released);
	return m;
}

/* Start from a flushed thread cache with class cls holding nothing. */
static struct pa_malloc_stats clean_start(unsigned cls)
{
	pa_thread_cache_flush();
	struct pa_malloc_stats m = snap();
	TU_EQ(m.classes[cls].spans, 0);
	TU_EQ(m.cached_bytes, 0);
	return m;
}

/* Exact counts: no scavenger, and no heap-profile samples (a sampled small
 * block is a large one with a page of its own, at random). */
static int scavenger_off(void **state)
{
	(void)state;
	return pa_config_set("scavenger", "off") | pa_config_set("prof", "off");
}

#define N64 1000

static void thousand_64_byte_objects_count_exactly_and_fill_8_spans(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(64);
	const struct pa_sizeclass *sc = &pa_sizeclasses[cls];
	TU_EQ(sc->size, 64);
	TU_EQ(sc->objects, 128);
	TU_EQ(sc->pages, 1);
	struct pa_malloc_stats m0 = clean_start(cls);
	static void *p[N64];
	for (unsigned k = 0; k < N64; k++)
		assert_non_null(p[k] = pa_malloc(64));

	/* The thread cache holds the rest of the last batch: not live. */
	struct pa_malloc_stats m1 = snap();
	TU_EQ(m1.live_objects - m0.live_objects, N64);
	TU_EQ(m1.heap_alloc - m0.heap_alloc, N64 * 64);
	TU_EQ(m1.classes[cls].objects - m0.classes[cls].objects, N64);
	TU_EQ(m1.classes[cls].bytes - m0.classes[cls].bytes, N64 * 64);
	TU_EQ(m1.cached_bytes, m1.classes[cls].cached * 64);

	/* Flushed, the spans are exactly those the live objects fill. */
	pa_thread_cache_flush();
	struct pa_malloc_stats m2 = snap();
	size_t spans = (N64 + 127) / 128; /* 8 */
	TU_EQ(m2.classes[cls].cached, 0);
	TU_EQ(m2.cached_bytes, 0);
	TU_EQ(m2.classes[cls].objects - m0.classes[cls].objects, N64);
	TU_EQ(m2.classes[cls].spans, spans);
	TU_EQ(m2.classes[cls].pages, spans);
	TU_EQ(m2.heap_inuse - m0.heap_inuse, spans * PG);
	TU_EQ(m2.max_fragmentation - m0.max_fragmentation, spans * PG - N64 * 64); /* 1536 */

	for (unsigned k = 0; k < N64; k++)
		pa_free(p[k]);
	pa_thread_cache_flush();
	struct pa_malloc_stats m3 = snap();
	TU_EQ(m3.classes[cls].spans, 0);
	TU_EQ(m3.classes[cls].objects, m0.classes[cls].objects);
	TU_EQ(m3.live_objects, m0.live_objects);
	TU_EQ(m3.heap_alloc, m0.heap_alloc);
	TU_EQ(m3.heap_inuse, m0.heap_inuse);
}

static void large_object_of_100000_bytes_holds_13_pages(void **state)
{
	(void)state;
	const size_t n = 100000, bytes = 13 * PG; /* 12 pages hold 98304 bytes */
	struct pa_malloc_stats m0 = clean_start(1);
	void *p = pa_malloc(n);
	assert_non_null(p);
	TU_EQ(pa_malloc_usable_size(p), bytes);
	struct pa_malloc_stats m1 = snap();
	TU_EQ(m1.large_objects - m0.large_objects, 1);
	TU_EQ(m1.large_bytes - m0.large_bytes, bytes);
	TU_EQ(m1.live_objects - m0.live_objects, 1);
	TU_EQ(m1.heap_alloc - m0.heap_alloc, bytes);
	TU_EQ(m1.heap_inuse - m0.heap_inuse, bytes);
	TU_EQ(m1.max_fragmentation, m0.max_fragmentation);

	/* Freed, it waits in the thread's large slots: cached, pages in use. */
	pa_free(p);
	struct pa_malloc_stats m2 = snap();
	TU_EQ(m2.large_objects, m0.large_objects);
	TU_EQ(m2.large_bytes, m0.large_bytes);
	TU_EQ(m2.live_objects, m0.live_objects);
	TU_EQ(m2.cached_bytes - m0.cached_bytes, bytes);
	TU_EQ(m2.heap_inuse - m0.heap_inuse, bytes);

	pa_thread_cache_flush();
	struct pa_malloc_stats m3 = snap();
	TU_EQ(m3.cached_bytes, m0.cached_bytes);
	TU_EQ(m3.heap_inuse, m0.heap_inuse);
}

#define SEED_OBJECTS (1u << 16)
#define SEED_KEEP_EVERY 512u /* objects per 16-byte span */

/* 2^16 objects of 16 bytes, of which every 512th stays live (the others are
 * freed into the thread cache): the returned array holds them all. */
static void **pin_one_per_span(void)
{
	static void *p[SEED_OBJECTS];
	for (unsigned k = 0; k < SEED_OBJECTS; k++)
		assert_non_null(p[k] = pa_malloc(16));
	for (unsigned k = 0; k < SEED_OBJECTS; k++)
		if (k % SEED_KEEP_EVERY != 0)
			pa_free(p[k]);
	return p;
}

/* Seed 000's fragmentation pattern, small: 2^16 objects of 16 bytes fill
 * 128 spans; keeping one object in 512 keeps each span alive for 16 bytes. */
static void one_16_byte_object_per_span_pins_128_spans(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(16);
	TU_EQ(pa_sizeclasses[cls].size, 16);
	TU_EQ(pa_sizeclasses[cls].objects, SEED_KEEP_EVERY);
	TU_EQ(pa_sizeclasses[cls].pages, 1);
	const size_t spans = SEED_OBJECTS / SEED_KEEP_EVERY; /* 128 */
	struct pa_malloc_stats m0 = clean_start(cls);
	void **p = pin_one_per_span();
	pa_thread_cache_flush();
	struct pa_malloc_stats m1 = snap();
	TU_EQ(m1.classes[cls].spans, spans);
	TU_EQ(m1.classes[cls].objects - m0.classes[cls].objects, spans);
	TU_EQ(m1.live_objects - m0.live_objects, spans);
	TU_EQ(m1.heap_alloc - m0.heap_alloc, spans * 16);
	TU_EQ(m1.heap_inuse - m0.heap_inuse, spans * PG);
	TU_EQ(m1.max_fragmentation - m0.max_fragmentation, spans * PG - spans * 16);

	for (unsigned k = 0; k < SEED_OBJECTS; k += SEED_KEEP_EVERY)
		pa_free(p[k]);
	pa_thread_cache_flush();
	struct pa_malloc_stats m2 = snap();
	TU_EQ(m2.classes[cls].spans, 0);
	TU_EQ(m2.heap_inuse, m0.heap_inuse);
	TU_EQ(m2.max_fragmentation, m0.max_fragmentation);
}

/* Whether the 4 KiB page at p is resident. */
static int resident(const void *p)
{
	unsigned char v = 0;
	uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
	assert_int_equal(mincore((void *)page, 4096, &v), 0);
	return v & 1;
}

/* The same pattern, trimmed: each span keeps its first object, so the
 * second 4 KiB page of every span holds only free objects and goes back to
 * the OS (span_released), while the first stays. Objects handed out again
 * take the released pages back; spans that empty stop counting them. */
static void trim_releases_the_free_4k_page_of_each_pinned_16_byte_span(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(16);
	const size_t spans = SEED_OBJECTS / SEED_KEEP_EVERY, per_page = 4096 / 16;
	struct pa_malloc_stats m0 = clean_start(cls);
	TU_EQ(m0.span_released, 0);
	void **p = pin_one_per_span();
	TU_EQ(pa_malloc_trim(0), 1);
	struct pa_malloc_stats m1 = snap();
	TU_EQ(m1.classes[cls].spans, spans);
	TU_EQ(m1.span_released, spans * 4096);
	TU_EQ(m1.heap_inuse - m0.heap_inuse, spans * PG);
	for (unsigned k = 0; k < SEED_OBJECTS; k += SEED_KEEP_EVERY) {
		TU_EQ(resident(p[k]), 1);
		TU_EQ(resident(p[k + per_page]), 0);
		TU_EQ(*(volatile uint64_t *)p[k + per_page], 0); /* released: reads as zero */
	}
	/* Nothing more to release. */
	TU_EQ(pa_malloc_trim(0), 0);

	/* Every free object again: the spans fill, lowest index first, and no
	 * page stays counted as released. */
	for (unsigned k = 0; k < SEED_OBJECTS; k++)
		if (k % SEED_KEEP_EVERY != 0)
			assert_non_null(p[k] = pa_malloc(16));
	struct pa_malloc_stats m2 = snap();
	TU_EQ(m2.classes[cls].spans, spans);
	TU_EQ(m2.span_released, 0);
	for (unsigned k = 0; k < SEED_OBJECTS; k++)
		pa_free(p[k]);
	pa_thread_cache_flush();
	struct pa_malloc_stats m3 = snap();
	TU_EQ(m3.classes[cls].spans, 0);
	TU_EQ(m3.span_released, 0);
	TU_EQ(m3.heap_inuse, m0.heap_inuse);
}

/* 3,072-byte blocks, 8 to a span of 3 heap pages, the first of each span
 * kept: the trim releases the span's 4 KiB pages 1 to 5 (page 0 holds the
 * kept block). When the kept blocks go, the spans retire to the page heap,
 * and the heap pages released whole (the span's second and third) count as
 * released there; the first, half released, counts as resident. */
static void retired_span_gives_the_heap_pages_the_sweep_released_as_released(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(3072);
	const struct pa_sizeclass *sc = &pa_sizeclasses[cls];
	TU_EQ(sc->size, 3072);
	TU_EQ(sc->pages, 3);
	TU_EQ(sc->objects, 8);
	enum { SPANS = 64, N = SPANS * 8 };
	static void *p[N];
	clean_start(cls);
	for (unsigned k = 0; k < N; k++)
		assert_non_null(p[k] = pa_malloc(3072));
	for (unsigned k = 0; k < N; k++)
		if (k % 8 != 0)
			pa_free(p[k]);
	TU_EQ(pa_malloc_trim(0), 1);
	struct pa_malloc_stats m1 = snap();
	TU_EQ(m1.classes[cls].spans, SPANS);
	TU_EQ(m1.span_released, SPANS * 5 * 4096);
	for (unsigned k = 0; k < N; k += 8)
		pa_free(p[k]);
	pa_thread_cache_flush();
	struct pa_malloc_stats m2 = snap();
	TU_EQ(m2.classes[cls].spans, 0);
	TU_EQ(m2.span_released, 0);
	TU_EQ(m2.heap_released - m1.heap_released, SPANS * 2 * PG);
	/* The half-released first heap page of each span: 4 KiB more counted. */
	TU_EQ(m2.heap_usage - m1.heap_usage, SPANS * 4096);
	/* The heap releases the rest; nothing is released twice. */
	TU_EQ(pa_malloc_trim(0), 1);
	struct pa_malloc_stats m3 = snap();
	TU_EQ(m3.heap_released - m2.heap_released, SPANS * PG);
}

/* Sizes across small classes and large objects, all freed, then trimmed:
 * nothing in use and every heap page released. */
static void trim_after_freeing_everything_releases_every_page(void **state)
{
	(void)state;
	static void *p[600];
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	for (unsigned k = 0; k < 600; k++) {
		size_t n = k % 50 == 0 ? 40000 + (size_t)(tu_xorshift(&rng) % 500000)
		                       : 1 + (size_t)(tu_xorshift(&rng) % 4096);
		assert_non_null(p[k] = pa_malloc(n));
		memset(p[k], 0x5a, n);
	}
	struct pa_malloc_stats m1 = snap();
	assert_true(m1.heap_inuse > 0);
	for (unsigned k = 0; k < 600; k++)
		pa_free(p[k]);
	TU_EQ(pa_malloc_trim(0), 1);
	struct pa_malloc_stats m2 = snap();
	TU_EQ(m2.heap_inuse, 0);
	TU_EQ(m2.heap_alloc, 0);
	TU_EQ(m2.live_objects, 0);
	TU_EQ(m2.large_objects, 0);
	TU_EQ(m2.cached_bytes, 0);
	TU_EQ(m2.max_fragmentation, 0);
	TU_EQ(m2.heap_idle, m2.heap_sys);
	TU_EQ(m2.heap_released, m2.heap_sys);
	TU_EQ(m2.heap_usage, 0);
	for (size_t c = 1; c < m2.nclasses; c++)
		TU_EQ(m2.classes[c].spans, 0);
	/* Nothing left to release: a second trim says so. */
	TU_EQ(pa_malloc_trim(0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(thousand_64_byte_objects_count_exactly_and_fill_8_spans),
	    TU_TEST(large_object_of_100000_bytes_holds_13_pages),
	    TU_TEST(one_16_byte_object_per_span_pins_128_spans),
	    TU_TEST(trim_releases_the_free_4k_page_of_each_pinned_16_byte_span),
	    TU_TEST(retired_span_gives_the_heap_pages_the_sweep_released_as_released),
	    TU_TEST(trim_after_freeing_everything_releases_every_page),
	};
	return cmocka_run_group_tests(tests, scavenger_off, NULL);
}
