/*
 * test_pageheap.c — the page heap (pageheap.h) on metadata-only heaps at fake
 * addresses: growth (contiguous, discontiguous, terabytes apart, hundreds of
 * ranges), first-fit allocation and free from tables of heap states (after
 * the Go runtime's mpagealloc_test.go), exhaustion at many sizes and heap
 * placements, runs that join across chunk, level-3, level-2, level-1 and
 * level-0 boundaries, summaries at the edge of committed summary memory,
 * hints that would land in gaps, hint movement, pageheap_check, and the
 * page counters. After every step tu_check recomputes every summary from the
 * bitmaps and runs pageheap_verify.
 */
#include <signal.h>

#include "testutil.h"

#define P TU_PAGE
#define CP PA_CHUNK_PAGES

static pa_sum pack3(uint64_t start, uint64_t max, uint64_t end)
{
	struct tu_sum s = {start, max, end};
	return tu_pack(s);
}

/* Allocate and check address and scavenged count (want 0: must fail). */
static void expect_alloc(struct tu_heap *t, size_t npages, uintptr_t want, size_t want_scav)
{
	size_t scav = 12345;
	errno = 0;
	uintptr_t a = pageheap_alloc(&t->h, npages, &scav);
	if (a != want)
		fail_msg("%s: alloc(%zu) = %#" PRIxPTR ", want %#" PRIxPTR, tu_case, npages, a,
		         want);
	if (want != 0) {
		if (scav != want_scav)
			fail_msg("%s: alloc(%zu) at %#" PRIxPTR ": scav %zu, want %zu", tu_case,
			         npages, a, scav, want_scav);
	} else {
		TU_EQ(errno, ENOMEM);
	}
}

/* Free a live allocation: it checks OK before and NOT_ALLOCATED after. */
static void checked_free(struct tu_heap *t, uintptr_t a, size_t npages)
{
	TU_EQ(pageheap_check(&t->h, a, npages), PA_PAGE_OK);
	pageheap_free(&t->h, a, npages);
	TU_EQ(pageheap_check(&t->h, a, npages), PA_PAGE_NOT_ALLOCATED);
}

/* ---- growth ----------------------------------------------------------------- */

static void test_grow_one_chunk_is_free_released_heap(void **state)
{
	(void)state;
	struct tu_heap *t = tu_heap_new();
	TU_EQ(pageheap_hint(&t->h), t->h.limit_hint);
	TU_EQ(t->h.limit_hint, (uintptr_t)1 << 48);
	tu_grow(t, TU_CHUNK(3), 1);
	TU_EQ(t->h.mapped_pages, CP);
	TU_EQ(t->h.scav_pages, CP);
	TU_EQ(t->h.inuse_pages, 0);
	TU_EQ(pageheap_hint(&t->h), TU_CHUNK(3));
	TU_EQ(tu_sum_at(t, 4, TU_CHUNK(3)), pack3(512, 512, 512));
	/* Chunk 3 of its level-3 entry: free in the middle, non-heap around. */
	TU_EQ(tu_sum_at(t, 3, TU_CHUNK(3)), pack3(0, 512, 0));
	TU_EQ(tu_sum_at(t, 3, TU_CHUNK(8)), 0);
	TU_EQ(tu_sum_at(t, 0, TU_CHUNK(3)), pack3(0, 512, 0));
	tu_check(t);
	tu_heap_free(t);
}

static void test_grow_out_of_order_ranges_terabytes_apart(void **state)
{
	(void)state;
	const uintptr_t A = 1 * TU_TIB, B = 5 * TU_TIB, C = 100 * TU_TIB;
	struct tu_heap *t = tu_heap_new();
	tu_grow(t, B, 3);
	TU_EQ(pageheap_hint(&t->h), B);
	tu_grow(t, C, 2);
	TU_EQ(pageheap_hint(&t->h), B);
	tu_grow(t, A, 1);
	TU_EQ(pageheap_hint(&t->h), A);
	TU_EQ(t->h.mapped_pages, 6 * CP);
	TU_EQ(t->h.scav_pages, 6 * CP);
	tu_check(t);                       /* also: ranges.n == 3 in address order */
	expect_alloc(t, 3 * CP + 1, 0, 0); /* more than any one range */
	expect_alloc(t, CP, A, CP);
	expect_alloc(t, 3 * CP, B, 3 * CP);
	expect_alloc(t, 2 * CP, C, 2 * CP);
	expect_alloc(t, 1, 0, 0);
	TU_EQ(pageheap_hint(&t->h), t->h.limit_hint);
	tu_check(t);
	checked_free(t, B + CP * PA_PAGE_SIZE, CP);
	TU_EQ(pageheap_hint(&t->h), B + CP * PA_PAGE_SIZE);
	tu_check(t);
	expect_alloc(t, CP + 1, 0, 0);
	expect_alloc(t, CP, B + CP * PA_PAGE_SIZE, 0);
	tu_check(t);
	tu_heap_free(t);
}

/* Ranges that touch merge: low neighbour, high neighbour, and both. */
static void test_grow_merges_adjacent_ranges(void **state)
{
	(void)state;
	struct tu_heap *t = tu_heap_new();
	tu_grow(t, TU_CHUNK(0), 1);
	tu_grow(t, TU_CHUNK(2), 1);
	TU_EQ(t->h.ranges.n, 2);
	expect_alloc(t, 2 * CP, 0, 0);
	tu_grow(t, TU_CHUNK(1), 1); /* joins both */
	TU_EQ(t->h.ranges.n, 1);
	tu_grow(t, TU_CHUNK(3), 1); /* joins the low neighbour */
	tu_grow(t, TU_CHUNK(10), 2);
	tu_grow(t, TU_CHUNK(9), 1); /* joins the high neighbour */
	TU_EQ(t->h.ranges.n, 2);
	TU_EQ(range_base(&t->h.ranges.v[0]), TU_CHUNK(0));
	TU_EQ(range_limit(&t->h.ranges.v[0]), TU_CHUNK(4));
	TU_EQ(range_base(&t->h.ranges.v[1]), TU_CHUNK(9));
	TU_EQ(range_limit(&t->h.ranges.v[1]), TU_CHUNK(12));
	tu_check(t);
	expect_alloc(t, 4 * CP, P(0, 0), 4 * CP);
	expect_alloc(t, 3 * CP, P(9, 0), 3 * CP);
	expect_alloc(t, 1, 0, 0);
	tu_check(t);
	tu_heap_free(t);
}

