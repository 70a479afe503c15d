/*
 * testutil.h — helpers for the page-heap tests (header-only: every helper is
 * static inline, so a test that does not use one pays nothing for it).
 *
 *  - Metadata-only heaps at fake addresses. Such a heap never maps or touches
 *    its pages, so any chunk-aligned address below 2^47 can be heap. Tests
 *    name addresses by chunk and page relative to TU_BASE (16 TiB, a multiple
 *    of every level's entry size, so chunk k has the same position inside
 *    8-, 64-, 512- and 4096-chunk blocks as the number k itself):
 *    TU_PAGE(3, 10) is page 10 of chunk 3.
 *  - Tables that describe heap states the way the Go runtime's tests do:
 *    lists of {chunk, first page, npages} runs, ended by npages == 0, applied
 *    with pageheap_alloc_range_locked (single-threaded tests call *_locked
 *    functions without taking the lock).
 *  - An independent reference checker (tu_check): it recomputes every
 *    summary at every level from the allocation bitmaps by scanning pages
 *    one at a time, packs them with its own packing code, and compares the
 *    packed words; it also checks the page counters, the range list, the
 *    hint invariant, and then that pageheap_verify agrees (0 violations).
 *  - TU_EQ: an equality assertion whose failure message names the table
 *    case being run (tu_case), the expression, and both values in hex.
 */
#ifndef PA_TESTUTIL_H
#define PA_TESTUTIL_H

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* 1 in a build with ASan or TSan: their runtimes make threads of their own
 * (pthread_create dies under an address-space limit instead of failing) and
 * run programs several times slower. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TU_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TU_UNDER_SANITIZER 1
#endif
#endif
#ifndef TU_UNDER_SANITIZER
#define TU_UNDER_SANITIZER 0
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pageheap.h"

/* ---- addresses ----------------------------------------------------------- */

#define TU_TIB ((uintptr_t)1 << 40)
#define TU_BASE ((uintptr_t)16 << 40)
#define TU_CHUNK(k) (TU_BASE + (uintptr_t)(k)*PA_CHUNK_SIZE)
#define TU_PAGE(k, p) (TU_CHUNK(k) + (uintptr_t)(p)*PA_PAGE_SIZE)

/* ---- assertions that name the case ---------------------------------------- */

/* The table case being run, for failure messages ("" outside tables). */
static const char *tu_case __attribute__((unused)) = "";

/* Per-test setup: a failed table case must not leave its name behind. */
static inline int tu_reset(void **state)
{
	(void)state;
	tu_case = "";
	return 0;
}

/* Register a test with tu_reset as its setup. */
#define TU_TEST(f) cmocka_unit_test_setup(f, tu_reset)

#define TU_EQ(got, want)                                                                           \
	do {                                                                                       \
		uintmax_t tu_g_ = (uintmax_t)(got), tu_w_ = (uintmax_t)(want);                     \
		if (tu_g_ != tu_w_)                                                                \
			fail_msg("%s%s%s:%d: %s is %#jx (%ju), want %#jx (%ju)", tu_case,          \
			         *tu_case ? ": " : "", __FILE__, __LINE__, #got, tu_g_, tu_g_,     \
			         tu_w_, tu_w_);                                                    \
	} while (0)

/* ---- a deterministic generator -------------------------------------------- */

