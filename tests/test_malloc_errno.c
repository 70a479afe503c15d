/*
 * test_malloc_errno.c — every way a block can go when it is freed leaves
 * errno as it found it (pagealloc.h: "pa_free preserves errno", as glibc's
 * free has since 2.33).
 *
 * The paths are one table. A row builds the state that sends the free of
 * one block down its path, checks that state (so that the row cannot drift
 * off its path as the allocator changes), frees the block with errno set to
 * ERRNO_SENTINEL, and checks where the block went: onto the thread's list,
 * a batch into the class's stash or back to its spans, a span to the page
 * heap, a large block into the thread's slots, the large stash or the page
 * heap. Every row runs once per freeing function: pa_free,
 * pa_free_sized, pa_free_aligned_sized and pa_realloc(p, 0) (C++'s delete
 * is pa_free).
 *
 * A row runs in a thread of its own (its cache starts empty; the main
 * thread's cache and both stashes are flushed before it), with the thread
 * cache on or off, or in a pthread key destructor that runs after the
 * thread's cache was handed back at exit. The thread records what it saw
 * and the main thread checks it (cmocka's assertions are the main thread's).
 *
 * Two cases are not rows: thread exit itself (the cache handed back after
 * the thread's function returned, before the program's later key
 * destructors run), and a free that tries to start the scavenger when no
 * thread can be made (a forked child under an address-space limit). The
 * scavenger is off otherwise: its stash decay would empty the stashes that
 * rows fill.
 */
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "testutil.h"

#include "central.h"
#include "large.h"
#include "pagealloc.h"
#include "pagemap.h"
#include "pages.h"
#include "sizeclass_table.h"
#include "span.h"
#include "stash.h"
#include "tcache.h"

/* errno before every free: no allocator function sets it to this. */
#define ERRNO_SENTINEL 12345

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* ---- one run of one row ------------------------------------------------------- */

enum how { HOW_FREE, HOW_FREE_SIZED, HOW_FREE_ALIGNED_SIZED, HOW_REALLOC_ZERO, HOWS };

static const char *const how_names[HOWS] = {
    [HOW_FREE] = "pa_free",
    [HOW_FREE_SIZED] = "pa_free_sized",
    [HOW_FREE_ALIGNED_SIZED] = "pa_free_aligned_sized",
    [HOW_REALLOC_ZERO] = "pa_realloc(p, 0)",
};

enum where {
	IN_THREAD,           /* a new thread, thread cache on */
	IN_THREAD_CACHE_OFF, /* a new thread, thread_cache=off */
	IN_EXIT_DESTRUCTOR,  /* a key destructor after the thread's cache was handed back */
};

struct run;

struct row {
	const char *name;
	enum where where;
	void (*fn)(struct run *r);
	size_t main_block; /* bytes of a block the main thread allocates for the row (r->given) */
	size_t exit_block; /* IN_EXIT_DESTRUCTOR: bytes of the block the destructor frees */
	int no_realloc;    /* not through pa_realloc(p, 0) */
};

struct run {
	const struct row *row;
	enum how how;
	void *given; /* row->main_block bytes, allocated by the main thread */
	void *exit_p;
	int freed;    /* the free under test ran */
	int err;      /* errno right after it */
	void *result; /* what pa_realloc(p, 0) returned */
	char why[256];
};

/* A row's check failed: keep the first message (the main thread reports it). */
static void note(struct run *r, int line, const char *stage, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(struct run *r, int line, const char *stage, const char *fmt, ...)
{
	if (r->why[0] != '\0')
		return;
	int n = snprintf(r->why, sizeof(r->why), "line %d: %s: ", line, stage);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->why + n, sizeof(r->why) - (size_t)n, fmt, ap);
	va_end(ap);
}

/* Before the free: the state that sends the block down the row's path. */
#define PATH(r, cond)                                                                              \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			note(r, __LINE__, "not on its path", "%s", #cond);                         \
			return;                                                                    \
		}                                                                                  \
	} while (0)