/* 300 single-chunk ranges (more than the range list's first mapping holds),
 * then the 299 gaps filled from the top down until one range remains. */
static void test_grow_hundreds_of_ranges_then_fill_the_gaps(void **state)
{
	(void)state;
	struct tu_heap *t = tu_heap_new();
	for (size_t k = 0; k < 300; k++)
		tu_grow(t, TU_CHUNK(2 * k), 1);
	TU_EQ(t->h.ranges.n, 300);
	tu_check(t);
	expect_alloc(t, CP + 1, 0, 0);
	for (size_t k = 0; k < 300; k++)
		expect_alloc(t, CP, P(2 * k, 0), CP);
	expect_alloc(t, 1, 0, 0);
	for (size_t k = 299; k-- > 0;) {
		tu_grow(t, TU_CHUNK(2 * k + 1), 1);
		TU_EQ(pageheap_hint(&t->h), TU_CHUNK(2 * k + 1));
	}
	TU_EQ(t->h.ranges.n, 1);
	TU_EQ(range_limit(&t->h.ranges.v[0]), TU_CHUNK(599));
	tu_check(t);
	expect_alloc(t, CP + 1, 0, 0);
	for (size_t k = 0; k < 299; k++)
		expect_alloc(t, CP, P(2 * k + 1, 0), CP);
	expect_alloc(t, 1, 0, 0);
	tu_check(t);
	tu_heap_free(t);
}

static void test_grow_rejects_overlap_and_misalignment(void **state)
{
	(void)state;
	struct tu_heap *t = tu_heap_new();
	tu_grow(t, TU_CHUNK(4), 2);
	struct {
		const char *name;
		uintptr_t base;
		size_t npages;
	} cases[] = {
	    {"the same range again", TU_CHUNK(4), 2 * CP},
	    {"overlapping its top", TU_CHUNK(5), 2 * CP},
	    {"overlapping its bottom", TU_CHUNK(3), 2 * CP},
	    {"containing it", TU_CHUNK(2), 8 * CP},
	    {"base not chunk-aligned", TU_CHUNK(10) + PA_PAGE_SIZE, CP},
	    {"size not whole chunks", TU_CHUNK(10), CP + 1},
	    {"no pages", TU_CHUNK(10), 0},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		tu_case = cases[k].name;
		TU_EQ(pageheap_grow_range(&t->h, cases[k].base, cases[k].npages), -1);
		tu_check(t); /* still one range of 2 chunks, counters unchanged */
	}
	tu_case = "";
	TU_EQ(t->h.mapped_pages, 2 * CP);
	tu_heap_free(t);
}

/* grow_prepare (pageheap.h) sees each range before it joins the heap, and a
 * refusal leaves the heap as it was, ENOMEM. */
static uintptr_t prepared_base[4];
static size_t prepared_bytes[4], prepared_n;
static uintptr_t refuse_base;

static int record_prepare(uintptr_t base, size_t bytes)
{
	if (prepared_n < 4) {
		prepared_base[prepared_n] = base;
		prepared_bytes[prepared_n] = bytes;
	}
	prepared_n++;
	return base == refuse_base ? -1 : 0;
}

static void test_grow_prepare_sees_each_range_and_may_refuse_it(void **state)
{
	(void)state;
	struct tu_heap *t = tu_heap_new();
	t->h.grow_prepare = record_prepare;
	prepared_n = 0;
	refuse_base = TU_CHUNK(8);
	tu_grow(t, TU_CHUNK(4), 2);
	TU_EQ(prepared_n, 1);
	TU_EQ(prepared_base[0], TU_CHUNK(4));
	TU_EQ(prepared_bytes[0], 2 * PA_CHUNK_SIZE);
	errno = 0;
	TU_EQ(pageheap_grow_range(&t->h, TU_CHUNK(8), CP), -1);
	TU_EQ(errno, ENOMEM);
	TU_EQ(prepared_n, 2);
	TU_EQ(prepared_base[1], TU_CHUNK(8));
	TU_EQ(prepared_bytes[1], PA_CHUNK_SIZE);
	TU_EQ(t->h.mapped_pages, 2 * CP);
	tu_check(t); /* one range of 2 chunks */
	tu_case = "the refused chunk is not heap";
	expect_alloc(t, 3 * CP, 0, 0);
	tu_case = "";
	expect_alloc(t, 2 * CP, TU_CHUNK(4), 2 * CP);
	tu_heap_free(t);
}

/* ---- allocation tables ---------------------------------------------------------- */

struct hit {
	size_t npages;
	uintptr_t addr; /* 0: must fail */
	size_t scav;
};

struct alloc_case {
	const char *name;
	struct tu_chunks ranges[4];
	struct tu_run before[4];   /* allocated before the hits */
	struct tu_run resident[4]; /* free pages made resident (growth releases all) */
	struct hit hits[8];
	struct tu_run after[4]; /* every allocated page at the end (none listed: all free) */
};

#define LASTC (((size_t)1 << 18) - 1) /* last entry on its summary page at levels 1-4 */
#define FARC (((size_t)1 << 18) + ((size_t)1 << 20)) /* first entry on its page */
#define GAPB (((size_t)1 << 20) + 0x503)
#define FARC2 ((size_t)1 << 21)

