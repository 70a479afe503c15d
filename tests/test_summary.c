/*
 * test_summary.c — the packed 64-bit summary (summary.h): exact packed words
 * for the edge values (0 = full, 2^21 = the top bit alone, 2^21 - 1 in every
 * field), round trips, and sum_merge for every way a run can grow through
 * neighbours (free prefix, free suffix, seams, 8-way merges at each level's
 * size), checked against independently computed, independently packed
 * results.
 */
#include "testutil.h"

#include "summary.h"

#define F21 (1u << 21)
#define M21 (F21 - 1u)

struct triple {
	unsigned start, max, end;
};

/* ---- packing ----------------------------------------------------------------- */

static void test_pack_exact_words(void **state)
{
	(void)state;
	TU_EQ(sum_pack(0, 0, 0), 0);
	TU_EQ(sum_pack(1, 2, 3), 0x00000c0000400001ull);
	TU_EQ(sum_pack(M21, 0, 0), 0x00000000001fffffull);
	TU_EQ(sum_pack(0, M21, 0), 0x000003ffffe00000ull);
	TU_EQ(sum_pack(0, 0, M21), 0x7ffffc0000000000ull);
	/* The largest representable counts do not touch the top bit. */
	TU_EQ(sum_pack(M21, M21, M21), 0x7fffffffffffffffull);
	/* 2^21 everywhere: the top bit alone. */
	TU_EQ(sum_pack(F21, F21, F21), 0x8000000000000000ull);
	TU_EQ(sum_free(9), 0x0008000040000200ull);
	TU_EQ(sum_free(12), 0x0040000200001000ull);
	TU_EQ(sum_free(18), 0x1000008000040000ull);
	TU_EQ(sum_free(21), 0x8000000000000000ull);
}

static void test_unpack_full_and_all_free(void **state)
{
	(void)state;
	TU_EQ(sum_start(0), 0);
	TU_EQ(sum_max(0), 0);
	TU_EQ(sum_end(0), 0);
	pa_sum all = (pa_sum)1 << 63;
	TU_EQ(sum_start(all), F21);
	TU_EQ(sum_max(all), F21);
	TU_EQ(sum_end(all), F21);
	pa_sum top = sum_pack(M21, M21, M21);
	TU_EQ(sum_start(top), M21);
	TU_EQ(sum_max(top), M21);
	TU_EQ(sum_end(top), M21);
}

static void test_pack_unpack_round_trips(void **state)
{
	(void)state;
	static const struct triple cases[] = {
	    {0, 0, 0},        {1, 1, 0},
	    {0, 1, 1},        {512, 512, 512},
	    {0, 511, 511},    {511, 511, 0},
	    {0, M21, 0},      {M21, M21, 0},
	    {0, M21, M21},    {M21, M21, M21},
	    {5, 1u << 20, 7}, {1u << 20, 1u << 20, 0},
	    {3, 4096, 4095},  {F21 - 2, F21 - 2, 1},
	    {F21, F21, F21},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pa_sum s = sum_pack(cases[i].start, cases[i].max, cases[i].end);
		TU_EQ(sum_start(s), cases[i].start);
		TU_EQ(sum_max(s), cases[i].max);
		TU_EQ(sum_end(s), cases[i].end);
		struct tu_sum want = {cases[i].start, cases[i].max, cases[i].end};
		TU_EQ(s, tu_pack(want));
	}
	uint64_t seed = 0x452821e638d01377ull;
	for (unsigned k = 0; k < 100000; k++) {
		unsigned a = (unsigned)(tu_xorshift(&seed) & M21);
		unsigned b = (unsigned)(tu_xorshift(&seed) & M21);
		unsigned c = (unsigned)(tu_xorshift(&seed) & M21);
		pa_sum s = sum_pack(a, b, c);
		TU_EQ(sum_start(s), a);
		TU_EQ(sum_max(s), b);
		TU_EQ(sum_end(s), c);
		TU_EQ(s >> 63, 0);
	}
}

/* ---- merging ------------------------------------------------------------------- */

#define FREE9                                                                                      \
	{                                                                                          \
		512, 512, 512                                                                      \
	}
#define FREE18                                                                                     \
	{                                                                                          \
		1u << 18, 1u << 18, 1u << 18                                                       \
	}
