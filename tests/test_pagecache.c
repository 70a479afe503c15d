/*
 * test_pagecache.c — the per-CPU page caches, one CPU at a time, on exact
 * heap states.
 *
 * Every case builds a metadata-only heap at a fake chunk-aligned address
 * (BASE), shapes its bitmaps with pageheap_alloc_range_locked ("pages 0-9 in
 * use"), then drives the caches and asserts exact values: the cache's base,
 * free and scav words, the heap's hint and page counters, the chunk bitmaps
 * and cached_by, and pagecache_stats. The test thread is pinned to one CPU
 * (cpu_a) for the whole run, so "the current CPU's cache" is always
 * pc.cpus[cpu_a]; the few cases about two CPUs move it to a second allowed CPU
 * (cpu_b) and back, and are skipped where there is none.
 *
 * Faults in queued frees are caught by a recording pagecache_fault_hook
 * instead of aborting, and every case checks the exact list.
 *
 * Each cache test runs in PA_CACHE_LOCKED and again in PA_CACHE_RSEQ, skipped
 * where pagecache_init falls back to locked mode. Mode selection through
 * GLIBC_TUNABLES and PAGEALLOC_CONF runs in child processes that re-execute
 * this binary (/proc/self/exe --child WHAT): glibc reads its tunables, and the
 * default heap its configuration, once per process.
 *
 * Cases whose title starts with "bug_" pin behaviour that src/ gets wrong
 * today (each says what it expects and why); they fail until it is fixed.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "bits.h"
#include "pagealloc.h"
#include "pagecache.h"
#include "pageheap.h"

#define P PA_PAGE_SIZE
#define CHUNK PA_CHUNK_SIZE
#define GROUP (64 * P)
/* A fake heap address: chunk-aligned, far from anything mapped, 16 TiB. */
#define BASE ((uintptr_t)0x100000000000)
/* Page i of the heap's first chunk (i may run past it into the next). */
#define PG(i) (BASE + (uintptr_t)(i)*P)
#define ALL (~(uint64_t)0)
#define BIT(i) ((uint64_t)1 << (i))
/* n (< 64) pages from page `start`, as a constant for the tables. */
#define MASK(start, n) ((BIT(n) - 1) << (start))

/* ---- exact assertions that name the case -------------------------------- */

static const char *edge = "";

#define EQ(actual, expected)                                                                       \
	do {                                                                                       \
		uint64_t a_ = (uint64_t)(actual), e_ = (uint64_t)(expected);                       \
		if (a_ != e_) {                                                                    \
			print_error("[%s] %s = %#" PRIx64 ", want %#" PRIx64 "\n", edge, #actual,  \
			            a_, e_);                                                       \
			fail();                                                                    \
		}                                                                                  \
	} while (0)

/* ---- CPUs ----------------------------------------------------------------- */

static int cpu_a = -1, cpu_b = -1;

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	assert_int_equal(sched_setaffinity(0, sizeof(s), &s), 0);
	assert_int_equal(sched_getcpu(), cpu);
}

/* Pin to the CPU we run on; remember another allowed one for two-CPU cases. */
static void pin_setup(void)
{
	cpu_set_t allowed;
	CPU_ZERO(&allowed);
	assert_int_equal(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
	cpu_a = sched_getcpu();
	assert_true(cpu_a >= 0);
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (c != cpu_a && CPU_ISSET(c, &allowed)) {
			cpu_b = c;
			break;
		}
	}
	pin(cpu_a);
}

/* ---- recorded faults ------------------------------------------------------ */

struct fault_rec {
	uintptr_t addr;
	size_t npages;
	enum pa_page_fault f;
};

#define MAX_FAULTS 16
static struct fault_rec faults[MAX_FAULTS];
static unsigned nfaults;

static void record_fault(uintptr_t addr, size_t npages, enum pa_page_fault f)
{
	if (nfaults < MAX_FAULTS)
		faults[nfaults] = (struct fault_rec){addr, npages, f};
	nfaults++;
}

static void expect_faults(const struct fault_rec *want, unsigned n)
{
	EQ(nfaults, n);
	for (unsigned i = 0; i < n; i++) {
		EQ(faults[i].addr, want[i].addr);
		EQ(faults[i].npages, want[i].npages);
		EQ(faults[i].f, want[i].f);
	}
}

/* ---- the fixture: one metadata-only heap and its caches ----------------- */

struct fx {
	enum pa_cache_mode mode; /* wanted; the test skips if pagecache_init gave less */
	struct pa_pageheap h;
	struct pa_pagecache_set pc;
	struct pa_pagecache *c; /* cpu_a's cache */
};

static struct fx fixture;
static enum pa_cache_mode mode_off = PA_CACHE_OFF, mode_locked = PA_CACHE_LOCKED,
                          mode_rseq = PA_CACHE_RSEQ;

static void fx_open(struct fx *f)
{
	struct pa_pageheap_opts o = {.metadata_only = 1};
	assert_int_equal(pageheap_init(&f->h, &o), 0);
	assert_int_equal(pagecache_init(&f->pc, &f->h, f->mode), 0);
	f->c = NULL;
	if (f->pc.cpus != NULL) {
		assert_true((unsigned)cpu_a < f->pc.ncpus);
		f->c = &f->pc.cpus[cpu_a];
	}
	nfaults = 0;
	pagecache_fault_hook = record_fault;
}

static void fx_close(struct fx *f)
{
	pagecache_destroy(&f->pc);
	pageheap_destroy(&f->h);
	pagecache_fault_hook = NULL;
}

static int fx_setup(void **state)
{
	fixture.mode = *(enum pa_cache_mode *)*state;
	fx_open(&fixture);
	*state = &fixture;
	return 0;
}

static int fx_teardown(void **state)
{
	pin(cpu_a);
	fx_close(*state);
	return 0;
}

/* The fixture, or skip when the wanted mode is not available here. */
static struct fx *fx_get(void **state)
{
	struct fx *f = *state;
	if (f->pc.mode != f->mode)
		skip();
	edge = "";
	return f;
}

/* A fresh heap for the next row of a table. */
static void fx_reopen(struct fx *f)
{
	fx_close(f);
	fx_open(f);
}

static void grow(struct fx *f, uintptr_t base, size_t npages)
{
	EQ(pageheap_grow_range(&f->h, base, npages), 0);
}

/* Mark [addr, addr + n pages) allocated in the heap (a live heap allocation). */
static void heap_take(struct fx *f, uintptr_t addr, size_t n)
{
	lock_acquire(&f->h.lock);
	pageheap_alloc_range_locked(&f->h, addr, n);
	lock_release(&f->h.lock);
}

/* Mark the set bits of `used` allocated in the group at gbase. */
static void heap_take_mask(struct fx *f, uintptr_t gbase, uint64_t used)
{
	for (unsigned i = 0; i < 64;) {
		if (!((used >> i) & 1)) {
			i++;
			continue;
		}
		unsigned j = i;
		while (j < 64 && ((used >> j) & 1))
			j++;
		heap_take(f, gbase + (uintptr_t)i * P, j - i);
		i = j;
	}
}

static unsigned word_of(uintptr_t a)
{
	return (unsigned)((a & (CHUNK - 1)) / GROUP);
}
static uint64_t alloc_word(struct fx *f, uintptr_t a)
{
	return pageheap_chunk(&f->h, a)->alloc[word_of(a)];
}
static uint64_t scav_word(struct fx *f, uintptr_t a)
{
	return pageheap_chunk(&f->h, a)->scav[word_of(a)];
}
static unsigned owner_of(struct fx *f, uintptr_t a)
{
	return pageheap_chunk(&f->h, a)->cached_by[word_of(a)];
}

