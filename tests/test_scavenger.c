/*
 * test_scavenger.c — what the scavenger releases, in which order, and when.
 *
 * Everything here runs on metadata-only heaps: chunks are grown at fake,
 * chunk-aligned addresses (0x100000000000 and a range 4 TiB above it), pages
 * are never touched, and a release only flips bitmaps (no madvise). Heap
 * states are built from tables in the style of Go's mgcscavenge_test.go: per
 * chunk, the runs that are allocated and the runs that are released; every
 * other page is free and resident.
 *
 *  - chunk_scav_candidate on exact bitmaps: one cmocka test per table row,
 *    named for its edge (Go's TestPallocDataFindScavengeCandidate cases that
 *    apply to 8 KiB heap pages, plus the huge-page policy: a wholly free huge
 *    page is taken whole, a huge page with an allocated page is skipped,
 *    force takes any run);
 *  - scav_release: strictly highest address first, across chunks and across
 *    a gap of terabytes, exactly the requested number of pages;
 *  - scav_step: the free stamp and min_age decide, huge pages stay whole;
 *  - re-allocation reports exactly the released pages it took;
 *  - the memory limit releases the excess synchronously, then counts an
 *    overrun when live memory itself is over;
 *  - one scavenger over two heaps (a NUMA machine's nodes): steps take the
 *    heaps in turn, releases the highest heap first, the limit counts both.
 * The scavenger is built with conf.enabled = 0 (no thread) and hp_pages set
 * by hand, so both huge-page policies run on any machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bits.h"
#include "chunk.h"
#include "config.h"
#include "os.h"
#include "pagealloc.h"
#include "pageheap.h"
#include "scavenger.h"

#define BASE ((uintptr_t)0x100000000000)  /* 16 TiB */
#define FAR (BASE + ((uintptr_t)4 << 40)) /* 4 TiB above BASE */
#define CHUNK(base, i) ((base) + (uintptr_t)(i)*PA_CHUNK_SIZE)
#define PAGE(chunk_base, p) ((chunk_base) + (uintptr_t)(p)*PA_PAGE_SIZE)
#define HP 256u /* a 2 MiB huge page in 8 KiB heap pages */

/* ---- heap states from tables ---------------------------------------------- */

struct run {
	unsigned start, n; /* n == 0 ends a list */
};

#define RUNS 6

struct chunk_spec {
	uintptr_t base;
	uint32_t freed_at; /* heap epoch when its resident free pages were freed */
	struct run alloc[RUNS];
	struct run scav[RUNS]; /* released pages; alloc wins where both say so */
};

enum { PG_RESIDENT, PG_ALLOC, PG_SCAV };

static void page_states(const struct chunk_spec *cs, unsigned char st[PA_CHUNK_PAGES])
{
	memset(st, PG_RESIDENT, PA_CHUNK_PAGES);
	for (const struct run *r = cs->scav; r < cs->scav + RUNS && r->n; r++)
		memset(st + r->start, PG_SCAV, r->n);
	for (const struct run *r = cs->alloc; r < cs->alloc + RUNS && r->n; r++)
		memset(st + r->start, PG_ALLOC, r->n);
}

static void spec_bits(const struct chunk_spec *cs, int state, uint64_t out[PA_CHUNK_WORDS])
{
	unsigned char st[PA_CHUNK_PAGES];
	page_states(cs, st);
	memset(out, 0, PA_CHUNK_WORDS * sizeof(uint64_t));
	for (unsigned p = 0; p < PA_CHUNK_PAGES; p++)
		if (st[p] == state)
			out[p / 64] |= (uint64_t)1 << (p % 64);
}

/*
 * Grow every chunk (fresh chunks are free and released), then make the
 * non-released pages resident by allocating them, and free the ones meant to
 * be free again at epoch freed_at (which stamps the chunk).
 */
static void build(struct pa_pageheap *h, const struct chunk_spec *cs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pageheap_grow_range(h, cs[i].base, PA_CHUNK_PAGES), 0);
	for (size_t i = 0; i < n; i++) {
		unsigned char st[PA_CHUNK_PAGES];
		page_states(&cs[i], st);
		lock_acquire(&h->lock);
		for (unsigned p = 0; p < PA_CHUNK_PAGES;) {
			unsigned q = p;
			while (q < PA_CHUNK_PAGES && st[q] != PG_SCAV)
				q++;
			if (q > p)
				pageheap_alloc_range_locked(h, PAGE(cs[i].base, p), q - p);
			p = q + 1;
		}
		lock_release(&h->lock);
		__atomic_store_n(&h->epoch, cs[i].freed_at, __ATOMIC_RELAXED);
		for (unsigned p = 0; p < PA_CHUNK_PAGES;) {
			unsigned q = p;
			while (q < PA_CHUNK_PAGES && st[q] == PG_RESIDENT)
				q++;
			if (q > p)
				pageheap_free(h, PAGE(cs[i].base, p), q - p);
			p = q + 1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t want[PA_CHUNK_WORDS];
		spec_bits(&cs[i], PG_SCAV, want);
		assert_memory_equal(pageheap_chunk(h, cs[i].base)->scav, want, sizeof(want));
		spec_bits(&cs[i], PG_ALLOC, want);
		assert_memory_equal(pageheap_chunk(h, cs[i].base)->alloc, want, sizeof(want));
	}
	assert_int_equal(pageheap_verify(h), 0);
}

static size_t count_state(const struct chunk_spec *cs, size_t n, int state)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t b[PA_CHUNK_WORDS];
		spec_bits(&cs[i], state, b);
		for (unsigned w = 0; w < PA_CHUNK_WORDS; w++)
			total += bits_popcount(b[w]);
	}
	return total;
}

/* ---- fixture --------------------------------------------------------------- */

struct fixture {
	struct pa_pageheap h;
	struct pa_scavenger s;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	struct pa_pageheap_opts opts = {.metadata_only = 1};
	assert_int_equal(pageheap_init(&f->h, &opts), 0);
	struct pa_scav_config conf = {.enabled = 0, .percent = 1, .delay_ms = 0};
	scav_init(&f->s, &f->h, NULL, &conf);
	f->s.hp_pages = 0;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	pageheap_destroy(&f->h);
	free(f);
	return 0;
}

static size_t chunk_index_of(const struct pa_pageheap *h, uintptr_t addr)
{
	return (addr - h->window_base) >> PA_CHUNK_SHIFT;
}

/* ---- chunk_scav_candidate ------------------------------------------------- */

struct cand_case {
	const char *name;
	struct run alloc[RUNS], scav[RUNS];
	int force;
	unsigned hp_pages, max_pages;
	unsigned want_start, want_n; /* want_n == 0: no candidate */
	unsigned split;              /* huge pages that may be split (not backed whole); 0: none */
};

#define ALL PA_CHUNK_PAGES