#define FULL                                                                                       \
	{                                                                                          \
		0, 0, 0                                                                            \
	}

struct merge_case {
	const char *name;
	unsigned log_pages, n;
	struct triple kids[8];
	struct triple want;
};

static const struct merge_case merge_cases[] = {
    {"two free chunks", 9, 2, {FREE9, FREE9}, {1024, 1024, 1024}},
    {"eight free chunks make a free level-3 entry",
     9,
     8,
     {FREE9, FREE9, FREE9, FREE9, FREE9, FREE9, FREE9, FREE9},
     {4096, 4096, 4096}},
    {"eight free level-1 entries make the all-free level-0 value",
     18,
     8,
     {FREE18, FREE18, FREE18, FREE18, FREE18, FREE18, FREE18, FREE18},
     {F21, F21, F21}},
    {"all full", 9, 8, {FULL, FULL, FULL, FULL, FULL, FULL, FULL, FULL}, {0, 0, 0}},
    {"start runs through a free prefix",
     9,
     8,
     {FREE9, FREE9, {10, 20, 5}, FULL, FULL, FULL, FULL, FULL},
     {1034, 1034, 0}},
    {"end runs through a free suffix",
     9,
     8,
     {FULL, FULL, FULL, FULL, FULL, {0, 3, 7}, FREE9, FREE9},
     {0, 1031, 1031}},
    {"seam end+start beats both maxes", 9, 2, {{0, 100, 300}, {200, 200, 0}}, {0, 500, 0}},
    {"seam through a free middle child", 9, 3, {{0, 300, 300}, FREE9, {200, 200, 0}}, {0, 1012, 0}},
    {"interior max beats the seam", 9, 2, {{1, 400, 2}, {3, 10, 4}}, {1, 400, 4}},
    {"full child then free ones",
     9,
     8,
     {FULL, FREE9, FREE9, FREE9, FREE9, FREE9, FREE9, FREE9},
     {0, 3584, 3584}},
    {"free ones then a full child",
     9,
     8,
     {FREE9, FREE9, FREE9, FREE9, FREE9, FREE9, FREE9, FULL},
     {3584, 3584, 0}},
    {"single-page seam", 9, 2, {{0, 1, 1}, {1, 1, 0}}, {0, 2, 0}},
    {"one child is unchanged", 9, 1, {{10, 20, 30}}, {10, 20, 30}},
    {"start stops at a full child although later ones are free",
     9,
     3,
     {FREE9, FULL, FREE9},
     {512, 512, 512}},
    {"largest seam is the last pair",
     9,
     8,
     {{0, 5, 5}, {5, 5, 5}, {5, 5, 5}, {5, 5, 5}, {5, 5, 5}, {5, 5, 5}, {5, 5, 100}, {200, 200, 0}},
     {0, 300, 0}},
    {"seam chain through free children to the end",
     9,
     8,
     {FULL, FULL, {0, 7, 7}, FREE9, FREE9, FREE9, FREE9, FREE9},
     {0, 2567, 2567}},
    {"full level-1 entry then free ones",
     18,
     8,
     {FULL, FREE18, FREE18, FREE18, FREE18, FREE18, FREE18, FREE18},
     {0, 7u << 18, 7u << 18}},
    {"first page used: 2^21-1 free without the top bit",
     18,
     8,
     {{0, (1u << 18) - 1, (1u << 18) - 1}, FREE18, FREE18, FREE18, FREE18, FREE18, FREE18, FREE18},
     {0, M21, M21}},
    {"last page used: 2^21-1 free without the top bit",
     18,
     8,
     {FREE18, FREE18, FREE18, FREE18, FREE18, FREE18, FREE18, {(1u << 18) - 1, (1u << 18) - 1, 0}},
     {M21, M21, 0}},
    {"middle level-1 entry full at level-0 scale",
     18,
     8,
     {FREE18, FREE18, FREE18, FULL, FREE18, FREE18, FREE18, FREE18},
     {3u << 18, 4u << 18, 4u << 18}},
    {"level-2 sized seam",
     15,
     8,
     {FULL, FULL, FULL, {0, 100, 4000}, {5000, 5000, 0}, FULL, FULL, FULL},
     {0, 9000, 0}},
};