static inline uint64_t tu_xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* PA_TEST_SCALE multiplies the work of long tests (default 1; 0.1 for a tenth). */
static inline double tu_scale(void)
{
	const char *s = getenv("PA_TEST_SCALE");
	double v = s != NULL ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

/* ---- heaps --------------------------------------------------------------- */

#define TU_MAX_RANGES 1024

/* A metadata-only heap plus the test's own record of what is heap: sorted,
 * adjacent ranges merged, kept independently of the heap's range list. */
struct tu_heap {
	struct pa_pageheap h;
	size_t nranges;
	uintptr_t base[TU_MAX_RANGES], limit[TU_MAX_RANGES];
};

/* A run of pages for state tables: npages from page `page` of chunk `chunk`
 * (relative to TU_BASE); may cross chunks. npages == 0 ends a list. */
struct tu_run {
	size_t chunk;
	unsigned page;
	size_t npages;
};

/* Chunks [chunk, chunk + n) relative to TU_BASE. n == 0 ends a list. */
struct tu_chunks {
	size_t chunk, n;
};

static inline struct tu_heap *tu_heap_new_window(unsigned window_bits, uintptr_t window_base)
{
	struct tu_heap *t = calloc(1, sizeof(*t));
	assert_non_null(t);
	struct pa_pageheap_opts o = {
	    .metadata_only = 1, .window_bits = window_bits, .window_base = window_base};
	TU_EQ(pageheap_init(&t->h, &o), 0);
	return t;
}

static inline struct tu_heap *tu_heap_new(void)
{
	return tu_heap_new_window(0, 0);
}

static inline void tu_heap_free(struct tu_heap *t)
{
	if (t == NULL)
		return;
	pageheap_destroy(&t->h);
	free(t);
}

/* Record [base, limit) as heap in the test's own list. */
static inline void tu_note_range(struct tu_heap *t, uintptr_t base, uintptr_t limit)
{
	size_t i = 0;
	while (i < t->nranges && t->base[i] < base)
		i++;
	assert_true(t->nranges < TU_MAX_RANGES);
	memmove(&t->base[i + 1], &t->base[i], (t->nranges - i) * sizeof(t->base[0]));
	memmove(&t->limit[i + 1], &t->limit[i], (t->nranges - i) * sizeof(t->limit[0]));
	t->base[i] = base;
	t->limit[i] = limit;
	t->nranges++;
	/* Merge neighbours that touch. */
	for (size_t j = 0; j + 1 < t->nranges;) {
		if (t->limit[j] == t->base[j + 1]) {
			t->limit[j] = t->limit[j + 1];
			memmove(&t->base[j + 1], &t->base[j + 2],
			        (t->nranges - j - 2) * sizeof(t->base[0]));
			memmove(&t->limit[j + 1], &t->limit[j + 2],
			        (t->nranges - j - 2) * sizeof(t->limit[0]));
			t->nranges--;
		} else {
			j++;
		}
	}
}

/* Grow the heap by nchunks chunks at base; must succeed. */
static inline void tu_grow(struct tu_heap *t, uintptr_t base, size_t nchunks)
{
	TU_EQ(pageheap_grow_range(&t->h, base, nchunks * PA_CHUNK_PAGES), 0);
	tu_note_range(t, base, base + nchunks * PA_CHUNK_SIZE);
}

static inline void tu_grow_chunks(struct tu_heap *t, const struct tu_chunks *r)
{
	for (; r != NULL && r->n != 0; r++)
		tu_grow(t, TU_CHUNK(r->chunk), r->n);
}

/* Mark every run of the list allocated (the pages must be free). */
static inline void tu_alloc_runs(struct tu_heap *t, const struct tu_run *r)
{
	for (; r != NULL && r->npages != 0; r++)
		pageheap_alloc_range_locked(&t->h, TU_PAGE(r->chunk, r->page), r->npages);
}

/* Make the free pages of every run resident: clear their scav bits (pages
 * start released when the heap grows) and keep scav_pages in step. */
static inline void tu_make_resident(struct tu_heap *t, const struct tu_run *r)
{
	for (; r != NULL && r->npages != 0; r++) {
		for (size_t i = 0; i < r->npages; i++) {
			uintptr_t a = TU_PAGE(r->chunk, r->page) + i * PA_PAGE_SIZE;
			struct pa_chunk *c = pageheap_chunk(&t->h, a);
			unsigned p = (unsigned)((a >> PA_PAGE_SHIFT) & (PA_CHUNK_PAGES - 1));
			uint64_t bit = (uint64_t)1 << (p % 64);
			assert_true((c->alloc[p / 64] & bit) == 0);
			if (c->scav[p / 64] & bit) {
				c->scav[p / 64] &= ~bit;
				t->h.scav_pages--;
			}
		}
	}
}

/* A heap grown with `ranges`, then with `allocs` marked allocated. */
static inline struct tu_heap *tu_heap_build(const struct tu_chunks *ranges,
                                            const struct tu_run *allocs)
{
	struct tu_heap *t = tu_heap_new();
	tu_grow_chunks(t, ranges);
	tu_alloc_runs(t, allocs);
	return t;
}

/* ---- bitmap comparison ------------------------------------------------------ */

static inline int tu_page_allocated(const struct tu_heap *t, uintptr_t a)
{
	const struct pa_chunk *c = pageheap_chunk(&t->h, a);
	unsigned p = (unsigned)((a >> PA_PAGE_SHIFT) & (PA_CHUNK_PAGES - 1));
	return (int)((c->alloc[p / 64] >> (p % 64)) & 1);
}

/* The allocation bitmap of every heap chunk equals exactly the runs listed. */
static inline void tu_expect_alloc(const struct tu_heap *t, const struct tu_run *want)
{
	for (size_t r = 0; r < t->nranges; r++) {
		for (uintptr_t cb = t->base[r]; cb < t->limit[r]; cb += PA_CHUNK_SIZE) {
			uint64_t w[PA_CHUNK_WORDS] = {0};
			uintptr_t cpage = cb / PA_PAGE_SIZE;
			for (const struct tu_run *x = want; x->npages != 0; x++) {
				uintptr_t s = TU_PAGE(x->chunk, x->page) / PA_PAGE_SIZE;
				uintptr_t e = s + x->npages;
				for (uintptr_t g = s > cpage ? s : cpage;
				     g < e && g < cpage + PA_CHUNK_PAGES; g++)
					w[(g - cpage) / 64] |= (uint64_t)1 << ((g - cpage) % 64);
			}
			const struct pa_chunk *c = pageheap_chunk(&t->h, cb);
			for (unsigned i = 0; i < PA_CHUNK_WORDS; i++)
				if (c->alloc[i] != w[i])
					fail_msg("%s: chunk at %#" PRIxPTR
					         " (TU chunk %jd) word %u: "
					         "alloc bits %#" PRIx64 ", want %#" PRIx64,
					         tu_case, cb,
					         (intmax_t)(cb - TU_BASE) / (intmax_t)PA_CHUNK_SIZE,
					         i, c->alloc[i], w[i]);
		}
	}
}

/* ---- the reference summary checker ------------------------------------------- */

struct tu_sum {
	uint64_t start, max, end;
};

/* Streams pages in address order: free ones extend the current run. */
struct tu_acc {
	uint64_t start, max, cur;
	int broken; /* an in-use page has been seen: start is final */
};

static inline void tu_acc_free(struct tu_acc *a, uint64_t n)
{
	if (!a->broken)
		a->start += n;
	a->cur += n;
	if (a->cur > a->max)
		a->max = a->cur;
}

static inline void tu_acc_used(struct tu_acc *a, uint64_t n)
{
	if (n != 0) {
		a->broken = 1;
		a->cur = 0;
	}
}

/* A region of `size` pages known by its (start, max, end). */
static inline void tu_acc_region(struct tu_acc *a, struct tu_sum s, uint64_t size)
{
	if (s.start == size) {
		tu_acc_free(a, size);
		return;
	}
	tu_acc_free(a, s.start);
	tu_acc_used(a, 1);
	if (s.max > a->max)
		a->max = s.max;
	tu_acc_free(a, s.end);
}

static inline struct tu_sum tu_acc_sum(const struct tu_acc *a)
{
	struct tu_sum s = {a->start, a->max, a->cur};
	return s;
}

/* One chunk, page by page. */
static inline struct tu_sum tu_naive_chunk(const struct pa_chunk *c)
{
	struct tu_acc a = {0, 0, 0, 0};
	for (unsigned p = 0; p < PA_CHUNK_PAGES; p++) {
		if ((c->alloc[p / 64] >> (p % 64)) & 1)
			tu_acc_used(&a, 1);
		else
			tu_acc_free(&a, 1);
	}
	return tu_acc_sum(&a);
}

/* The packed form, written from the format description in summary.h. */
static inline uint64_t tu_pack(struct tu_sum s)
{
	if (s.max == (uint64_t)1 << 21) {
		assert_true(s.start == s.max && s.end == s.max);
		return (uint64_t)1 << 63;
	}
	assert_true(s.start < (1u << 21) && s.max < (1u << 21) && s.end < (1u << 21));
	return s.start | s.max << 21 | s.end << 42;
}

/* Naive summaries of every heap chunk, in range order. */
struct tu_leaves {
	size_t n;
	struct tu_sum *v;
	size_t first[TU_MAX_RANGES]; /* index of each range's first chunk */
};

static inline void tu_leaves_build(const struct tu_heap *t, struct tu_leaves *L)
{
	size_t n = 0;
	for (size_t r = 0; r < t->nranges; r++) {
		L->first[r] = n;
		n += (t->limit[r] - t->base[r]) / PA_CHUNK_SIZE;
	}
	L->n = n;
	L->v = calloc(n ? n : 1, sizeof(L->v[0]));
	assert_non_null(L->v);
	for (size_t r = 0; r < t->nranges; r++)
		for (uintptr_t cb = t->base[r]; cb < t->limit[r]; cb += PA_CHUNK_SIZE)
			L->v[L->first[r] + (cb - t->base[r]) / PA_CHUNK_SIZE] =
			    tu_naive_chunk(pageheap_chunk(&t->h, cb));
}

/* The expected summary of [rb, re): heap chunks by their naive summary,
 * everything that is not heap as in use. */
static inline struct tu_sum tu_expected(const struct tu_heap *t, const struct tu_leaves *L,
                                        uintptr_t rb, uintptr_t re)
{
	struct tu_acc a = {0, 0, 0, 0};
	uintptr_t cur = rb;
	for (size_t r = 0; r < t->nranges; r++) {
		if (t->limit[r] <= rb || t->base[r] >= re)
			continue;
		uintptr_t from = t->base[r] > rb ? t->base[r] : rb;
		uintptr_t to = t->limit[r] < re ? t->limit[r] : re;
		tu_acc_used(&a, (from - cur) / PA_PAGE_SIZE);
		for (uintptr_t cb = from; cb < to; cb += PA_CHUNK_SIZE)
			tu_acc_region(&a, L->v[L->first[r] + (cb - t->base[r]) / PA_CHUNK_SIZE],
			              PA_CHUNK_PAGES);
		cur = to;
	}
	tu_acc_used(&a, (re - cur) / PA_PAGE_SIZE);
	return tu_acc_sum(&a);
}

static inline void tu_check_entry(const struct tu_heap *t, const struct tu_leaves *L, unsigned l,
                                  size_t i)
{
	const struct pa_pageheap *h = &t->h;
	uintptr_t rb = h->window_base + ((uintptr_t)i << PA_LEVEL_SHIFT(l));
	uintptr_t re = rb + ((uintptr_t)1 << PA_LEVEL_SHIFT(l));
	struct tu_sum want = tu_expected(t, L, rb, re);
	uint64_t got = h->sum[l][i];
	if (got != tu_pack(want))
		fail_msg("%s: level %u entry %zu [%#" PRIxPTR ", %#" PRIxPTR "): summary %#" PRIx64
		         " (start %u max %u end %u), want start %" PRIu64 " max %" PRIu64
		         " end %" PRIu64,
		         tu_case, l, i, rb, re, got, sum_start(got), sum_max(got), sum_end(got),
		         want.start, want.max, want.end);
}

/* Every summary the tree may read: all of level 0, and at levels 1-4 every
 * entry of each fanout block that covers heap (non-heap siblings must be 0). */
static inline void tu_check_summaries(const struct tu_heap *t)
{
	const struct pa_pageheap *h = &t->h;
	struct tu_leaves L;
	tu_leaves_build(t, &L);
	for (size_t i = 0; i < h->sum_len[0]; i++)
		tu_check_entry(t, &L, 0, i);
	for (unsigned l = 1; l < PA_SUM_LEVELS; l++) {
		size_t next = 0;
		for (size_t r = 0; r < t->nranges; r++) {
			size_t lo = (t->base[r] - h->window_base) >> PA_LEVEL_SHIFT(l);
			size_t hi = ((t->limit[r] - 1 - h->window_base) >> PA_LEVEL_SHIFT(l)) + 1;
			lo &= ~(size_t)(PA_SUM_FANOUT - 1);
			hi = (hi + PA_SUM_FANOUT - 1) & ~(size_t)(PA_SUM_FANOUT - 1);
			if (hi > h->sum_len[l])
				hi = h->sum_len[l];
			for (size_t i = lo > next ? lo : next; i < hi; i++)
				tu_check_entry(t, &L, l, i);
			if (hi > next)
				next = hi;
		}
	}
	free(L.v);
}

/* Counters, the range list, invariant 4 and the hint invariant. */
static inline void tu_check_accounting(const struct tu_heap *t)
{
	const struct pa_pageheap *h = &t->h;
	size_t mapped = 0, inuse = 0, scav = 0;
	for (size_t r = 0; r < t->nranges; r++) {
		mapped += (t->limit[r] - t->base[r]) / PA_PAGE_SIZE;
		for (uintptr_t cb = t->base[r]; cb < t->limit[r]; cb += PA_CHUNK_SIZE) {
			const struct pa_chunk *c = pageheap_chunk(h, cb);
			for (unsigned w = 0; w < PA_CHUNK_WORDS; w++) {
				if (c->alloc[w] & c->scav[w])
					fail_msg("%s: chunk %#" PRIxPTR " word %u: pages both "
					         "allocated and released (%#" PRIx64 ")",
					         tu_case, cb, w, c->alloc[w] & c->scav[w]);
				inuse += (size_t)__builtin_popcountll(c->alloc[w]);
				scav += (size_t)__builtin_popcountll(c->scav[w]);
			}
		}
	}
	TU_EQ(h->mapped_pages, mapped);
	TU_EQ(h->inuse_pages, inuse);
	TU_EQ(h->scav_pages, scav);
	TU_EQ(h->ranges.n, t->nranges);
	for (size_t r = 0; r < t->nranges && r < h->ranges.n; r++) {
		TU_EQ(range_base(&h->ranges.v[r]), t->base[r]);
		TU_EQ(range_limit(&h->ranges.v[r]), t->limit[r]);
	}
	/* The hint is heap, or limit_hint; no free page lies below it. */
	int in_heap = 0;
	for (size_t r = 0; r < t->nranges; r++)
		in_heap |= pageheap_hint(h) >= t->base[r] && pageheap_hint(h) < t->limit[r];
	if (!in_heap && pageheap_hint(h) != h->limit_hint)
		fail_msg("%s: hint %#" PRIxPTR " is neither heap nor limit_hint %#" PRIxPTR,
		         tu_case, pageheap_hint(h), h->limit_hint);
	for (size_t r = 0; r < t->nranges && t->base[r] < pageheap_hint(h); r++)
		for (uintptr_t a = t->base[r]; a < t->limit[r] && a < pageheap_hint(h);
		     a += PA_PAGE_SIZE)
			if (!tu_page_allocated(t, a))
				fail_msg("%s: page %#" PRIxPTR
				         " is free but below the hint %#" PRIxPTR,
				         tu_case, a, pageheap_hint(h));
}

/* Everything: the reference recomputation, then pageheap_verify. */
static inline void tu_check(struct tu_heap *t)
{
	tu_check_accounting(t);
	tu_check_summaries(t);
	TU_EQ(pageheap_verify(&t->h), 0);
}

/* The packed summary at `level` of the entry holding addr. */
static inline pa_sum tu_sum_at(const struct tu_heap *t, unsigned level, uintptr_t addr)
{
	return t->h.sum[level][(addr - t->h.window_base) >> PA_LEVEL_SHIFT(level)];
}

/* ---- byte patterns ------------------------------------------------------------ */

/* Byte i of the pattern of seed: (i >> 8) makes a shift by a multiple of
 * 256 bytes visible, the seed tells blocks apart. */
static inline unsigned char tu_pattern(size_t i, size_t seed)
{
	return (unsigned char)(i * 131 + (i >> 8) * 7 + seed * 29 + 1);
}

static inline void tu_fill(unsigned char *p, size_t n, size_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = tu_pattern(i, seed);
}

/* The first byte of p[0, n) that is not tu_pattern(i, seed), or n. */
static inline size_t tu_pattern_break(const unsigned char *p, size_t n, size_t seed)
{
	size_t i = 0;
	while (i < n && p[i] == tu_pattern(i, seed))
		i++;
	return i;
}

/* ---- child processes -------------------------------------------------------- */

/*
 * Run fn(arg) in a forked child whose stderr is a pipe; the child exits 0 if
 * fn returns. Returns the wait status; out receives what the child wrote to
 * stderr (NUL-terminated, truncated to cap - 1).
 */
static inline int tu_run_child(void (*fn)(void *), void *arg, char *out, size_t cap)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		close(fds[1]);
		fn(arg);
		_exit(0);
	}
	close(fds[1]);
	size_t len = 0;
	for (;;) {
		char buf[512];
		ssize_t n = read(fds[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && len + 1 < cap; i++)
			out[len++] = buf[i];
	}
	out[len] = '\0';
	close(fds[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

static inline size_t tu_count_lines(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* A child (tu_run_child) that met a bad pointer: it must have died of
 * SIGABRT after exactly one line on stderr (err), "pagealloc: FUNC(PTR):
 * FAULT". Failures name the case. */
static inline void tu_expect_fault_line(const char *name, int status, const char *err,
                                        const char *func, uintptr_t ptr, const char *fault)
{
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
		fail_msg("%s: child %s %d, want SIGABRT; stderr: \"%s\"", name,
		         WIFSIGNALED(status) ? "killed by signal" : "exited with",
		         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), err);
	char want[512];
	snprintf(want, sizeof(want), "pagealloc: %s(%#" PRIxPTR "): %s\n", func, ptr, fault);
	if (strcmp(err, want) != 0)
		fail_msg("%s: stderr is\n\"%s\"\nwant\n\"%s\"", name, err, want);
	TU_EQ(tu_count_lines(err), 1);
}

#endif