/* One row per case. */
/* clang-format off */
static const struct cand_case cand_cases[] = {
    /* Go's edge classes, with 8 KiB heap pages (min = 1). */
    {"all_free_is_one_run", {{0}}, {{0}}, 0, 0, ALL, 0, ALL, 0},
    {"all_scavenged_has_none", {{0}}, {{0, ALL}}, 0, 0, ALL, 0, 0, 0},
    {"none_free_has_none", {{0, ALL}}, {{0}}, 0, 0, ALL, 0, 0, 0},
    {"free_page_0_at_chunk_bottom", {{1, ALL - 1}}, {{0}}, 0, 0, ALL, 0, 1, 0},
    {"free_page_511_at_chunk_top", {{0, ALL - 1}}, {{0}}, 0, 0, ALL, ALL - 1, 1, 0},
    {"pages_0_and_511_free_takes_the_top", {{1, ALL - 2}}, {{0}}, 0, 0, ALL, ALL - 1, 1, 0},
    {"one_free_page", {{0, 40}, {41, ALL - 41}}, {{0}}, 0, 0, ALL, 40, 1, 0},
    {"one_free_page_already_scavenged", {{0, 40}, {41, ALL - 41}}, {{40, 1}}, 0, 0, ALL, 0, 0, 0},
    {"mixed_scavenged_and_resident_pair", {{0, 40}, {42, ALL - 42}}, {{40, 1}}, 0, 0, ALL, 41, 1, 0},
    {"multi_skips_scavenged_top_page", {{0, 63}, {65, 20}, {87, ALL - 87}}, {{86, 1}}, 0, 0, ALL, 85, 1, 0},
    {"bottom_edge_64_with_full", {{64, 64}, {131, ALL - 131}}, {{1, 10}}, 0, 0, 3, 128, 3, 0},
    {"bottom_edge_64_with_pocket", {{64, 62}, {127, 1}, {131, ALL - 131}}, {{1, 10}}, 0, 0, 3, 128, 3, 0},
    /* Runs and words. */
    {"run_straddles_a_64_page_word", {{0, 60}, {70, ALL - 70}}, {{0}}, 0, 0, ALL, 60, 10, 0},
    {"run_spans_whole_words", {{0, 10}, {300, ALL - 300}}, {{0}}, 0, 0, ALL, 10, 290, 0},
    {"run_below_a_full_top_word", {{448, 64}}, {{0}}, 0, 0, ALL, 0, 448, 0},
    {"run_stops_at_a_scavenged_page", {{0}}, {{100, 1}}, 0, 0, ALL, 101, ALL - 101, 0},
    {"run_below_a_scavenged_top", {{0}}, {{500, 12}}, 0, 0, ALL, 0, 500, 0},
    /* max_pages trims from the top: the highest pages go first. */
    {"run_trimmed_from_the_top_by_max", {{0, 10}, {300, ALL - 300}}, {{0}}, 0, 0, 100, 200, 100, 0},
    {"run_exactly_max_long", {{0, 60}, {70, ALL - 70}}, {{0}}, 0, 0, 10, 60, 10, 0},
    {"run_one_longer_than_max", {{0, 60}, {70, ALL - 70}}, {{0}}, 0, 0, 9, 61, 9, 0},
    {"whole_chunk_trimmed_to_half", {{0}}, {{0}}, 0, 0, 256, 256, 256, 0},
    {"whole_chunk_trimmed_to_one_page", {{0}}, {{0}}, 0, 0, 1, ALL - 1, 1, 0},
    {"force_without_huge_pages_is_the_same", {{0, 60}, {70, ALL - 70}}, {{0}}, 1, 0, ALL, 60, 10, 0},
    /* Huge pages (256 heap pages), background policy: whole free huge pages only. */
    {"hp_all_free_takes_the_top_huge_page", {{0}}, {{0}}, 0, HP, ALL, HP, HP, 0},
    {"hp_whole_huge_page_even_if_max_is_one", {{0}}, {{0}}, 0, HP, 1, HP, HP, 0},
    {"hp_preserve_top", {{0, HP}}, {{0}}, 0, HP, 1, HP, HP, 0},
    {"hp_preserve_bottom", {{HP + 2, ALL - HP - 2}}, {{0}}, 0, HP, 3, 0, HP, 0},
    {"hp_partly_scavenged_is_returned_whole", {{0}}, {{300, 100}}, 0, HP, ALL, HP, HP, 0},
    {"hp_one_resident_page_left_is_returned_whole", {{0}}, {{HP, HP - 1}}, 0, HP, ALL, HP, HP, 0},
    {"hp_fully_scavenged_top_is_skipped", {{0}}, {{HP, HP}}, 0, HP, ALL, 0, HP, 0},
    {"hp_both_scavenged_has_none", {{0}}, {{0, ALL}}, 0, HP, ALL, 0, 0, 0},
    {"hp_one_allocated_top_page_skips_the_huge_page", {{ALL - 1, 1}}, {{0}}, 0, HP, ALL, 0, HP, 0},
    {"hp_one_allocated_bottom_page_skips_the_huge_page", {{HP, 1}}, {{0}}, 0, HP, ALL, 0, HP, 0},
    {"hp_every_huge_page_in_use_has_none", {{0, 1}, {ALL - 1, 1}}, {{0}}, 0, HP, ALL, 0, 0, 0},
    {"hp_run_crossing_huge_pages_is_skipped", {{0, 100}, {400, 112}}, {{0}}, 0, HP, ALL, 0, 0, 0},
    /* Force (memory limit, pa_scavenge): any free run, huge pages split. */
    {"hp_force_takes_the_highest_free_run", {{0, 1}, {ALL - 1, 1}}, {{0}}, 1, HP, ALL, 1, ALL - 2, 0},
    {"hp_force_trimmed_by_max_splits_huge_pages", {{ALL - 1, 1}}, {{0}}, 1, HP, HP, HP - 1, HP, 0},
    {"hp_force_run_above_scavenged_pages", {{ALL - 1, 1}}, {{400, 10}}, 1, HP, ALL, 410, 101, 0},
    /* Only some huge pages backed whole (collapsed; THP "madvise"): a
     * whole free huge page first, wherever it is, then runs of the others,
     * each within its own huge page. */
    {"split_highest_run_when_no_huge_page_is_whole", {{0, 10}, {ALL - 1, 1}}, {{0}}, 0, HP, ALL, HP, HP - 1, 3},
    {"split_whole_free_low_huge_page_before_the_high_runs", {{ALL - 1, 1}}, {{0}}, 0, HP, ALL, 0, HP, 3},
    {"split_high_run_of_a_huge_page_that_may_split", {{0, 10}, {ALL - 1, 1}}, {{0}}, 0, HP, ALL, HP, HP - 1, 2},
    {"split_kept_high_huge_page_leaves_the_low_run", {{0, 10}, {ALL - 1, 1}}, {{0}}, 0, HP, ALL, 10, HP - 10, 1},
    {"split_kept_low_huge_page_and_no_other_has_none", {{0, 10}, {HP, HP}}, {{0}}, 0, HP, ALL, 0, 0, 2},
    {"split_run_stops_at_the_huge_page_edge", {{0, 100}, {ALL - 1, 1}}, {{0}}, 0, HP, ALL, 100, HP - 100, 1},
    {"split_run_trimmed_by_max_from_the_top", {{0, 10}, {HP, HP}}, {{0}}, 0, HP, 20, HP - 20, 20, 1},
};
/* clang-format on */

#define NCAND (sizeof(cand_cases) / sizeof(cand_cases[0]))

static void candidate_case(void **state)
{
	const struct cand_case *k = *state;
	struct pa_chunk c;
	memset(&c, 0, sizeof(c));
	for (const struct run *r = k->alloc; r < k->alloc + RUNS && r->n; r++)
		bits_set_range(c.alloc, r->start, r->n);
	for (const struct run *r = k->scav; r < k->scav + RUNS && r->n; r++)
		bits_set_range(c.scav, r->start, r->n);
	/* The chunk invariant: a page is never both allocated and released. */
	for (unsigned w = 0; w < PA_CHUNK_WORDS; w++)
		c.scav[w] &= ~c.alloc[w];
	unsigned start = 12345;
	unsigned n =
	    chunk_scav_candidate(&c, k->force, k->hp_pages, ~k->split, k->max_pages, &start);
	assert_int_equal(n, k->want_n);
	if (k->want_n != 0)
		assert_int_equal(start, k->want_start);
}

/* ---- scav_release: highest address first ---------------------------------- */

/* Three contiguous chunks at BASE and one 4 TiB above: resident free runs at
 * chunk edges, across chunk and word boundaries, around released pages. */
static const struct chunk_spec order_heap[] = {
    {CHUNK(BASE, 0), 0, {{0, 100}, {200, 50}}, {{300, 12}}},
    {CHUNK(BASE, 1), 0, {{10, 490}}, {{0}}},
    {CHUNK(BASE, 2), 0, {{5, 59}, {128, 300}}, {{64, 64}}},
    {CHUNK(FAR, 0), 0, {{0, 256}}, {{400, 1}}},
};
#define NORDER (sizeof(order_heap) / sizeof(order_heap[0]))

/* The heap's resident free pages, highest address first. */
static size_t resident_desc(const struct chunk_spec *cs, size_t n, uintptr_t *out)
{
	size_t k = 0;
	for (size_t i = n; i-- > 0;) {
		/* order_heap lists chunks in ascending address order */
		unsigned char st[PA_CHUNK_PAGES];
		page_states(&cs[i], st);
		for (unsigned p = PA_CHUNK_PAGES; p-- > 0;)
			if (st[p] == PG_RESIDENT)
				out[k++] = PAGE(cs[i].base, p);
	}
	return k;
}

/* Do the heap's scav bits equal the spec's plus the first `released` of desc? */
static void assert_released_prefix(struct pa_pageheap *h, const struct chunk_spec *cs, size_t n,
                                   const uintptr_t *desc, size_t released)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t want[PA_CHUNK_WORDS];
		spec_bits(&cs[i], PG_SCAV, want);
		for (size_t k = 0; k < released; k++) {
			if (desc[k] >= cs[i].base && desc[k] < cs[i].base + PA_CHUNK_SIZE) {
				unsigned p = (unsigned)((desc[k] - cs[i].base) / PA_PAGE_SIZE);
				want[p / 64] |= (uint64_t)1 << (p % 64);
			}
		}
		assert_memory_equal(pageheap_chunk(h, cs[i].base)->scav, want, sizeof(want));
	}
}

static int page_is_released(struct pa_pageheap *h, uintptr_t addr)
{
	unsigned p = (unsigned)((addr >> PA_PAGE_SHIFT) % PA_CHUNK_PAGES);
	return (int)(pageheap_chunk(h, addr)->scav[p / 64] >> (p % 64) & 1);
}

