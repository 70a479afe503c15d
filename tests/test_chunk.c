/*
 * test_chunk.c — one chunk's bitmaps (chunk.h): chunk_summarize on tables of
 * bitmaps and on random ones; chunk_find for every run length 1..512 at
 * every word-edge alignment, with search_idx and *first_free; the range
 * helpers and the scavenged accounting of chunk_alloc_range.
 */
#include "testutil.h"

#include "chunk.h"

/* A range of pages inside one chunk; n == 0 ends a list. */
struct prange {
	unsigned start, n;
};

static void set_used(struct pa_chunk *c, const struct prange *r)
{
	for (; r->n != 0; r++)
		for (unsigned i = r->start; i < r->start + r->n; i++)
			c->alloc[i / 64] |= (uint64_t)1 << (i % 64);
}

/* A chunk in which exactly the listed ranges are free. */
static void set_only_free(struct pa_chunk *c, const struct prange *r)
{
	memset(c, 0, sizeof(*c));
	memset(c->alloc, 0xff, sizeof(c->alloc));
	for (; r->n != 0; r++)
		for (unsigned i = r->start; i < r->start + r->n; i++)
			c->alloc[i / 64] &= ~((uint64_t)1 << (i % 64));
}

static int used(const struct pa_chunk *c, unsigned i)
{
	return (int)((c->alloc[i / 64] >> (i % 64)) & 1);
}

/* First fit of n free pages at or after from, page by page. */
static unsigned naive_find(const struct pa_chunk *c, unsigned n, unsigned from)
{
	unsigned run = 0;
	for (unsigned i = from; i < PA_CHUNK_PAGES; i++) {
		run = used(c, i) ? 0 : run + 1;
		if (run == n)
			return i + 1 - n;
	}
	return CHUNK_NOT_FOUND;
}

static unsigned naive_first_free(const struct pa_chunk *c, unsigned from)
{
	for (unsigned i = from; i < PA_CHUNK_PAGES; i++)
		if (!used(c, i))
			return i;
	return CHUNK_NOT_FOUND;
}

static pa_sum triple(uint64_t start, uint64_t max, uint64_t end)
{
	struct tu_sum s = {start, max, end};
	return tu_pack(s);
}

/* ---- chunk_summarize --------------------------------------------------------- */

struct summarize_case {
	const char *name;
	int free_list; /* 1: `r` lists the free pages; 0: the used ones */
	struct prange r[8];
	unsigned start, max, end;
};

static const struct summarize_case summarize_cases[] = {
    {"empty chunk", 0, {{0, 0}}, 512, 512, 512},
    {"full chunk", 1, {{0, 0}}, 0, 0, 0},
    {"page 0 used", 0, {{0, 1}}, 0, 511, 511},
    {"page 63 used", 0, {{63, 1}}, 63, 448, 448},
    {"page 64 used", 0, {{64, 1}}, 64, 447, 447},
    {"page 511 used", 0, {{511, 1}}, 511, 511, 0},
    {"only page 0 free", 1, {{0, 1}}, 1, 1, 0},
    {"only page 511 free", 1, {{511, 1}}, 0, 1, 1},
    {"only page 200 free", 1, {{200, 1}}, 0, 1, 0},
    {"free run 60-69 across a word edge", 1, {{60, 10}}, 0, 10, 0},
    {"free start 11 and end 23", 1, {{0, 11}, {489, 23}}, 11, 23, 23},
    {"start, max, end all differ", 1, {{0, 4}, {50, 100}, {508, 4}}, 4, 100, 4},
    {"max only, ends used", 1, {{1, 20}, {35, 241}, {462, 30}}, 0, 241, 0},
    {"several equal maxima", 1, {{35, 2}, {40, 5}, {100, 5}}, 0, 5, 0},
    {"max interior run: everything but the two end pages", 1, {{1, 510}}, 0, 510, 0},
    {"62 free strictly inside word 1", 1, {{65, 62}}, 0, 62, 0},
    {"61 inside word 2 beats 60 across words 3-4", 1, {{129, 61}, {226, 60}}, 0, 61, 0},
    {"62 inside word 1 beats 61 across words 3-4", 1, {{65, 62}, {226, 61}}, 0, 62, 0},
    {"62 across words 3-4 ties 62 inside word 1", 1, {{65, 62}, {226, 62}}, 0, 62, 0},
    {"63 free at the top of word 0 only", 1, {{1, 63}}, 0, 63, 0},
    {"interior run of 10 beats a 4-page word-edge run", 1, {{62, 4}, {100, 10}}, 0, 10, 0},
    {"two full free words in the middle", 1, {{128, 128}}, 0, 128, 0},
    {"free words at both ends", 1, {{0, 64}, {448, 64}}, 64, 64, 64},
    {"alternating pages",
     0,
     {{0, 0}}, /* filled in by the test: every odd page used */
     1,
     1,
     0},
};