/* After the free: where the path sends the block. */
#define WENT(r, got, want)                                                                         \
	do {                                                                                       \
		uintmax_t g_ = (uintmax_t)(got), w_ = (uintmax_t)(want);                           \
		if (g_ != w_) {                                                                    \
			note(r, __LINE__, "the block went elsewhere", "%s is %ju, want %ju", #got, \
			     g_, w_);                                                              \
			return;                                                                    \
		}                                                                                  \
	} while (0)

/* The free under test: block p of `size` bytes (16-aligned, as every block
 * is), through r's function, errno at the sentinel; errno afterwards goes
 * to r->err. */
static void free_under_test(struct run *r, void *p, size_t size)
{
	errno = ERRNO_SENTINEL;
	switch (r->how) {
	case HOW_FREE:
		pa_free(p);
		break;
	case HOW_FREE_SIZED:
		pa_free_sized(p, size);
		break;
	case HOW_FREE_ALIGNED_SIZED:
		pa_free_aligned_sized(p, 16, size);
		break;
	case HOW_REALLOC_ZERO:
		r->result = pa_realloc(p, 0);
		break;
	case HOWS:
		break;
	}
	r->err = errno;
	r->freed = 1;
}

/* ---- what the allocator holds ------------------------------------------------- */

static unsigned cls_of(size_t size)
{
	return pa_size_to_class(size);
}

static uint32_t list_room(unsigned cls)
{
	return (uint32_t)(tcache_self->limit[cls] - tcache_self->freed[cls]);
}

static uint32_t list_count(unsigned cls)
{
	return tcache_list_count(tcache_self, cls);
}

/* Objects of cls out of their spans (central.h: in caches, stashed, live). */
static size_t central_out(unsigned cls)
{
	return __atomic_load_n(&central[cls].out, __ATOMIC_RELAXED);
}

static size_t central_spans(unsigned cls)
{
	return __atomic_load_n(&central[cls].spans, __ATOMIC_RELAXED);
}

static uint32_t stash_batches(unsigned cls)
{
	return central_stash_batches(cls);
}

/* Batches the stash of cls holds at most (central.c's stash_cap). */
static uint32_t stash_cap(unsigned cls)
{
	return stash_cap_of((size_t)central_batch(cls) * pa_sizeclasses[cls].size,
	                    CENTRAL_STASH_MAX);
}

static size_t large_stash_spans(void)
{
	size_t spans, pages;
	large_stashed(&spans, &pages);
	return spans;
}

static uint32_t large_slots_used(void)
{
	struct pa_tcache *tc = tcache_real();
	return tc != NULL ? tc->large.n : 0;
}

/* Is p the start of a block the page map knows? */
static int mapped(const void *p)
{
	return pagemap_lookup((uintptr_t)p) != NULL;
}

/* The calling thread has no cache and cannot build one: its cache was
 * handed back at exit (tcache.h's tcache_gone), or thread_cache is off. */
static int cacheless(void)
{
	return tcache_real() == NULL && tcache_get() == NULL;
}

/* ---- the rows ------------------------------------------------------------------- */

static void small_onto_list_with_room(struct run *r)
{
	unsigned cls = cls_of(64);
	void *p = pa_malloc(64);
	PATH(r, tcache_real() != NULL);
	PATH(r, list_room(cls) > 0);
	uint32_t count = list_count(cls);
	free_under_test(r, p, 64);
	WENT(r, list_count(cls), count + 1);
}

/* The main thread's block, freed by a thread whose first call this is. */
static void small_by_a_thread_with_no_cache_yet(struct run *r)
{
	PATH(r, tcache_self == &tcache_empty);
	free_under_test(r, r->given, 64);
	WENT(r, tcache_real() != NULL, 1);
	WENT(r, list_count(cls_of(64)), 1);
}

/* The main thread's block, freed by a thread that has a cache. */
static void small_by_another_thread_with_a_cache(struct run *r)
{
	unsigned cls = cls_of(64);
	pa_free(pa_malloc(64));
	PATH(r, tcache_real() != NULL);
	PATH(r, list_room(cls) > 0);
	uint32_t count = list_count(cls);
	free_under_test(r, r->given, 64);
	WENT(r, list_count(cls), count + 1);
}