/* The cache's group and free pages; scav only where free is set (elsewhere
 * it means nothing, per pagecache.h). */
static void expect_cache(const struct pa_pagecache *c, uintptr_t base, uint64_t free, uint64_t scav)
{
	EQ(c->base, base);
	EQ(c->free, free);
	EQ(c->scav & c->free, scav & free);
}

static void expect_stats(struct fx *f, size_t cached, size_t queued, uint64_t refills,
                         uint64_t drains)
{
	struct pa_pagecache_stats s;
	pagecache_stats(&f->pc, &s);
	EQ(s.cached_pages, cached);
	EQ(s.queued_pages, queued);
	EQ(s.refills, refills);
	EQ(s.drains, drains);
}

static uintptr_t alloc_pages(struct fx *f, size_t n, size_t *scav)
{
	size_t s = ~(size_t)0;
	uintptr_t a = pagecache_alloc(&f->pc, n, &s);
	if (scav != NULL)
		*scav = s;
	return a;
}

/* ---- refill ----------------------------------------------------------------- */

struct run {
	uintptr_t addr;
	size_t npages; /* 0 ends a list */
};

static const struct refill_case {
	const char *edge;
	struct run grow[2];  /* in this order */
	struct run taken[3]; /* live heap allocations before the refill */
	uintptr_t base;      /* the group the cache takes */
	uint64_t free;       /* its free pages: all of them go to the cache */
} refill_cases[] = {
    {"empty heap: group 0 of the first chunk", {{BASE, 512}}, {{0, 0}}, BASE, ALL},
    {"pages 0-9 in use: only the group's free bits", {{BASE, 512}}, {{BASE, 10}}, BASE, ALL << 10},
    {"a single free page, the group's last", {{BASE, 512}}, {{BASE, 63}}, BASE, BIT(63)},
    {"a single free page inside the group",
     {{BASE, 512}},
     {{BASE, 41}, {PG(42), 22}},
     BASE,
     BIT(41)},
    {"holes above the first free page come along",
     {{BASE, 512}},
     {{BASE, 3}, {PG(20), 5}},
     BASE,
     ALL & ~MASK(0, 3) & ~MASK(20, 5)},
    {"first free page in the chunk's second group, mid-word",
     {{BASE, 512}},
     {{BASE, 100}},
     PG(64),
     ALL << 36},
    {"first free page in the chunk's last group", {{BASE, 512}}, {{BASE, 453}}, PG(448), ALL << 5},
    {"first free page in the second chunk", {{BASE, 1024}}, {{BASE, 512}}, BASE + CHUNK, ALL},
    {"second chunk, mid-word", {{BASE, 1024}}, {{BASE, 512 + 70}}, BASE + CHUNK + GROUP, ALL << 6},
    {"two ranges, the first full",
     {{BASE, 512}, {BASE + 16 * CHUNK, 512}},
     {{BASE, 512}},
     BASE + 16 * CHUNK,
     ALL},
    {"two ranges 64 GiB apart (another level-0 entry), the first full",
     {{BASE, 512}, {BASE + ((uintptr_t)64 << 30), 512}},
     {{BASE, 512}},
     BASE + ((uintptr_t)64 << 30),
     ALL},
    {"a lower range grown second pulls the hint down",
     {{BASE + 16 * CHUNK, 512}, {BASE, 512}},
     {{0, 0}},
     BASE,
     ALL},
};

/* The first allocation refills from the heap's first free page: the cache
 * takes that page's whole 64-page group, every free page of it becomes
 * allocated in the heap, and the hint moves to the group's last page. Grown
 * memory is released (scavenged), so every cached page is too. */
static void refill_takes_the_first_free_group(void **state)
{
	struct fx *f = fx_get(state);
	for (size_t k = 0; k < sizeof(refill_cases) / sizeof(refill_cases[0]); k++) {
		const struct refill_case *rc = &refill_cases[k];
		if (k > 0)
			fx_reopen(f);
		edge = rc->edge;
		size_t grown = 0, taken = 0;
		for (const struct run *r = rc->grow; r < rc->grow + 2 && r->npages; r++) {
			grow(f, r->addr, r->npages);
			grown += r->npages;
		}
		for (const struct run *r = rc->taken; r < rc->taken + 3 && r->npages; r++) {
			heap_take(f, r->addr, r->npages);
			taken += r->npages;
		}
		size_t nfree = bits_popcount(rc->free), scav;
		unsigned first = bits_ctz(rc->free);

		EQ(alloc_pages(f, 1, &scav), rc->base + first * P);
		EQ(scav, 1);
		expect_cache(f->c, rc->base, rc->free & ~BIT(first), rc->free);
		EQ(f->c->scav, rc->free); /* as taken: allocation leaves scav bits alone */
		EQ(alloc_word(f, rc->base), ALL);
		EQ(scav_word(f, rc->base), 0);
		EQ(owner_of(f, rc->base), cpu_a + 1);
		EQ(pageheap_hint(&f->h), rc->base + 63 * P);
		EQ(f->h.inuse_pages, taken + nfree);
		EQ(f->h.scav_pages, grown - taken - nfree);
		expect_stats(f, nfree - 1, 0, 1, 0);
		EQ(pageheap_verify(&f->h), 0);
		EQ(nfaults, 0);
	}
}

/* A cache whose group is used up moves on to the next group with a free page. */
static void refill_moves_on_when_the_group_is_used_up(void **state)
{
	struct fx *f = fx_get(state);
	edge = "64 single pages, then the 65th";
	grow(f, BASE, 512);
	for (unsigned i = 0; i < 64; i++) {
		size_t scav;
		EQ(alloc_pages(f, 1, &scav), PG(i));
		EQ(scav, 1);
	}
	expect_cache(f->c, BASE, 0, 0);
	expect_stats(f, 0, 0, 1, 0);
	EQ(alloc_pages(f, 1, NULL), PG(64));
	expect_cache(f->c, PG(64), ALL << 1, ALL);
	EQ(owner_of(f, BASE), 0);
	EQ(owner_of(f, PG(64)), cpu_a + 1);
	EQ(alloc_word(f, BASE), ALL);
	EQ(alloc_word(f, PG(64)), ALL);
	EQ(pageheap_hint(&f->h), PG(127));
	EQ(f->h.inuse_pages, 128);
	EQ(f->h.scav_pages, 512 - 128);
	expect_stats(f, 63, 0, 2, 0);
	EQ(pageheap_verify(&f->h), 0);
}

/* A refill hands queued frees to the heap before it looks for a group, so a
 * page freed through the queue can come straight back. */
static void refill_drains_the_queue_first(void **state)
{
	struct fx *f = fx_get(state);
	edge = "group 1 in use by the heap, page 71 queued, group 0 used up";
	grow(f, BASE, 512);
	heap_take(f, PG(64), 64);
	for (unsigned i = 0; i < 64; i++)
		EQ(alloc_pages(f, 1, NULL), PG(i));
	EQ(pagecache_free(&f->pc, PG(71), 1), PA_PAGE_OK);
	EQ(f->c->nbatch, 1);
	expect_stats(f, 0, 1, 1, 0);

	size_t scav;
	EQ(alloc_pages(f, 1, &scav), PG(71));
	EQ(scav, 0); /* it had been in use: resident */
	expect_cache(f->c, PG(64), 0, 0);
	EQ(f->c->nbatch, 0);
	EQ(owner_of(f, BASE), 0);
	EQ(owner_of(f, PG(64)), cpu_a + 1);
	EQ(alloc_word(f, PG(64)), ALL);
	EQ(pageheap_hint(&f->h), PG(127));
	EQ(f->h.inuse_pages, 128);
	expect_stats(f, 0, 0, 2, 1);
	EQ(pageheap_verify(&f->h), 0);
	EQ(nfaults, 0);
}