static const struct alloc_case alloc_cases[] = {
    {.name = "1 page at a time, pages 1 and 4 resident",
     .ranges = {{0, 1}},
     .resident = {{0, 1, 1}, {0, 4, 1}},
     .hits = {{1, P(0, 0), 1}, {1, P(0, 1), 0}, {1, P(0, 2), 1}, {1, P(0, 3), 1}, {1, P(0, 4), 0}},
     .after = {{0, 0, 5}}},
    {.name = "2 pages at a time, pages 3-6 and 8+ resident",
     .ranges = {{0, 1}},
     .resident = {{0, 3, 4}, {0, 8, 504}},
     .hits = {{2, P(0, 0), 2}, {2, P(0, 2), 1}, {2, P(0, 4), 0}, {2, P(0, 6), 1}, {2, P(0, 8), 0}},
     .after = {{0, 0, 10}}},
    {.name = "5 pages at a time, mixed residency",
     .ranges = {{0, 1}},
     .resident = {{0, 8, 1}, {0, 10, 7}, {0, 22, 490}},
     .hits =
         {{5, P(0, 0), 5}, {5, P(0, 5), 4}, {5, P(0, 10), 0}, {5, P(0, 15), 3}, {5, P(0, 20), 2}},
     .after = {{0, 0, 25}}},
    {.name = "64 pages at a time",
     .ranges = {{0, 1}},
     .resident = {{0, 0, 21}, {0, 22, 41}, {0, 128, 384}},
     .hits = {{64, P(0, 0), 2}, {64, P(0, 64), 64}, {64, P(0, 128), 0}},
     .after = {{0, 0, 192}}},
    {.name = "65 pages at a time",
     .ranges = {{0, 1}},
     .resident = {{0, 0, 129}, {0, 130, 382}},
     .hits = {{65, P(0, 0), 0}, {65, P(0, 65), 1}, {65, P(0, 130), 0}},
     .after = {{0, 0, 195}}},
    {.name = "chunk minus 3, then the rest by ones and twos",
     .ranges = {{0, 1}},
     .resident = {{0, 0, 10}, {0, 11, 501}},
     .hits = {{509, P(0, 0), 1},
              {509, 0, 0},
              {1, P(0, 509), 0},
              {2, P(0, 510), 0},
              {1, 0, 0},
              {509, 0, 0}},
     .after = {{0, 0, 512}}},
    {.name = "a whole chunk",
     .ranges = {{0, 1}},
     .resident = {{0, 1, 510}},
     .hits = {{512, P(0, 0), 2}, {512, 0, 0}, {1, 0, 0}},
     .after = {{0, 0, 512}}},
    {.name = "last page of the third chunk",
     .ranges = {{0, 3}},
     .before = {{0, 0, 3 * CP - 1}},
     .hits = {{1, P(2, 511), 1}},
     .after = {{0, 0, 3 * CP}}},
    {.name = "a far chunk after a full one",
     .ranges = {{0, 1}, {0xff, 1}},
     .before = {{0, 0, CP}},
     .hits = {{1, P(0xff, 0), 1}},
     .after = {{0, 0, CP}, {0xff, 0, 1}}},
    {.name = "2 pages straddling a chunk boundary",
     .ranges = {{0, 2}},
     .before = {{0, 0, 511}, {1, 1, 511}},
     .resident = {{1, 0, 1}},
     .hits = {{2, P(0, 511), 1}},
     .after = {{0, 0, 2 * CP}}},
    {.name = "a chunk plus 1 from the middle of a chunk",
     .ranges = {{0, 2}},
     .before = {{0, 0, 256}},
     .hits = {{513, P(0, 256), 513}, {512, 0, 0}, {1, P(1, 257), 1}},
     .after = {{0, 0, 770}}},
    {.name = "two whole resident chunks",
     .ranges = {{0, 2}},
     .resident = {{0, 0, 2 * CP}},
     .hits = {{2 * CP, P(0, 0), 0}, {2 * CP, 0, 0}, {1, 0, 0}},
     .after = {{0, 0, 2 * CP}}},
    {.name = "two chunks from a far range, then the near one",
     .ranges = {{0, 1}, {0x40, 2}},
     .resident = {{0x40, 0, 2 * CP}},
     .hits = {{2 * CP, P(0x40, 0), 0}, {21, P(0, 0), 21}, {1, P(0, 21), 1}},
     .after = {{0, 0, 22}, {0x40, 0, 2 * CP}}},
    {.name = "5/4 of a chunk across the third and fourth",
     .ranges = {{0, 4}},
     .before = {{0, 0, CP}, {1, 0, 384}, {2, 0, 384}},
     .hits = {{640, P(2, 384), 640}, {640, 0, 0}, {1, P(1, 384), 1}},
     .after = {{0, 0, CP}, {1, 0, 385}, {2, 0, 2 * CP}}},
    {.name = "7 chunks plus 5 pages",
     .ranges = {{0, 8}},
     .hits = {{7 * CP + 5, P(0, 0), 7 * CP + 5}, {7 * CP + 5, 0, 0}, {1, P(7, 5), 1}},
     .after = {{0, 0, 7 * CP + 6}}},
    {.name = "2 chunks straddling three",
     .ranges = {{0, 3}},
     .before = {{0, 0, 256}, {2, 256, 256}},
     .hits = {{2 * CP, P(0, 256), 2 * CP}, {2 * CP, 0, 0}, {1, 0, 0}},
     .after = {{0, 0, 3 * CP}}},
    {.name = "leaf summaries last and first on their summary pages",
     .ranges = {{LASTC - 11, 12}, {FARC, 1}},
     .before = {{LASTC - 11, 0, 11 * CP}},
     .hits = {{511, P(LASTC, 0), 511},
              {1, P(LASTC, 511), 1},
              {1, P(FARC, 0), 1},
              {511, P(FARC, 1), 511},
              {1, 0, 0}},
     .after = {{LASTC - 11, 0, 12 * CP}, {FARC, 0, CP}}},
    {.name = "coarse hint lands in a gap (Go issue 40191)",
     .ranges = {{0, 1}, {GAPB, 1}, {FARC2, 1}},
     .before = {{0, 0, 511}, {GAPB, 0, 502}, {GAPB, 511, 1}},
     .hits = {{1, P(0, 511), 1}, {100, P(FARC2, 0), 100}, {9, P(GAPB, 502), 9}},
     .after = {{0, 0, CP}, {GAPB, 0, CP}, {FARC2, 0, 100}}},
};

static void test_alloc_table(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(alloc_cases) / sizeof(alloc_cases[0]); k++) {
		const struct alloc_case *c = &alloc_cases[k];
		tu_case = c->name;
		struct tu_heap *t = tu_heap_build(c->ranges, c->before);
		tu_make_resident(t, c->resident);
		tu_check(t);
		for (const struct hit *x = c->hits; x->npages != 0; x++) {
			expect_alloc(t, x->npages, x->addr, x->scav);
			tu_check(t);
		}
		tu_expect_alloc(t, c->after);
		tu_heap_free(t);
	}
	tu_case = "";
}

/* ---- free tables ------------------------------------------------------------------- */