/* Blocks of `size` bytes, freed one by one until the next free overflows
 * the thread's full list (its bound at least a batch) with the class's
 * stash full or not; returns the index in o[] of that next block, n when no
 * free got there. The blocks before it are freed. */
static size_t free_until_overflow(void **o, size_t n, size_t size, int stash_full)
{
	unsigned cls = cls_of(size);
	uint32_t want = stash_full ? stash_cap(cls) : 0;
	for (size_t k = 0; k < n; k++) {
		if (list_room(cls) == 0 && tcache_self->max[cls] >= central_batch(cls) &&
		    stash_batches(cls) == want)
			return k;
		pa_free(o[k]);
	}
	return n;
}

static void free_rest(void **o, size_t from, size_t n)
{
	for (size_t k = from; k < n; k++)
		pa_free(o[k]);
}

/* Blocks of `size` in a thread of their own, freed until the class's stash
 * is full (a list that grew in the mallocs gives some batches back two at a
 * time, to the spans: hence the margin). */
static void *stash_filler(void *arg)
{
	size_t size = *(size_t *)arg;
	unsigned cls = cls_of(size);
	size_t n = 4 * (size_t)(stash_cap(cls) + PA_TC_LIST_BATCHES) * central_batch(cls);
	void **o = calloc(n, sizeof(*o));
	for (size_t k = 0; k < n; k++)
		o[k] = pa_malloc(size);
	free_rest(o, 0, n);
	free(o);
	return NULL;
}

/* n blocks of `size` allocated, the class's stash filled by another
 * thread (so that these mallocs did not take its batches), then freed until
 * the next one overflows this thread's list: the row's block, *t. */
static void **over_full_list_and_stash(size_t size, size_t n, size_t *t)
{
	void **o = calloc(n, sizeof(*o));
	for (size_t k = 0; k < n; k++)
		o[k] = pa_malloc(size);
	pthread_t filler;
	if (pthread_create(&filler, NULL, stash_filler, &size) != 0 ||
	    pthread_join(filler, NULL) != 0)
		abort();
	*t = free_until_overflow(o, n, size, 1);
	return o;
}

static void small_over_a_full_list_into_the_stash(struct run *r)
{
	unsigned cls = cls_of(64);
	size_t n = (PA_TC_LIST_BATCHES + 2) * central_batch(cls);
	void **o = calloc(n, sizeof(*o));
	for (size_t k = 0; k < n; k++)
		o[k] = pa_malloc(64);
	size_t t = free_until_overflow(o, n, 64, 0);
	PATH(r, t < n);
	uint32_t stashed = stash_batches(cls);
	free_under_test(r, o[t], 64);
	WENT(r, stash_batches(cls), stashed + 1);
	free_rest(o, t + 1, n);
	free(o);
}

static void small_over_a_full_list_and_stash_back_to_its_spans(struct run *r)
{
	unsigned cls = cls_of(64);
	size_t t, n = (PA_TC_LIST_BATCHES + 2) * central_batch(cls);
	void **o = over_full_list_and_stash(64, n, &t);
	PATH(r, t < n);
	size_t out = central_out(cls);
	free_under_test(r, o[t], 64);
	WENT(r, stash_batches(cls), stash_cap(cls));
	WENT(r, central_out(cls), out - central_batch(cls));
	free_rest(o, t + 1, n);
	free(o);
}

/* 8 KiB blocks: one to a span, so each block given back empties its span. */
static void small_over_a_full_list_and_stash_empties_spans(struct run *r)
{
	const size_t size = 8 * KIB;
	unsigned cls = cls_of(size);
	PATH(r, pa_sizeclasses[cls].objects == 1);
	size_t t, n = (PA_TC_LIST_BATCHES + 2) * central_batch(cls);
	void **o = over_full_list_and_stash(size, n, &t);
	PATH(r, t < n);
	size_t spans = central_spans(cls);
	free_under_test(r, o[t], size);
	/* The batch: this block and the one freed before it. */
	WENT(r, central_spans(cls), spans - central_batch(cls));
	WENT(r, mapped(o[t]), 0);
	free_rest(o, t + 1, n);
	free(o);
}

/* 48-byte blocks (a class no other row uses: two blocks in a row share a
 * fresh span). */
