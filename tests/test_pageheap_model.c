/*
 * test_pageheap_model.c — a randomized model test of the page heap.
 *
 * At least 10^6 operations (PA_TEST_SCALE scales them; PA_TEST_SEED picks
 * another seed) on a metadata-only heap of a few discontiguous ranges — one
 * across a 64-chunk boundary, one across a level-0 boundary a terabyte up,
 * one across a 4096-chunk boundary twenty terabytes up, one a chunk above
 * the first — which grows twice while live: once adjacent to a range (they
 * merge), once into the one-chunk gap between two ranges (three merge).
 *
 * The reference is a plain bitmap over every chunk that is or will be heap,
 * in address order, with first fit done page run by page run: the lowest
 * run of n free pages that does not cross a gap between ranges. Every
 * allocation must return exactly the reference's address (0 when it finds
 * nothing) and exactly the number of released pages the reference counts in
 * that run; every free is checked with pageheap_check before and after.
 * Allocation sizes are mostly 1-16 pages, some up to 128, a few up to 1128
 * (more than two chunks); phases fill the heap until allocations fail and
 * drain it to 40%, so exhaustion is exercised over and over. Every 1000
 * operations and at the end: the heap's bitmaps equal the reference's, and
 * every summary at every level equals one recomputed from the bitmaps
 * (tu_check, which also runs pageheap_verify).
 */
#include "testutil.h"

/* ---- the heap's geometry ---------------------------------------------------------- */

struct model_range {
	size_t chunk, n; /* relative to TU_BASE */
	int grown_at;    /* 0: at the start; 1: a third of the way; 2: two thirds */
};

static const struct model_range model_ranges[] = {
    {60, 100, 0},                       /* across the 64- and 128-chunk edges */
    {160, 1, 2},                        /* fills the gap: 60..201 become one */
    {161, 30, 0},                       /* one chunk above the first range */
    {191, 10, 1},                       /* adjacent to the previous: merges */
    {((size_t)1 << 18) - 40, 100, 0},   /* across a level-0 edge, ~1 TiB up */
    {((size_t)5 << 20) + 4090, 100, 0}, /* across a 4096-chunk edge, ~20 TiB up */
};
#define NRANGES (sizeof(model_ranges) / sizeof(model_ranges[0]))
#define MAX_SLOTS 341

/* ---- the reference -------------------------------------------------------------------- */

/* One slot per chunk that is or will be heap, in address order. A run may
 * continue from slot s-1 into slot s only if both are present and their
 * chunks are neighbours. Global page index g = slot * 512 + page. */
struct ref {
	size_t nslots;
	size_t chunk[MAX_SLOTS];
	int present[MAX_SLOTS];
	uint64_t used[MAX_SLOTS][PA_CHUNK_WORDS];
	uint64_t released[MAX_SLOTS][PA_CHUNK_WORDS];
	size_t low;   /* no free page below this global index */
	size_t inuse; /* pages in use */
};

static uintptr_t ref_addr(const struct ref *r, size_t g)
{
	return TU_PAGE(r->chunk[g / PA_CHUNK_PAGES], g % PA_CHUNK_PAGES);
}

static size_t ref_total(const struct ref *r)
{
	return r->nslots * PA_CHUNK_PAGES;
}

static void ref_init(struct ref *r)
{
	memset(r, 0, sizeof(*r));
	/* Slots sorted by chunk (model_ranges is sorted). */
	for (size_t i = 0; i < NRANGES; i++)
		for (size_t c = 0; c < model_ranges[i].n; c++) {
			assert_true(r->nslots < MAX_SLOTS);
			if (r->nslots > 0)
				assert_true(r->chunk[r->nslots - 1] < model_ranges[i].chunk + c);
			r->chunk[r->nslots++] = model_ranges[i].chunk + c;
		}
	r->low = ref_total(r);
}

/* The pages of a newly grown range: present, free and released. */
static void ref_grow(struct ref *r, const struct model_range *m)
{
	for (size_t s = 0; s < r->nslots; s++) {
		if (r->chunk[s] < m->chunk || r->chunk[s] >= m->chunk + m->n)
			continue;
		r->present[s] = 1;
		memset(r->used[s], 0, sizeof(r->used[s]));
		memset(r->released[s], 0xff, sizeof(r->released[s]));
		if (s * PA_CHUNK_PAGES < r->low)
			r->low = s * PA_CHUNK_PAGES;
	}
}