struct free_case {
	const char *name;
	struct tu_chunks ranges[2];
	struct tu_run before[2];
	size_t npages;
	uintptr_t frees[6];     /* 0 ends */
	struct tu_run after[4]; /* none listed: all free */
};

static const struct free_case free_cases[] = {
    {.name = "1 page five times",
     .ranges = {{0, 1}},
     .before = {{0, 0, CP}},
     .npages = 1,
     .frees = {P(0, 0), P(0, 1), P(0, 2), P(0, 3), P(0, 4)},
     .after = {{0, 5, 507}}},
    {.name = "1 page in each of three chunks",
     .ranges = {{0, 3}},
     .before = {{0, 0, 3 * CP}},
     .npages = 1,
     .frees = {P(0, 256), P(1, 0), P(2, 511)},
     .after = {{0, 0, 256}, {0, 257, 255}, {1, 1, 1022}}},
    {.name = "2 pages straddling a chunk boundary",
     .ranges = {{0, 2}},
     .before = {{0, 511, 2}},
     .npages = 2,
     .frees = {P(0, 511)}},
    {.name = "5 pages five times",
     .ranges = {{0, 1}},
     .before = {{0, 0, CP}},
     .npages = 5,
     .frees = {P(0, 0), P(0, 5), P(0, 10), P(0, 15), P(0, 20)},
     .after = {{0, 25, 487}}},
    {.name = "64 pages three times",
     .ranges = {{0, 1}},
     .before = {{0, 0, CP}},
     .npages = 64,
     .frees = {P(0, 0), P(0, 64), P(0, 128)},
     .after = {{0, 192, 320}}},
    {.name = "65 pages three times",
     .ranges = {{0, 1}},
     .before = {{0, 0, CP}},
     .npages = 65,
     .frees = {P(0, 0), P(0, 65), P(0, 130)},
     .after = {{0, 195, 317}}},
    {.name = "a whole chunk",
     .ranges = {{0, 1}},
     .before = {{0, 0, CP}},
     .npages = CP,
     .frees = {P(0, 0)}},
    {.name = "a chunk straddling two",
     .ranges = {{0, 2}},
     .before = {{0, 256, CP}},
     .npages = CP,
     .frees = {P(0, 256)}},
    {.name = "a chunk plus 1 straddling two",
     .ranges = {{0, 2}},
     .before = {{0, 0, 2 * CP}},
     .npages = CP + 1,
     .frees = {P(0, 256)},
     .after = {{0, 0, 256}, {1, 257, 255}}},
    {.name = "two whole chunks",
     .ranges = {{0, 2}},
     .before = {{0, 0, 2 * CP}},
     .npages = 2 * CP,
     .frees = {P(0, 0)}},
    {.name = "two chunks straddling three",
     .ranges = {{0, 3}},
     .before = {{0, 0, 3 * CP}},
     .npages = 2 * CP,
     .frees = {P(0, 256)},
     .after = {{0, 0, 256}, {2, 256, 256}}},
    {.name = "7 chunks plus 5",
     .ranges = {{0, 8}},
     .before = {{0, 0, 8 * CP}},
     .npages = 7 * CP + 5,
     .frees = {P(0, 0)},
     .after = {{7, 5, 507}}},
    {.name = "interior chunks across a level-3 boundary freed wholesale",
     .ranges = {{6, 12}},
     .before = {{6, 0, 12 * CP}},
     .npages = 10 * CP + 3,
     .frees = {P(6, 509)},
     .after = {{6, 0, 509}, {17, 0, CP}}},
};

static void test_free_table(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(free_cases) / sizeof(free_cases[0]); k++) {
		const struct free_case *c = &free_cases[k];
		tu_case = c->name;
		struct tu_heap *t = tu_heap_build(c->ranges, c->before);
		tu_check(t);
		for (const uintptr_t *a = c->frees; *a != 0; a++) {
			checked_free(t, *a, c->npages);
			tu_check(t);
		}
		tu_expect_alloc(t, c->after);
		tu_heap_free(t);
	}
	tu_case = "";
}

/* ---- exhaustion -------------------------------------------------------------------- */

struct layout {
	const char *name;
	struct tu_chunks ranges[3];
};

static const struct layout layouts[] = {
    {"4 chunks at a 4096-chunk-aligned base", {{0, 4}}},
    {"3 chunks across an 8-chunk boundary", {{6, 3}}},
    {"4 chunks across a 64-chunk boundary", {{62, 4}}},
    {"3 chunks across a 512-chunk boundary", {{510, 3}}},
    {"4 chunks across a 4096-chunk (level-0) boundary", {{4094, 4}}},
    {"2+2 chunks with a one-chunk gap", {{0, 2}, {3, 2}}},
    {"1+3 chunks a terabyte apart", {{7, 1}, {((size_t)1 << 18) + 5, 3}}},
};

static void exhaust(const struct layout *L, size_t n)
{
	char name[160];
	snprintf(name, sizeof(name), "%s, %zu pages", L->name, n);
	tu_case = name;
	struct tu_heap *t = tu_heap_build(L->ranges, NULL);
	size_t total = 0, count = 0;
	/* First fit with allocations of one size fills each range in turn. */
	for (const struct tu_chunks *r = L->ranges; r->n != 0; r++) {
		size_t pages = r->n * CP;
		total += pages;
		for (size_t i = 0; i < pages / n; i++, count++)
			expect_alloc(t, n, P(r->chunk, i * n), n);
	}
	expect_alloc(t, n, 0, 0);
	TU_EQ(t->h.inuse_pages, count * n);
	TU_EQ(t->h.scav_pages, total - count * n);
	tu_check(t);
	/* What is left: the tails of the ranges, lowest first, page by page. */
	for (const struct tu_chunks *r = L->ranges; r->n != 0; r++) {
		size_t pages = r->n * CP;
		for (size_t p = pages - pages % n; p < pages; p++)
			expect_alloc(t, 1, P(r->chunk, p), 1);
	}
	expect_alloc(t, 1, 0, 0);
	TU_EQ(pageheap_hint(&t->h), t->h.limit_hint);
	TU_EQ(t->h.inuse_pages, total);
	TU_EQ(t->h.scav_pages, 0);
	tu_check(t);
	tu_heap_free(t);
}

