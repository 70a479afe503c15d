/*
 * test_heapmap.c — the heap map's walk (heapmap.h) on the default heap:
 * heapmap_write's file, read back, names every page of known blocks.
 *
 * Each case builds blocks with the pa_ API, writes the map to a temporary
 * file and checks the pages of those blocks, and the totals' changes. The
 * scavenger and the heap profile are off (a sampled small block would be a
 * large one with a page of its own), so nothing moves between the walk and
 * the blocks' making. The last case walks while another thread allocates
 * and frees blocks of 16 bytes to 80 KB, small and large: every map is
 * whole, and under TSan the walk races with neither the central lists nor
 * the page heap (its reads of large records are a snapshot, heapmap.c).
 */
#include <pthread.h>

#include "testutil.h"

#include "heapmap.h"
#include "pagealloc.h"
#include "sizeclass_table.h"

#define PG PA_PAGE_BYTES

/* A map read back: its header, class sizes, chunks. */
struct map {
	struct heapmap_header h;
	uint32_t sizes[PA_SC_NUM_CLASSES];
	uint64_t *base;            /* h.nchunks chunk bases */
	struct heapmap_page *page; /* h.nchunks * PA_CHUNK_PAGES */
};

static struct map map_now(void)
{
	char path[] = "/tmp/test_heapmap.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	TU_EQ(heapmap_write(path), 0);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	struct map m;
	assert_int_equal(fread(&m.h, sizeof(m.h), 1, f), 1);
	assert_memory_equal(m.h.magic, HEAPMAP_MAGIC, 8);
	TU_EQ(m.h.version, HEAPMAP_VERSION);
	TU_EQ(m.h.header_bytes, sizeof(m.h));
	TU_EQ(m.h.page_size, PG);
	TU_EQ(m.h.chunk_pages, PA_CHUNK_PAGES);
	TU_EQ(m.h.nclasses, PA_SC_NUM_CLASSES);
	TU_EQ(m.h.pid, (uint64_t)getpid());
	size_t class_bytes = (PA_SC_NUM_CLASSES * 4 + 7) / 8 * 8;
	char sizes[(PA_SC_NUM_CLASSES * 4 + 7) / 8 * 8];
	assert_int_equal(fread(sizes, class_bytes, 1, f), 1);
	memcpy(m.sizes, sizes, sizeof(m.sizes));
	m.base = calloc(m.h.nchunks, sizeof(*m.base));
	m.page = calloc((size_t)m.h.nchunks * PA_CHUNK_PAGES, sizeof(*m.page));
	uint64_t kinds[HEAPMAP_KINDS] = {0};
	for (uint32_t c = 0; c < m.h.nchunks; c++) {
		assert_int_equal(fread(&m.base[c], 8, 1, f), 1);
		assert_int_equal(
		    fread(&m.page[(size_t)c * PA_CHUNK_PAGES], sizeof(*m.page), PA_CHUNK_PAGES, f),
		    PA_CHUNK_PAGES);
		TU_EQ(m.base[c] % PA_CHUNK_SIZE, 0);
		if (c > 0)
			assert_true(m.base[c] > m.base[c - 1]);
		for (unsigned p = 0; p < PA_CHUNK_PAGES; p++) {
			const struct heapmap_page *pg = &m.page[(size_t)c * PA_CHUNK_PAGES + p];
			assert_true(pg->kind < HEAPMAP_KINDS);
			kinds[pg->kind]++;
		}
	}
	char extra;
	TU_EQ(fread(&extra, 1, 1, f), 0); /* the file ends with the chunks */
	fclose(f);
	unlink(path);
	for (unsigned k = 0; k < HEAPMAP_KINDS; k++)
		TU_EQ(m.h.pages[k], kinds[k]);
	for (unsigned c = 0; c < PA_SC_NUM_CLASSES; c++)
		TU_EQ(m.sizes[c], pa_sizeclasses[c].size);
	return m;
}

static void map_free(struct map *m)
{
	free(m->base);
	free(m->page);
}