/* First fit: global index of the lowest run of n free pages, or SIZE_MAX. */
static size_t ref_find(struct ref *r, size_t n)
{
	size_t run = 0, run_start = 0, first_free = SIZE_MAX;
	size_t s0 = r->low / PA_CHUNK_PAGES;
	for (size_t s = s0; s < r->nslots; s++) {
		if (!r->present[s]) {
			run = 0;
			continue;
		}
		if (s == 0 || !r->present[s - 1] || r->chunk[s - 1] + 1 != r->chunk[s])
			run = 0;
		unsigned w0 = s == s0 ? (unsigned)(r->low % PA_CHUNK_PAGES) / 64 : 0;
		for (unsigned w = w0; w < PA_CHUNK_WORDS; w++) {
			uint64_t u = r->used[s][w];
			size_t pos = s * PA_CHUNK_PAGES + w * 64;
			if (u == ~(uint64_t)0) {
				run = 0;
				continue;
			}
			if (first_free == SIZE_MAX)
				first_free = pos + (size_t)__builtin_ctzll(~u);
			if (u == 0) {
				if (run == 0)
					run_start = pos;
				run += 64;
				if (run >= n)
					goto found;
				continue;
			}
			/* Free pages at the bottom extend the current run. */
			size_t lead = (size_t)__builtin_ctzll(u);
			if (lead > 0) {
				if (run == 0)
					run_start = pos;
				run += lead;
				if (run >= n)
					goto found;
			}
			/* A run strictly inside the word: bit i of c is set iff pages
			 * i .. i+n-1 of the word are free. */
			if (n < 64) {
				uint64_t c = ~u;
				for (size_t k = 1; k < n && c != 0; k++)
					c &= ~u >> k;
				if (c != 0) {
					run_start = pos + (size_t)__builtin_ctzll(c);
					goto found;
				}
			}
			/* Free pages at the top start a new run. */
			run = (size_t)__builtin_clzll(u);
			run_start = pos + 64 - run;
		}
	}
	/* Nothing fits; pages below the first free one are still all in use. */
	r->low = first_free == SIZE_MAX ? ref_total(r) : first_free;
	return SIZE_MAX;
found:
	r->low = first_free;
	return run_start;
}

static int ref_bit(const uint64_t (*m)[PA_CHUNK_WORDS], size_t g)
{
	return (int)((m[g / PA_CHUNK_PAGES][(g % PA_CHUNK_PAGES) / 64] >> (g % 64)) & 1);
}

static void ref_set(uint64_t (*m)[PA_CHUNK_WORDS], size_t g, int v)
{
	uint64_t bit = (uint64_t)1 << (g % 64);
	uint64_t *w = &m[g / PA_CHUNK_PAGES][(g % PA_CHUNK_PAGES) / 64];
	*w = v ? *w | bit : *w & ~bit;
}

/* Mark [g, g+n) in use; returns how many of them were released. */
static size_t ref_take(struct ref *r, size_t g, size_t n)
{
	size_t released = 0;
	for (size_t i = g; i < g + n; i++) {
		assert_false(ref_bit(r->used, i));
		released += (size_t)ref_bit(r->released, i);
		ref_set(r->used, i, 1);
		ref_set(r->released, i, 0);
	}
	r->inuse += n;
	return released;
}

static void ref_give(struct ref *r, size_t g, size_t n)
{
	for (size_t i = g; i < g + n; i++) {
		assert_true(ref_bit(r->used, i));
		ref_set(r->used, i, 0);
	}
	r->inuse -= n;
	if (g < r->low)
		r->low = g;
}

/* ---- the comparison ------------------------------------------------------------------- */

static void compare_bitmaps(struct tu_heap *t, const struct ref *r, size_t op)
{
	for (size_t s = 0; s < r->nslots; s++) {
		if (!r->present[s])
			continue;
		const struct pa_chunk *c = pageheap_chunk(&t->h, TU_CHUNK(r->chunk[s]));
		for (unsigned w = 0; w < PA_CHUNK_WORDS; w++) {
			if (c->alloc[w] != r->used[s][w] || c->scav[w] != r->released[s][w])
				fail_msg("op %zu: chunk %zu word %u: alloc %#" PRIx64
				         " scav %#" PRIx64 ", reference %#" PRIx64 " %#" PRIx64,
				         op, r->chunk[s], w, c->alloc[w], c->scav[w], r->used[s][w],
				         r->released[s][w]);
		}
	}
	TU_EQ(t->h.inuse_pages, r->inuse);
}

/* ---- the test ------------------------------------------------------------------------- */

struct live {
	size_t g, n;
};

static size_t pick_size(uint64_t *seed)
{
	uint64_t x = tu_xorshift(seed) % 100;
	if (x < 80)
		return 1 + (size_t)(tu_xorshift(seed) % 16);
	if (x < 96)
		return 17 + (size_t)(tu_xorshift(seed) % 112);
	return 129 + (size_t)(tu_xorshift(seed) % 1000);
}