static void test_exhaust_every_layout_and_size(void **state)
{
	(void)state;
	static const size_t sizes[] = {1, 2, 3, 4, 5, 8, 16, 64, 1024, 1025, 2048, 2049};
	for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
			exhaust(&layouts[l], sizes[s]);
	tu_case = "";
}

/* ---- runs across tree boundaries ------------------------------------------------------ */

/*
 * Chunks X-2 .. X+1 are heap; X-1 | X is a boundary of the given kind. All
 * is in use except the last 37 pages of X-1 and the first 91 of X: a run of
 * 128 that exists only as end + start across the boundary. At every level
 * where X-1 and X share an entry, that entry says max 128; below, the two
 * entries say end 37 and start 91.
 */
static void check_split_summaries(struct tu_heap *t, size_t x)
{
	for (unsigned l = 0; l < PA_SUM_LEVELS; l++) {
		uintptr_t a = TU_CHUNK(x - 1), b = TU_CHUNK(x);
		if ((a >> PA_LEVEL_SHIFT(l)) == (b >> PA_LEVEL_SHIFT(l))) {
			TU_EQ(tu_sum_at(t, l, a), pack3(0, 128, 0));
		} else {
			TU_EQ(tu_sum_at(t, l, a), pack3(0, 37, 37));
			TU_EQ(tu_sum_at(t, l, b), pack3(91, 91, 0));
		}
	}
}

static void test_runs_join_end_and_start_across_each_boundary(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		size_t x;
	} cases[] = {
	    {"chunk boundary", 8193},
	    {"level-3 (8-chunk) boundary", 8 * 1025},
	    {"level-2 (64-chunk) boundary", 64 * 129},
	    {"level-1 (512-chunk) boundary", 512 * 17},
	    {"level-0 (4096-chunk, 16 GiB) boundary", 4096 * 3},
	    {"chunk-array block (8192-chunk) boundary", 8192 * 3},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		tu_case = cases[k].name;
		const size_t x = cases[k].x;
		const struct tu_chunks ranges[] = {{x - 2, 4}, {0, 0}};
		const struct tu_run before[] = {{x - 2, 0, CP + 475}, {x, 91, 421 + CP}, {0, 0, 0}};
		struct tu_heap *t = tu_heap_build(ranges, before);
		tu_check(t);
		check_split_summaries(t, x);

		expect_alloc(t, 129, 0, 0);
		expect_alloc(t, 128, P(x - 1, 475), 128);
		for (unsigned l = 0; l < PA_SUM_LEVELS; l++) {
			TU_EQ(tu_sum_at(t, l, TU_CHUNK(x - 1)), 0);
			TU_EQ(tu_sum_at(t, l, TU_CHUNK(x)), 0);
		}
		tu_check(t);

		checked_free(t, P(x - 1, 475), 128);
		check_split_summaries(t, x);
		tu_check(t);
		expect_alloc(t, 128, P(x - 1, 475), 0); /* resident now */
		checked_free(t, P(x - 1, 475), 128);

		/* Widen the run through all of X-1: 12 + 512 + 91 across two boundaries. */
		checked_free(t, P(x - 2, 500), 12 + 475);
		tu_check(t);
		expect_alloc(t, 616, 0, 0);
		expect_alloc(t, 615, P(x - 2, 500), 0);
		tu_check(t);

		/* Everything in use: free it all at once (interior chunks wholesale). */
		checked_free(t, P(x - 2, 0), 4 * CP);
		for (size_t c = x - 2; c < x + 2; c++)
			TU_EQ(tu_sum_at(t, 4, TU_CHUNK(c)), sum_free(PA_CHUNK_PAGES_SHIFT));
		TU_EQ(pageheap_hint(&t->h), P(x - 2, 0));
		tu_check(t);
		expect_alloc(t, 3 * CP + 100, P(x - 2, 0), 0);
		expect_alloc(t, 412, P(x + 1, 100), 0);
		expect_alloc(t, 1, 0, 0);
		tu_check(t);
		tu_heap_free(t);
	}
	tu_case = "";
}

/* ---- multi-chunk runs ---------------------------------------------------------------- */

static void test_multi_chunk_alloc_and_partial_free(void **state)
{
	(void)state;
	const struct tu_chunks ranges[] = {{6, 12}, {0, 0}};
	struct tu_heap *t = tu_heap_build(ranges, NULL);
	expect_alloc(t, 3 * CP + 5, P(6, 0), 3 * CP + 5);
	TU_EQ(tu_sum_at(t, 4, TU_CHUNK(6)), 0);
	TU_EQ(tu_sum_at(t, 4, TU_CHUNK(7)), 0);
	TU_EQ(tu_sum_at(t, 4, TU_CHUNK(8)), 0);
	TU_EQ(tu_sum_at(t, 4, TU_CHUNK(9)), pack3(0, 507, 507));
	expect_alloc(t, 10, P(9, 5), 10);
	tu_check(t);

	/* A sub-run of the big allocation: the end of 6, all of 7, the start of 8. */
	checked_free(t, P(6, 200), 2 * CP);
	TU_EQ(tu_sum_at(t, 4, TU_CHUNK(6)), pack3(0, 312, 312));
	TU_EQ(tu_sum_at(t, 4, TU_CHUNK(7)), sum_free(PA_CHUNK_PAGES_SHIFT));
	TU_EQ(tu_sum_at(t, 4, TU_CHUNK(8)), pack3(200, 200, 0));
	/* Chunk 8 starts a level-3 entry whose chunks 10-15 are free. */
	TU_EQ(tu_sum_at(t, 3, TU_CHUNK(8)), pack3(200, 497 + 6 * 512, 497 + 6 * 512));
	TU_EQ(tu_sum_at(t, 3, TU_CHUNK(0)), pack3(0, 312 + 512, 312 + 512));
	/* The 1024-page hole loses to 497 free pages of chunk 9 plus chunks 10-17. */
	TU_EQ(tu_sum_at(t, 2, TU_CHUNK(0)), pack3(0, 497 + 8 * 512, 0));
	tu_check(t);
	expect_alloc(t, 2 * CP, P(6, 200), 0);
	tu_check(t);

	/* The whole original allocation goes back. */
	checked_free(t, P(6, 0), 3 * CP + 5);
	TU_EQ(tu_sum_at(t, 4, TU_CHUNK(9)), pack3(5, 497, 497));
	tu_check(t);

	/* 8 chunks: first fit skips the 1541-page run at chunk 6 and starts at
	 * page 15 of chunk 9, covering all of level-3 entry 8-15 but chunk 8-9. */
	expect_alloc(t, 8 * CP, P(9, 15), 497 + 7 * CP + 15);
	for (size_t c = 10; c < 17; c++)
		TU_EQ(tu_sum_at(t, 4, TU_CHUNK(c)), 0);
	TU_EQ(tu_sum_at(t, 4, TU_CHUNK(17)), pack3(0, 497, 497));
	TU_EQ(tu_sum_at(t, 3, TU_CHUNK(8)), pack3(517, 517, 0));
	TU_EQ(tu_sum_at(t, 3, TU_CHUNK(16)), pack3(0, 497, 0));
	tu_check(t);
	const struct tu_run after[] = {{9, 5, 10}, {9, 15, 8 * CP}, {0, 0, 0}};
	tu_expect_alloc(t, after);
	tu_heap_free(t);
}