static void test_summarize_table(void **state)
{
	(void)state;
	struct pa_chunk c;
	for (size_t k = 0; k < sizeof(summarize_cases) / sizeof(summarize_cases[0]); k++) {
		const struct summarize_case *sc = &summarize_cases[k];
		tu_case = sc->name;
		if (sc->free_list) {
			set_only_free(&c, sc->r);
		} else {
			memset(&c, 0, sizeof(c));
			set_used(&c, sc->r);
		}
		if (strcmp(sc->name, "alternating pages") == 0)
			for (unsigned i = 0; i < PA_CHUNK_WORDS; i++)
				c.alloc[i] = 0xaaaaaaaaaaaaaaaaull;
		TU_EQ(chunk_summarize(&c), triple(sc->start, sc->max, sc->end));
	}
	tu_case = "";
}

static void test_summarize_matches_reference_on_random_chunks(void **state)
{
	(void)state;
	uint64_t seed = 0x0801f2e2858efc16ull;
	struct pa_chunk c;
	memset(&c, 0, sizeof(c));
	for (unsigned iter = 0; iter < 30000; iter++) {
		unsigned kind = (unsigned)(tu_xorshift(&seed) % 5);
		for (unsigned w = 0; w < PA_CHUNK_WORDS; w++) {
			uint64_t r = tu_xorshift(&seed);
			switch ((kind + (unsigned)(tu_xorshift(&seed) % 3)) % 5) {
			case 0:
				c.alloc[w] = 0;
				break;
			case 1:
				c.alloc[w] = ~(uint64_t)0;
				break;
			case 2:
				c.alloc[w] = r & tu_xorshift(&seed) & tu_xorshift(&seed);
				break;
			case 3:
				c.alloc[w] = r | tu_xorshift(&seed);
				break;
			default: {
				/* Two used bits somewhere: long interior runs. */
				unsigned a = (unsigned)(r % 64), b = (unsigned)((r >> 8) % 64);
				c.alloc[w] = (uint64_t)1 << a | (uint64_t)1 << b;
				break;
			}
			}
		}
		pa_sum got = chunk_summarize(&c), want = tu_pack(tu_naive_chunk(&c));
		if (got != want)
			fail_msg("iteration %u: chunk_summarize %#" PRIx64
			         " (start %u max %u end %u), "
			         "want %#" PRIx64 " (start %u max %u end %u)",
			         iter, got, sum_start(got), sum_max(got), sum_end(got), want,
			         sum_start(want), sum_max(want), sum_end(want));
	}
}

/* ---- chunk_find ---------------------------------------------------------------- */

/* Run starts worth testing for a run of n: every word edge and its
 * neighbours, and the start that makes the run end at page 511. */
static unsigned edge_starts(unsigned n, unsigned *out)
{
	unsigned k = 0;
	for (unsigned w = 0; w <= PA_CHUNK_WORDS; w++) {
		for (int d = -1; d <= 1; d++) {
			int s = (int)(w * 64) + d;
			if (s >= 0 && (unsigned)s + n <= PA_CHUNK_PAGES)
				out[k++] = (unsigned)s;
		}
	}
	out[k++] = PA_CHUNK_PAGES - n;
	return k;
}

/* Only [s, s+n) free: found at s for n and every shorter length; n + 1 is
 * not found; *first_free is s either way. */