/* Nothing free anywhere: the allocation fails and the cache stays empty. */
static void refill_with_nothing_free_returns_0(void **state)
{
	struct fx *f = fx_get(state);
	edge = "no heap at all";
	EQ(alloc_pages(f, 1, NULL), 0);
	EQ(alloc_pages(f, 15, NULL), 0);
	expect_cache(f->c, 0, 0, 0);
	EQ(pageheap_hint(&f->h), f->h.limit_hint);
	expect_stats(f, 0, 0, 0, 0);

	fx_reopen(f);
	edge = "one chunk, all in use";
	grow(f, BASE, 512);
	heap_take(f, BASE, 512);
	EQ(alloc_pages(f, 1, NULL), 0);
	EQ(alloc_pages(f, 15, NULL), 0);
	expect_cache(f->c, 0, 0, 0);
	EQ(pageheap_hint(&f->h), f->h.limit_hint);
	EQ(f->h.inuse_pages, 512);
	expect_stats(f, 0, 0, 0, 0);
	EQ(pageheap_verify(&f->h), 0);
}

/* ---- allocation from the group ------------------------------------------- */

/* Group 0's free runs, low to high: 2, 5, 3, 12, 9 and 14 pages (the last one
 * ends at bit 63); pages 2, 8, 12, 25 and 35-49 are in use. */
#define FIT_FREE                                                                                   \
	(bits_mask(0, 2) | bits_mask(3, 5) | bits_mask(9, 3) | bits_mask(13, 12) |                 \
	 bits_mask(26, 9) | bits_mask(50, 14))

static const struct fit_case {
	const char *edge;
	size_t n;
	int page; /* first page in group 0, or -1: from the heap at PG(64) */
} fit_cases[] = {
    {"n=1: the lowest free page", 1, 0},
    {"n=2: the 2-run at the group's start, exactly", 2, 0},
    {"n=3: skips the 2-run", 3, 3},
    {"n=4", 4, 3},
    {"n=5: the 5-run, exactly", 5, 3},
    {"n=6: skips the 2-, 5- and 3-runs", 6, 13},
    {"n=7", 7, 13},
    {"n=8", 8, 13},
    {"n=9: first fit, not the later exact 9-run", 9, 13},
    {"n=10", 10, 13},
    {"n=11", 11, 13},
    {"n=12: the 12-run, exactly", 12, 13},
    {"n=13: the run that ends at bit 63", 13, 50},
    {"n=14: the run that ends at bit 63, exactly", 14, 50},
    {"n=15: no run fits, the heap (next group)", 15, -1},
};

static void alloc_is_first_fit_in_the_group_else_the_heap(void **state)
{
	struct fx *f = fx_get(state);
	for (size_t k = 0; k < sizeof(fit_cases) / sizeof(fit_cases[0]); k++) {
		const struct fit_case *fc = &fit_cases[k];
		if (k > 0)
			fx_reopen(f);
		edge = fc->edge;
		grow(f, BASE, 512);
		heap_take_mask(f, BASE, ~FIT_FREE);
		size_t scav;
		uintptr_t a = alloc_pages(f, fc->n, &scav);
		EQ(scav, fc->n); /* fresh memory: released */
		if (fc->page >= 0) {
			EQ(a, PG(fc->page));
			expect_cache(f->c, BASE,
			             FIT_FREE & ~bits_mask((unsigned)fc->page, (unsigned)fc->n),
			             ALL);
			EQ(f->h.inuse_pages, 64);
		} else {
			EQ(a, PG(64));
			expect_cache(f->c, BASE, FIT_FREE, ALL);
			EQ(alloc_word(f, PG(64)), bits_mask(0, (unsigned)fc->n));
			EQ(f->h.inuse_pages, 64 + fc->n);
		}
		expect_stats(f, bits_popcount(f->c->free), 0, 1, 0);
		EQ(pageheap_verify(&f->h), 0);
	}
}

/* Repeated allocations keep first-fitting in what is left of the group. */
static void alloc_sequence_packs_the_group(void **state)
{
	struct fx *f = fx_get(state);
	static const struct {
		size_t n;
		uintptr_t want;
	} seq[] = {
	    {15, PG(0)},  {1, PG(15)},  {7, PG(16)},
	    {15, PG(23)}, {15, PG(38)}, {11, PG(53)}, /* ends exactly at bit 63: free == 0 */
	    {1, PG(64)},                              /* the next group */
	};
	edge = "15, 1, 7, 15, 15, 11, then 1";
	grow(f, BASE, 512);
	for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]) - 1; i++)
		EQ(alloc_pages(f, seq[i].n, NULL), seq[i].want);
	expect_cache(f->c, BASE, 0, 0);
	EQ(alloc_pages(f, 1, NULL), PG(64));
	expect_cache(f->c, PG(64), ALL << 1, ALL);
	expect_stats(f, 63, 0, 2, 0);
	EQ(pageheap_verify(&f->h), 0);
}

/* ---- free ------------------------------------------------------------------ */

/* A free inside the current group sets the cache's bits; the heap's bitmap
 * does not change. A page that comes back this way is resident. */
static void free_inside_the_group_goes_back_to_the_cache(void **state)
{
	struct fx *f = fx_get(state);
	edge = "pages 0-2 allocated, page 1 freed";
	grow(f, BASE, 512);
	EQ(alloc_pages(f, 3, NULL), PG(0));
	EQ(pagecache_free(&f->pc, PG(1), 1), PA_PAGE_OK);
	expect_cache(f->c, BASE, (ALL << 3) | BIT(1), (ALL << 3));
	EQ(f->c->nbatch, 0);
	EQ(alloc_word(f, BASE), ALL);
	EQ(f->h.inuse_pages, 64);
	expect_stats(f, 62, 0, 1, 0);

	edge = "the freed page is the first fit again, and resident";
	size_t scav;
	EQ(alloc_pages(f, 1, &scav), PG(1));
	EQ(scav, 0);
	expect_cache(f->c, BASE, ALL << 3, ALL << 3);

	edge = "a run up to bit 63 (49 + 15)";
	EQ(alloc_pages(f, 15, NULL), PG(3));
	for (unsigned i = 18; i < 64; i++)
		EQ(alloc_pages(f, 1, NULL), PG(i));
	expect_cache(f->c, BASE, 0, 0);
	EQ(pagecache_free(&f->pc, PG(49), 15), PA_PAGE_OK);
	expect_cache(f->c, BASE, bits_mask(49, 15), 0);
	EQ(f->c->nbatch, 0);

	edge = "everything back";
	EQ(pagecache_free(&f->pc, PG(0), 3), PA_PAGE_OK);
	EQ(pagecache_free(&f->pc, PG(3), 15), PA_PAGE_OK);
	for (unsigned i = 18; i < 49; i++)
		EQ(pagecache_free(&f->pc, PG(i), 1), PA_PAGE_OK);
	expect_cache(f->c, BASE, ALL, 0);
	EQ(alloc_word(f, BASE), ALL);
	expect_stats(f, 64, 0, 1, 0);
	EQ(pageheap_verify(&f->h), 0);
	EQ(nfaults, 0);
}