/* ---- summaries at the edge of committed summary memory ---------------------------------- */

static void read_entry(void *p)
{
	(void)*(volatile pa_sum *)p;
}

static void read_entry_in_child(void *p)
{
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	read_entry(p);
}

/* The entry right after (or before) the heap's entry is on an uncommitted
 * page: reading it kills a child with SIGSEGV. */
static void expect_unreadable(pa_sum *p)
{
	char out[256];
	int status = tu_run_child(read_entry_in_child, p, out, sizeof(out));
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
		fail_msg("summary word %p is readable: the test's layout premise is wrong",
		         (void *)p);
}

static void test_alloc_at_the_edge_of_committed_summary_pages(void **state)
{
	(void)state;
	const size_t opage = (size_t)sysconf(_SC_PAGESIZE);
	const struct tu_chunks ranges[] = {{LASTC - 11, 12}, {FARC, 4}, {0, 0}};
	struct tu_heap *t = tu_heap_build(ranges, NULL);
	/* The premise: at levels 1-4 the last chunk's entry ends an OS page and
	 * the next page is uncommitted; the far range's entry starts one. */
	for (unsigned l = 1; l < PA_SUM_LEVELS; l++) {
		size_t i = (TU_CHUNK(LASTC) - t->h.window_base) >> PA_LEVEL_SHIFT(l);
		size_t j = (TU_CHUNK(FARC) - t->h.window_base) >> PA_LEVEL_SHIFT(l);
		TU_EQ((uintptr_t)&t->h.sum[l][i] % opage, opage - sizeof(pa_sum));
		TU_EQ((uintptr_t)&t->h.sum[l][j] % opage, 0);
		expect_unreadable(&t->h.sum[l][i + 1]);
		expect_unreadable(&t->h.sum[l][j - 1]);
	}
	/* Exhaust it page by page; any stray read of the neighbours faults. */
	for (size_t i = 0; i < 12 * CP; i++)
		expect_alloc(t, 1, P(LASTC - 11, i), 1);
	for (size_t i = 0; i < 4 * CP; i++)
		expect_alloc(t, 1, P(FARC, i), 1);
	expect_alloc(t, 1, 0, 0);
	tu_check(t);
	tu_heap_free(t);

	/* Again with runs that end exactly at the edge and start exactly at it. */
	t = tu_heap_build(ranges, NULL);
	expect_alloc(t, 11 * CP, P(LASTC - 11, 0), 11 * CP);
	expect_alloc(t, CP - 1, P(LASTC, 0), CP - 1);
	expect_alloc(t, 2, P(FARC, 0), 2); /* the lone last page cannot hold 2 */
	expect_alloc(t, 1, P(LASTC, CP - 1), 1);
	expect_alloc(t, 4 * CP - 2, P(FARC, 2), 4 * CP - 2);
	expect_alloc(t, 1, 0, 0);
	tu_check(t);
	checked_free(t, P(LASTC, CP - 1), 1);
	checked_free(t, P(FARC, 0), 1);
	expect_alloc(t, 2, 0, 0);
	expect_alloc(t, 1, P(LASTC, CP - 1), 0);
	expect_alloc(t, 1, P(FARC, 0), 0);
	expect_alloc(t, 1, 0, 0);
	tu_check(t);
	tu_heap_free(t);
}

/* A coarse hint (a level-0 region's base) that is not heap: it must be
 * moved up to real heap before anyone reads the leaf summary there. */
static void test_hint_from_a_coarse_level_is_moved_out_of_a_gap(void **state)
{
	(void)state;
	const struct tu_chunks ranges[] = {{0, 1}, {GAPB, 1}, {FARC2, 1}, {0, 0}};
	const struct tu_run before[] = {{0, 0, 511}, {GAPB, 0, 502}, {GAPB, 511, 1}, {0, 0, 0}};
	struct tu_heap *t = tu_heap_build(ranges, before);
	/* B's leaf is 0x503 entries into its level-0 region: the region base's
	 * leaf summary lies on an uncommitted page. */
	size_t gap_leaf =
	    (PA_ALIGN_DOWN(TU_CHUNK(GAPB), (uintptr_t)1 << PA_LEVEL_SHIFT(0)) - t->h.window_base) >>
	    PA_CHUNK_SHIFT;
	expect_unreadable(&t->h.sum[4][gap_leaf]);
	expect_alloc(t, 1, P(0, 511), 1);
	TU_EQ(pageheap_hint(&t->h), P(0, 511));
	expect_alloc(t, 100, P(FARC2, 0), 100);
	TU_EQ(pageheap_hint(&t->h), TU_CHUNK(GAPB));
	tu_check(t);
	expect_alloc(t, 9, P(GAPB, 502), 9);
	expect_alloc(t, 1, P(FARC2, 100), 1);
	tu_check(t);
	tu_heap_free(t);
}

/* ---- the hint ------------------------------------------------------------------------ */

static void test_hint_is_the_lowest_grown_address(void **state)
{
	(void)state;
	struct tu_heap *t = tu_heap_new();
	tu_grow(t, TU_CHUNK(5), 1);
	TU_EQ(pageheap_hint(&t->h), TU_CHUNK(5));
	tu_grow(t, TU_CHUNK(9), 1);
	TU_EQ(pageheap_hint(&t->h), TU_CHUNK(5));
	tu_grow(t, TU_CHUNK(1), 1);
	TU_EQ(pageheap_hint(&t->h), TU_CHUNK(1));
	tu_check(t);
	tu_heap_free(t);
}