/* The record of the page holding address a (which the map must cover). */
static struct heapmap_page page_of(const struct map *m, const void *a)
{
	uintptr_t x = (uintptr_t)a;
	for (uint32_t c = 0; c < m->h.nchunks; c++)
		if (x - m->base[c] < PA_CHUNK_SIZE)
			return m->page[(size_t)c * PA_CHUNK_PAGES + (x - m->base[c]) / PG];
	fail_msg("%p is in no chunk of the map", a);
	struct heapmap_page none = {0};
	return none;
}

static void expect_page(const struct map *m, const void *a, unsigned kind, unsigned cls,
                        unsigned flags, unsigned inuse, unsigned objects)
{
	struct heapmap_page pg = page_of(m, a);
	TU_EQ(pg.kind, kind);
	TU_EQ(pg.cls, cls);
	TU_EQ(pg.flags, flags);
	TU_EQ(pg.inuse, inuse);
	TU_EQ(pg.objects, objects);
}

static int quiet_heap(void **state)
{
	(void)state;
	return pa_config_set("scavenger", "off") | pa_config_set("prof", "off");
}

/* seed 000's picture: 64 spans of the 16-byte class each keep one object
 * (the one at its first byte), all others freed. */
static void pinned_16_byte_spans_show_one_object_of_512_each(void **state)
{
	(void)state;
	enum { N = 66 * 512 };
	unsigned cls = pa_size_to_class(16);
	TU_EQ(pa_sizeclasses[cls].objects, 512);
	static void *p[N], *kept[N / 512 + 2];
	unsigned nkept = 0;
	for (unsigned i = 0; i < N; i++)
		assert_non_null(p[i] = pa_malloc(16));
	for (unsigned i = 0; i < N; i++) {
		if ((uintptr_t)p[i] % PG == 0 && nkept < 64)
			kept[nkept++] = p[i];
		else
			pa_free(p[i]);
	}
	TU_EQ(nkept, 64);
	pa_thread_cache_flush(); /* the freed objects back in their spans */
	struct map m = map_now();
	for (unsigned k = 0; k < nkept; k++) {
		tu_case = "a kept object's page";
		expect_page(&m, kept[k], HEAPMAP_SMALL, cls, HEAPMAP_FIRST, 1, 512);
	}
	assert_true(m.h.small_objects >= nkept);
	map_free(&m);
	for (unsigned k = 0; k < nkept; k++)
		pa_free(kept[k]);
	pa_thread_cache_flush();
}

/* A 6 MiB block's 768 pages cross a chunk's end: the first is marked, the
 * rest follow into the next chunk, and the page after it is not its. */
static void large_object_runs_across_a_chunk_end(void **state)
{
	(void)state;
	struct map m0 = map_now();
	char *big = pa_malloc((size_t)768 * PG);
	assert_non_null(big);
	struct map m = map_now();
	expect_page(&m, big, HEAPMAP_LARGE, 0, HEAPMAP_FIRST, 0, 0);
	for (size_t i = 1; i < 768; i++)
		TU_EQ(page_of(&m, big + i * PG).kind, HEAPMAP_LARGE);
	struct heapmap_page after = page_of(&m, big + 768 * PG);
	assert_true(after.kind != HEAPMAP_LARGE || (after.flags & HEAPMAP_FIRST));
	TU_EQ(m.h.large_objects - m0.h.large_objects, 1);
	TU_EQ(m.h.pages[HEAPMAP_LARGE] - m0.h.pages[HEAPMAP_LARGE], 768);
	map_free(&m0);
	map_free(&m);
	pa_free(big);
	pa_thread_cache_flush();
}

/* A freed 256 KiB block waits in the thread's large slots: its pages are a
 * freed large object's, until the slots are flushed to the page heap. */
static void freed_large_object_waits_in_the_slots(void **state)
{
	(void)state;
	pa_thread_cache_flush();
	char *b = pa_malloc((size_t)32 * PG);
	assert_non_null(b);
	pa_free(b);
	struct map m = map_now();
	expect_page(&m, b, HEAPMAP_LARGE_FREE, 0, HEAPMAP_FIRST, 0, 0);
	for (size_t i = 1; i < 32; i++)
		TU_EQ(page_of(&m, b + i * PG).kind, HEAPMAP_LARGE_FREE);
	TU_EQ(m.h.large_free_objects, 1);
	TU_EQ(m.h.pages[HEAPMAP_LARGE_FREE], 32);
	map_free(&m);
	pa_thread_cache_flush();
	m = map_now();
	TU_EQ(page_of(&m, b).kind, HEAPMAP_FREE);
	TU_EQ(m.h.large_free_objects, 0);
	map_free(&m);
}