/* A free outside the current group is queued (address | npages), also one
 * that starts in the group but runs past its end; the heap's bitmap does not
 * change until the queue drains. */
static void free_outside_the_group_is_queued(void **state)
{
	struct fx *f = fx_get(state);
	edge = "heap run 60-83 in use, cache on group 0";
	grow(f, BASE, 512);
	heap_take(f, PG(60), 24);
	EQ(alloc_pages(f, 1, NULL), PG(0));
	expect_cache(f->c, BASE, bits_mask(1, 59), ALL);
	EQ(pagecache_free(&f->pc, PG(70), 3), PA_PAGE_OK);
	EQ(pagecache_free(&f->pc, PG(80), 4), PA_PAGE_OK);
	EQ(pagecache_free(&f->pc, PG(60), 8), PA_PAGE_OK); /* 60-63 in group 0, 64-67 not */
	EQ(f->c->nbatch, 3);
	EQ(f->c->batch[0], PG(70) | 3);
	EQ(f->c->batch[1], PG(80) | 4);
	EQ(f->c->batch[2], PG(60) | 8);
	expect_cache(f->c, BASE, bits_mask(1, 59), ALL);
	EQ(alloc_word(f, BASE), ALL);
	EQ(alloc_word(f, PG(64)), bits_mask(0, 20));
	EQ(f->h.inuse_pages, 84);
	expect_stats(f, 59, 15, 1, 0);

	edge = "the flush hands them to the heap";
	pagecache_flush_all(&f->pc);
	EQ(alloc_word(f, BASE), BIT(0));
	EQ(alloc_word(f, PG(64)), bits_mask(4, 2) | bits_mask(9, 7));
	EQ(f->h.inuse_pages, 1 + 9);
	EQ(pageheap_hint(&f->h), PG(1));
	expect_stats(f, 0, 0, 1, 1);
	EQ(pageheap_verify(&f->h), 0);
	EQ(nfaults, 0);
}

/* PA_CACHE_BATCH queued frees fit; the next one drains them to the heap under
 * one lock acquisition and takes the first slot. */
static void full_queue_drains_to_the_heap(void **state)
{
	struct fx *f = fx_get(state);
	edge = "15 single-page frees of heap pages 64-78";
	grow(f, BASE, 512);
	heap_take(f, PG(64), 20);
	EQ(alloc_pages(f, 1, NULL), PG(0));
	for (unsigned i = 0; i < PA_CACHE_BATCH; i++)
		EQ(pagecache_free(&f->pc, PG(64 + i), 1), PA_PAGE_OK);
	EQ(f->c->nbatch, PA_CACHE_BATCH);
	EQ(alloc_word(f, PG(64)), bits_mask(0, 20));
	EQ(f->h.inuse_pages, 84);
	expect_stats(f, 63, 15, 1, 0);

	edge = "the 16th free drains the 15";
	EQ(pagecache_free(&f->pc, PG(79), 1), PA_PAGE_OK);
	EQ(f->c->nbatch, 1);
	EQ(f->c->batch[0], PG(79) | 1);
	EQ(alloc_word(f, PG(64)), bits_mask(15, 5));
	EQ(scav_word(f, PG(64)), ALL << 20); /* freed pages were used: resident */
	EQ(f->h.inuse_pages, 84 - 15);
	EQ(pageheap_hint(&f->h), PG(63));
	expect_cache(f->c, BASE, ALL << 1, ALL);
	expect_stats(f, 63, 1, 1, 1);
	EQ(pageheap_verify(&f->h), 0);
	EQ(nfaults, 0);
}

/* pagecache_flush_all drains the queue and gives the group back: its free
 * pages become free in the heap with their released state, the group is no
 * longer cached, and the hint drops to the group's lowest free page. */
static void flush_returns_the_group_and_the_queue(void **state)
{
	struct fx *f = fx_get(state);
	edge = "pages 0, 2-5 held, page 1 freed into the cache, 70-72 queued";
	grow(f, BASE, 512);
	EQ(alloc_pages(f, 4, NULL), PG(0));
	EQ(alloc_pages(f, 2, NULL), PG(4));
	EQ(pagecache_free(&f->pc, PG(1), 1), PA_PAGE_OK);
	heap_take(f, PG(64), 20);
	EQ(pagecache_free(&f->pc, PG(70), 3), PA_PAGE_OK);
	expect_cache(f->c, BASE, (ALL << 6) | BIT(1), ALL << 6);
	EQ(f->h.inuse_pages, 84);
	EQ(f->h.scav_pages, 512 - 84);
	EQ(pageheap_hint(&f->h), PG(63));
	expect_stats(f, 59, 3, 1, 0);

	pagecache_flush_all(&f->pc);
	expect_cache(f->c, 0, 0, 0);
	EQ(f->c->scav, 0);
	EQ(f->c->nbatch, 0);
	EQ(owner_of(f, BASE), 0);
	EQ(alloc_word(f, BASE), BIT(0) | bits_mask(2, 4));
	EQ(scav_word(f, BASE), ALL << 6); /* page 1 was used: resident */
	EQ(alloc_word(f, PG(64)), bits_mask(0, 20) & ~bits_mask(6, 3));
	EQ(scav_word(f, PG(64)), ALL << 20);
	EQ(f->h.inuse_pages, 84 - 3 - 59);
	EQ(f->h.scav_pages, 512 - 84 + 58);
	EQ(pageheap_hint(&f->h), PG(1));
	expect_stats(f, 0, 0, 1, 1);
	EQ(pageheap_verify(&f->h), 0);

	edge = "a second flush does nothing";
	pagecache_flush_all(&f->pc);
	EQ(f->h.inuse_pages, 22);
	expect_stats(f, 0, 0, 1, 1);

	edge = "the next refill takes group 0 again, released pages still released";
	size_t scav;
	EQ(alloc_pages(f, 1, &scav), PG(1));
	EQ(scav, 0);
	expect_cache(f->c, BASE, ~(BIT(0) | bits_mask(1, 5)), ALL << 6);
	EQ(alloc_pages(f, 1, &scav), PG(6));
	EQ(scav, 1);
	EQ(pageheap_hint(&f->h), PG(63));
	expect_stats(f, 57, 0, 2, 1);
	EQ(pageheap_verify(&f->h), 0);
	EQ(nfaults, 0);
}

/* ---- faults ---------------------------------------------------------------- */