static void release_goes_highest_address_first_across_chunks_and_ranges(void **state)
{
	struct fixture *f = *state;
	build(&f->h, order_heap, NORDER);
	static uintptr_t desc[NORDER * PA_CHUNK_PAGES];
	size_t total = resident_desc(order_heap, NORDER, desc);
	size_t scav0 = count_state(order_heap, NORDER, PG_SCAV);
	assert_int_equal(total, 350 + 22 + 89 + 255);
	assert_int_equal(f->h.scav_pages, scav0);

	/* Page by page first: each call takes the next page down. The FAR range
	 * (4 TiB above) goes first, skipping its released page 400 and crossing
	 * word boundaries; then chunk 2 of BASE from its top. */
	size_t done = 0;
	for (; done < 300; done++) {
		assert_int_equal(page_is_released(&f->h, desc[done]), 0);
		assert_int_equal(scav_release(&f->s, PA_PAGE_SIZE, 1), PA_PAGE_SIZE);
		assert_int_equal(page_is_released(&f->h, desc[done]), 1);
		assert_int_equal(f->h.scav_pages, scav0 + done + 1);
	}
	assert_int_equal(desc[done - 1], PAGE(CHUNK(BASE, 2), 467));
	assert_released_prefix(&f->h, order_heap, NORDER, desc, done);

	/* Then larger requests: always exactly the next pages down, several
	 * runs and chunks per request where it takes them. */
	static const struct {
		const char *edge;
		size_t pages;
	} steps[] = {
	    {"rest_of_the_run_in_chunk_2", 39},
	    {"run_crossing_the_chunk_1_2_boundary", 5 + 12},
	    {"run_crossing_the_chunk_0_1_boundary", 10 + 200},
	    {"skips_allocated_and_released_pages_mid_request", 50 + 50},
	    {"more_than_is_left", 10000},
	};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		size_t want = steps[i].pages < total - done ? steps[i].pages : total - done;
		print_message("step %s: %zu pages\n", steps[i].edge, want);
		assert_int_equal(scav_release(&f->s, steps[i].pages * PA_PAGE_SIZE, 1),
		                 want * PA_PAGE_SIZE);
		done += want;
		assert_int_equal(f->h.scav_pages, scav0 + done);
		assert_released_prefix(&f->h, order_heap, NORDER, desc, done);
		assert_int_equal(f->h.releasing_pages, 0);
		assert_int_equal(pageheap_verify(&f->h), 0);
	}
	assert_int_equal(done, total);
	assert_int_equal(desc[total - 1], PAGE(CHUNK(BASE, 0), 100));
	/* Nothing resident and free is left. */
	assert_int_equal(scav_release(&f->s, 0, 1), 0);
	assert_int_equal(f->h.scav_pages, f->h.mapped_pages - f->h.inuse_pages);
	assert_int_equal(f->s.released_bytes, total * PA_PAGE_SIZE);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

static void release_everything_takes_all_resident_free_pages(void **state)
{
	struct fixture *f = *state;
	build(&f->h, order_heap, NORDER);
	size_t resident = count_state(order_heap, NORDER, PG_RESIDENT);
	assert_int_equal(scav_release(&f->s, 0, 1), resident * PA_PAGE_SIZE);
	assert_int_equal(f->h.scav_pages, f->h.mapped_pages - f->h.inuse_pages);
	assert_int_equal(f->s.released_bytes, resident * PA_PAGE_SIZE);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

static void release_rounds_bytes_up_to_whole_pages(void **state)
{
	struct fixture *f = *state;
	static const struct chunk_spec one[] = {{CHUNK(BASE, 0), 0, {{0}}, {{0}}}};
	build(&f->h, one, 1);
	assert_int_equal(scav_release(&f->s, 1, 1), PA_PAGE_SIZE);
	assert_int_equal(scav_release(&f->s, PA_PAGE_SIZE + 1, 1), 2 * PA_PAGE_SIZE);
	assert_int_equal(f->h.scav_pages, 3);
	assert_int_equal(pageheap_chunk(&f->h, BASE)->scav[PA_CHUNK_WORDS - 1], (uint64_t)7 << 61);
}

/* ---- re-allocation reports released pages --------------------------------- */

static void realloc_reports_exactly_the_released_pages_it_takes(void **state)
{
	struct fixture *f = *state;
	static const struct chunk_spec two[] = {
	    {CHUNK(BASE, 0), 0, {{0}}, {{0}}},
	    {CHUNK(BASE, 1), 0, {{0}}, {{0}}},
	};
	build(&f->h, two, 2);
	/* Chunk 1 pages 312..511 are released. */
	assert_int_equal(scav_release(&f->s, 200 * PA_PAGE_SIZE, 1), 200 * PA_PAGE_SIZE);
	static const struct {
		const char *edge;
		size_t npages;
		uintptr_t addr;
		size_t scav, scav_pages_after;
	} allocs[] = {
	    {"resident_pages_only", 400, PAGE(CHUNK(BASE, 0), 0), 0, 200},
	    {"resident_pages_across_chunks", 312, PAGE(CHUNK(BASE, 0), 400), 0, 200},
	    {"resident_then_released", 200, PAGE(CHUNK(BASE, 1), 200), 88, 112},
	    {"released_pages_only", 112, PAGE(CHUNK(BASE, 1), 400), 112, 0},
	};
	for (size_t i = 0; i < sizeof(allocs) / sizeof(allocs[0]); i++) {
		size_t scav = 9999;
		print_message("alloc %s\n", allocs[i].edge);
		uintptr_t a = pageheap_alloc(&f->h, allocs[i].npages, &scav);
		assert_int_equal(a, allocs[i].addr);
		assert_int_equal(scav, allocs[i].scav);
		assert_int_equal(f->h.scav_pages, allocs[i].scav_pages_after);
		assert_int_equal(pageheap_verify(&f->h), 0);
	}
}

/* ---- scav_step: stamps, age, huge pages ----------------------------------- */

static const struct step_age_case {
	const char *name;
	uint32_t freed_at, now, min_age;
	size_t want_pages;
} step_age_cases[] = {
    {"age_one_below_min_age_is_kept", 20, 29, 10, 0},
    {"age_equal_to_min_age_is_released", 20, 30, 10, 256},
    {"min_age_zero_releases_at_once", 20, 20, 0, 256},
    {"age_across_the_clock_wrap", 0xfffffff0u, 5, 10, 256},
    {"age_just_short_across_the_clock_wrap", 0xfffffff0u, 5, 22, 0},
};

static void step_releases_only_chunks_free_for_min_age(void **state)
{
	(void)state; /* a fresh heap per case */
	for (size_t i = 0; i < sizeof(step_age_cases) / sizeof(step_age_cases[0]); i++) {
		const struct step_age_case *k = &step_age_cases[i];
		print_message("case %s\n", k->name);
		void *st;
		setup(&st);
		struct fixture *f = st;
		const struct chunk_spec one[] = {{CHUNK(BASE, 0), k->freed_at, {{0}}, {{0}}}};
		build(&f->h, one, 1);
		__atomic_store_n(&f->h.epoch, k->now, __ATOMIC_RELAXED);
		assert_int_equal(scav_step(&f->s, k->min_age), k->want_pages);
		assert_int_equal(f->h.scav_pages, k->want_pages);
		if (k->want_pages != 0)
			assert_int_equal(pageheap_chunk(&f->h, BASE)->scav[PA_CHUNK_WORDS - 1],
			                 ~(uint64_t)0);
		assert_int_equal(pageheap_verify(&f->h), 0);
		teardown(&st);
	}
}

/* A free at the clock's last tick before it wraps still marks the chunk. */
static void step_sees_a_free_at_the_last_epoch_before_the_wrap(void **state)
{
	struct fixture *f = *state;
	static const struct chunk_spec one[] = {{CHUNK(BASE, 0), UINT32_MAX, {{0}}, {{0}}}};
	build(&f->h, one, 1);
	__atomic_store_n(&f->h.epoch, 0, __ATOMIC_RELAXED);
	assert_int_equal(scav_step(&f->s, 0), 256);
	assert_int_equal(f->h.scav_pages, 256);
}

/* Which 256-page halves of chunks 0, 1 and 3 are released: bit 2*chunk+half. */
static void assert_released_halves(struct pa_pageheap *h, unsigned halves)
{
	static const unsigned chunks[] = {0, 1, 3};
	for (unsigned i = 0; i < 3; i++) {
		const struct pa_chunk *c = pageheap_chunk(h, CHUNK(BASE, chunks[i]));
		for (unsigned half = 0; half < 2; half++) {
			uint64_t want = halves >> (2 * chunks[i] + half) & 1 ? ~(uint64_t)0 : 0;
			for (unsigned w = 4 * half; w < 4 * half + 4; w++)
				assert_int_equal(c->scav[w], want);
		}
	}
}

static void step_skips_young_and_unstamped_chunks_and_comes_back_later(void **state)
{
	struct fixture *f = *state;
	static const struct chunk_spec heap[] = {
	    {CHUNK(BASE, 0), 10, {{0}}, {{0}}},
	    {CHUNK(BASE, 1), 20, {{0}}, {{0}}},
	    {CHUNK(BASE, 2), 0, {{0, ALL}}, {{0}}}, /* all in use: never freed, no stamp */
	    {CHUNK(BASE, 3), 15, {{0}}, {{0}}},
	};
	build(&f->h, heap, 4);
	size_t c0 = chunk_index_of(&f->h, CHUNK(BASE, 0));
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 2))->free_stamp, 0);
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 1))->free_stamp, 21);
	assert_int_equal(f->h.scav_ci, c0 + 4);

	/* Epoch 25, min_age 10: chunks 3 (age 10) and 0 (age 15) qualify,
	 * chunk 1 (age 5) does not; highest first, 256 pages a step. */
	__atomic_store_n(&f->h.epoch, 25, __ATOMIC_RELAXED);
	static const struct {
		const char *edge;
		size_t pages;
		unsigned halves; /* released afterwards */
	} first_pass[] = {
	    {"chunk_3_top_half", 256, 1u << 7},
	    {"chunk_3_bottom_half", 256, 3u << 6},
	    {"chunk_0_top_half_past_young_chunk_1", 256, 3u << 6 | 1u << 1},
	    {"chunk_0_bottom_half", 256, 3u << 6 | 3u},
	    {"nothing_old_enough_is_left", 0, 3u << 6 | 3u},
	};
	for (size_t i = 0; i < sizeof(first_pass) / sizeof(first_pass[0]); i++) {
		print_message("step %s\n", first_pass[i].edge);
		assert_int_equal(scav_step(&f->s, 10), first_pass[i].pages);
		assert_released_halves(&f->h, first_pass[i].halves);
	}
	assert_int_equal(f->h.scav_pages, 4 * 256);
	/* The empty pass cleared the stamps of the chunks it emptied and lowered
	 * the scan's top to just above the young chunk. */
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 0))->free_stamp, 0);
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 3))->free_stamp, 0);
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 1))->free_stamp, 21);
	assert_int_equal(f->h.scav_ci, c0 + 2);

	/* At epoch 30 chunk 1 is 10 old: its turn. */
	__atomic_store_n(&f->h.epoch, 30, __ATOMIC_RELAXED);
	assert_int_equal(scav_step(&f->s, 10), 256);
	assert_released_halves(&f->h, 3u << 6 | 1u << 3 | 3u);
	assert_int_equal(scav_step(&f->s, 10), 256);
	assert_int_equal(scav_step(&f->s, 10), 0);
	assert_released_halves(&f->h, 3u << 6 | 3u << 2 | 3u);
	assert_int_equal(f->h.scav_pages, 6 * 256);
	assert_int_equal(f->h.scav_ci, 0);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