static void test_merge_cases(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(merge_cases) / sizeof(merge_cases[0]); k++) {
		const struct merge_case *c = &merge_cases[k];
		tu_case = c->name;
		pa_sum kids[8] = {0};
		for (unsigned i = 0; i < c->n; i++)
			kids[i] = sum_pack(c->kids[i].start, c->kids[i].max, c->kids[i].end);
		struct tu_sum want = {c->want.start, c->want.max, c->want.end};
		TU_EQ(sum_merge(kids, c->n, c->log_pages), tu_pack(want));
	}
	tu_case = "";
}

/* Up the tree: eight free children of each level merge into a free parent,
 * ending in the top-bit value at level 0. */
static void test_merge_free_children_at_every_level(void **state)
{
	(void)state;
	for (unsigned l = 0; l + 1 < PA_SUM_LEVELS; l++) {
		pa_sum kids[PA_SUM_FANOUT];
		for (unsigned i = 0; i < PA_SUM_FANOUT; i++)
			kids[i] = sum_free(PA_LEVEL_LOG_PAGES(l + 1));
		TU_EQ(sum_merge(kids, PA_SUM_FANOUT, PA_LEVEL_LOG_PAGES(l + 1)),
		      sum_free(PA_LEVEL_LOG_PAGES(l)));
		/* One page used at the very start and the very end. */
		unsigned size = 1u << PA_LEVEL_LOG_PAGES(l + 1);
		kids[0] = sum_pack(0, size - 1, size - 1);
		kids[PA_SUM_FANOUT - 1] = sum_pack(size - 1, size - 1, 0);
		struct tu_sum want = {0, 8 * (uint64_t)size - 2, 0};
		TU_EQ(sum_merge(kids, PA_SUM_FANOUT, PA_LEVEL_LOG_PAGES(l + 1)), tu_pack(want));
	}
}

/* The summary of bits [from, from + n) of a page map (set bit = in use). */
static struct tu_sum naive_summary(const uint64_t *used, unsigned from, unsigned n)
{
	struct tu_acc a = {0, 0, 0, 0};
	for (unsigned i = from; i < from + n; i++) {
		if ((used[i / 64] >> (i % 64)) & 1)
			tu_acc_used(&a, 1);
		else
			tu_acc_free(&a, 1);
	}
	return tu_acc_sum(&a);
}

/* Random page maps cut into n regions of 2^log pages: merging the regions'
 * summaries gives the summary of the whole map. */
static void test_merge_matches_page_level_reference(void **state)
{
	(void)state;
	uint64_t seed = 0xbe5466cf34e90c6cull;
	static const unsigned logs[] = {0, 1, 3, 6, 9};
	for (unsigned iter = 0; iter < 20000; iter++) {
		unsigned log = logs[iter % 5];
		unsigned n = 1 + (unsigned)(tu_xorshift(&seed) % 8);
		unsigned size = 1u << log, words = (n * size + 63) / 64;
		uint64_t used[64];
		for (unsigned w = 0; w < words; w++) {
			uint64_t r = tu_xorshift(&seed);
			switch (tu_xorshift(&seed) % 4) {
			case 0:
				used[w] = 0;
				break;
			case 1:
				used[w] = r & tu_xorshift(&seed) & tu_xorshift(&seed);
				break;
			case 2:
				used[w] = r;
				break;
			default:
				used[w] = ~(uint64_t)0;
				break;
			}
		}
		pa_sum kids[8] = {0};
		for (unsigned i = 0; i < n; i++) {
			struct tu_sum s = naive_summary(used, i * size, size);
			kids[i] = sum_pack((unsigned)s.start, (unsigned)s.max, (unsigned)s.end);
		}
		pa_sum got = sum_merge(kids, n, log);
		pa_sum want = tu_pack(naive_summary(used, 0, n * size));
		if (got != want)
			fail_msg("iteration %u (n %u, log %u): merge %#" PRIx64 ", want %#" PRIx64,
			         iter, n, log, got, want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(test_pack_exact_words),
	    TU_TEST(test_unpack_full_and_all_free),
	    TU_TEST(test_pack_unpack_round_trips),
	    TU_TEST(test_merge_cases),
	    TU_TEST(test_merge_free_children_at_every_level),
	    TU_TEST(test_merge_matches_page_level_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