/* Applied in order on one heap: pages 0-1 handed out from group 0. */
static const struct at_once_case {
	const char *edge;
	uintptr_t addr;
	size_t npages;
	enum pa_page_fault want;
	uint64_t free_after; /* the cache's free word after the call */
} at_once_cases[] = {
    {"misaligned by 1 byte", PG(0) + 1, 1, PA_PAGE_UNALIGNED, ALL << 2},
    {"misaligned by 4 KiB", PG(0) + 4096, 1, PA_PAGE_UNALIGNED, ALL << 2},
    {"misaligned by a page less a byte", PG(1) - 1, 1, PA_PAGE_UNALIGNED, ALL << 2},
    {"npages 0", PG(0), 0, PA_PAGE_BAD_SIZE, ALL << 2},
    {"npages 16 (PA_CACHE_MAX_PAGES)", PG(0), 16, PA_PAGE_BAD_SIZE, ALL << 2},
    {"npages SIZE_MAX", PG(0), SIZE_MAX, PA_PAGE_BAD_SIZE, ALL << 2},
    {"a cached page never handed out", PG(2), 1, PA_PAGE_NOT_ALLOCATED, ALL << 2},
    {"the group's last page, never handed out", PG(63), 1, PA_PAGE_NOT_ALLOCATED, ALL << 2},
    {"a run whose last page is free in the cache", PG(1), 2, PA_PAGE_NOT_ALLOCATED, ALL << 2},
    {"the two pages, once", PG(0), 2, PA_PAGE_OK, ALL},
    {"page 0 again", PG(0), 1, PA_PAGE_NOT_ALLOCATED, ALL},
    {"page 1 again", PG(1), 1, PA_PAGE_NOT_ALLOCATED, ALL},
    {"both again", PG(0), 2, PA_PAGE_NOT_ALLOCATED, ALL},
};

/* Misaligned addresses, bad sizes and double frees in the CPU's own group
 * are refused at once, and change nothing. */
static void faults_found_at_once(void **state)
{
	struct fx *f = fx_get(state);
	grow(f, BASE, 512);
	EQ(alloc_pages(f, 2, NULL), PG(0));
	for (size_t k = 0; k < sizeof(at_once_cases) / sizeof(at_once_cases[0]); k++) {
		const struct at_once_case *ac = &at_once_cases[k];
		edge = ac->edge;
		EQ(pagecache_free(&f->pc, ac->addr, ac->npages), ac->want);
		expect_cache(f->c, BASE, ac->free_after, ALL << 2);
		EQ(f->c->nbatch, 0);
		EQ(alloc_word(f, BASE), ALL);
		EQ(nfaults, 0);
	}
	EQ(f->h.inuse_pages, 64);
	EQ(pageheap_verify(&f->h), 0);
}

/* Heap: [BASE, BASE+CHUNK) and [BASE+16*CHUNK, BASE+17*CHUNK); heap pages
 * 64-83 in use; the cache holds group 0 with page 0 handed out. Every free
 * is queued; the bad ones are reported, in address order, when it drains. */
static const struct queued_case {
	const char *edge;
	struct run frees[3];
	unsigned nwant;
	struct fault_rec want[3];
	size_t inuse_after; /* after the flush */
} queued_cases[] = {
    {"the same heap page freed twice",
     {{PG(64), 1}, {PG(64), 1}},
     1,
     {{PG(64), 1, PA_PAGE_NOT_ALLOCATED}},
     20 - 1 + 1},
    {"overlapping runs",
     {{PG(70), 3}, {PG(72), 2}},
     1,
     {{PG(72), 2, PA_PAGE_NOT_ALLOCATED}},
     20 - 3 + 1},
    {"overlapping runs, the higher one queued first: reported in address order",
     {{PG(72), 2}, {PG(70), 3}},
     1,
     {{PG(72), 2, PA_PAGE_NOT_ALLOCATED}},
     20 - 3 + 1},
    {"a bad free between two adjacent good ones does not join them",
     {{PG(66), 2}, {PG(100), 1}, {PG(64), 2}},
     1,
     {{PG(100), 1, PA_PAGE_NOT_ALLOCATED}},
     20 - 4 + 1},
    {"a heap page never allocated",
     {{PG(100), 1}},
     1,
     {{PG(100), 1, PA_PAGE_NOT_ALLOCATED}},
     20 + 1},
    {"a run whose tail is free in the heap",
     {{PG(80), 6}},
     1,
     {{PG(80), 6, PA_PAGE_NOT_ALLOCATED}},
     20 + 1},
    {"in the gap between two ranges",
     {{BASE + CHUNK, 1}},
     1,
     {{BASE + CHUNK, 1, PA_PAGE_NOT_HEAP}},
     20 + 1},
    {"a run off the end of a range",
     {{BASE + CHUNK - P, 2}},
     1,
     {{BASE + CHUNK - P, 2, PA_PAGE_NOT_HEAP}},
     20 + 1},
    {"past the last range",
     {{BASE + 17 * CHUNK, 1}},
     1,
     {{BASE + 17 * CHUNK, 1, PA_PAGE_NOT_HEAP}},
     20 + 1},
    {"below the first range",
     {{BASE - CHUNK, 1}},
     1,
     {{BASE - CHUNK, 1, PA_PAGE_NOT_HEAP}},
     20 + 1},
    {"far from the heap, then a good free",
     {{(uintptr_t)0x200000000000, 3}, {PG(83), 1}},
     1,
     {{(uintptr_t)0x200000000000, 3, PA_PAGE_NOT_HEAP}},
     20 - 1 + 1},
};

static void faults_in_queued_frees_reported_at_drain(void **state)
{
	struct fx *f = fx_get(state);
	for (size_t k = 0; k < sizeof(queued_cases) / sizeof(queued_cases[0]); k++) {
		const struct queued_case *qc = &queued_cases[k];
		if (k > 0)
			fx_reopen(f);
		edge = qc->edge;
		grow(f, BASE, 512);
		grow(f, BASE + 16 * CHUNK, 512);
		heap_take(f, PG(64), 20);
		EQ(alloc_pages(f, 1, NULL), PG(0));
		size_t n = 0, queued = 0;
		for (const struct run *r = qc->frees; r < qc->frees + 3 && r->npages; r++) {
			EQ(pagecache_free(&f->pc, r->addr, r->npages), PA_PAGE_OK);
			n++;
			queued += r->npages;
		}
		EQ(f->c->nbatch, n);
		expect_stats(f, 63, queued, 1, 0);
		EQ(nfaults, 0);
		pagecache_flush_all(&f->pc);
		expect_faults(qc->want, qc->nwant);
		EQ(f->h.inuse_pages, qc->inuse_after);
		expect_stats(f, 0, 0, 1, 1);
		EQ(pageheap_verify(&f->h), 0);
	}
}

/* A drain sorts its batch and joins adjacent frees: runs queued out of
 * order reach the heap as one free per contiguous run. */
static void queued_adjacent_frees_reach_the_heap_as_one_run(void **state)
{
	struct fx *f = fx_get(state);
	edge = "heap pages 64-83 in use; queue 66-67, 70, 64-65, 68-69, 80";
	grow(f, BASE, 512);
	heap_take(f, PG(64), 20);
	EQ(alloc_pages(f, 1, NULL), PG(0));
	static const struct run frees[] = {
	    {PG(66), 2}, {PG(70), 1}, {PG(64), 2}, {PG(68), 2}, {PG(80), 1}};
	for (size_t i = 0; i < sizeof(frees) / sizeof(frees[0]); i++)
		EQ(pagecache_free(&f->pc, frees[i].addr, frees[i].npages), PA_PAGE_OK);
	EQ(f->c->nbatch, 5);
	uint64_t heap_frees = f->h.free_count;
	pagecache_flush_all(&f->pc);
	/* 64-70 joined into one heap free, 80 in a second; the group's return
	 * is the third. */
	EQ(f->h.free_count - heap_frees, 3);
	EQ(nfaults, 0);
	EQ(f->c->nbatch, 0);
	EQ(alloc_word(f, PG(64)), MASK(7, 9) | MASK(17, 3));
	EQ(alloc_word(f, PG(0)), BIT(0));
	EQ(pageheap_hint(&f->h), PG(1));
	EQ(f->h.inuse_pages, 1 + 20 - 8);
	expect_stats(f, 0, 0, 1, 1);
	EQ(pageheap_verify(&f->h), 0);
}