static void step_takes_a_whole_free_huge_page_and_skips_one_in_use(void **state)
{
	struct fixture *f = *state;
	f->s.hp_pages = HP;
	f->s.thp_kernel_always = 1;
	/* Low huge page: 100 pages already released, the rest resident, all
	 * free. High huge page: its top page allocated. */
	static const struct chunk_spec one[] = {{CHUNK(BASE, 0), 0, {{ALL - 1, 1}}, {{0, 100}}}};
	build(&f->h, one, 1);
	struct pa_chunk *c = pageheap_chunk(&f->h, BASE);
	assert_int_equal(scav_step(&f->s, 0), HP);
	for (unsigned w = 0; w < 4; w++)
		assert_int_equal(c->scav[w], ~(uint64_t)0);
	for (unsigned w = 4; w < PA_CHUNK_WORDS; w++)
		assert_int_equal(c->scav[w], 0);
	assert_int_equal(f->h.scav_pages, HP);
	/* released_total counts only the 156 pages that were still resident. */
	assert_int_equal(f->s.released_bytes, (HP - 100) * PA_PAGE_SIZE);
	/* The high huge page is in use: the background leaves it whole. */
	assert_int_equal(scav_step(&f->s, 0), 0);
	assert_int_equal(f->h.scav_pages, HP);
	assert_int_equal(c->free_stamp, 0);
	/* An explicit release splits it. */
	assert_int_equal(scav_release(&f->s, 0, 1), (HP - 1) * PA_PAGE_SIZE);
	assert_int_equal(c->scav[PA_CHUNK_WORDS - 1], ~(uint64_t)0 >> 1);
	assert_int_equal(f->h.scav_pages, ALL - 1);
	assert_int_equal(f->s.released_bytes, (HP - 100 + HP - 1) * PA_PAGE_SIZE);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

/*
 * A shrinking heap (free resident pages above an eighth of those in use plus
 * a chunk) with burst pacing on: the background splits huge pages of sparse
 * chunks (fewer than 31/32 of their pages in use), never of dense ones.
 * Two chunks, free and resident but for their top pages: 1022 free resident
 * pages against 2 in use. With bursts off the step takes the high chunk's
 * lower, whole free huge page; with them on it takes the highest free run
 * (256 pages below the top one), splitting the huge page the top one is in.
 */
static void shrinking_step_splits_huge_pages_of_a_sparse_chunk(void **state)
{
	struct fixture *f = *state;
	f->s.hp_pages = HP;
	f->s.thp_kernel_always = 1;
	static const struct chunk_spec two[] = {
	    {CHUNK(BASE, 0), 0, {{ALL - 1, 1}}, {{0, 0}}},
	    {CHUNK(BASE, 1), 0, {{ALL - 1, 1}}, {{0, 0}}},
	};
	build(&f->h, two, 2);
	struct pa_chunk *hi = pageheap_chunk(&f->h, CHUNK(BASE, 1));
	assert_int_equal(scav_step(&f->s, 0), HP);
	for (unsigned w = 0; w < PA_CHUNK_WORDS; w++)
		assert_int_equal(hi->scav[w], w < 4 ? ~(uint64_t)0 : 0);
	struct pa_scav_config conf = {
	    .enabled = 0, .percent = 1, .delay_ms = 0, .burst_percent = 10};
	scav_configure(&f->s, &conf);
	f->s.hp_pages = HP;
	f->s.thp_kernel_always = 1;
	assert_int_equal(scav_step(&f->s, 0), 255); /* pages 256..510 */
	for (unsigned w = 0; w < PA_CHUNK_WORDS; w++)
		assert_int_equal(hi->scav[w],
		                 w < PA_CHUNK_WORDS - 1 ? ~(uint64_t)0 : ~(uint64_t)0 >> 1);
	/* Free resident: 511 pages in the low chunk, 2 in use: still shrinking
	 * (511 > 2 / 8 + 512 is false): the heap is back within its goal, and
	 * the low chunk keeps its huge pages. */
	assert_int_equal(scav_step(&f->s, 0), HP);
	struct pa_chunk *lo = pageheap_chunk(&f->h, CHUNK(BASE, 0));
	for (unsigned w = 0; w < PA_CHUNK_WORDS; w++)
		assert_int_equal(lo->scav[w], w < 4 ? ~(uint64_t)0 : 0);
	assert_int_equal(scav_step(&f->s, 0), 0);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

/* A dense chunk (31/32 of its pages in use) keeps its huge pages even while
 * the heap shrinks: two free chunks above it make the heap shrink. */
static void shrinking_step_leaves_huge_pages_of_a_dense_chunk_whole(void **state)
{
	struct fixture *f = *state;
	struct pa_scav_config conf = {
	    .enabled = 0, .percent = 1, .delay_ms = 0, .burst_percent = 10};
	scav_configure(&f->s, &conf);
	f->s.hp_pages = HP;
	f->s.thp_kernel_always = 1;
	static const struct chunk_spec three[] = {
	    {CHUNK(BASE, 0), 0, {{0, ALL - 16}}, {{0, 0}}},
	    {CHUNK(BASE, 1), 0, {{0, 0}}, {{0, 0}}},
	    {CHUNK(BASE, 2), 0, {{0, 0}}, {{0, 0}}},
	};
	build(&f->h, three, 3);
	/* The free chunks go first, a whole huge page a step; then the dense
	 * chunk's 16 free pages share a huge page with used ones: left alone. */
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(scav_step(&f->s, 0), HP);
	assert_int_equal(scav_step(&f->s, 0), 0);
	struct pa_chunk *c = pageheap_chunk(&f->h, CHUNK(BASE, 0));
	for (unsigned w = 0; w < PA_CHUNK_WORDS; w++)
		assert_int_equal(c->scav[w], 0);
	assert_int_equal(f->h.scav_pages, 4 * HP);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

/* The background's delay (scav_hold_delay): free resident memory within
 * the hold (an eighth of the pages in use plus 4,096 pages, 32 MiB) waits
 * four delays; past it the heap shrank, and every page waits one delay
 * until the pages in use grow by the hold again. */
static void steady_heap_holds_its_free_pages_four_delays_and_a_shrunk_one_one(void **state)
{
	struct fixture *f = *state;
	const size_t hold = (32u << 20) / PA_PAGE_SIZE; /* 4,096 pages */
	/* 12 chunks, all in use, then all but chunk 0 freed: 5,632 pages free
	 * and resident, 512 in use. */
	for (unsigned i = 0; i < 12; i++)
		assert_int_equal(pageheap_grow_range(&f->h, CHUNK(BASE, i), PA_CHUNK_PAGES), 0);
	lock_acquire(&f->h.lock);
	pageheap_alloc_range_locked(&f->h, CHUNK(BASE, 0), 12 * PA_CHUNK_PAGES);
	lock_release(&f->h.lock);
	/* Steady while it is all in use: no free memory, four delays. */
	assert_int_equal(scav_hold_delay(&f->s, 1000), 4000);
	pageheap_free(&f->h, CHUNK(BASE, 1), 11 * PA_CHUNK_PAGES);
	/* 5,632 > 512 / 8 + 4,096: shrunk. */
	assert_int_equal(scav_hold_delay(&f->s, 1000), 1000);
	/* Released down to 4,000 free pages, within the hold: still one delay,
	 * to the last page. */
	assert_int_equal(scav_release(&f->s, (5632 - 4000) * PA_PAGE_SIZE, 1),
	                 (5632 - 4000) * PA_PAGE_SIZE);
	assert_int_equal(scav_hold_delay(&f->s, 1000), 1000);
	/* The pages in use grow by the hold exactly (512 + 4,096): not more
	 * than it, still one delay; one page more, and the heap is steady. */
	size_t scav;
	assert_int_not_equal(pageheap_alloc(&f->h, hold, &scav), 0);
	assert_int_equal(scav_hold_delay(&f->s, 1000), 1000);
	assert_int_not_equal(pageheap_alloc(&f->h, 1, &scav), 0);
	assert_int_equal(scav_hold_delay(&f->s, 1000), 4000);
	/* No delay stays none; four delays stop at an hour. */
	assert_int_equal(scav_hold_delay(&f->s, 0), 0);
	assert_int_equal(scav_hold_delay(&f->s, 1000000), 3600000);
	assert_int_equal(scav_hold_delay(&f->s, 3600000), 3600000);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

static void step_without_huge_pages_takes_runs_of_at_most_256(void **state)
{
	struct fixture *f = *state;
	static const struct chunk_spec one[] = {{CHUNK(BASE, 0), 0, {{ALL - 1, 1}}, {{0, 100}}}};
	build(&f->h, one, 1);
	struct pa_chunk *c = pageheap_chunk(&f->h, BASE);
	assert_int_equal(scav_step(&f->s, 0), 256); /* pages 255..510 */
	assert_int_equal(c->scav[3], (uint64_t)1 << 63);
	assert_int_equal(c->scav[PA_CHUNK_WORDS - 1], ~(uint64_t)0 >> 1);
	assert_int_equal(scav_step(&f->s, 0), 155); /* pages 100..254 */
	assert_int_equal(scav_step(&f->s, 0), 0);
	assert_int_equal(f->h.scav_pages, ALL - 1);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

/* ---- the memory limit ----------------------------------------------------- */

static void limit_releases_the_excess_highest_first_then_counts_an_overrun(void **state)
{
	struct fixture *f = *state;
	/* Chunk 0 in use; chunk 1 alternates free resident and allocated 64-page
	 * bands; chunks 2 and 3 fresh (released). Resident: 1024 pages. */
	static const struct chunk_spec heap[] = {
	    {CHUNK(BASE, 0), 0, {{0, ALL}}, {{0}}},
	    {CHUNK(BASE, 1), 0, {{64, 64}, {192, 64}, {320, 64}, {448, 64}}, {{0}}},
	    {CHUNK(BASE, 2), 0, {{0}}, {{0, ALL}}},
	    {CHUNK(BASE, 3), 0, {{0}}, {{0, ALL}}},
	};
	build(&f->h, heap, 4);
	struct pa_scav_config conf = {
	    .enabled = 0, .percent = 1, .memory_limit = 1024 * PA_PAGE_SIZE};
	scav_configure(&f->s, &conf);
	assert_int_equal(f->h.limit_pages, 1024);
	assert_int_equal(pageheap_resident_pages_locked(&f->h), 1024);

	/* 128 pages fit in no resident band: they come from chunk 2 (released),
	 * and the two highest resident bands of chunk 1 pay for them. */
	size_t scav = 0;
	assert_int_equal(pageheap_alloc(&f->h, 128, &scav), CHUNK(BASE, 2));
	assert_int_equal(scav, 128);
	assert_int_equal(pageheap_resident_pages_locked(&f->h), 1024);
	struct pa_chunk *c1 = pageheap_chunk(&f->h, CHUNK(BASE, 1));
	uint64_t want[PA_CHUNK_WORDS] = {0, 0, 0, 0, ~(uint64_t)0, 0, ~(uint64_t)0, 0};
	assert_memory_equal(c1->scav, want, sizeof(want));
	assert_int_equal(f->s.limit_overruns, 0);
	assert_int_equal(f->h.pressure, 0);

	/* 300 more pages put live memory itself over the limit: everything
	 * free is released, the allocation stands, an overrun is counted. */
	assert_int_equal(pageheap_alloc(&f->h, 300, &scav), PAGE(CHUNK(BASE, 2), 128));
	assert_int_equal(scav, 300);
	assert_int_equal(f->h.inuse_pages, 512 + 256 + 128 + 300);
	assert_int_equal(pageheap_resident_pages_locked(&f->h), f->h.inuse_pages);
	want[0] = want[2] = ~(uint64_t)0;
	assert_memory_equal(c1->scav, want, sizeof(want));
	assert_int_equal(f->s.limit_overruns, 1);
	assert_int_equal(f->h.pressure, 0);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

/* ---- one scavenger over two heaps (a NUMA machine's nodes, pages.c) -------- */

struct two_heaps {
	struct pa_pageheap h[2];
	struct pa_scavenger s;
};

/* Heaps in the adjacent 4 TiB windows at BASE and FAR, each with chunk 0
 * wholly free and resident. */
static void two_heaps_init(struct two_heaps *t, size_t memory_limit)
{
	static const uintptr_t bases[2] = {BASE, FAR};
	struct pa_pageheap *heaps[2];
	for (int i = 0; i < 2; i++) {
		struct pa_pageheap_opts opts = {
		    .metadata_only = 1, .window_bits = 42, .window_base = bases[i]};
		assert_int_equal(pageheap_init(&t->h[i], &opts), 0);
		const struct chunk_spec free_chunk[] = {{CHUNK(bases[i], 0), 0, {{0}}, {{0}}}};
		build(&t->h[i], free_chunk, 1);
		heaps[i] = &t->h[i];
	}
	struct pa_scav_config conf = {.enabled = 0, .percent = 1, .memory_limit = memory_limit};
	scav_init_heaps(&t->s, heaps, NULL, 2, &conf);
	t->s.hp_pages = 0;
}

static void two_heaps_destroy(struct two_heaps *t)
{
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pageheap_verify(&t->h[i]), 0);
		pageheap_destroy(&t->h[i]);
	}
}

static void step_takes_the_heaps_in_turn(void **state)
{
	(void)state;
	static struct two_heaps t;
	two_heaps_init(&t, 0);
	/* Each step releases one run of at most 256 pages, the next heap's. */
	static const size_t want[][2] = {{256, 0}, {256, 256}, {512, 256}, {512, 512}};
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(scav_step(&t.s, 0), 256);
		assert_int_equal(t.h[0].scav_pages, want[i][0]);
		assert_int_equal(t.h[1].scav_pages, want[i][1]);
	}
	assert_int_equal(scav_step(&t.s, 0), 0);
	two_heaps_destroy(&t);
}

static void release_takes_the_highest_heap_first_then_the_next(void **state)
{
	(void)state;
	static struct two_heaps t;
	two_heaps_init(&t, 0);
	assert_int_equal(scav_release(&t.s, 10 * PA_PAGE_SIZE, 1), 10 * PA_PAGE_SIZE);
	assert_int_equal(t.h[0].scav_pages, 0);
	assert_int_equal(t.h[1].scav_pages, 10);
	assert_int_equal(scav_release(&t.s, 600 * PA_PAGE_SIZE, 1), 600 * PA_PAGE_SIZE);
	assert_int_equal(t.h[0].scav_pages, 98);
	assert_int_equal(t.h[1].scav_pages, 512);
	assert_int_equal(scav_release(&t.s, 0, 1), 414 * PA_PAGE_SIZE);
	assert_int_equal(t.h[0].scav_pages, 512);
	two_heaps_destroy(&t);
}

static void limit_counts_the_resident_pages_of_both_heaps(void **state)
{
	(void)state;
	static struct two_heaps t;
	/* 1024 resident pages, 512 in each heap: each under the limit of 600,
	 * both together over it. */
	two_heaps_init(&t, 600 * PA_PAGE_SIZE);
	assert_int_equal(t.h[0].limit_pages, 300); /* each heap's share flags it */
	assert_int_equal(t.h[1].limit_pages, 300);
	assert_int_equal(pageheap_alloc(&t.h[0], 1, NULL), CHUNK(BASE, 0));
	/* The excess, 424 pages, came from the highest heap first. */
	assert_int_equal(t.h[1].scav_pages, 424);
	assert_int_equal(t.h[0].scav_pages, 0);
	assert_int_equal(t.s.limit_overruns, 0);
	assert_int_equal(t.h[0].pressure, 0);
	assert_int_equal(t.h[1].pressure, 0);
	two_heaps_destroy(&t);
}

/* ---- huge pages: what the scavenger collapses, and what it keeps whole ----- */

/* The machine and configuration set by hand (scav_thp_setup would ask the
 * kernel): 2 MiB huge pages in "madvise" mode, thp=auto, MADV_COLLAPSE. On a
 * metadata-only heap a collapse flips the chunk's huge bit, no madvise. */
static void thp_by_hand(struct fixture *f, unsigned thp)
{
	f->s.hp_pages = HP;
	f->s.thp_kernel_always = 0;
	f->s.thp_state = PA_THP_STATE_COLLAPSE;
	f->s.conf.thp = thp;
	f->s.collapse_cursor[0] = SIZE_MAX;
	f->h.hp_pages = HP;
}

/* Chunk 0 wholly in use (two dense huge pages); chunk 1: its low huge page
 * one page short of 15/16 in use, its high one in use but for one released
 * page; chunk 2: its high huge page exactly 15/16 in use (the 16 pages
 * above free and resident), its low one free and resident. */
static const struct chunk_spec dense_heap[] = {
    {CHUNK(BASE, 0), 0, {{0, ALL}}, {{0}}},
    {CHUNK(BASE, 1), 0, {{0, HP * 15 / 16 - 1}, {HP, HP - 1}}, {{ALL - 1, 1}}},
    {CHUNK(BASE, 2), 0, {{HP, HP * 15 / 16}}, {{0}}},
};

static void collapse_takes_dense_huge_pages_highest_chunk_first(void **state)
{
	struct fixture *f = *state;
	build(&f->h, dense_heap, 3);
	thp_by_hand(f, PA_THP_OFF);
	assert_int_equal(scav_collapse_step(&f->s), 0); /* thp=off: nothing */
	thp_by_hand(f, PA_THP_AUTO);
	/* The first pass only notes the dense huge pages (chunk 2's high one,
	 * both of chunk 0's): a collapse waits for the next pass to find them
	 * dense again. */
	assert_int_equal(scav_collapse_step(&f->s), 0);
	assert_int_equal(f->s.collapse_cursor[0], SIZE_MAX);
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 2))->dense_seen, 2);
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 1))->dense_seen, 0);
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 0))->dense_seen, 3);
	assert_int_equal(f->h.huge_pages, 0);
	/* The second: the top chunk's dense huge page, then (chunk 1 has none)
	 * both of chunk 0's in one step; then the pass is over, and the next
	 * finds nothing new. */
	assert_int_equal(scav_collapse_step(&f->s), 1);
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 2))->huge, 2);
	assert_int_equal(f->h.huge_pages, 1);
	assert_int_equal(scav_collapse_step(&f->s), 2);
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 0))->huge, 3);
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 1))->huge, 0);
	assert_int_equal(f->s.collapse_cursor[0], CHUNK(BASE, 0) >> PA_CHUNK_SHIFT);
	assert_int_equal(scav_collapse_step(&f->s), 0);
	assert_int_equal(f->s.collapse_cursor[0], SIZE_MAX);
	assert_int_equal(scav_collapse_step(&f->s), 0);
	assert_int_equal(f->h.huge_pages, 3);
	assert_int_equal(f->h.huge_collapses, 3);
	assert_int_equal(f->h.huge_splits + f->h.huge_freed, 0);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

