/*
 * test_valkey_backend.c — tools/valkey/zmalloc_pagealloc.c, the Valkey
 * backend, compiled here against a stand-in for Valkey's zmalloc.h
 * (tests/valkey/zmalloc.h) and called as Valkey calls it.
 *
 * The heap of each test: 8,192 blocks of 256 bytes, each filled with its
 * own pattern, then 9 in 10 freed (every block whose index is not a multiple
 * of 10) and the thread cache flushed: sparse spans, as after Valkey deletes
 * 9 keys in 10. The scavenger and sampling are off (the figures must not
 * move between two reads).
 *
 * Checked: INFO memory's allocator_* figures are the heap's own, term by
 * term; the hint Valkey's defrag.c calls is pa_defrag_hint; a defrag pass
 * done as activeDefragAlloc does it (hint, allocate bypassing the caches,
 * copy, free bypassing the caches) keeps every byte and takes spans away;
 * MEMORY MALLOC-STATS gets the heap's story whole; ZMALLOC_LIB names the
 * library's version.
 */
#include "testutil.h"

#include <stdio.h>
#include <unistd.h>

#include "pagealloc.h"
#include "zmalloc.h" /* tests/valkey/: the stand-in, then zmalloc_pagealloc.h */

#define NBLOCKS 8192
#define BLOCK 256
#define KEEP_ONE_IN 10

static unsigned char *blocks[NBLOCKS];

static unsigned char pattern(size_t i, size_t j)
{
	return (unsigned char)(i * 31 + j);
}

/* The heap after the deletes: blocks[i] live for i % KEEP_ONE_IN == 0. */
static void sparse_heap(void)
{
	for (size_t i = 0; i < NBLOCKS; i++) {
		blocks[i] = pa_malloc(BLOCK);
		assert_non_null(blocks[i]);
		for (size_t j = 0; j < BLOCK; j++)
			blocks[i][j] = pattern(i, j);
	}
	for (size_t i = 0; i < NBLOCKS; i++)
		if (i % KEEP_ONE_IN != 0) {
			pa_free(blocks[i]);
			blocks[i] = NULL;
		}
	pa_thread_cache_flush();
}

static void free_survivors(void)
{
	for (size_t i = 0; i < NBLOCKS; i++) {
		pa_free(blocks[i]);
		blocks[i] = NULL;
	}
	pa_thread_cache_flush();
}

/* The spans of BLOCK's class. */
static size_t class_spans(void)
{
	static struct pa_malloc_stats ms;
	assert_int_equal(pa_malloc_stats(&ms), 0);
	for (size_t c = 1; c < ms.nclasses; c++)
		if (ms.classes[c].size == BLOCK)
			return ms.classes[c].spans;
	fail_msg("no class of %d bytes", BLOCK);
	return 0;
}

static void allocator_info_is_the_heaps_own_figures(void **state)
{
	(void)state;
	sparse_heap();
	size_t allocated, active, resident, retained, muzzy, frag;
	TU_EQ(zmalloc_get_allocator_info(&allocated, &active, &resident, &retained, &muzzy, &frag),
	      1);
	static struct pa_malloc_stats ms;
	struct pa_stats st;
	assert_int_equal(pa_malloc_stats(&ms), 0);
	assert_int_equal(pa_stats(&st), 0);
	TU_EQ(allocated, ms.heap_alloc);
	TU_EQ(active, ms.heap_inuse - ms.span_released);
	TU_EQ(resident, ms.heap_usage + st.metadata);
	TU_EQ(retained, ms.heap_released + ms.span_released);
	TU_EQ(muzzy, 0);
	TU_EQ(frag, pa_defrag_frag_bytes());
	TU_EQ(allocatorDefragGetFragSmallbins(), frag);
	/* The survivors' spans are 9/10 free: at least 9 free slots for every
	 * survivor of the class lie inside partial spans. */
	assert_true(frag >= (size_t)(NBLOCKS / KEEP_ONE_IN) * (KEEP_ONE_IN - 1) * BLOCK);
	/* NULL for retained and muzzy, as defrag.c passes them. */
	size_t a2, act2, r2, f2;
	TU_EQ(zmalloc_get_allocator_info(&a2, &act2, &r2, NULL, NULL, &f2), 1);
	TU_EQ(a2, allocated);
	TU_EQ(f2, frag);
	free_survivors();
}