static void test_find_every_length_at_every_word_edge(void **state)
{
	(void)state;
	struct pa_chunk c;
	unsigned starts[3 * (PA_CHUNK_WORDS + 1) + 1];
	for (unsigned n = 1; n <= PA_CHUNK_PAGES; n++) {
		unsigned ns = edge_starts(n, starts);
		for (unsigned k = 0; k < ns; k++) {
			unsigned s = starts[k], ff = 12345;
			struct prange r[] = {{s, n}, {0, 0}};
			set_only_free(&c, r);
			if (chunk_find(&c, n, 0, &ff) != s || ff != s)
				fail_msg(
				    "only [%u, %u) free: find(%u) = %u, first_free %u; want %u", s,
				    s + n, n, chunk_find(&c, n, 0, &ff), ff, s);
			TU_EQ(chunk_find(&c, 1, 0, &ff), s);
			TU_EQ(ff, s);
			if (n > 2) {
				TU_EQ(chunk_find(&c, n - 1, 0, &ff), s);
				TU_EQ(ff, s);
			}
			/* Starting the search at the run itself. */
			TU_EQ(chunk_find(&c, n, s, &ff), s);
			TU_EQ(ff, s);
			if (n < PA_CHUNK_PAGES) {
				ff = 12345;
				TU_EQ(chunk_find(&c, n + 1, 0, &ff), CHUNK_NOT_FOUND);
				TU_EQ(ff, s);
			}
		}
	}
}

/* A run one page short just below the real one (separated by a used page)
 * must be passed over, but it is the first free page. */
static void test_find_skips_shorter_run_below(void **state)
{
	(void)state;
	struct pa_chunk c;
	static const unsigned lengths[] = {2, 3, 8, 31, 63, 64, 65, 66, 127, 128, 129, 200, 255};
	for (size_t li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++) {
		unsigned n = lengths[li];
		for (unsigned s = 0; s + (n - 1) + 1 + n <= PA_CHUNK_PAGES; s += 7) {
			unsigned real = s + n, ff = 0;
			struct prange r[] = {{s, n - 1}, {real, n}, {0, 0}};
			set_only_free(&c, r);
			TU_EQ(chunk_find(&c, n, 0, &ff), real);
			TU_EQ(ff, s);
		}
	}
}

struct find_case {
	const char *name;
	struct prange used[6];
	unsigned npages, search_idx;
	unsigned want, want_first_free;
};

static const struct find_case find_cases[] = {
    {"empty chunk, 1 page", {{0, 0}}, 1, 0, 0, 0},
    {"empty chunk, whole chunk", {{0, 0}}, 512, 0, 0, 0},
    {"empty chunk, 511 from page 1 (page 0 used)", {{0, 1}}, 511, 1, 1, 1},
    {"full chunk", {{0, 512}}, 1, 0, CHUNK_NOT_FOUND, CHUNK_NOT_FOUND},
    {"full chunk, 64 pages", {{0, 512}}, 64, 0, CHUNK_NOT_FOUND, CHUNK_NOT_FOUND},
    {"full chunk, 65 pages", {{0, 512}}, 65, 0, CHUNK_NOT_FOUND, CHUNK_NOT_FOUND},
    {"only page 511 free, 1", {{0, 511}}, 1, 0, 511, 511},
    {"only page 511 free, 2", {{0, 511}}, 2, 0, CHUNK_NOT_FOUND, 511},
    {"only page 511 free, searched from 300", {{0, 511}}, 1, 300, 511, 511},
    {"search_idx mid-word skips used low bits", {{0, 70}}, 3, 70, 70, 70},
    {"search_idx at a word edge", {{0, 128}}, 64, 128, 128, 128},
    {"64 pages across a word edge from search_idx 10", {{0, 10}}, 64, 10, 10, 10},
    {"63 free then a used page: 64 found after it", {{0, 10}, {73, 1}}, 64, 10, 74, 10},
    {"some free but no 64", {{0, 32}, {64, 32}, {100, 412}}, 64, 0, CHUNK_NOT_FOUND, 32},
    {"exact fit 1 in the middle", {{0, 253}, {254, 258}}, 1, 0, 253, 253},
    {"exact fit 2 in the middle", {{0, 253}, {255, 257}}, 2, 0, 253, 253},
    {"exact fit 5 in the middle", {{0, 253}, {258, 254}}, 5, 0, 253, 253},
    {"exact fit 65 in the middle", {{0, 225}, {290, 222}}, 65, 0, 225, 225},
    {"161 after a short gap", {{0, 185}, {331, 1}}, 161, 0, 332, 185},
    {"run ending at 511 across four words", {{0, 320}}, 192, 0, 320, 320},
    {"run of 130 from the top of word 1", {{0, 127}, {257, 255}}, 130, 0, 127, 127},
    {"130 misses by one page", {{0, 127}, {256, 256}}, 130, 0, CHUNK_NOT_FOUND, 127},
};