/* A huge page is collapsed only when two passes in a row find it dense: one
 * freed in part between them is forgotten, and noted afresh once it is
 * dense again. */
static void collapse_waits_for_two_passes_in_a_row(void **state)
{
	struct fixture *f = *state;
	build(&f->h, dense_heap, 3);
	thp_by_hand(f, PA_THP_AUTO);
	struct pa_chunk *c0 = pageheap_chunk(&f->h, CHUNK(BASE, 0));
	assert_int_equal(scav_collapse_step(&f->s), 0);
	assert_int_equal(c0->dense_seen, 3);
	/* Chunk 0's low huge page down to 312 of 512 pages in use. */
	pageheap_free(&f->h, CHUNK(BASE, 0), 200);
	assert_int_equal(scav_collapse_step(&f->s), 1); /* chunk 2's */
	assert_int_equal(scav_collapse_step(&f->s), 1); /* chunk 0's high one only */
	assert_int_equal(c0->huge, 2);
	assert_int_equal(scav_collapse_step(&f->s), 0);
	assert_int_equal(f->s.collapse_cursor[0], SIZE_MAX);
	/* Dense again: the next pass notes it, the one after collapses it. */
	lock_acquire(&f->h.lock);
	assert_int_equal(pageheap_alloc_range_locked(&f->h, CHUNK(BASE, 0), 200), 0);
	lock_release(&f->h.lock);
	assert_int_equal(scav_collapse_step(&f->s), 0);
	assert_int_equal(c0->huge, 2);
	assert_int_equal(c0->dense_seen & 1, 1);
	assert_int_equal(scav_collapse_step(&f->s), 1);
	assert_int_equal(c0->huge, 3);
	assert_int_equal(f->h.huge_collapses, 3);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

/* A huge page split after its collapse (here as the sweep splits one, a
 * release inside a span) is not collapsed again while every pass finds it
 * dense, until the heap's split epoch moves on (the thread's, every 30 s);
 * and once a pass finds it not dense, it is forgotten, and two passes that
 * find it dense again collapse it. */
static void collapse_skips_a_huge_page_split_while_it_stays_dense(void **state)
{
	struct fixture *f = *state;
	build(&f->h, dense_heap, 3);
	thp_by_hand(f, PA_THP_AUTO);
	struct pa_chunk *c0 = pageheap_chunk(&f->h, CHUNK(BASE, 0));
	assert_int_equal(scav_collapse_step(&f->s), 0);
	while (scav_collapse_step(&f->s) != 0)
		;
	assert_int_equal(c0->huge, 3);
	lock_acquire(&f->h.lock);
	assert_int_equal(pageheap_huge_at_locked(&f->h, PAGE(CHUNK(BASE, 0), 7), 1), 1);
	lock_release(&f->h.lock);
	assert_int_equal(c0->huge, 2);
	assert_int_equal(c0->split_seen, 1);
	assert_int_equal(f->h.huge_splits, 1);
	/* Three full passes: dense all along, never collapsed again. */
	for (int pass = 0; pass < 3; pass++) {
		assert_int_equal(scav_collapse_step(&f->s), 0);
		assert_int_equal(f->s.collapse_cursor[0], SIZE_MAX);
	}
	assert_int_equal(c0->huge, 2);
	assert_int_equal(c0->split_seen, 1);
	/* A new epoch: the next pass collapses it (dense in the last one). */
	f->h.split_epoch++;
	assert_int_equal(scav_collapse_step(&f->s), 1);
	assert_int_equal(c0->huge, 3);
	assert_int_equal(c0->split_seen, 0);
	assert_int_equal(f->h.huge_collapses, 4);
	/* Split again. */
	lock_acquire(&f->h.lock);
	assert_int_equal(pageheap_huge_at_locked(&f->h, PAGE(CHUNK(BASE, 0), 7), 1), 1);
	lock_release(&f->h.lock);
	assert_int_equal(scav_collapse_step(&f->s), 0);
	assert_int_equal(scav_collapse_step(&f->s), 0);
	assert_int_equal(c0->split_seen, 1);
	/* Freed in part: the pass that finds it not dense forgets the split. */
	pageheap_free(&f->h, CHUNK(BASE, 0), 200);
	assert_int_equal(scav_collapse_step(&f->s), 0);
	assert_int_equal(c0->split_seen, 0);
	assert_int_equal(c0->dense_seen & 1, 0);
	lock_acquire(&f->h.lock);
	assert_int_equal(pageheap_alloc_range_locked(&f->h, CHUNK(BASE, 0), 200), 0);
	lock_release(&f->h.lock);
	assert_int_equal(scav_collapse_step(&f->s), 0); /* notes it dense */
	assert_int_equal(scav_collapse_step(&f->s), 1);
	assert_int_equal(c0->huge, 3);
	assert_int_equal(f->h.huge_collapses, 5);
	assert_int_equal(f->h.huge_splits, 2);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

/* A process that turned THP off for itself (prctl PR_SET_THP_DISABLE, as
 * redis-server does where THP is "always") gets no collapse, in a child; this process, with THP
 * on, gets the same heap's three. */
static void collapse_respects_the_process_s_thp_disable(void **state)
{
	struct fixture *f = *state;
	build(&f->h, dense_heap, 3);
	thp_by_hand(f, PA_THP_AUTO);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int set = prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0 && os_thp_disabled();
		size_t n = 0;
		for (int k = 0; k < 4; k++)
			n += scav_collapse_step(&f->s);
		_exit(set && n == 0 && f->h.huge_pages == 0 ? 0 : 1);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(os_thp_disabled(), 0);
	size_t n = 0;
	for (int k = 0; k < 4; k++)
		n += scav_collapse_step(&f->s);
	assert_int_equal(n, 3);
	assert_int_equal(f->h.huge_pages, 3);
}

static void background_keeps_collapsed_huge_pages_whole_until_freed_whole(void **state)
{
	struct fixture *f = *state;
	build(&f->h, dense_heap, 3);
	thp_by_hand(f, PA_THP_AUTO);
	assert_int_equal(scav_collapse_step(&f->s), 0); /* the pass that notes them */
	while (scav_collapse_step(&f->s) != 0)
		;
	struct pa_chunk *c2 = pageheap_chunk(&f->h, CHUNK(BASE, 2));
	struct pa_chunk *c1 = pageheap_chunk(&f->h, CHUNK(BASE, 1));
	/* Chunk 2's whole free huge page goes first; its collapsed one keeps
	 * its 16 free pages; chunk 1's low huge page (not collapsed) gives its
	 * 17 free pages, its high one has none resident. */
	assert_int_equal(scav_step(&f->s, 0), HP);
	for (unsigned w = 0; w < PA_CHUNK_WORDS; w++)
		assert_int_equal(c2->scav[w], w < 4 ? ~(uint64_t)0 : 0);
	assert_int_equal(scav_step(&f->s, 0), 17);
	assert_int_equal(c1->scav[3], ~(uint64_t)0 << (HP * 15 / 16 - 1 - 192));
	assert_int_equal(scav_step(&f->s, 0), 0);
	assert_int_equal(f->h.huge_pages, 3);
	assert_int_equal(f->h.huge_splits, 0);
	/* An explicit release splits chunk 2's. */
	assert_int_equal(scav_release(&f->s, 0, 1), 16 * PA_PAGE_SIZE);
	assert_int_equal(c2->huge, 0);
	assert_int_equal(f->h.huge_splits, 1);
	assert_int_equal(f->h.huge_pages, 2);
	/* Chunk 0's low huge page down to 56 pages in use, fewer than half:
	 * its free run goes, and that splits it. */
	pageheap_free(&f->h, CHUNK(BASE, 0), 200);
	assert_int_equal(scav_step(&f->s, 0), 200);
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 0))->huge, 2);
	assert_int_equal(f->h.huge_splits, 2);
	assert_int_equal(f->h.huge_pages, 1);
	lock_acquire(&f->h.lock);
	assert_int_equal(pageheap_alloc_range_locked(&f->h, CHUNK(BASE, 0), 200), 200);
	lock_release(&f->h.lock);
	/* Chunk 0's high huge page freed whole: released whole, not split. */
	pageheap_free(&f->h, PAGE(CHUNK(BASE, 0), HP), HP);
	assert_int_equal(scav_step(&f->s, 0), HP);
	assert_int_equal(pageheap_chunk(&f->h, CHUNK(BASE, 0))->huge, 0);
	assert_int_equal(f->h.huge_freed, 1);
	assert_int_equal(f->h.huge_splits, 2);
	assert_int_equal(f->h.huge_pages, 0);
	assert_int_equal(pageheap_verify(&f->h), 0);
}