/* A page that sits free in another CPU's group is allocated in the heap's
 * bitmap; a free of it through a queue is still a double free. */
static void queued_free_of_a_page_free_in_another_cache(void **state)
{
	struct fx *f = fx_get(state);
	if (cpu_b < 0 || (unsigned)cpu_b >= f->pc.ncpus)
		skip();
	struct pa_pagecache *cb = &f->pc.cpus[cpu_b];
	edge = "cpu_a holds group 0; cpu_b frees its page 5";
	grow(f, BASE, 512);
	EQ(alloc_pages(f, 1, NULL), PG(0));
	pin(cpu_b);
	EQ(pagecache_free(&f->pc, PG(5), 1), PA_PAGE_OK);
	EQ(cb->nbatch, 1);
	/* cpu_b's first allocation refills, draining its queue first. */
	EQ(alloc_pages(f, 1, NULL), PG(64));
	pin(cpu_a);
	static const struct fault_rec want[] = {{PG(5), 1, PA_PAGE_NOT_ALLOCATED}};
	expect_faults(want, 1);
	expect_cache(f->c, BASE, ALL << 1, ALL);
	expect_cache(cb, PG(64), ALL << 1, ALL);
	EQ(alloc_word(f, BASE), ALL);
	EQ(owner_of(f, BASE), cpu_a + 1);
	EQ(owner_of(f, PG(64)), cpu_b + 1);
	expect_stats(f, 126, 0, 2, 1);
	pagecache_flush_all(&f->pc);
	EQ(f->h.inuse_pages, 2);
	EQ(pageheap_verify(&f->h), 0);
}

/* ---- mode selection ------------------------------------------------------- */

/* PA_CACHE_OFF: no caches; alloc and free are the heap's, faults at once. */
static void cache_off_goes_straight_to_the_heap(void **state)
{
	struct fx *f = *state;
	edge = "PA_CACHE_OFF";
	EQ(f->pc.mode, PA_CACHE_OFF);
	EQ((uintptr_t)f->pc.cpus, 0);
	EQ(f->pc.ncpus, 0);
	grow(f, BASE, 512);
	size_t scav;
	EQ(alloc_pages(f, 1, &scav), PG(0));
	EQ(scav, 1);
	EQ(alloc_pages(f, 15, NULL), PG(1));
	EQ(alloc_word(f, BASE), bits_mask(0, 16));
	EQ(f->h.inuse_pages, 16);
	EQ(pagecache_free(&f->pc, PG(0), 1), PA_PAGE_OK);
	EQ(alloc_word(f, BASE), bits_mask(1, 15));
	EQ(f->h.inuse_pages, 15);
	EQ(pageheap_hint(&f->h), PG(0));
	EQ(pagecache_free(&f->pc, PG(0), 1), PA_PAGE_NOT_ALLOCATED);
	EQ(pagecache_free(&f->pc, (uintptr_t)0x200000000000, 1), PA_PAGE_NOT_HEAP);
	EQ(pagecache_free(&f->pc, (uintptr_t)0x2000, 1), PA_PAGE_NOT_HEAP);
	EQ(pagecache_free(&f->pc, PG(1) + 8, 1), PA_PAGE_UNALIGNED);
	EQ(pagecache_free(&f->pc, PG(1), 16), PA_PAGE_BAD_SIZE);
	EQ(pagecache_free(&f->pc, PG(1), 15), PA_PAGE_OK);
	EQ(f->h.inuse_pages, 0);
	pagecache_flush_all(&f->pc);
	expect_stats(f, 0, 0, 0, 0);
	EQ(pageheap_verify(&f->h), 0);
	EQ(nfaults, 0);
}

extern char **environ;

/* Run this binary as `--child what` with name=value (NAME= prefix) replacing
 * that variable (or the environment as is, for NULL); its exit status. */
static int run_child(const char *what, const char *setenv_entry)
{
	size_t n = 0;
	while (environ[n] != NULL)
		n++;
	char **env = calloc(n + 2, sizeof(*env));
	assert_non_null(env);
	size_t k = 0, namelen = 0;
	if (setenv_entry != NULL)
		namelen = (size_t)(strchr(setenv_entry, '=') - setenv_entry) + 1;
	for (size_t i = 0; i < n; i++)
		if (setenv_entry == NULL || strncmp(environ[i], setenv_entry, namelen) != 0)
			env[k++] = environ[i];
	if (setenv_entry != NULL)
		env[k++] = (char *)setenv_entry;
	env[k] = NULL;
	char *argv[] = {(char *)"test_pagecache", (char *)"--child", (char *)what, NULL};
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		execve("/proc/self/exe", argv, env);
		_exit(127);
	}
	free(env);
	assert_true(pid > 0);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* What pagecache_init(PA_CACHE_RSEQ) gives in this process. */
static int rseq_mode_here(void)
{
	struct pa_pageheap h;
	struct pa_pagecache_set pc;
	struct pa_pageheap_opts o = {.metadata_only = 1};
	assert_int_equal(pageheap_init(&h, &o), 0);
	assert_int_equal(pagecache_init(&pc, &h, PA_CACHE_RSEQ), 0);
	int mode = (int)pc.mode;
	pagecache_destroy(&pc);
	pageheap_destroy(&h);
	return mode;
}

/* Child: exit with the mode pagecache_init(PA_CACHE_RSEQ) yields. */
static int child_rseq_mode(void)
{
	return rseq_mode_here();
}

/* Child: the default heap under PAGEALLOC_CONF. Exits with pa_stats'
 * cache_mode, or 10 + the number of the check that failed. Runs of 16 pages
 * and more never touch the caches; 15 pages do, unless they are off. */
static int child_public(void)
{
	struct pa_stats s;
	if (pa_stats(&s) != 0)
		return 10;
	int mode = s.cache_mode;
	void *big = pa_pages_alloc(16);
	if (big == NULL || pa_stats(&s) != 0)
		return 11;
	if (s.cache_refills != 0 || s.cache_free != 0 || s.heap_inuse != 16 * PA_PAGE_BYTES)
		return 12;
	void *small = pa_pages_alloc(15);
	if (small == NULL || pa_stats(&s) != 0)
		return 13;
	size_t want_inuse = mode == 0 ? 31 : 64, want_free = mode == 0 ? 0 : 64 - 16 - 15;
	if (s.cache_refills != (mode == 0 ? 0u : 1u) || s.cache_free != want_free * PA_PAGE_BYTES ||
	    s.heap_inuse != want_inuse * PA_PAGE_BYTES || (char *)small != (char *)big + 16 * P) {
		fprintf(stderr, "mode %d refills %" PRIu64 " cache_free %zu inuse %zu\n", mode,
		        s.cache_refills, s.cache_free, s.heap_inuse);
		return 14;
	}
	pa_pages_free(big, 16);
	pa_pages_free(small, 15);
	pa_cache_flush();
	if (pa_stats(&s) != 0 || s.heap_inuse != 0 || s.cache_free != 0 || s.cache_queued != 0)
		return 15;
	return mode;
}

static void rseq_tunable_off_falls_back_to_locked(void **state)
{
	(void)state;
	edge = "GLIBC_TUNABLES=glibc.pthread.rseq=0";
	EQ(run_child("rseq-mode", "GLIBC_TUNABLES=glibc.pthread.rseq=0"), PA_CACHE_LOCKED);
	edge = "the environment as is: the same mode as this process";
	EQ(run_child("rseq-mode", NULL), rseq_mode_here());
}