static void small_cache_off_back_to_its_span(struct run *r)
{
	unsigned cls = cls_of(48);
	void *p = pa_malloc(48), *keep = pa_malloc(48);
	PATH(r, cacheless());
	PATH(r, pagemap_lookup((uintptr_t)p) == pagemap_lookup((uintptr_t)keep));
	size_t out = central_out(cls), spans = central_spans(cls);
	free_under_test(r, p, 48);
	WENT(r, central_out(cls), out - 1);
	WENT(r, central_spans(cls), spans);
	pa_free(keep);
}

static void small_cache_off_empties_its_span(struct run *r)
{
	const size_t size = 8 * KIB;
	unsigned cls = cls_of(size);
	void *p = pa_malloc(size);
	PATH(r, cacheless());
	PATH(r, pa_sizeclasses[cls].objects == 1);
	size_t spans = central_spans(cls);
	free_under_test(r, p, size);
	WENT(r, central_spans(cls), spans - 1);
	WENT(r, mapped(p), 0);
}

/* 96-byte blocks: all but one freed and given back, then pa_malloc_trim
 * releases the free 4 KiB pages of the span it is in. Its span's fbump is
 * then 0: pa_free's fast checks fail and the full ones pass. */
static void small_in_a_span_with_released_pages(struct run *r)
{
	unsigned cls = cls_of(96);
	size_t n = 3 * (size_t)pa_sizeclasses[cls].objects;
	void **o = calloc(n, sizeof(*o));
	for (size_t k = 0; k < n; k++)
		o[k] = pa_malloc(96);
	free_rest(o, 1, n);
	pa_malloc_trim(0); /* flushes this thread's cache and both stashes first */
	struct pa_span *s = pagemap_lookup((uintptr_t)o[0]);
	PATH(r, s != NULL && s->relmap != 0);
	PATH(r, __atomic_load_n(&s->fbump, __ATOMIC_RELAXED) == 0);
	PATH(r, list_room(cls) > 0);
	uint32_t count = list_count(cls);
	free_under_test(r, o[0], 96);
	WENT(r, list_count(cls), count + 1);
	free(o);
}

static void large_into_a_free_slot(struct run *r)
{
	pa_free(pa_malloc(64)); /* the thread's cache */
	void *p = pa_malloc(64 * KIB);
	PATH(r, tcache_real() != NULL);
	PATH(r, large_slots_used() < PA_LARGE_SLOTS);
	free_under_test(r, p, 64 * KIB);
	WENT(r, large_slots_used(), 1);
	WENT(r, mapped(p), 1);
}

/* The main thread's 64 KiB block, freed by a thread whose first call this is. */
static void large_by_a_thread_with_no_cache_yet(struct run *r)
{
	PATH(r, tcache_self == &tcache_empty);
	free_under_test(r, r->given, 64 * KIB);
	WENT(r, tcache_real() != NULL, 1);
	WENT(r, large_slots_used(), 1);
}

/* Five 40 KiB blocks (5 pages: the large stash keeps up to 16): four fill
 * the slots, the fifth pushes the oldest into the stash. */
static void large_over_full_slots_oldest_into_the_stash(struct run *r)
{
	void *o[PA_LARGE_SLOTS + 1];
	for (unsigned k = 0; k <= PA_LARGE_SLOTS; k++)
		o[k] = pa_malloc(40 * KIB);
	free_rest(o, 0, PA_LARGE_SLOTS);
	PATH(r, large_slots_used() == PA_LARGE_SLOTS);
	PATH(r, large_stash_spans() == 0);
	free_under_test(r, o[PA_LARGE_SLOTS], 40 * KIB);
	WENT(r, large_slots_used(), PA_LARGE_SLOTS);
	WENT(r, large_stash_spans(), 1);
	WENT(r, mapped(o[0]), 1);
}

/* 128 KiB blocks (16 pages): the stash keeps 8 of them (PA_STASH_BYTES).
 * Four fill the slots, eight more fill the stash, and the next free sends
 * the oldest slot back to the page heap. */