static void test_find_table(void **state)
{
	(void)state;
	struct pa_chunk c;
	for (size_t k = 0; k < sizeof(find_cases) / sizeof(find_cases[0]); k++) {
		const struct find_case *fc = &find_cases[k];
		tu_case = fc->name;
		memset(&c, 0, sizeof(c));
		set_used(&c, fc->used);
		unsigned ff = 12345;
		TU_EQ(chunk_find(&c, fc->npages, fc->search_idx, &ff), fc->want);
		TU_EQ(ff, fc->want_first_free);
	}
	tu_case = "";
}

/* Allocating with find + alloc_range from an empty chunk packs runs tightly:
 * the sequence of hits is exact. */
static void test_find_then_alloc_sequences(void **state)
{
	(void)state;
	static const unsigned sizes[] = {1, 2, 5, 64, 65, 100, 511, 512};
	struct pa_chunk c;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		unsigned n = sizes[k], ff;
		memset(&c, 0, sizeof(c));
		for (unsigned i = 0; i < PA_CHUNK_PAGES / n; i++) {
			TU_EQ(chunk_find(&c, n, 0, &ff), i * n);
			chunk_alloc_range(&c, i * n, n);
		}
		TU_EQ(chunk_find(&c, n, 0, &ff), CHUNK_NOT_FOUND);
		unsigned left = PA_CHUNK_PAGES % n;
		TU_EQ(ff, left ? PA_CHUNK_PAGES - left : CHUNK_NOT_FOUND);
		TU_EQ(chunk_count_alloc(&c, 0, PA_CHUNK_PAGES), PA_CHUNK_PAGES - left);
	}
}

/* Random chunks, random lengths, random legal search_idx (every page below
 * it used): position and *first_free match the page-by-page reference. */
static void test_find_matches_reference_on_random_chunks(void **state)
{
	(void)state;
	uint64_t seed = 0x9216d5d98979fb1bull;
	struct pa_chunk c;
	memset(&c, 0, sizeof(c));
	for (unsigned iter = 0; iter < 20000; iter++) {
		for (unsigned w = 0; w < PA_CHUNK_WORDS; w++) {
			uint64_t r = tu_xorshift(&seed);
			switch (tu_xorshift(&seed) % 5) {
			case 0:
				c.alloc[w] = 0;
				break;
			case 1:
				c.alloc[w] = ~(uint64_t)0;
				break;
			case 2:
				c.alloc[w] = r;
				break;
			case 3:
				c.alloc[w] = r & tu_xorshift(&seed) & tu_xorshift(&seed);
				break;
			default:
				c.alloc[w] = (uint64_t)1 << (r % 64);
				break;
			}
		}
		unsigned search = (unsigned)(tu_xorshift(&seed) % 3 ? 0 : tu_xorshift(&seed) % 512);
		for (unsigned i = 0; i < search; i++)
			c.alloc[i / 64] |= (uint64_t)1 << (i % 64);
		unsigned n;
		switch (tu_xorshift(&seed) % 4) {
		case 0:
			n = 1 + (unsigned)(tu_xorshift(&seed) % 8);
			break;
		case 1:
			n = 1 + (unsigned)(tu_xorshift(&seed) % 64);
			break;
		case 2:
			n = 60 + (unsigned)(tu_xorshift(&seed) % 80);
			break;
		default:
			n = 1 + (unsigned)(tu_xorshift(&seed) % 512);
			break;
		}
		unsigned ff, got = chunk_find(&c, n, search, &ff);
		unsigned want = naive_find(&c, n, search), want_ff = naive_first_free(&c, search);
		if (got != want || ff != want_ff)
			fail_msg("iteration %u: find(%u, from %u) = %u, first_free %u; want %u, %u",
			         iter, n, search, got, ff, want, want_ff);
	}
}