/* On real memory: a dense huge page whose 4 KiB pages are all resident is
 * collapsed (or the kernel's refusal counted); one whose pages are only
 * half resident is left alone, so it never becomes 2 MiB resident. Skipped
 * where the machine's THP is "never" or the kernel lacks MADV_COLLAPSE. */
static void collapse_takes_a_resident_huge_page_and_leaves_a_half_touched_one(void **state)
{
	(void)state;
	struct os_thp m;
	os_thp_read(&m);
	if (m.mode == OS_THP_NEVER || m.bytes != (size_t)HP * PA_PAGE_SIZE ||
	    os_collapse(NULL, 0) != 0)
		skip();
	struct pa_pageheap h;
	struct pa_pageheap_opts opts = {0};
	assert_int_equal(pageheap_init(&h, &opts), 0);
	struct pa_scavenger s;
	struct pa_scav_config conf = {.enabled = 0, .percent = 1, .thp = PA_THP_AUTO};
	scav_init(&s, &h, NULL, &conf);
	scav_thp_setup(&s, &m);
	assert_int_equal(s.thp_state, PA_THP_STATE_COLLAPSE);
	uintptr_t a = pageheap_alloc(&h, ALL, NULL);
	assert_true(a != 0);
	assert_int_equal(a % PA_CHUNK_SIZE, 0);
	memset((void *)a, 1, HP * PA_PAGE_SIZE);                           /* all of the low one */
	memset((void *)(a + HP * PA_PAGE_SIZE), 1, HP / 2 * PA_PAGE_SIZE); /* half the high one */
	assert_int_equal(scav_collapse_step(&s), 0); /* the pass that notes them dense */
	size_t collapsed = scav_collapse_step(&s);
	assert_int_equal(collapsed, s.collapse_failures == 0 ? 1 : 0);
	assert_int_equal(s.collapse_sparse, 1);
	assert_int_equal(h.huge_collapses + s.collapse_failures, 1);
	assert_int_equal(pageheap_chunk(&h, a)->huge, h.huge_collapses == 1 ? 1 : 0);
	/* The high huge page is still half resident. */
	assert_int_equal(os_resident_pages((void *)(a + HP * PA_PAGE_SIZE), HP * PA_PAGE_SIZE),
	                 HP * PA_PAGE_SIZE / 2 / os_page_size());
	pageheap_free(&h, a, ALL);
	pageheap_destroy(&h);
}