static void large_over_full_slots_and_stash_oldest_to_the_heap(struct run *r)
{
	const size_t size = 128 * KIB;
	enum { CAP = PA_STASH_BYTES / (128 * 1024) };
	_Static_assert(CAP <= LARGE_STASH_MAX, "the stash's bound for 16 pages is its bytes");
	void *o[PA_LARGE_SLOTS + CAP + 1];
	const size_t n = sizeof(o) / sizeof(o[0]);
	for (size_t k = 0; k < n; k++)
		o[k] = pa_malloc(size);
	free_rest(o, 0, n - 1);
	PATH(r, large_slots_used() == PA_LARGE_SLOTS);
	PATH(r, large_stash_spans() == CAP);
	void *oldest = (void *)span_base(tcache_real()->large.span[0]);
	free_under_test(r, o[n - 1], size);
	WENT(r, large_slots_used(), PA_LARGE_SLOTS);
	WENT(r, large_stash_spans(), CAP);
	WENT(r, mapped(oldest), 0);
}

static void large_too_big_for_the_slots_to_the_heap(struct run *r)
{
	pa_free(pa_malloc(64)); /* the thread's cache */
	void *p = pa_malloc(2 * MIB);
	PATH(r, tcache_real() != NULL);
	PATH(r, pagemap_lookup((uintptr_t)p)->npages > PA_LARGE_SLOT_MAX_PAGES);
	free_under_test(r, p, 2 * MIB);
	WENT(r, large_slots_used(), 0);
	WENT(r, mapped(p), 0);
}

static void large_cache_off_to_the_heap(struct run *r)
{
	void *p = pa_malloc(64 * KIB);
	PATH(r, cacheless());
	free_under_test(r, p, 64 * KIB);
	WENT(r, mapped(p), 0);
}

static void null_block(struct run *r)
{
	free_under_test(r, NULL, 0);
}

/* IN_EXIT_DESTRUCTOR rows: r->exit_p, allocated while the thread's cache
 * was up, freed after it was handed back. */
static void small_after_the_cache_was_handed_back(struct run *r)
{
	unsigned cls = cls_of(64);
	PATH(r, tcache_self != &tcache_empty);
	PATH(r, cacheless());
	size_t out = central_out(cls);
	free_under_test(r, r->exit_p, 64);
	WENT(r, central_out(cls), out - 1);
}

static void large_after_the_cache_was_handed_back(struct run *r)
{
	PATH(r, tcache_self != &tcache_empty);
	PATH(r, cacheless());
	free_under_test(r, r->exit_p, 64 * KIB);
	WENT(r, mapped(r->exit_p), 0);
}

/* main: bytes of a block the main thread allocates for the row (r->given);
 * exit: IN_EXIT_DESTRUCTOR, bytes of the block the destructor frees. */
#define ROW(name, where, fn, main, exit)                                                           \
	{                                                                                          \
		name, where, fn, main, exit, 0                                                     \
	}