static void pagealloc_conf_selects_the_cache_mode(void **state)
{
	(void)state;
	edge = "percpu_cache=off";
	EQ(run_child("public", "PAGEALLOC_CONF=percpu_cache=off,scavenger=off"), 0);
	edge = "percpu_cache=locked";
	EQ(run_child("public", "PAGEALLOC_CONF=percpu_cache=locked,scavenger=off"), 1);
	edge = "percpu_cache=on: rseq where this process has it";
	EQ(run_child("public", "PAGEALLOC_CONF=percpu_cache=on,scavenger=off"), rseq_mode_here());
}

/* ---- known bugs ------------------------------------------------------------- */

/*
 * An empty cache has base 0, and the group at address 0 is not heap. A
 * wild pointer in the first 512 KiB of the address space must not be taken
 * for a free inside that "group": it is not heap (reported at once or when
 * the queue drains), and the next allocation must come from the heap.
 */
static void bug_wild_low_pointer_with_an_empty_cache(void **state)
{
	struct fx *f = fx_get(state);
	static const struct {
		const char *edge;
		uintptr_t addr;
		size_t npages;
	} cases[] = {
	    {"0x2000, 1 page, cache empty", 0x2000, 1},
	    {"0x7e000 (page 63 of group 0), 1 page, cache empty", 0x7e000, 1},
	    {"0x4000, 15 pages, cache empty", 0x4000, 15},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		if (k > 0)
			fx_reopen(f);
		edge = cases[k].edge;
		grow(f, BASE, 512);
		enum pa_page_fault r = pagecache_free(&f->pc, cases[k].addr, cases[k].npages);
		assert_true(r == PA_PAGE_OK || r == PA_PAGE_NOT_HEAP);
		EQ(alloc_pages(f, cases[k].npages, NULL), PG(0));
		EQ(f->c->base, BASE);
		pagecache_flush_all(&f->pc);
		if (r == PA_PAGE_OK) {
			struct fault_rec want = {cases[k].addr, cases[k].npages, PA_PAGE_NOT_HEAP};
			expect_faults(&want, 1);
		}
		EQ(f->h.inuse_pages, cases[k].npages);
		EQ(pageheap_verify(&f->h), 0);
	}
}

/*
 * A queued free whose run straddles the end of a cached group, and whose
 * pages in that group sit free in the cache, is a double free: those pages
 * are allocated in the heap's bitmap only because the cache holds them.
 */
static void bug_queued_free_straddling_a_cached_group(void **state)
{
	struct fx *f = fx_get(state);
	edge = "free(62, 4 pages): 62-63 free in the cache, 64-65 live";
	grow(f, BASE, 512);
	heap_take(f, PG(64), 20);
	EQ(alloc_pages(f, 1, NULL), PG(0));
	EQ(pagecache_free(&f->pc, PG(62), 4), PA_PAGE_OK); /* crosses the group: queued */
	EQ(f->c->nbatch, 1);
	pagecache_flush_all(&f->pc);
	static const struct fault_rec want[] = {{PG(62), 4, PA_PAGE_NOT_ALLOCATED}};
	expect_faults(want, 1);
	EQ(f->h.inuse_pages, 1 + 20);
	EQ(pageheap_verify(&f->h), 0);
}

/*
 * A free inside the CPU's own group is checked only against the cache's free
 * bits. A page of that group can also be free in the heap: one that was in
 * use when the cache took the group and was then freed through a queue. A
 * second free of it is a double free.
 */
static void bug_free_in_the_group_of_a_page_free_in_the_heap(void **state)
{
	struct fx *f = fx_get(state);
	edge = "heap run 60-67 freed through the queue, then page 60 freed again";
	grow(f, BASE, 512);
	heap_take(f, PG(60), 8); /* live heap run across groups 0 and 1 */
	EQ(alloc_pages(f, 1, NULL), PG(0));
	expect_cache(f->c, BASE, bits_mask(1, 59), ALL);
	EQ(pagecache_free(&f->pc, PG(60), 8), PA_PAGE_OK); /* queued */
	heap_take(f, PG(128), PA_CACHE_BATCH);
	for (unsigned i = 0; i < PA_CACHE_BATCH; i++) /* the last one drains the queue */
		EQ(pagecache_free(&f->pc, PG(128 + i), 1), PA_PAGE_OK);
	EQ(f->c->nbatch, 1);
	EQ(alloc_word(f, BASE) & bits_mask(60, 4), 0); /* 60-63 free in the heap */
	EQ(f->c->base, BASE);                          /* ... and the cache still on group 0 */
	EQ(pagecache_free(&f->pc, PG(60), 1), PA_PAGE_NOT_ALLOCATED);
	EQ(nfaults, 0);
	expect_cache(f->c, BASE, bits_mask(1, 59), ALL);
	pagecache_flush_all(&f->pc);
	EQ(f->h.inuse_pages, 1);
	EQ(pageheap_verify(&f->h), 0);
}

/*
 * Two caches can hold the same group (cpu_b refills with a page of cpu_a's
 * group that was freed through cpu_b's queue), but cached_by has one slot:
 * the second owner overwrites it and clears it when it moves on, while cpu_a
 * still holds the group. A queued double free of a page free in cpu_a's
 * cache must still be found.
 */
static void bug_queued_double_free_after_a_shared_group(void **state)
{
	struct fx *f = fx_get(state);
	if (cpu_b < 0 || (unsigned)cpu_b >= f->pc.ncpus)
		skip();
	struct pa_pagecache *cb = &f->pc.cpus[cpu_b];
	edge = "cpu_a on group 0; cpu_b takes page 0 of it, moves on, frees page 5";
	grow(f, BASE, 512);
	EQ(alloc_pages(f, 1, NULL), PG(0)); /* cpu_a: group 0 */
	pin(cpu_b);
	EQ(pagecache_free(&f->pc, PG(0), 1), PA_PAGE_OK); /* queued on cpu_b */
	EQ(alloc_pages(f, 1, NULL), PG(0)); /* drain, refill: cpu_b gets group 0's page 0 */
	expect_cache(cb, BASE, 0, 0);
	expect_cache(f->c, BASE, ALL << 1, ALL);
	EQ(alloc_pages(f, 1, NULL), PG(64));              /* cpu_b moves on to group 1 */
	EQ(pagecache_free(&f->pc, PG(5), 1), PA_PAGE_OK); /* queued: free in cpu_a's cache */
	for (unsigned i = 65; i < 128; i++)               /* use up group 1 */
		EQ(alloc_pages(f, 1, NULL), PG(i));
	uintptr_t next = alloc_pages(f, 1, NULL); /* refill: drains cpu_b's queue */
	pin(cpu_a);
	static const struct fault_rec want[] = {{PG(5), 1, PA_PAGE_NOT_ALLOCATED}};
	expect_faults(want, 1);
	EQ(next, PG(128));
	EQ(alloc_word(f, BASE), ALL);
	expect_cache(f->c, BASE, ALL << 1, ALL);
}

/*
 * rseq fast paths read free and scav, then commit with a sequence that
 * re-checks gen and free but not scav, and stores the scav word they read.
 * Fast paths do not change gen, so free can go A -> B -> A in between (a page
 * handed out and freed again on the same CPU) while its scav bit is cleared:
 * the commit then writes the stale scav word back, and a page that was used
 * is reported released (zero-filled) to its next owner. A thread preempted
 * between its snapshot and its commit, with others running on that CPU,
 * does this; a timer signal whose handler allocates and frees one page on the
 * same cache reproduces it within a few thousand interruptions. Violations
 * are never false: a reported-released page that was handed out before.
 */