/* A machine whose THP is "never": no huge page size, nothing to collapse,
 * and the state the story turns into its one line. */
static void thp_never_machine_collapses_nothing(void **state)
{
	struct fixture *f = *state;
	build(&f->h, dense_heap, 3);
	f->s.conf.thp = PA_THP_AUTO;
	const struct os_thp never = {OS_THP_NEVER, 1, 0};
	scav_thp_setup(&f->s, &never);
	assert_int_equal(f->s.thp_state, PA_THP_STATE_NEVER);
	assert_int_equal(f->s.hp_pages, 0);
	assert_int_equal(f->h.hp_pages, 0);
	assert_int_equal(scav_collapse_step(&f->s), 0);
	assert_int_equal(f->h.huge_collapses, 0);
}

/* A busy program (scav_program_busy): more than 1,000 faults a second, or
 * all its CPUs but half of one, over the window. */
static void busy_program_faults_past_a_thousand_a_second_or_fills_its_cpus(void **state)
{
	(void)state;
	const uint64_t s = 1000000000u;
	assert_int_equal(scav_program_busy(s, 0, 1000, 2), 0);
	assert_int_equal(scav_program_busy(s, 0, 1001, 2), 1);
	assert_int_equal(scav_program_busy(s / 10, 0, 100, 2), 0);
	assert_int_equal(scav_program_busy(s / 10, 0, 101, 2), 1);
	/* Two CPUs: 1.5 of them. */
	assert_int_equal(scav_program_busy(s, s * 3 / 2 - 1, 0, 2), 0);
	assert_int_equal(scav_program_busy(s, s * 3 / 2, 0, 2), 1);
	/* One CPU: half of it. */
	assert_int_equal(scav_program_busy(s, s / 2 - 1, 0, 1), 0);
	assert_int_equal(scav_program_busy(s, s / 2, 0, 1), 1);
	/* CPUs unknown: the faults only. */
	assert_int_equal(scav_program_busy(s, 9 * s, 0, 0), 0);
	assert_int_equal(scav_program_busy(0, s, 5000, 2), 0);
}

/* Collapses wait for a busy program 4 s at most, then one step runs and
 * they wait again; a quiet window ends the wait. */
static void collapses_wait_for_a_busy_program_four_seconds_at_most(void **state)
{
	struct fixture *f = *state;
	const uint64_t ms = 1000000u;
	assert_int_equal(scav_collapse_may_run(&f->s, 0, 1000 * ms), 1);
	assert_int_equal(scav_collapse_may_run(&f->s, 1, 10000 * ms), 0);
	assert_int_equal(scav_collapse_may_run(&f->s, 1, 13999 * ms), 0);
	assert_int_equal(scav_collapse_may_run(&f->s, 1, 14000 * ms), 1);
	assert_int_equal(scav_collapse_may_run(&f->s, 1, 14100 * ms), 0);
	assert_int_equal(scav_collapse_may_run(&f->s, 1, 17999 * ms), 0);
	assert_int_equal(scav_collapse_may_run(&f->s, 1, 18000 * ms), 1);
	assert_int_equal(scav_collapse_may_run(&f->s, 0, 18200 * ms), 1);
	/* The wait starts over. */
	assert_int_equal(scav_collapse_may_run(&f->s, 1, 18300 * ms), 0);
	assert_int_equal(scav_collapse_may_run(&f->s, 1, 22299 * ms), 0);
	assert_int_equal(f->s.collapse_waits, 8);
}

