/*
 * test_malloc_usable_size.c — what pa_malloc_usable_size says a block holds,
 * and that every byte of it is the program's.
 *
 * The usable size of a small block is its class's size: the smallest size in
 * the size class table (sizeclass_table.h) that holds the request, found
 * here by walking the table, not by the lookup the allocator uses. A large
 * block holds whole pages (PA_PAGE_SIZE). Sizes: every one from 0 to 1 KiB,
 * then every 16th to 64 KiB with each class size and the bytes either side
 * of it, then large ones to 32 MiB. For each size, a span's worth of blocks
 * (every object of at least one span live, so each block's neighbours are
 * blocks of the test) is filled to the last usable byte, each with its own
 * pattern, and every pattern must be intact afterwards. The aligned
 * allocations' usable sizes, NULL's, and a realloc's in place and moved
 * follow.
 *
 * Under valgrind a block's usable size is its requested size, as with
 * valgrind's own malloc; these tests are not run there.
 */
#include "testutil.h"

#include "layout.h"
#include "pagealloc.h"
#include "sizeclass_table.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* ---- what a block of n bytes holds --------------------------------------------- */

/* The smallest class size that holds n bytes and is a multiple of align, or
 * 0 when no class does. */
static size_t class_size_at_least(size_t n, size_t align)
{
	for (unsigned c = 1; c < PA_SC_NUM_CLASSES; c++)
		if (pa_sizeclasses[c].size >= n && pa_sizeclasses[c].size % align == 0)
			return pa_sizeclasses[c].size;
	return 0;
}

/* The pages of a large block of n bytes: at least one. */
static size_t whole_pages(size_t n)
{
	return n == 0 ? PA_PAGE_SIZE : (n + PA_PAGE_SIZE - 1) / PA_PAGE_SIZE * PA_PAGE_SIZE;
}

/* pa_malloc(n)'s usable size: its class's size, or its pages. */
static size_t usable_of(size_t n)
{
	return n <= PA_SC_MAX_SMALL ? class_size_at_least(n, 1) : whole_pages(n);
}

/* ---- the sizes --------------------------------------------------------------------- */

#define MAX_SIZES 8192

/* 0..1 KiB every byte; to 64 KiB every 16th and each class size +-1; then
 * large sizes past the slots, the stash and a chunk. Sorted, no repeats. */
static size_t sweep_sizes(size_t *out)
{
	static const size_t large[] = {100000,      128 * KIB - 1, 128 * KIB, 128 * KIB + 1,
	                               MIB - 1,     MIB,           MIB + 1,   3 * MIB + 1,
	                               8 * MIB + 5, 32 * MIB + 1};
	size_t n = 0;
	for (size_t s = 0; s <= 64 * KIB; s++) {
		int edge = 0;
		for (unsigned c = 1; c < PA_SC_NUM_CLASSES && !edge; c++)
			edge = s + 1 >= pa_sizeclasses[c].size && s <= pa_sizeclasses[c].size + 1;
		if (s <= KIB || s % 16 == 0 || edge || s == PA_SC_MAX_SMALL + 1)
			out[n++] = s;
	}
	for (size_t i = 0; i < sizeof(large) / sizeof(large[0]); i++)
		out[n++] = large[i];
	assert_true(n <= MAX_SIZES);
	return n;
}

/* ---- malloc and calloc ---------------------------------------------------------------- */

static void usable_size_is_the_class_size_or_whole_pages_for_every_size(void **state)
{
	(void)state;
	static size_t sizes[MAX_SIZES];
	size_t n = sweep_sizes(sizes);
	char name[64];
	tu_case = name;
	for (size_t i = 0; i < n; i++) {
		size_t s = sizes[i];
		snprintf(name, sizeof(name), "malloc(%zu)", s);
		void *p = pa_malloc(s);
		assert_non_null(p);
		TU_EQ(pa_malloc_usable_size(p), usable_of(s));
		pa_free(p);
		snprintf(name, sizeof(name), "calloc(1, %zu)", s);
		p = pa_calloc(1, s);
		assert_non_null(p);
		TU_EQ(pa_malloc_usable_size(p), usable_of(s));
		pa_free(p);
	}
	tu_case = "";
}

/* A span's worth of blocks of each size and one more (two spans, the first
 * all live), or three large blocks; every block filled to its usable size
 * with a pattern of its own, then every pattern checked. */
static void every_usable_byte_is_writable_and_the_neighbours_keep_theirs(void **state)
{
	(void)state;
	static size_t sizes[MAX_SIZES];
	static unsigned char *blocks[PA_SC_MAX_OBJECTS + 1];
	size_t n = sweep_sizes(sizes);
	char name[64];
	tu_case = name;
	for (size_t i = 0; i < n; i++) {
		size_t s = sizes[i], nb = 3;
		if (s <= PA_SC_MAX_SMALL)
			nb = pa_sizeclasses[pa_size_to_class(s)].objects + 1u;
		for (size_t k = 0; k < nb; k++) {
			blocks[k] = pa_malloc(s);
			assert_non_null(blocks[k]);
			tu_fill(blocks[k], pa_malloc_usable_size(blocks[k]), k);
		}
		for (size_t k = 0; k < nb; k++) {
			size_t u = pa_malloc_usable_size(blocks[k]);
			snprintf(name, sizeof(name), "malloc(%zu), block %zu of %zu", s, k, nb);
			TU_EQ(tu_pattern_break(blocks[k], u, k), u);
		}
		for (size_t k = 0; k < nb; k++)
			pa_free(blocks[k]);
	}
	tu_case = "";
}