static void test_random_ops_match_first_fit_bitmap_model(void **state)
{
	(void)state;
	uint64_t seed = 0x70616765616c6c6full; /* "pagealloc" */
	const char *env_seed = getenv("PA_TEST_SEED");
	if (env_seed != NULL)
		seed = strtoull(env_seed, NULL, 0);
	if (seed == 0)
		seed = 1;
	size_t ops = (size_t)(1000000.0 * tu_scale());
	if (ops < 3000)
		ops = 3000;
	const uint64_t seed0 = seed;
	print_message("model test: seed %#" PRIx64 ", %zu operations\n", seed, ops);

	struct ref *r = calloc(1, sizeof(*r));
	size_t live_cap = MAX_SLOTS * PA_CHUNK_PAGES;
	struct live *live = calloc(live_cap, sizeof(*live));
	assert_non_null(r);
	assert_non_null(live);
	size_t nlive = 0;
	ref_init(r);

	struct tu_heap *t = tu_heap_new();
	/* Grow the initial ranges out of address order. */
	static const size_t order[] = {5, 2, 0, 4};
	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
		const struct model_range *m = &model_ranges[order[k]];
		assert_int_equal(m->grown_at, 0);
		tu_grow(t, TU_CHUNK(m->chunk), m->n);
		ref_grow(r, m);
	}
	tu_check(t);

	int filling = 1;
	size_t failures = 0, allocs = 0, frees = 0, partial = 0, phases = 0, big = 0, failed = 0;
	for (size_t op = 1; op <= ops; op++) {
		for (size_t i = 0; i < NRANGES; i++) {
			const struct model_range *m = &model_ranges[i];
			if (m->grown_at != 0 && op == ops * (size_t)m->grown_at / 3) {
				tu_grow(t, TU_CHUNK(m->chunk), m->n);
				ref_grow(r, m);
				tu_check(t);
			}
		}
		size_t present_pages = t->h.mapped_pages;
		if (filling && (failures >= 64 || r->inuse * 100 > present_pages * 97)) {
			filling = 0;
			phases++;
		} else if (!filling && r->inuse * 100 < present_pages * 40) {
			filling = 1;
			failures = 0;
		}
		uint64_t x = tu_xorshift(&seed) % 100;
		int do_alloc = nlive == 0 || x < (filling ? 65u : 35u);
		if (do_alloc) {
			size_t n = pick_size(&seed), scav = 12345;
			size_t g = ref_find(r, n);
			uintptr_t want = g == SIZE_MAX ? 0 : ref_addr(r, g);
			uintptr_t got = pageheap_alloc(&t->h, n, &scav);
			if (got != want)
				fail_msg("op %zu (PA_TEST_SEED=%#" PRIx64
				         "): alloc(%zu) = %#" PRIxPTR ", reference %#" PRIxPTR,
				         op, seed0, n, got, want);
			if (g == SIZE_MAX) {
				failures++;
				failed++;
				continue;
			}
			size_t want_scav = ref_take(r, g, n);
			if (scav != want_scav)
				fail_msg("op %zu: alloc(%zu) at %#" PRIxPTR
				         " released %zu, reference %zu",
				         op, n, got, scav, want_scav);
			assert_true(nlive < live_cap);
			live[nlive].g = g;
			live[nlive].n = n;
			nlive++;
			allocs++;
			big += n > 128;
		} else {
			size_t i = (size_t)(tu_xorshift(&seed) % nlive);
			size_t g = live[i].g, n = live[i].n;
			size_t off = 0, k = n;
			if (n > 1 && tu_xorshift(&seed) % 8 == 0) {
				/* Free a sub-run; what is left stays live as one or two pieces. */
				k = 1 + (size_t)(tu_xorshift(&seed) % (n - 1));
				off = (size_t)(tu_xorshift(&seed) % (n - k + 1));
				partial++;
			}
			uintptr_t a = ref_addr(r, g + off);
			TU_EQ(pageheap_check(&t->h, a, k), PA_PAGE_OK);
			pageheap_free(&t->h, a, k);
			TU_EQ(pageheap_check(&t->h, a, k), PA_PAGE_NOT_ALLOCATED);
			ref_give(r, g + off, k);
			live[i] = live[--nlive];
			if (off > 0) {
				live[nlive].g = g;
				live[nlive].n = off;
				nlive++;
			}
			if (off + k < n) {
				live[nlive].g = g + off + k;
				live[nlive].n = n - off - k;
				nlive++;
			}
			frees++;
		}
		if (op % 1000 == 0) {
			compare_bitmaps(t, r, op);
			tu_check(t);
		}
	}
	compare_bitmaps(t, r, ops);
	tu_check(t);
	print_message("model test: %zu allocs (%zu over 128 pages), %zu failed, %zu frees "
	              "(%zu partial), %zu fill phases\n",
	              allocs, big, failed, frees, partial, phases);
	/* The run must have exercised what it claims to. */
	assert_true(phases >= 2);
	assert_true(big > 0 && partial > 0 && failed > 0);

	/* Free everything: the heap is all free again and its summaries say so. */
	for (size_t i = 0; i < nlive; i++) {
		pageheap_free(&t->h, ref_addr(r, live[i].g), live[i].n);
		ref_give(r, live[i].g, live[i].n);
	}
	TU_EQ(t->h.inuse_pages, 0);
	compare_bitmaps(t, r, ops);
	tu_check(t);
	TU_EQ(t->h.ranges.n, 3); /* 60..201, the TiB range, the 20 TiB range */
	tu_heap_free(t);
	free(live);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(test_random_ops_match_first_fit_bitmap_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