/* Pages of the page API are no span's: "other"; 3 of them given back go
 * to a per-CPU page cache; 64 given back are free in the heap, and
 * released after pa_scavenge. */
static void page_api_pages_are_other_then_cached_free_and_released(void **state)
{
	(void)state;
	char *three = pa_pages_alloc(3), *many = pa_pages_alloc(64);
	assert_non_null(three);
	assert_non_null(many);
	struct map m = map_now();
	for (size_t i = 0; i < 3; i++)
		expect_page(&m, three + i * PG, HEAPMAP_OTHER, 0, 0, 0, 0);
	for (size_t i = 0; i < 64; i++)
		TU_EQ(page_of(&m, many + i * PG).kind, HEAPMAP_OTHER);
	map_free(&m);
	pa_pages_free(three, 3);
	pa_pages_free(many, 64);
	m = map_now();
	for (size_t i = 0; i < 3; i++)
		TU_EQ(page_of(&m, three + i * PG).kind, HEAPMAP_CACHED);
	for (size_t i = 0; i < 64; i++)
		TU_EQ(page_of(&m, many + i * PG).kind, HEAPMAP_FREE);
	map_free(&m);
	pa_cache_flush();
	pa_scavenge(0);
	m = map_now();
	TU_EQ(m.h.pages[HEAPMAP_FREE], 0);
	TU_EQ(m.h.pages[HEAPMAP_CACHED], 0);
	for (size_t i = 0; i < 64; i++)
		TU_EQ(page_of(&m, many + i * PG).kind, HEAPMAP_RELEASED);
	map_free(&m);
}

static int churn_stop;

static void *churn(void *arg)
{
	(void)arg;
	void *keep[64] = {0};
	for (unsigned i = 0; !__atomic_load_n(&churn_stop, __ATOMIC_RELAXED); i++) {
		unsigned k = i % 64;
		pa_free(keep[k]);
		keep[k] = pa_malloc(16 + (i * 37) % 80000);
		assert_non_null(keep[k]);
	}
	for (unsigned k = 0; k < 64; k++)
		pa_free(keep[k]);
	return NULL;
}

/* Walks while another thread makes and retires spans and large objects:
 * every map whole. */
static void walk_while_another_thread_churns_blocks(void **state)
{
	(void)state;
	pthread_t t;
	__atomic_store_n(&churn_stop, 0, __ATOMIC_RELAXED);
	assert_int_equal(pthread_create(&t, NULL, churn, NULL), 0);
	for (int i = 0; i < 20; i++) {
		struct map m = map_now(); /* checks the counts add up */
		assert_true(m.h.nchunks >= 1);
		for (size_t p = 0; p < (size_t)m.h.nchunks * PA_CHUNK_PAGES; p++) {
			const struct heapmap_page *pg = &m.page[p];
			if (pg->kind == HEAPMAP_SMALL) {
				TU_EQ(pg->objects, pa_sizeclasses[pg->cls].objects);
				assert_true(pg->inuse <= pg->objects);
			}
		}
		map_free(&m);
	}
	__atomic_store_n(&churn_stop, 1, __ATOMIC_RELAXED);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* An unwritable path: -1 and the errno, nothing left behind. */
static void unwritable_path_fails_with_errno(void **state)
{
	(void)state;
	errno = 0;
	TU_EQ(heapmap_write("/nonexistent-dir/map"), -1);
	TU_EQ(errno, ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(pinned_16_byte_spans_show_one_object_of_512_each),
	    TU_TEST(large_object_runs_across_a_chunk_end),
	    TU_TEST(freed_large_object_waits_in_the_slots),
	    TU_TEST(page_api_pages_are_other_then_cached_free_and_released),
	    TU_TEST(walk_while_another_thread_churns_blocks),
	    TU_TEST(unwritable_path_fails_with_errno),
	};
	return cmocka_run_group_tests(tests, quiet_heap, NULL);
}