/* ---- alloc_range, free_range, counts ---------------------------------------------- */

static void test_alloc_range_returns_scavenged_count_and_clears_scav(void **state)
{
	(void)state;
	struct pa_chunk c;
	memset(&c, 0, sizeof(c));
	/* Pages 0, 2-3 and 60-69 released. */
	c.scav[0] = 0x1 | 0xc | (0x3ull << 60 | 0xfull << 60);
	c.scav[1] = 0x3f;
	TU_EQ(chunk_count_scav(&c, 0, PA_CHUNK_PAGES), 1 + 2 + 4 + 6);
	TU_EQ(chunk_alloc_range(&c, 0, 1), 1);
	TU_EQ(chunk_alloc_range(&c, 1, 1), 0);
	TU_EQ(chunk_alloc_range(&c, 2, 2), 2);
	TU_EQ(chunk_alloc_range(&c, 62, 4), 4); /* 62, 63 | 64, 65 across the word edge */
	TU_EQ(c.alloc[0], 0xfull | 0x3ull << 62);
	TU_EQ(c.alloc[1], 0x3);
	/* Taken pages lose their scav bits; the others keep theirs. */
	TU_EQ(c.scav[0], 0x3ull << 60);
	TU_EQ(c.scav[1], 0x3c);
	TU_EQ(chunk_count_scav(&c, 0, PA_CHUNK_PAGES), 6);
	TU_EQ(chunk_count_alloc(&c, 0, PA_CHUNK_PAGES), 8);
	TU_EQ(chunk_count_alloc(&c, 60, 10), 4);
	TU_EQ(chunk_count_scav(&c, 60, 10), 6);
}

static void test_alloc_range_whole_chunk_all_released(void **state)
{
	(void)state;
	struct pa_chunk c;
	memset(&c, 0, sizeof(c));
	memset(c.scav, 0xff, sizeof(c.scav));
	TU_EQ(chunk_alloc_range(&c, 0, PA_CHUNK_PAGES), PA_CHUNK_PAGES);
	for (unsigned w = 0; w < PA_CHUNK_WORDS; w++) {
		TU_EQ(c.alloc[w], ~(uint64_t)0);
		TU_EQ(c.scav[w], 0);
	}
	TU_EQ(chunk_summarize(&c), 0);
	/* Freeing leaves the pages resident: scav stays clear. */
	chunk_mark_free(&c, 0, PA_CHUNK_PAGES);
	for (unsigned w = 0; w < PA_CHUNK_WORDS; w++) {
		TU_EQ(c.alloc[w], 0);
		TU_EQ(c.scav[w], 0);
	}
	TU_EQ(chunk_summarize(&c), sum_free(PA_CHUNK_PAGES_SHIFT));
}

static void test_alloc_range_across_several_words_ending_at_511(void **state)
{
	(void)state;
	struct pa_chunk c;
	memset(&c, 0, sizeof(c));
	memset(c.scav, 0xff, sizeof(c.scav));
	TU_EQ(chunk_alloc_range(&c, 511 - 192, 193), 193);
	TU_EQ(c.alloc[4], (uint64_t)1 << 63);
	TU_EQ(c.alloc[5], ~(uint64_t)0);
	TU_EQ(c.alloc[7], ~(uint64_t)0);
	TU_EQ(c.alloc[3], 0);
	TU_EQ(chunk_count_scav(&c, 0, PA_CHUNK_PAGES), 512 - 193);
	TU_EQ(chunk_summarize(&c), triple(319, 319, 0));
	TU_EQ(chunk_alloc_range(&c, 0, 319), 319);
	TU_EQ(chunk_summarize(&c), 0);
	chunk_mark_free(&c, 320, 100);
	TU_EQ(chunk_summarize(&c), triple(0, 100, 0));
	TU_EQ(chunk_count_alloc(&c, 0, PA_CHUNK_PAGES), 412);
	TU_EQ(chunk_count_scav(&c, 0, PA_CHUNK_PAGES), 0);
	unsigned ff;
	TU_EQ(chunk_find(&c, 100, 0, &ff), 320);
	TU_EQ(ff, 320);
	TU_EQ(chunk_find(&c, 101, 0, &ff), CHUNK_NOT_FOUND);
	TU_EQ(ff, 320);
}