/* As in Go: after an allocation the hint is the first free page the search
 * saw (which the allocation may then have taken). */
static void test_hint_is_the_first_free_page_the_search_saw(void **state)
{
	(void)state;
	const struct tu_chunks ranges[] = {{0, 1}, {0, 0}};
	const struct tu_run before[] = {{0, 0, 10}, {0, 11, 1}, {0, 0, 0}};
	struct tu_heap *t = tu_heap_build(ranges, before);
	TU_EQ(pageheap_hint(&t->h), P(0, 0));
	expect_alloc(t, 2, P(0, 12), 2); /* page 10 is free but alone */
	TU_EQ(pageheap_hint(&t->h), P(0, 10));
	tu_check(t);
	expect_alloc(t, 1, P(0, 10), 1);
	TU_EQ(pageheap_hint(&t->h), P(0, 10));
	expect_alloc(t, 1, P(0, 14), 1);
	TU_EQ(pageheap_hint(&t->h), P(0, 14));
	expect_alloc(t, 1, P(0, 15), 1);
	TU_EQ(pageheap_hint(&t->h), P(0, 15));
	tu_check(t);
	tu_heap_free(t);
}

static void test_free_below_hint_moves_it_down(void **state)
{
	(void)state;
	const struct tu_chunks ranges[] = {{0, 1}, {0, 0}};
	struct tu_heap *t = tu_heap_build(ranges, NULL);
	for (size_t i = 0; i < 100; i++)
		expect_alloc(t, 1, P(0, i), 1);
	TU_EQ(pageheap_hint(&t->h), P(0, 99));
	checked_free(t, P(0, 42), 1);
	TU_EQ(pageheap_hint(&t->h), P(0, 42));
	tu_check(t);
	expect_alloc(t, 1, P(0, 42), 0);
	expect_alloc(t, 1, P(0, 100), 1);
	expect_alloc(t, 1, P(0, 101), 1);
	TU_EQ(pageheap_hint(&t->h), P(0, 101));
	checked_free(t, P(0, 42), 1);
	TU_EQ(pageheap_hint(&t->h), P(0, 42));
	/* A free above the hint leaves it alone. */
	checked_free(t, P(0, 101), 1);
	TU_EQ(pageheap_hint(&t->h), P(0, 42));
	tu_check(t);
	tu_heap_free(t);
}

static void test_free_in_a_lower_range_reopens_it(void **state)
{
	(void)state;
	const struct tu_chunks ranges[] = {{0, 1}, {10, 1}, {0, 0}};
	struct tu_heap *t = tu_heap_build(ranges, NULL);
	expect_alloc(t, CP, P(0, 0), CP);
	expect_alloc(t, 20, P(10, 0), 20);
	TU_EQ(pageheap_hint(&t->h), P(10, 0));
	checked_free(t, P(0, 100), 10);
	TU_EQ(pageheap_hint(&t->h), P(0, 100));
	tu_check(t);
	expect_alloc(t, 10, P(0, 100), 0);
	TU_EQ(pageheap_hint(&t->h), P(0, 100));
	expect_alloc(t, 10, P(10, 20), 10);
	TU_EQ(pageheap_hint(&t->h), P(10, 20));
	tu_check(t);
	tu_heap_free(t);
}

static void test_alloc_free_cycles_bring_the_hint_back(void **state)
{
	(void)state;
	const struct tu_chunks ranges[] = {{0, 3}, {0, 0}};
	const struct tu_run before[] = {{0, 0, 5}, {0, 0, 0}};
	struct tu_heap *t = tu_heap_build(ranges, before);
	size_t hw = 5; /* pages below hw have been in use at least once: resident */
	for (size_t i = 0; i < 1000; i++) {
		size_t n = 1 + (i * 37) % 1000;
		uintptr_t a = P(0, 5), b = P(0, 5 + n);
		expect_alloc(t, n, a, 5 + n > hw ? 5 + n - hw : 0);
		if (5 + n > hw)
			hw = 5 + n;
		expect_alloc(t, 1, b, 5 + n >= hw ? 1 : 0);
		if (5 + n + 1 > hw)
			hw = 5 + n + 1;
		checked_free(t, a, n);
		TU_EQ(pageheap_hint(&t->h), P(0, 5));
		checked_free(t, b, 1);
		TU_EQ(pageheap_hint(&t->h), P(0, 5));
	}
	tu_check(t);
	TU_EQ(t->h.inuse_pages, 5);
	tu_heap_free(t);
}

static void test_exhausted_hint_is_limit_hint_until_a_free(void **state)
{
	(void)state;
	const struct tu_chunks ranges[] = {{0, 1}, {0, 0}};
	struct tu_heap *t = tu_heap_build(ranges, NULL);
	expect_alloc(t, CP, P(0, 0), CP);
	expect_alloc(t, 1, 0, 0);
	TU_EQ(pageheap_hint(&t->h), t->h.limit_hint);
	tu_check(t);
	checked_free(t, P(0, 7), 1);
	TU_EQ(pageheap_hint(&t->h), P(0, 7));
	expect_alloc(t, 2, 0, 0);
	/* A failed larger request must not skip the free page. */
	expect_alloc(t, 1, P(0, 7), 0);
	expect_alloc(t, 1, 0, 0);
	tu_check(t);
	tu_heap_free(t);
}

/* ---- pageheap_check ---------------------------------------------------------------- */