static const struct row rows[] = {
    ROW("small block onto the thread's list, which has room", IN_THREAD, small_onto_list_with_room,
        0, 0),
    ROW("small block freed by a thread with no cache yet (it builds one)", IN_THREAD,
        small_by_a_thread_with_no_cache_yet, 64, 0),
    ROW("small block of another thread freed by one with a cache", IN_THREAD,
        small_by_another_thread_with_a_cache, 64, 0),
    ROW("small block over a full list: a batch into the stash", IN_THREAD,
        small_over_a_full_list_into_the_stash, 0, 0),
    ROW("small block over a full list and stash: a batch back to its spans", IN_THREAD,
        small_over_a_full_list_and_stash_back_to_its_spans, 0, 0),
    ROW("small block over a full list and stash: the batch empties its spans", IN_THREAD,
        small_over_a_full_list_and_stash_empties_spans, 0, 0),
    ROW("small block with thread_cache=off: back to its span", IN_THREAD_CACHE_OFF,
        small_cache_off_back_to_its_span, 0, 0),
    ROW("small block with thread_cache=off: its span empties", IN_THREAD_CACHE_OFF,
        small_cache_off_empties_its_span, 0, 0),
    ROW("small block in a span with released pages (the full checks)", IN_THREAD,
        small_in_a_span_with_released_pages, 0, 0),
    ROW("large block into a free large slot", IN_THREAD, large_into_a_free_slot, 0, 0),
    ROW("large block freed by a thread with no cache yet (it builds one)", IN_THREAD,
        large_by_a_thread_with_no_cache_yet, 64 * KIB, 0),
    ROW("large block over full slots: the oldest into the large stash", IN_THREAD,
        large_over_full_slots_oldest_into_the_stash, 0, 0),
    ROW("large block over full slots and stash: the oldest to the page heap", IN_THREAD,
        large_over_full_slots_and_stash_oldest_to_the_heap, 0, 0),
    ROW("large block too big for the slots: to the page heap", IN_THREAD,
        large_too_big_for_the_slots_to_the_heap, 0, 0),
    ROW("large block with thread_cache=off: to the page heap", IN_THREAD_CACHE_OFF,
        large_cache_off_to_the_heap, 0, 0),
    {"NULL (no pa_realloc: pa_realloc(NULL, 0) is a malloc)", IN_THREAD, null_block, 0, 0, 1},
    ROW("small block in a key destructor after the cache was handed back", IN_EXIT_DESTRUCTOR,
        small_after_the_cache_was_handed_back, 0, 64),
    ROW("large block in a key destructor after the cache was handed back", IN_EXIT_DESTRUCTOR,
        large_after_the_cache_was_handed_back, 0, 64 * KIB),
};

/* ---- running a row --------------------------------------------------------------- */

/* Created after malloc's own key (the first pa_ call), so its destructor
 * runs after malloc's has handed the thread's cache back. */
static pthread_key_t late_key;

/* IN_EXIT_DESTRUCTOR: the row's function; the exit test: errno. */
static void late_destructor(void *arg)
{
	int err = errno;
	struct run *r = arg;
	if (r->row != NULL)
		r->row->fn(r);
	else
		r->err = err;
}

static void *row_thread(void *arg)
{
	struct run *r = arg;
	if (r->row->where != IN_EXIT_DESTRUCTOR) {
		r->row->fn(r);
		return NULL;
	}
	pa_free(pa_malloc(64)); /* the thread's cache, for malloc's key destructor */
	r->exit_p = pa_malloc(r->row->exit_block);
	pthread_setspecific(late_key, r);
	return NULL;
}

static void run_row(struct run *r)
{
	pa_thread_cache_flush(); /* this thread's cache and both stashes: empty */
	if (r->row->main_block != 0)
		r->given = pa_malloc(r->row->main_block);
	int off = r->row->where == IN_THREAD_CACHE_OFF;
	if (off)
		assert_int_equal(pa_config_set("thread_cache", "off"), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, row_thread, r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	if (off)
		assert_int_equal(pa_config_set("thread_cache", "on"), 0);
}

static void every_free_path_leaves_errno_alone(void **state)
{
	(void)state;
	int bad = 0;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		for (enum how h = 0; h < HOWS; h++) {
			if (h == HOW_REALLOC_ZERO && rows[i].no_realloc)
				continue;
			struct run r = {.row = &rows[i], .how = h};
			run_row(&r);
			if (r.why[0] != '\0' || !r.freed) {
				print_error("%s, %s: %s\n", rows[i].name, how_names[h],
				            r.why[0] != '\0' ? r.why : "the free did not run");
				bad++;
			} else if (r.err != ERRNO_SENTINEL) {
				print_error(
				    "%s, %s: errno is %d after the free, want %d (unchanged)\n",
				    rows[i].name, how_names[h], r.err, ERRNO_SENTINEL);
				bad++;
			} else if (h == HOW_REALLOC_ZERO && r.result != NULL) {
				print_error("%s, %s: returned %p, want NULL\n", rows[i].name,
				            how_names[h], r.result);
				bad++;
			}
		}
	}
	TU_EQ(bad, 0);
}

/* ---- thread exit ------------------------------------------------------------------- */

/* Small blocks on the thread's lists, a stashed batch, a large block in a
 * slot: its cache has all of them to hand back at exit. */