static void usable_size_of_null_is_zero(void **state)
{
	(void)state;
	TU_EQ(pa_malloc_usable_size(NULL), 0);
}

/* ---- aligned allocations ----------------------------------------------------------------- */

/* pa_memalign(align, n), align a power of two above 16: the smallest class
 * that holds n and whose every object is aligned (its size a multiple of
 * align), up to a page's alignment; else whole pages. */
static size_t aligned_usable_of(size_t align, size_t n)
{
	size_t c = align <= PA_PAGE_SIZE && n <= PA_SC_MAX_SMALL
	               ? class_size_at_least(n > align ? n : align, align)
	               : 0;
	return c != 0 ? c : whole_pages(n);
}

static void aligned_usable_size_is_the_smallest_aligned_class_or_whole_pages(void **state)
{
	(void)state;
	static const size_t sizes[] = {0,     1,     16,    17,    48,        100,        1000,
	                               4095,  4096,  4097,  8192,  8193,      20000,      28673,
	                               32767, 32768, 32769, 65536, 200 * KIB, 1 * MIB + 3};
	char name[64];
	tu_case = name;
	for (size_t a = 32; a <= 64 * KIB; a *= 2) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t s = sizes[i];
			snprintf(name, sizeof(name), "memalign(%zu, %zu)", a, s);
			unsigned char *p = pa_memalign(a, s);
			assert_non_null(p);
			TU_EQ((uintptr_t)p % a, 0);
			size_t u = pa_malloc_usable_size(p);
			TU_EQ(u, aligned_usable_of(a, s));
			tu_fill(p, u, a);
			TU_EQ(tu_pattern_break(p, u, a), u);
			pa_free(p);
		}
	}
	tu_case = "";
}

/* ---- realloc ---------------------------------------------------------------------------- */

struct resize {
	const char *name;
	size_t from, to;
	int in_place; /* the block must stay where it is (1) or move (0) */
	size_t usable;
};

static const struct resize resizes[] = {
    /* A small block stays while the new size fits its class and is more
     * than half of it (class 1 always stays). */
    {"small shrinks within its class", 100, 90, 1, 112},
    {"small grows to its class size", 90, 96, 1, 96},
    {"small shrinks to more than half its class", 112, 57, 1, 112},
    {"small shrinks to half its class: moves", 112, 56, 0, 64},
    {"small grows past its class: moves", 112, 113, 0, 128},
    {"16 bytes shrink to 1 in place", 16, 1, 1, 16},
    {"the largest class grows to a large block: moves", 32768, 32769, 0, 40 * KIB},
    /* A large block gives its tail pages back in place; one shrunk to a
     * small size moves into a class. */
    {"large shrinks in place to whole pages", MIB, 600000, 1, 606208},
    {"large shrinks to a page and a byte: a small size, moves", MIB, 8193, 0, 9472},
    {"large shrinks to 40 KiB + 1 in place: 6 pages", MIB, 40 * KIB + 1, 1, 48 * KIB},
    {"large shrinks to a small size: moves", MIB, 20000, 0, 20480},
};

static void realloc_in_place_keeps_or_moves_and_reports_the_new_usable_size(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(resizes) / sizeof(resizes[0]); i++) {
		const struct resize *r = &resizes[i];
		tu_case = r->name;
		unsigned char *p = pa_malloc(r->from);
		assert_non_null(p);
		tu_fill(p, r->from, i);
		unsigned char *q = pa_realloc(p, r->to);
		assert_non_null(q);
		TU_EQ(q == p, r->in_place);
		TU_EQ(pa_malloc_usable_size(q), r->usable);
		size_t keep = r->from < r->to ? r->from : r->to;
		TU_EQ(tu_pattern_break(q, keep, i), keep);
		pa_free(q);
	}
	tu_case = "";
}

/* A large block shrunk in place and grown back takes its own tail pages
 * again (the only thread: no one took them). */
static void large_block_grows_back_in_place_into_its_tail(void **state)
{
	(void)state;
	unsigned char *p = pa_malloc(MIB);
	assert_non_null(p);
	tu_fill(p, 512 * KIB, 5);
	unsigned char *q = pa_realloc(p, 512 * KIB);
	TU_EQ(q, p);
	TU_EQ(pa_malloc_usable_size(q), 512 * KIB);
	q = pa_realloc(q, MIB);
	TU_EQ(q, p);
	TU_EQ(pa_malloc_usable_size(q), MIB);
	TU_EQ(tu_pattern_break(q, 512 * KIB, 5), 512 * KIB);
	tu_fill(q, MIB, 6);
	TU_EQ(tu_pattern_break(q, MIB, 6), MIB);
	pa_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(usable_size_is_the_class_size_or_whole_pages_for_every_size),
	    TU_TEST(every_usable_byte_is_writable_and_the_neighbours_keep_theirs),
	    TU_TEST(usable_size_of_null_is_zero),
	    TU_TEST(aligned_usable_size_is_the_smallest_aligned_class_or_whole_pages),
	    TU_TEST(realloc_in_place_keeps_or_moves_and_reports_the_new_usable_size),
	    TU_TEST(large_block_grows_back_in_place_into_its_tail),
	};
	/* Blocks resized in place: a sampled block (heap profiles) always
	 * moves, at random. test_prof.c checks sampled blocks' sizes. */
	if (pa_config_set("prof", "off") != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