static void test_check_classifies_bad_frees(void **state)
{
	(void)state;
	const struct tu_chunks ranges[] = {{0, 2}, {4, 1}, {0, 0}};
	const struct tu_run before[] = {{0, 10, 20}, {0, 500, 24}, {1, 500, 12}, {0, 0, 0}};
	struct tu_heap *t = tu_heap_build(ranges, before);
	static const struct {
		const char *name;
		uintptr_t addr;
		size_t npages;
		enum pa_page_fault want;
	} cases[] = {
	    {"exact allocation", P(0, 10), 20, PA_PAGE_OK},
	    {"a sub-run of it", P(0, 15), 5, PA_PAGE_OK},
	    {"its last page", P(0, 29), 1, PA_PAGE_OK},
	    {"a run across a chunk boundary", P(0, 500), 24, PA_PAGE_OK},
	    {"the last pages before a gap", P(1, 500), 12, PA_PAGE_OK},
	    {"a free page", P(0, 100), 1, PA_PAGE_NOT_ALLOCATED},
	    {"one page past the end", P(0, 10), 21, PA_PAGE_NOT_ALLOCATED},
	    {"one page before the start", P(0, 9), 2, PA_PAGE_NOT_ALLOCATED},
	    {"free page in the second chunk", P(0, 500), 25, PA_PAGE_NOT_ALLOCATED},
	    {"a whole free range", TU_CHUNK(4), CP, PA_PAGE_NOT_ALLOCATED},
	    {"below the heap", TU_CHUNK(0) - PA_PAGE_SIZE, 1, PA_PAGE_NOT_HEAP},
	    {"in the gap between ranges", TU_CHUNK(2), 1, PA_PAGE_NOT_HEAP},
	    {"above the heap", TU_CHUNK(5), 1, PA_PAGE_NOT_HEAP},
	    {"far above the heap", (uintptr_t)100 << 40, 1, PA_PAGE_NOT_HEAP},
	    {"the null page", 0, 1, PA_PAGE_NOT_HEAP},
	    {"allocated run continuing into the gap", P(1, 500), 13, PA_PAGE_NOT_HEAP},
	    {"misaligned by a byte", P(0, 10) + 1, 1, PA_PAGE_UNALIGNED},
	    {"misaligned by an OS page", P(0, 10) + 4096, 1, PA_PAGE_UNALIGNED},
	    {"zero pages", P(0, 10), 0, PA_PAGE_BAD_SIZE},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		tu_case = cases[k].name;
		TU_EQ(pageheap_check(&t->h, cases[k].addr, cases[k].npages), cases[k].want);
	}
	tu_case = "double free";
	pageheap_free(&t->h, P(0, 10), 20);
	TU_EQ(pageheap_check(&t->h, P(0, 10), 20), PA_PAGE_NOT_ALLOCATED);
	TU_EQ(pageheap_check(&t->h, P(0, 29), 1), PA_PAGE_NOT_ALLOCATED);
	TU_EQ(pageheap_check(&t->h, P(0, 500), 24), PA_PAGE_OK);
	tu_case = "";
	tu_check(t);
	tu_heap_free(t);
}

/* ---- counters and errors ------------------------------------------------------------- */

static void test_counters_track_inuse_and_released_pages(void **state)
{
	(void)state;
	const struct tu_chunks ranges[] = {{0, 3}, {0, 0}};
	struct tu_heap *t = tu_heap_build(ranges, NULL);
	TU_EQ(t->h.mapped_pages, 3 * CP);
	TU_EQ(t->h.scav_pages, 3 * CP);
	TU_EQ(t->h.inuse_pages, 0);
	expect_alloc(t, 10, P(0, 0), 10);
	TU_EQ(t->h.inuse_pages, 10);
	TU_EQ(t->h.scav_pages, 3 * CP - 10);
	checked_free(t, P(0, 0), 10);
	TU_EQ(t->h.inuse_pages, 0);
	TU_EQ(t->h.scav_pages, 3 * CP - 10); /* freed pages are resident */
	expect_alloc(t, 20, P(0, 0), 10);    /* 10 resident + 10 released */
	expect_alloc(t, 1000, P(0, 20), 1000);
	TU_EQ(t->h.inuse_pages, 1020);
	TU_EQ(t->h.scav_pages, 3 * CP - 1020);
	TU_EQ(pageheap_alloc(&t->h, 1, NULL), P(0, 1020));
	TU_EQ(t->h.inuse_pages, 1021);
	TU_EQ(t->h.mapped_pages, 3 * CP);
	tu_check(t);
	tu_heap_free(t);
}

static void test_alloc_failures_return_zero_with_enomem(void **state)
{
	(void)state;
	struct tu_heap *t = tu_heap_new();
	tu_case = "heap with no memory";
	expect_alloc(t, 1, 0, 0);
	tu_grow(t, TU_CHUNK(0), 1);
	tu_case = "more than the heap";
	expect_alloc(t, CP + 1, 0, 0);
	tu_case = "more than the address space";
	expect_alloc(t, (size_t)1 << 40, 0, 0);
	expect_alloc(t, SIZE_MAX, 0, 0);
	tu_case = "zero pages";
	TU_EQ(pageheap_alloc(&t->h, 0, NULL), 0);
	tu_case = "";
	TU_EQ(t->h.inuse_pages, 0);
	tu_check(t);
	expect_alloc(t, CP, P(0, 0), CP);
	tu_heap_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(test_grow_one_chunk_is_free_released_heap),
	    TU_TEST(test_grow_out_of_order_ranges_terabytes_apart),
	    TU_TEST(test_grow_merges_adjacent_ranges),
	    TU_TEST(test_grow_hundreds_of_ranges_then_fill_the_gaps),
	    TU_TEST(test_grow_rejects_overlap_and_misalignment),
	    TU_TEST(test_grow_prepare_sees_each_range_and_may_refuse_it),
	    TU_TEST(test_alloc_table),
	    TU_TEST(test_free_table),
	    TU_TEST(test_exhaust_every_layout_and_size),
	    TU_TEST(test_runs_join_end_and_start_across_each_boundary),
	    TU_TEST(test_multi_chunk_alloc_and_partial_free),
	    TU_TEST(test_alloc_at_the_edge_of_committed_summary_pages),
	    TU_TEST(test_hint_from_a_coarse_level_is_moved_out_of_a_gap),
	    TU_TEST(test_hint_is_the_lowest_grown_address),
	    TU_TEST(test_hint_is_the_first_free_page_the_search_saw),
	    TU_TEST(test_free_below_hint_moves_it_down),
	    TU_TEST(test_free_in_a_lower_range_reopens_it),
	    TU_TEST(test_alloc_free_cycles_bring_the_hint_back),
	    TU_TEST(test_exhausted_hint_is_limit_hint_until_a_free),
	    TU_TEST(test_check_classifies_bad_frees),
	    TU_TEST(test_counters_track_inuse_and_released_pages),
	    TU_TEST(test_alloc_failures_return_zero_with_enomem),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