/* Whether a collapse can run at all: not with thp=off, nor on a machine
 * whose THP is "never" or whose kernel neither collapses nor takes a hint
 * without stalling. */
static void collapse_possible_needs_thp_on_and_a_machine_that_backs(void **state)
{
	struct fixture *f = *state;
	thp_by_hand(f, PA_THP_AUTO);
	assert_int_equal(scav_collapse_possible(&f->s), 1);
	f->s.conf.thp = PA_THP_ALWAYS;
	assert_int_equal(scav_collapse_possible(&f->s), 1);
	f->s.thp_state = PA_THP_STATE_HINT;
	assert_int_equal(scav_collapse_possible(&f->s), 1);
	f->s.conf.thp = PA_THP_OFF;
	assert_int_equal(scav_collapse_possible(&f->s), 0);
	f->s.conf.thp = PA_THP_AUTO;
	f->s.thp_state = PA_THP_STATE_UNUSABLE;
	assert_int_equal(scav_collapse_possible(&f->s), 0);
	f->s.thp_state = PA_THP_STATE_NEVER;
	assert_int_equal(scav_collapse_possible(&f->s), 0);
}

/* The thread looks at whether the program is busy (getrusage, which walks
 * every thread) only where a collapse can run: with thp=off a whole wake
 * passes without a look; thp=auto, set live, brings one. A wait for the
 * outcome, not a timing: 20 s is the test's patience. */
static void thread_looks_at_the_program_only_where_a_collapse_can_run(void **state)
{
	(void)state;
	struct pa_pageheap h;
	struct pa_pageheap_opts opts = {.metadata_only = 1};
	assert_int_equal(pageheap_init(&h, &opts), 0);
	struct pa_scavenger s;
	struct pa_scav_config conf = {
	    .enabled = 1, .percent = 1, .delay_ms = 3600000, .thp = PA_THP_OFF};
	scav_init(&s, &h, NULL, &conf);
	assert_int_equal(scav_start(&s), 0);
	for (int i = 0; i < 2000 && __atomic_load_n(&s.cpu_ns, __ATOMIC_RELAXED) == 0; i++)
		usleep(10000);
	assert_true(__atomic_load_n(&s.cpu_ns, __ATOMIC_RELAXED) != 0); /* a wake ended */
	assert_int_equal(__atomic_load_n(&s.busy_at_ns, __ATOMIC_RELAXED), 0);
	int machine = __atomic_load_n(&s.thp_state, __ATOMIC_RELAXED);
	if (machine == PA_THP_STATE_COLLAPSE || machine == PA_THP_STATE_HINT) {
		conf.thp = PA_THP_AUTO;
		scav_configure(&s, &conf);
		for (int i = 0; i < 2000 && __atomic_load_n(&s.busy_at_ns, __ATOMIC_RELAXED) == 0;
		     i++)
			usleep(10000);
		assert_true(__atomic_load_n(&s.busy_at_ns, __ATOMIC_RELAXED) != 0);
	}
	scav_stop(&s);
	pageheap_destroy(&h);
}

/* The process's faults count each first touch of a page (a region the
 * kernel backs with 4 KiB pages) and each page populated, and its CPU time
 * moves forward. */
static void process_usage_counts_each_page_first_touched_or_populated(void **state)
{
	(void)state;
	const size_t pages = 64, os_page = os_page_size();
	char *m =
	    mmap(NULL, pages * os_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	madvise(m, pages * os_page, MADV_NOHUGEPAGE);
	uint64_t cpu0, faults0, cpu1, faults1;
	assert_int_equal(os_process_usage(&cpu0, &faults0), 0);
	for (size_t i = 0; i < pages; i++)
		m[i * os_page] = 1;
	assert_int_equal(os_process_usage(&cpu1, &faults1), 0);
	assert_true(faults1 - faults0 >= pages);
	assert_true(faults1 - faults0 < pages + 16);
	assert_true(cpu1 >= cpu0 && cpu0 > 0);
	/* Pages faulted in by MADV_POPULATE_WRITE count too (the kernel counts
	 * a fault through get_user_pages to the task), where the kernel has it
	 * (Linux 5.14): a refill populates its pages (central.c), and a heap
	 * that grows so is busy. */
	char *q =
	    mmap(NULL, pages * os_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(q != MAP_FAILED);
	madvise(q, pages * os_page, MADV_NOHUGEPAGE);
	if (os_populate(q, pages * os_page) == 0) {
		uint64_t cpu2, faults2;
		assert_int_equal(os_process_usage(&cpu2, &faults2), 0);
		assert_true(faults2 - faults1 >= pages);
		assert_true(faults2 - faults1 < pages + 16);
		assert_int_equal(os_resident_pages(q, pages * os_page), (long)pages);
	}
	munmap(q, pages * os_page);
	unsigned n = os_usable_cpus();
	assert_true(n >= 1 && n <= (unsigned)sysconf(_SC_NPROCESSORS_CONF));
	munmap(m, pages * os_page);
}

/* The thp= key: its three words, and nothing else. */
static void thp_key_parses_off_auto_always(void **state)
{
	(void)state;
	assert_int_equal(pa_conf.thp, PA_THP_AUTO); /* the default */
	assert_int_equal(pa_config_set("thp", "always"), 0);
	assert_int_equal(pa_conf.thp, PA_THP_ALWAYS);
	assert_int_equal(pa_config_set("thp", "off"), 0);
	assert_int_equal(pa_conf.thp, PA_THP_OFF);
	assert_int_equal(pa_config_set("thp", "madvise"), -1);
	assert_int_equal(pa_config_set("thp", ""), -1);
	assert_int_equal(pa_conf.thp, PA_THP_OFF);
	assert_int_equal(pa_config("thp=auto,thp=never"), 1);
	assert_int_equal(pa_conf.thp, PA_THP_AUTO);
}

int main(void)
{
	static struct CMUnitTest cand_tests[NCAND];
	for (size_t i = 0; i < NCAND; i++) {
		cand_tests[i] = (struct CMUnitTest){.name = cand_cases[i].name,
		                                    .test_func = candidate_case,
		                                    .initial_state = (void *)&cand_cases[i]};
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        release_goes_highest_address_first_across_chunks_and_ranges, setup, teardown),
	    cmocka_unit_test_setup_teardown(release_everything_takes_all_resident_free_pages, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(release_rounds_bytes_up_to_whole_pages, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(realloc_reports_exactly_the_released_pages_it_takes,
	                                    setup, teardown),
	    cmocka_unit_test(step_releases_only_chunks_free_for_min_age),
	    cmocka_unit_test_setup_teardown(step_sees_a_free_at_the_last_epoch_before_the_wrap,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        step_skips_young_and_unstamped_chunks_and_comes_back_later, setup, teardown),
	    cmocka_unit_test_setup_teardown(step_takes_a_whole_free_huge_page_and_skips_one_in_use,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(shrinking_step_splits_huge_pages_of_a_sparse_chunk,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(shrinking_step_leaves_huge_pages_of_a_dense_chunk_whole,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        steady_heap_holds_its_free_pages_four_delays_and_a_shrunk_one_one, setup, teardown),
	    cmocka_unit_test_setup_teardown(step_without_huge_pages_takes_runs_of_at_most_256,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        limit_releases_the_excess_highest_first_then_counts_an_overrun, setup, teardown),
	    cmocka_unit_test(step_takes_the_heaps_in_turn),
	    cmocka_unit_test(release_takes_the_highest_heap_first_then_the_next),
	    cmocka_unit_test(limit_counts_the_resident_pages_of_both_heaps),
	    cmocka_unit_test_setup_teardown(collapse_takes_dense_huge_pages_highest_chunk_first,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(collapse_waits_for_two_passes_in_a_row, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(collapse_skips_a_huge_page_split_while_it_stays_dense,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(collapse_respects_the_process_s_thp_disable, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(
	        background_keeps_collapsed_huge_pages_whole_until_freed_whole, setup, teardown),
	    cmocka_unit_test(collapse_takes_a_resident_huge_page_and_leaves_a_half_touched_one),
	    cmocka_unit_test_setup_teardown(thp_never_machine_collapses_nothing, setup, teardown),
	    cmocka_unit_test(thp_key_parses_off_auto_always),
	    cmocka_unit_test(busy_program_faults_past_a_thousand_a_second_or_fills_its_cpus),
	    cmocka_unit_test_setup_teardown(collapses_wait_for_a_busy_program_four_seconds_at_most,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(collapse_possible_needs_thp_on_and_a_machine_that_backs,
	                                    setup, teardown),
	    cmocka_unit_test(thread_looks_at_the_program_only_where_a_collapse_can_run),
	    cmocka_unit_test(process_usage_counts_each_page_first_touched_or_populated),
	};
	int failed = cmocka_run_group_tests_name("chunk_scav_candidate", cand_tests, NULL, NULL);
	failed += cmocka_run_group_tests_name("scavenger", tests, NULL, NULL);
	return failed;
}