static void a_defrag_pass_as_valkey_runs_it_keeps_every_byte_and_empties_spans(void **state)
{
	(void)state;
	sparse_heap();
	size_t frag_before = allocatorDefragGetFragSmallbins(), spans_before = class_spans();
	size_t hits = 0;
	for (size_t i = 0; i < NBLOCKS; i += KEEP_ONE_IN) {
		int hint = allocatorShouldDefrag(blocks[i]);
		TU_EQ(hint, pa_defrag_hint(blocks[i]));
		TU_EQ(je_get_defrag_hint(blocks[i]), hint);
		if (!hint)
			continue;
		/* activeDefragAlloc: zmalloc_size, zmalloc_no_tcache, memcpy,
		 * zfree_no_tcache. */
		size_t size = pa_malloc_usable_size(blocks[i]);
		unsigned char *moved = allocatorDefragAlloc(size);
		assert_non_null(moved);
		TU_EQ(pa_malloc_usable_size(moved), size);
		memcpy(moved, blocks[i], size);
		allocatorDefragFree(blocks[i], size);
		blocks[i] = moved;
		hits++;
	}
	assert_true(hits > 0);
	for (size_t i = 0; i < NBLOCKS; i += KEEP_ONE_IN)
		for (size_t j = 0; j < BLOCK; j++)
			if (blocks[i][j] != pattern(i, j))
				fail_msg("block %zu byte %zu is %u after the pass, want %u", i, j,
				         blocks[i][j], pattern(i, j));
	assert_true(allocatorDefragGetFragSmallbins() < frag_before);
	assert_true(class_spans() < spans_before);
	free_survivors();
}

static void not_judged_and_null_are_no(void **state)
{
	(void)state;
	TU_EQ(allocatorShouldDefrag(NULL), 0);
	void *large = pa_malloc(PA_MALLOC_MAX_SMALL + 1);
	TU_EQ(allocatorShouldDefrag(large), 0);
	pa_free(large);
	/* Large sizes: as pa_malloc, freed as pa_free. */
	void *p = allocatorDefragAlloc(PA_MALLOC_MAX_SMALL * 2);
	assert_non_null(p);
	TU_EQ(pa_malloc_usable_size(p), PA_MALLOC_MAX_SMALL * 2);
	allocatorDefragFree(p, PA_MALLOC_MAX_SMALL * 2);
}

/* MEMORY MALLOC-STATS: the pieces write_cb gets, joined. */
static char story[1 << 16];
static size_t story_len, pieces;

static void collect(void *opaque, const char *piece)
{
	TU_EQ(opaque, story);
	size_t n = strlen(piece);
	assert_true(n > 0 && n < 4096);
	assert_true(story_len + n < sizeof(story));
	memcpy(story + story_len, piece, n + 1);
	story_len += n;
	pieces++;
}

static void malloc_stats_gets_the_heaps_story_whole(void **state)
{
	(void)state;
	sparse_heap();
	story_len = pieces = 0;
	pagealloc_stats_print(collect, story);
	char head[96], tail[64];
	snprintf(head, sizeof(head), "==== pagealloc: the story of the heap of pid %d ",
	         (int)getpid());
	snprintf(tail, sizeof(tail), "==== end of the story of pid %d ====\n", (int)getpid());
	assert_true(story_len > strlen(head) + strlen(tail));
	assert_memory_equal(story, head, strlen(head));
	assert_string_equal(story + story_len - strlen(tail), tail);
	assert_non_null(strstr(story, "\n  heap_alloc "));
	assert_true(pieces >= (story_len + 4094) / 4095);
	free_survivors();
}

static void purge_gives_free_pages_back_and_the_name_has_the_version(void **state)
{
	(void)state;
	sparse_heap();
	free_survivors();
	TU_EQ(jemalloc_purge(), 0);
	struct pa_stats st;
	assert_int_equal(pa_stats(&st), 0);
	TU_EQ(st.heap_free, st.heap_released); /* every free page released */
	set_jemalloc_bg_thread(0);             /* accepted, nothing to switch */
	TU_EQ(allocatorDefragInit(), 0);
	assert_string_equal(ZMALLOC_LIB, "libpagealloc-" PA_TEST_VERSION);
}

int main(void)
{
	if (pa_config("scavenger=off,prof=off") != 0)
		return 1;
	const struct CMUnitTest tests[] = {
	    TU_TEST(allocator_info_is_the_heaps_own_figures),
	    TU_TEST(a_defrag_pass_as_valkey_runs_it_keeps_every_byte_and_empties_spans),
	    TU_TEST(not_judged_and_null_are_no),
	    TU_TEST(malloc_stats_gets_the_heaps_story_whole),
	    TU_TEST(purge_gives_free_pages_back_and_the_name_has_the_version),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