static void *exit_thread(void *arg)
{
	enum { N = 300 };
	static void *o[N];
	for (size_t k = 0; k < N; k++)
		o[k] = pa_malloc(64 + (k % 4) * 100);
	free_rest(o, 0, N);
	pa_free(pa_malloc(64 * KIB));
	pthread_setspecific(late_key, arg);
	errno = ERRNO_SENTINEL;
	return NULL;
}

/* A key destructor that runs after malloc's sees errno as the thread left
 * it. */
static void thread_exit_hands_the_cache_back_without_touching_errno(void **state)
{
	(void)state;
	struct run r = {.err = 0};
	pa_thread_cache_flush();
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, exit_thread, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	TU_EQ(r.err, ERRNO_SENTINEL);
}

/* ---- the scavenger cannot be started ------------------------------------------------ */

/* The process's address space in bytes (/proc/self/statm's first field). */
static size_t address_space_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0;
	if (f == NULL || fscanf(f, "%lu", &pages) != 1)
		pages = 0;
	if (f != NULL)
		fclose(f);
	return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* In a forked child: a 2 MiB block freed (past the large slots, to the page
 * heap: the slow path, which lets the scavenger start) just after the
 * scavenger was switched on, with the address space so nearly full that its
 * thread's stack cannot be mapped. Exit status 0, or 1 with a line. */
static int scavenger_start_fails_child(enum how h)
{
	struct run r = {.how = h};
	void *p = pa_malloc(2 * MIB);
	struct pa_stats st;
	if (p == NULL || pa_config_set("scavenger", "on") != 0 || pa_stats(&st) != 0 ||
	    st.scavenger_running) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	struct rlimit was, tight;
	getrlimit(RLIMIT_AS, &was);
	tight = was;
	tight.rlim_cur = address_space_bytes() + 16 * KIB; /* less than a 64 KiB stack */
	if (setrlimit(RLIMIT_AS, &tight) != 0) {
		fprintf(stderr, "setrlimit: %s\n", strerror(errno));
		return 1;
	}
	free_under_test(&r, p, 2 * MIB);
	setrlimit(RLIMIT_AS, &was);
	/* The free tried: the scavenger is not running and no longer wanted
	 * (with room now, pages_background does not start it). */
	pages_background();
	if (pa_stats(&st) != 0 || st.scavenger_running) {
		fprintf(stderr,
		        "not on its path: the scavenger is running (the free did not try to "
		        "start it, or its thread could be made)\n");
		return 1;
	}
	if (r.err != ERRNO_SENTINEL) {
		fprintf(stderr, "errno is %d (%s) after the free, want %d (unchanged)\n", r.err,
		        strerror(r.err), ERRNO_SENTINEL);
		return 1;
	}
	return 0;
}

static void free_that_cannot_start_the_scavenger_leaves_errno_alone(void **state)
{
	(void)state;
	if (TU_UNDER_SANITIZER) {
		print_message("skipped: the sanitizer's pthread_create aborts under the limit\n");
		skip();
	}
	int bad = 0;
	for (enum how h = 0; h < HOWS; h++) {
		fflush(NULL);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(scavenger_start_fails_child(h));
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			print_error("%s: the child failed (status %#x)\n", how_names[h], status);
			bad++;
		}
	}
	TU_EQ(bad, 0);
}

static int setup(void **state)
{
	(void)state;
	/* Before the heap is built: the scavenger never starts (the stashes
	 * keep what the rows put there, and no 64 KiB thread stack is cached
	 * for the scavenger test to reuse). */
	if (pa_config_set("scavenger", "off") != 0)
		return -1;
	/* Nor is any block sampled: a sampled block is a large span of its own
	 * (prof.h), and freeing one goes none of the rows' ways (the 8 KiB
	 * row's batch then left its spans in place in ~1 run of 8). */
	if (pa_config_set("prof", "off") != 0)
		return -1;
	pa_free(pa_malloc(1)); /* malloc's key first */
	return pthread_key_create(&late_key, late_destructor);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(every_free_path_leaves_errno_alone),
	    TU_TEST(thread_exit_hands_the_cache_back_without_touching_errno),
	    TU_TEST(free_that_cannot_start_the_scavenger_leaves_errno_alone),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