/* The counting helpers on word edges. */
static void test_count_alloc_and_scav_ranges(void **state)
{
	(void)state;
	struct pa_chunk c;
	memset(&c, 0, sizeof(c));
	struct prange r[] = {{0, 111}, {0, 0}};
	set_used(&c, r);
	TU_EQ(chunk_count_alloc(&c, 0, 1), 1);
	TU_EQ(chunk_count_alloc(&c, 110, 2), 1);
	TU_EQ(chunk_count_alloc(&c, 99, 50), 12);
	TU_EQ(chunk_count_alloc(&c, 111, 1), 0);
	TU_EQ(chunk_count_alloc(&c, 256, 256), 0);
	TU_EQ(chunk_count_alloc(&c, 0, 512), 111);
	memset(c.scav, 0xff, sizeof(c.scav));
	TU_EQ(chunk_count_scav(&c, 63, 2), 2);
	TU_EQ(chunk_count_scav(&c, 0, 512), 512);
	TU_EQ(chunk_count_scav(&c, 511, 1), 1);
}

/* ---- incremental summaries ------------------------------------------------------- */

/* A random bitmap: per word all free, all used, sparse, dense or random. */
static void random_alloc_words(struct pa_chunk *c, uint64_t *seed)
{
	for (unsigned w = 0; w < PA_CHUNK_WORDS; w++) {
		uint64_t r = tu_xorshift(seed);
		switch (tu_xorshift(seed) % 6) {
		case 0:
			c->alloc[w] = 0;
			break;
		case 1:
			c->alloc[w] = ~(uint64_t)0;
			break;
		case 2:
			c->alloc[w] = r & tu_xorshift(seed) & tu_xorshift(seed);
			break;
		case 3:
			c->alloc[w] = r | tu_xorshift(seed) | tu_xorshift(seed);
			break;
		case 4:
			c->alloc[w] = (uint64_t)1 << (r % 64) | (uint64_t)1 << ((r >> 8) % 64);
			break;
		default:
			c->alloc[w] = r;
			break;
		}
	}
}

/* The maximal run of pages in state `u` (1 used, 0 free) around page p. */
static void run_of(const struct pa_chunk *c, unsigned p, int u, unsigned *lo, unsigned *hi)
{
	*lo = p;
	while (*lo > 0 && used(c, *lo - 1) == u)
		(*lo)--;
	*hi = p + 1;
	while (*hi < PA_CHUNK_PAGES && used(c, *hi) == u)
		(*hi)++;
}

/* Check one incremental step: mark [a, a+n) (all in state !alloc) and
 * compare the incremental summary and run with the full rescan. */
static void check_step(struct pa_chunk *c, unsigned a, unsigned n, int alloc, const char *what)
{
	pa_sum old = chunk_summarize(c), got;
	struct chunk_run run;
	unsigned scav = 0;
	if (alloc) {
		unsigned lo, hi;
		run_of(c, a, 0, &lo, &hi);
		TU_EQ(chunk_mark_used(c, a, n, &scav), 0);
		got = chunk_sum_after_alloc(c, old, a, n, &run);
		TU_EQ(run.len, hi - lo);
		TU_EQ(run.lo, lo == 0);
		TU_EQ(run.hi, hi == PA_CHUNK_PAGES);
	} else {
		TU_EQ(chunk_mark_free(c, a, n), 0);
		got = chunk_sum_after_free(c, old, a, n, &run);
		unsigned lo, hi;
		run_of(c, a, 0, &lo, &hi);
		TU_EQ(run.len, hi - lo);
		TU_EQ(run.lo, lo == 0);
		TU_EQ(run.hi, hi == PA_CHUNK_PAGES);
	}
	pa_sum want = chunk_summarize(c);
	if (got != want)
		fail_msg("%s %s [%u, %u): incremental %#" PRIx64 " (start %u max %u end %u), "
		         "rescan %#" PRIx64 " (start %u max %u end %u)",
		         what, alloc ? "alloc" : "free", a, a + n, got, sum_start(got),
		         sum_max(got), sum_end(got), want, sum_start(want), sum_max(want),
		         sum_end(want));
	TU_EQ(want, tu_pack(tu_naive_chunk(c)));
}