#define ABA_PAGES (8192u * 512u) /* one L2 block of chunks: 32 GiB of heap */

static struct fx *aba_fx;
static uint8_t *aba_used; /* bit per page: handed out at least once */
static volatile unsigned aba_ops;

static int aba_test_and_mark(uintptr_t a)
{
	size_t i = (a - BASE) / P;
	int was = (aba_used[i / 8] >> (i % 8)) & 1;
	aba_used[i / 8] |= (uint8_t)(1u << (i % 8));
	return was;
}

static void aba_on_timer(int sig)
{
	(void)sig;
	struct pa_pagecache *c = aba_fx->c;
	/* The interrupted thread owns the cache (slow path): do not wait for it. */
	if ((__atomic_load_n(&c->gen, __ATOMIC_RELAXED) & 1) ||
	    __atomic_load_n(&c->free, __ATOMIC_RELAXED) == 0)
		return;
	uintptr_t a = pagecache_alloc(&aba_fx->pc, 1, NULL);
	if (a == 0)
		return;
	aba_test_and_mark(a);
	pagecache_free(&aba_fx->pc, a, 1);
	aba_ops++;
}

static void bug_rseq_fast_path_commits_a_stale_scav_word(void **state)
{
	struct fx *f = fx_get(state);
	edge = "single pages from a fresh heap, a handler allocating and freeing in between";
	aba_fx = f;
	aba_ops = 0;
	aba_used = calloc(ABA_PAGES / 8, 1);
	assert_non_null(aba_used);
	grow(f, BASE, ABA_PAGES);

	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = aba_on_timer;
	sa.sa_flags = SA_RESTART;
	assert_int_equal(sigaction(SIGRTMIN, &sa, &old), 0);
	struct sigevent ev;
	memset(&ev, 0, sizeof(ev));
	ev.sigev_notify = SIGEV_SIGNAL;
	ev.sigev_signo = SIGRTMIN;
	timer_t t;
	assert_int_equal(timer_create(CLOCK_MONOTONIC, &ev, &t), 0);
	struct itimerspec every_20us = {{0, 20000}, {0, 20000}}, stop = {{0, 0}, {0, 0}};
	assert_int_equal(timer_settime(t, 0, &every_20us, NULL), 0);

	size_t stale = 0, first_stale_page = 0;
	for (;;) {
		size_t scav = 0;
		uintptr_t a = pagecache_alloc(&f->pc, 1, &scav);
		if (a == 0)
			break;
		if (aba_test_and_mark(a) && scav != 0 && stale++ == 0)
			first_stale_page = (a - BASE) / P;
	}
	assert_int_equal(timer_settime(t, 0, &stop, NULL), 0);
	assert_int_equal(timer_delete(t), 0);
	assert_int_equal(sigaction(SIGRTMIN, &old, NULL), 0);
	free(aba_used);
	if (stale != 0)
		print_error("[%s] %zu used pages reported released (first: page %zu), "
		            "%u handler alloc/free pairs\n",
		            edge, stale, first_stale_page, aba_ops);
	assert_true(aba_ops > 0); /* the interleaving was exercised */
	EQ(stale, 0);
}

/*
 * The public API frees runs of 16 pages and more straight to the heap
 * (pages.c). Pages a cache holds are allocated in the heap's bitmap, so the
 * heap's own check cannot see that such a run sits free in a cache: a double
 * free of it must still abort. Child: exits 0 if the double free went
 * through, 20+ if the heap did not take the expected shape.
 */
static int child_double_free_16(void)
{
	char *x = pa_pages_alloc(1); /* the cache takes group 0 */
	char *y = pa_pages_alloc(16);
	char *p = pa_pages_alloc(16);
	if (x == NULL || y != x + 64 * P || p != x + 80 * P)
		return 20;
	pa_pages_free(y, 16);
	pa_pages_free(p, 16);
	for (unsigned i = 1; i < 64; i++)
		if (pa_pages_alloc(1) != x + i * P)
			return 21;
	if (pa_pages_alloc(1) != y) /* refill: group 1, with p's pages free in it */
		return 22;
	struct pa_stats s;
	if (pa_stats(&s) != 0 || s.cache_free != 63 * PA_PAGE_BYTES)
		return 23;
	pa_pages_free(p, 16); /* double free: must abort */
	return 0;
}

static void bug_public_double_free_of_16_pages_free_in_a_cache(void **state)
{
	(void)state;
	edge = "pa_pages_free(p, 16) twice, p's pages free in a cache the second time";
	EQ(run_child("double-free-16", "PAGEALLOC_CONF=scavenger=off"), 128 + SIGABRT);
}

/* ---- main ------------------------------------------------------------------ */

#define IN_MODES(fn)                                                                               \
	{#fn " [locked]", fn, fx_setup, fx_teardown, &mode_locked},                                \
	{                                                                                          \
#fn " [rseq]", fn, fx_setup, fx_teardown, &mode_rseq                               \
	}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--child") == 0) {
		if (strcmp(argv[2], "rseq-mode") == 0)
			return child_rseq_mode();
		if (strcmp(argv[2], "public") == 0)
			return child_public();
		if (strcmp(argv[2], "double-free-16") == 0)
			return child_double_free_16();
		return 100;
	}
	pin_setup();
	const struct CMUnitTest tests[] = {
	    IN_MODES(refill_takes_the_first_free_group),
	    IN_MODES(refill_moves_on_when_the_group_is_used_up),
	    IN_MODES(refill_drains_the_queue_first),
	    IN_MODES(refill_with_nothing_free_returns_0),
	    IN_MODES(alloc_is_first_fit_in_the_group_else_the_heap),
	    IN_MODES(alloc_sequence_packs_the_group),
	    IN_MODES(free_inside_the_group_goes_back_to_the_cache),
	    IN_MODES(free_outside_the_group_is_queued),
	    IN_MODES(full_queue_drains_to_the_heap),
	    IN_MODES(flush_returns_the_group_and_the_queue),
	    IN_MODES(faults_found_at_once),
	    IN_MODES(faults_in_queued_frees_reported_at_drain),
	    IN_MODES(queued_free_of_a_page_free_in_another_cache),
	    IN_MODES(queued_adjacent_frees_reach_the_heap_as_one_run),
	    cmocka_unit_test_prestate_setup_teardown(cache_off_goes_straight_to_the_heap, fx_setup,
	                                             fx_teardown, &mode_off),
	    cmocka_unit_test(rseq_tunable_off_falls_back_to_locked),
	    cmocka_unit_test(pagealloc_conf_selects_the_cache_mode),
	    IN_MODES(bug_wild_low_pointer_with_an_empty_cache),
	    IN_MODES(bug_queued_free_straddling_a_cached_group),
	    IN_MODES(bug_free_in_the_group_of_a_page_free_in_the_heap),
	    IN_MODES(bug_queued_double_free_after_a_shared_group),
	    cmocka_unit_test(bug_public_double_free_of_16_pages_free_in_a_cache),
	    {"bug_rseq_fast_path_commits_a_stale_scav_word [rseq]",
	     bug_rseq_fast_path_commits_a_stale_scav_word, fx_setup, fx_teardown, &mode_rseq},
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