/* Exact values: the summary and the run for hand-picked changes. */
static void test_incremental_table(void **state)
{
	(void)state;
	struct pa_chunk c;
	struct chunk_run run;
	unsigned scav = 0;

	memset(&c, 0, sizeof(c));
	chunk_mark_used(&c, 0, 1, &scav);
	TU_EQ(chunk_sum_after_alloc(&c, sum_free(PA_CHUNK_PAGES_SHIFT), 0, 1, &run),
	      triple(0, 511, 511));
	TU_EQ(run.len, 512);
	TU_EQ(run.lo, 1);
	TU_EQ(run.hi, 1);

	/* Page 300 of [0, 511) free: start and max cut, end unchanged (0). */
	struct prange f1[] = {{0, 511}, {0, 0}};
	set_only_free(&c, f1);
	chunk_mark_used(&c, 300, 1, &scav);
	TU_EQ(chunk_sum_after_alloc(&c, triple(511, 511, 0), 300, 1, &run), triple(300, 300, 0));
	TU_EQ(run.len, 511);
	TU_EQ(run.lo, 1);
	TU_EQ(run.hi, 0);

	/* Two maxima of 5: cutting one keeps max 5 (the other still stands). */
	struct prange f2[] = {{35, 2}, {40, 5}, {100, 5}, {0, 0}};
	set_only_free(&c, f2);
	chunk_mark_used(&c, 42, 1, &scav);
	TU_EQ(chunk_sum_after_alloc(&c, triple(0, 5, 0), 42, 1, &run), triple(0, 5, 0));
	TU_EQ(run.len, 5);
	/* Cutting the other as well drops max to the longest piece, 2. */
	chunk_mark_used(&c, 102, 1, &scav);
	TU_EQ(chunk_sum_after_alloc(&c, triple(0, 5, 0), 102, 1, &run), triple(0, 2, 0));

	/* One of several runs of max (2) length: the rescan finds the others. */
	chunk_mark_used(&c, 35, 1, &scav);
	TU_EQ(chunk_sum_after_alloc(&c, triple(0, 2, 0), 35, 1, &run), triple(0, 2, 0));
	TU_EQ(run.len, 2);
	/* A run shorter than max: max stays, no rescan needed. */
	chunk_mark_used(&c, 36, 1, &scav);
	TU_EQ(chunk_sum_after_alloc(&c, triple(0, 2, 0), 36, 1, &run), triple(0, 2, 0));
	TU_EQ(run.len, 1);

	/* Freeing page 200 of a full chunk; then 201-263 across a word edge
	 * joins it; then the rest of the top makes it the end. */
	memset(c.alloc, 0xff, sizeof(c.alloc));
	TU_EQ(chunk_mark_free(&c, 200, 1), 0);
	TU_EQ(chunk_sum_after_free(&c, 0, 200, 1, &run), triple(0, 1, 0));
	TU_EQ(run.len, 1);
	TU_EQ(chunk_mark_free(&c, 201, 63), 0);
	TU_EQ(chunk_sum_after_free(&c, triple(0, 1, 0), 201, 63, &run), triple(0, 64, 0));
	TU_EQ(run.len, 64);
	TU_EQ(run.hi, 0);
	TU_EQ(chunk_mark_free(&c, 264, 248), 0);
	TU_EQ(chunk_sum_after_free(&c, triple(0, 64, 0), 264, 248, &run), triple(0, 312, 312));
	TU_EQ(run.len, 312);
	TU_EQ(run.lo, 0);
	TU_EQ(run.hi, 1);
	/* And the bottom: the whole chunk is free. */
	TU_EQ(chunk_mark_free(&c, 0, 200), 0);
	TU_EQ(chunk_sum_after_free(&c, triple(0, 312, 312), 0, 200, &run),
	      sum_free(PA_CHUNK_PAGES_SHIFT));
	TU_EQ(run.len, 512);

	/* The clash masks report pages already in the target state. */
	TU_EQ(chunk_mark_free(&c, 10, 1), (uint64_t)1 << 10);
	memset(&c, 0, sizeof(c));
	c.scav[1] = 0xf0;
	scav = 0;
	TU_EQ(chunk_mark_used(&c, 62, 8, &scav), 0);
	TU_EQ(scav, 2);
	TU_EQ(c.scav[1], 0xc0);
	TU_EQ(chunk_mark_used(&c, 69, 2, &scav), (uint64_t)1 << 5);
	TU_EQ(scav, 3);
}

/* Every range ending on or next to a word edge, in chunks made of free and
 * used runs that straddle the edges: alloc then free it back. */
static void test_incremental_every_word_edge(void **state)
{
	(void)state;
	static const struct prange layouts[][6] = {
	    {{0, 512}, {0, 0}},
	    {{0, 63}, {65, 62}, {128, 129}, {300, 212}, {0, 0}},
	    {{1, 126}, {129, 255}, {386, 125}, {0, 0}},
	    {{0, 64}, {127, 3}, {191, 130}, {448, 64}, {0, 0}},
	};
	struct pa_chunk c;
	unsigned edges[3 * (PA_CHUNK_WORDS + 1)], ne = 0;
	for (unsigned w = 0; w <= PA_CHUNK_WORDS; w++)
		for (int d = -1; d <= 1; d++)
			if ((int)(w * 64) + d >= 0 && (int)(w * 64) + d <= (int)PA_CHUNK_PAGES)
				edges[ne++] = (unsigned)((int)(w * 64) + d);
	for (size_t k = 0; k < sizeof(layouts) / sizeof(layouts[0]); k++) {
		for (unsigned x = 0; x < ne; x++) {
			for (unsigned y = x + 1; y < ne; y++) {
				unsigned a = edges[x], b = edges[y], lo, hi;
				set_only_free(&c, layouts[k]);
				if (used(&c, a))
					continue;
				run_of(&c, a, 0, &lo, &hi);
				if (b > hi)
					continue;
				check_step(&c, a, b - a, 1, "edge");
				check_step(&c, a, b - a, 0, "edge");
			}
		}
	}
}

/* Random chunks: allocate a random piece of a random free run (often
 * touching its ends), free a random piece of a random used run; 10^5
 * steps, each checked against the rescan. */
static void test_incremental_matches_rescan_on_random_chunks(void **state)
{
	(void)state;
	uint64_t seed = 0x6a09e667f3bcc908ull;
	struct pa_chunk c;
	memset(&c, 0, sizeof(c));
	for (unsigned iter = 0; iter < 2000; iter++) {
		random_alloc_words(&c, &seed);
		for (unsigned step = 0; step < 50; step++) {
			unsigned p = (unsigned)(tu_xorshift(&seed) % PA_CHUNK_PAGES), lo, hi;
			int alloc = !used(&c, p);
			run_of(&c, p, !alloc, &lo, &hi);
			unsigned a, b;
			switch (tu_xorshift(&seed) % 4) {
			case 0: /* the whole run */
				a = lo;
				b = hi;
				break;
			case 1: /* from its start */
				a = lo;
				b = lo + 1 + (unsigned)(tu_xorshift(&seed) % (hi - lo));
				break;
			case 2: /* to its end */
				a = hi - 1 - (unsigned)(tu_xorshift(&seed) % (hi - lo));
				b = hi;
				break;
			default: /* somewhere inside */
				a = lo + (unsigned)(tu_xorshift(&seed) % (hi - lo));
				b = a + 1 + (unsigned)(tu_xorshift(&seed) % (hi - a));
				break;
			}
			check_step(&c, a, b - a, alloc, "random");
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(test_summarize_table),
	    TU_TEST(test_summarize_matches_reference_on_random_chunks),
	    TU_TEST(test_find_every_length_at_every_word_edge),
	    TU_TEST(test_find_skips_shorter_run_below),
	    TU_TEST(test_find_table),
	    TU_TEST(test_find_then_alloc_sequences),
	    TU_TEST(test_find_matches_reference_on_random_chunks),
	    TU_TEST(test_alloc_range_returns_scavenged_count_and_clears_scav),
	    TU_TEST(test_alloc_range_whole_chunk_all_released),
	    TU_TEST(test_alloc_range_across_several_words_ending_at_511),
	    TU_TEST(test_count_alloc_and_scav_ranges),
	    TU_TEST(test_incremental_table),
	    TU_TEST(test_incremental_every_word_edge),
	    TU_TEST(test_incremental_matches_rescan_on_random_chunks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
