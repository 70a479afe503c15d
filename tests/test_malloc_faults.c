/*
 * test_malloc_faults.c — every bad pointer the malloc layer promises to
 * catch kills the process with SIGABRT after exactly one line on stderr:
 * "pagealloc: FUNC(0xADDR): FAULT", FUNC the C name of the function called,
 * ADDR the pointer passed, FAULT the text src/span.c gives the fault.
 *
 * Each case runs in a forked child (tu_run_child) with stderr on a pipe;
 * the parent checks the wait status and compares the whole of stderr with
 * the line it expects, built from the pointer the child reports back
 * through a shared page. The cases are one table, each named for the fault
 * and the path that must catch it: a small double free caught at once by
 * the free-key in the cache, and one caught after the block went back to
 * its span through a cache overflow (its alloc bit is 0 there); a large
 * double free while the block waits in the thread's large slots (alloc bit
 * 0), and one after its pages went back to the page heap (its page-map
 * entry is gone: "foreign pointer, or freed already");
 * a small double free after the span went back to the heap (foreign);
 * interior pointers into a small block, into a large block's first and
 * third page and into the tail waste of a span; pointers the heap never
 * returned (glibc's malloc, the stack, a pa_pages_alloc page, a live
 * block's address with a high bit set) to free and to malloc_usable_size;
 * realloc of a freed block and of an interior pointer; free_sized with a
 * size of another class than the block's, larger or smaller (for a large
 * block, another page count); free_aligned_sized with an alignment the block does
 * not have; a freed small block written over its free-key (its second
 * word), caught when its batch goes back to its span and when a refill
 * takes it from its span. docs/design.md has the table of faults and when each is caught.
 */
#include <signal.h>
#include <sys/mman.h>

#include "testutil.h"

#include "central.h"
#include "large.h"
#include "pagealloc.h"
#include "pagemap.h"
#include "span.h"
#include "sweep.h"
#include "tcache.h"

/* Both stashes (sweep_stashes), with this thread's large slots and spare
 * span records. */
static size_t stashes_drain(int all)
{
	struct pa_tcache *tc = tcache_real();
	return sweep_stashes(all, tcache_large(tc), tcache_spares(tc));
}

/* The fault texts of src/span.c (fault_text), word for word. */
#define FOREIGN "not a live block of this heap (foreign pointer, or freed already)"
/* a pointer into the heap's own memory, on a page no span holds */
#define FREE_PAGE                                                                                  \
	"not a live block of this heap (on a free page of its own: a block freed already, or "     \
	"never "                                                                                   \
	"one)"
#define INTERIOR "points inside a block, not at its start (interior pointer)"
#define DOUBLE_FREE "block is already free (double free)"
#define USE_AFTER_FREE "block is already free (use after free)"
/* free_sized's reports: the size passed, the block's, what its class holds */
#define BAD_SIZE_SMALL(n)                                                                          \
	"wrong size: " #n                                                                          \
	" bytes passed for a 64-byte block (size class 4, which holds 49 to 64 bytes)"
#define BAD_SIZE_LARGE(n)                                                                          \
	"wrong size: " #n " bytes passed for a 106496-byte block (13 pages, which hold 90113 to "  \
	"106496 bytes)"
#define BAD_ALIGN "block does not have that alignment (wrong alignment)"
#define WRITTEN "write after free"

/* Written by the child just before the faulting call: the pointer it
 * passes (a MAP_SHARED page, so the parent sees it). */
struct shared {
	uintptr_t ptr;
	int setup_failed; /* the child could not build the case */
};
static struct shared *shared;

static void *set_ptr(void *p)
{
	shared->ptr = (uintptr_t)p;
	return p;
}

static void setup_failed(void)
{
	shared->setup_failed = 1;
	_exit(3);
}

/* ---- the cases (each runs in the child and must not return) --------------- */

static void small_double_free_at_once(void)
{
	void *p = pa_malloc(64);
	pa_free(p);
	pa_free(set_ptr(p));
}

/* The block's alloc bit in its span (0: the span has it back). */
static int span_has_it_free(void *p)
{
	struct pa_span *s = pagemap_lookup((uintptr_t)p);
	int exact;
	unsigned i = span_index(s, (uintptr_t)p, &exact);
	return exact && !span_bit(s, i);
}

/* Is p in one of the batches stashed for class cls? */
static int in_stash(unsigned cls, void *p)
{
	for (uint32_t k = 0; k < CENTRAL_STASH_MAX; k++)
		for (void **o = central_stash_slot[cls][k]; o != NULL; o = o[0])
			if (o == p)
				return 1;
	return 0;
}

/* With the cache's list empty, free `max` other 64-byte blocks (the list
 * is then full), then p: the overflow gives the newest batch, p with it,
 * back to the central list's stash. A keeper stays live so p's span is not
 * retired (its page-map entry stays). */
static void *overflow_with(void)
{
	unsigned cls = pa_size_to_class(64), max = 2 * central_batch(cls);
	static void *other[256];
	void *keeper = pa_malloc(64), *p = pa_malloc(64);
	for (unsigned k = 0; k < max; k++)
		other[k] = pa_malloc(64);
	if (pagemap_lookup((uintptr_t)keeper) != pagemap_lookup((uintptr_t)p))
		setup_failed();  /* the batches are contiguous: expected one span */
	pa_thread_cache_flush(); /* the list and the stash are empty */
	for (unsigned k = 0; k < max; k++)
		pa_free(other[k]);
	pa_free(p);
	if (!in_stash(cls, p) || span_has_it_free(p))
		setup_failed(); /* p waits in the stash, out of its span */
	return p;
}

/* p's batch waits in the stash: its free-key catches the second free. */
static void small_double_free_while_its_batch_is_stashed(void)
{
	pa_free(set_ptr(overflow_with()));
}

/* The stash gives p's batch to the spans: the span's bit catches it. */
static void small_double_free_after_a_cache_overflow(void)
{
	void *p = overflow_with();
	stashes_drain(1);
	if (!span_has_it_free(p))
		setup_failed();
	pa_free(set_ptr(p));
}

/* The flush gives the whole batch back: the span is empty and goes back
 * to the page heap, and the page map forgets it. */
static void small_double_free_after_its_span_went_back(void)
{
	void *p = pa_malloc(64);
	pa_free(p);
	pa_thread_cache_flush();
	if (pagemap_lookup((uintptr_t)p) != NULL)
		setup_failed();
	pa_free(set_ptr(p));
}

/* A span of 512 16-byte blocks keeps its first; the others are freed and
 * pa_malloc_trim releases the span's second 4 KiB page (the sweep), where
 * block 300 lies: its free-key reads zero now, and only the allocation bit
 * tells that it is free. */
static void small_double_free_on_a_page_the_sweep_released(void)
{
	static void *b[512];
	pa_thread_cache_flush();
	uintptr_t base = UINTPTR_MAX;
	for (unsigned k = 0; k < 512; k++) {
		b[k] = pa_malloc(16);
		if ((uintptr_t)b[k] < base)
			base = (uintptr_t)b[k];
	}
	void *target = (void *)(base + 300 * 16);
	if (pagemap_lookup(base) != pagemap_lookup((uintptr_t)target))
		setup_failed(); /* a fresh span holds all 512, from base */
	for (unsigned k = 0; k < 512; k++)
		if ((uintptr_t)b[k] != base)
			pa_free(b[k]);
	pa_malloc_trim(0);
	if (((void **)target)[1] != NULL || !span_has_it_free(target))
		setup_failed(); /* not released, or not back in its span */
	pa_free(set_ptr(target));
}

/* 13 pages: the free keeps the span in the thread's large slots, its
 * alloc bit 0. */
static void large_double_free_in_the_threads_slots(void)
{
	void *p = pa_malloc(100000);
	pa_free(p);
	pa_free(set_ptr(p));
}

/* Five 48 KiB blocks freed: four fill the thread's large slots, the fifth
 * pushes the oldest, p, into the large stash (central.h), alloc bit 0 clear. */
static void large_double_free_while_stashed(void)
{
	void *a[5];
	for (int k = 0; k < 5; k++)
		a[k] = pa_malloc(48 << 10);
	for (int k = 0; k < 5; k++)
		pa_free(a[k]);
	size_t spans, pages;
	large_stashed(&spans, &pages);
	if (spans != 1 || pages != 6 || pagemap_lookup((uintptr_t)a[0]) == NULL)
		setup_failed(); /* a[0] waits in the stash, still mapped */
	pa_free(set_ptr(a[0]));
}

/* More pages than a slot takes: the free gives them to the page heap and
 * the page map forgets the block. */
static void large_double_free_after_its_pages_went_back(void)
{
	size_t n = (PA_LARGE_SLOT_MAX_PAGES + 1) * PA_PAGE_BYTES;
	void *p = pa_malloc(n);
	pa_free(p);
	if (pagemap_lookup((uintptr_t)p) != NULL)
		setup_failed();
	pa_free(set_ptr(p));
}

static void small_interior_pointer(void)
{
	char *p = pa_malloc(64);
	pa_free(set_ptr(p + 16));
}

static void large_interior_pointer_on_its_first_page(void)
{
	char *p = pa_malloc(5 * PA_PAGE_BYTES);
	pa_free(set_ptr(p + 16));
}

static void large_interior_pointer_on_its_third_page(void)
{
	char *p = pa_malloc(5 * PA_PAGE_BYTES);
	pa_free(set_ptr(p + 3 * PA_PAGE_BYTES));
}

/* Class 48: 170 objects in one 8 KiB page, so [8160, 8192) of the span is
 * tail waste. A one-page span starts on its page: base = p rounded down. */
static void pointer_into_the_tail_waste_of_a_span(void)
{
	char *p = pa_malloc(48);
	uintptr_t cls = pa_size_to_class(48);
	if (pa_sizeclasses[cls].size != 48 || pa_sizeclasses[cls].pages != 1 ||
	    pa_sizeclasses[cls].objects != 170)
		setup_failed();
	char *base = (char *)((uintptr_t)p & ~(PA_PAGE_BYTES - 1));
	pa_free(set_ptr(base + 170 * 48));
}

static void free_of_a_glibc_block(void)
{
	void *p = malloc(64);
	pa_free(set_ptr(p));
}

static void free_of_a_stack_address(void)
{
	char buf[64];
	memset(buf, 1, sizeof(buf));
	pa_free(set_ptr(buf));
}

static void free_of_a_page_from_the_page_api(void)
{
	void *p = pa_pages_alloc(1);
	pa_free(set_ptr(p));
}

/* A live block's address with bit 52 set (a tagged pointer): the page map
 * masks it to the block's page, the exact check must still refuse it. */
static void free_of_a_live_block_with_a_high_bit_set(void)
{
	void *p = pa_malloc(64);
	pa_free(set_ptr((void *)((uintptr_t)p | (uintptr_t)1 << 52)));
}

static void realloc_of_a_freed_block(void)
{
	void *p = pa_malloc(64);
	pa_free(p);
	pa_realloc(set_ptr(p), 100);
}

static void usable_size_of_a_glibc_block(void)
{
	void *p = malloc(64);
	pa_malloc_usable_size(set_ptr(p));
}

/* A binding's name for the check (the Go package's Free): a block freed
 * already is a double free under a name with Free in it. */
static void usable_size_as_free_of_a_freed_block(void)
{
	void *p = pa_malloc(64);
	pa_free(p);
	pa_malloc_usable_size_as(set_ptr(p), "Free");
}

static void usable_size_as_free_of_a_glibc_block(void)
{
	void *p = malloc(64);
	pa_malloc_usable_size_as(set_ptr(p), "Free");
}

static void free_sized_larger_than_a_small_block(void)
{
	void *p = pa_malloc(64);
	pa_free_sized(set_ptr(p), 65);
}

static void free_sized_larger_than_a_large_block(void)
{
	void *p = pa_malloc(100000); /* 13 pages */
	pa_free_sized(set_ptr(p), 13 * PA_PAGE_BYTES + 1);
}

/* A smaller size is as wrong as a larger one: another class, or for a large
 * block another page count. (free_sized takes a size realloc could have
 * kept the block for in place, more than half its class: 33 to 64 here;
 * C++'s sized delete takes 49 to 64 only.) */
static void free_sized_smaller_than_a_small_block(void)
{
	void *p = pa_malloc(64);
	pa_free_sized(set_ptr(p), 32);
}

static void free_sized_smaller_than_a_large_block(void)
{
	void *p = pa_malloc(100000);
	pa_free_sized(set_ptr(p), 1000);
}

static void realloc_of_an_interior_pointer(void)
{
	char *p = pa_malloc(64);
	pa_realloc(set_ptr(p + 32), 200);
}

/* A 48-byte block not at a page start, freed as if 8 KiB-aligned. */
static void free_aligned_sized_with_an_alignment_the_block_lacks(void)
{
	char *p = pa_malloc(48), *q = pa_malloc(48);
	char *bad = (uintptr_t)p % PA_PAGE_BYTES != 0 ? p : q;
	pa_free_aligned_sized(set_ptr(bad), PA_PAGE_BYTES, 48);
}

/* A freed block's second word (its free-key) written over. */
static void write_after_free(void *p)
{
	((volatile uintptr_t *)p)[1] = 0x5a5a5a5a5a5a5a5a;
}

/* p freed onto the thread's list and written: the flush gives the list
 * back to the spans, which check each key. A keeper keeps the span. */
static void small_write_after_free_caught_going_back_to_its_span(void)
{
	void *keeper = pa_malloc(64), *p = pa_malloc(64);
	pa_free(p);
	write_after_free(set_ptr(p));
	pa_thread_cache_flush();
	(void)keeper;
}

/* p back in its span (flushed, key intact), written there, then handed out
 * again: the refill that takes it from the span checks its key. The span
 * hands out its lowest free index first, so p comes within its span's
 * objects. */
static void small_write_after_free_caught_by_a_refill(void)
{
	unsigned cls = pa_size_to_class(64);
	void *keeper = pa_malloc(64), *p = pa_malloc(64);
	pa_free(p);
	pa_thread_cache_flush();
	if (!span_has_it_free(p) ||
	    pagemap_lookup((uintptr_t)keeper) != pagemap_lookup((uintptr_t)p))
		setup_failed(); /* p is back in the keeper's span */
	write_after_free(set_ptr(p));
	for (unsigned k = 0; k < pa_sizeclasses[cls].objects; k++)
		if (pa_malloc(64) == p)
			return; /* handed out unchecked */
}

struct fault_case {
	const char *name;
	void (*run)(void);
	const char *func;  /* as the message names it */
	const char *fault; /* one of the texts above */
};

static const struct fault_case cases[] = {
    {"small double free, at once", small_double_free_at_once, "free", DOUBLE_FREE},
    {"small double free, its batch stashed", small_double_free_while_its_batch_is_stashed, "free",
     DOUBLE_FREE},
    {"small double free, after a cache overflow", small_double_free_after_a_cache_overflow, "free",
     DOUBLE_FREE},
    {"small double free, span back in the heap", small_double_free_after_its_span_went_back, "free",
     FREE_PAGE},
    {"small double free, page released by the sweep",
     small_double_free_on_a_page_the_sweep_released, "free", DOUBLE_FREE},
    {"large double free, in the slots", large_double_free_in_the_threads_slots, "free",
     DOUBLE_FREE},
    {"large double free, in the large stash", large_double_free_while_stashed, "free", DOUBLE_FREE},
    {"large double free, pages back in the heap", large_double_free_after_its_pages_went_back,
     "free", FREE_PAGE},
    {"small interior pointer", small_interior_pointer, "free", INTERIOR},
    {"large interior pointer, first page", large_interior_pointer_on_its_first_page, "free",
     INTERIOR},
    {"large interior pointer, third page", large_interior_pointer_on_its_third_page, "free",
     INTERIOR},
    {"span tail waste", pointer_into_the_tail_waste_of_a_span, "free", INTERIOR},
    {"glibc block", free_of_a_glibc_block, "free", FOREIGN},
    {"stack address", free_of_a_stack_address, "free", FOREIGN},
    {"page from pa_pages_alloc", free_of_a_page_from_the_page_api, "free", FOREIGN},
    {"live block with bit 52 set", free_of_a_live_block_with_a_high_bit_set, "free", FOREIGN},
    {"realloc of a freed block", realloc_of_a_freed_block, "realloc", USE_AFTER_FREE},
    {"realloc of an interior pointer", realloc_of_an_interior_pointer, "realloc", INTERIOR},
    {"malloc_usable_size of a glibc block", usable_size_of_a_glibc_block, "malloc_usable_size",
     FOREIGN},
    {"usable size as Free, a freed block", usable_size_as_free_of_a_freed_block, "Free",
     DOUBLE_FREE},
    {"usable size as Free, a glibc block", usable_size_as_free_of_a_glibc_block, "Free", FOREIGN},
    {"free_sized too large, small", free_sized_larger_than_a_small_block, "free_sized",
     BAD_SIZE_SMALL(65)},
    {"free_sized too large, large", free_sized_larger_than_a_large_block, "free_sized",
     BAD_SIZE_LARGE(106497)},
    {"free_sized too small, small", free_sized_smaller_than_a_small_block, "free_sized",
     BAD_SIZE_SMALL(32)},
    {"free_sized too small, large", free_sized_smaller_than_a_large_block, "free_sized",
     BAD_SIZE_LARGE(1000)},
    {"free_aligned_sized, misaligned", free_aligned_sized_with_an_alignment_the_block_lacks,
     "free_aligned_sized", BAD_ALIGN},
    {"small write after free, its batch back to its span",
     small_write_after_free_caught_going_back_to_its_span, "malloc", WRITTEN},
    {"small write after free, a refill takes it", small_write_after_free_caught_by_a_refill,
     "malloc", WRITTEN},
};

static void run_case(void *arg)
{
	const struct fault_case *c = arg;
	c->run();
	/* Still alive: the fault went unnoticed. Exit 0, which the parent
	 * reports as "not killed". */
}

static void every_bad_pointer_aborts_with_one_line_naming_it(void **state)
{
	(void)state;
	shared =
	    mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(shared != MAP_FAILED);
	/* No scavenger thread: a child of a threaded process would restart it,
	 * which ThreadSanitizer refuses (die_after_fork). */
	assert_int_equal(pa_config_set("scavenger", "off"), 0);
	/* Build the heap here, so each child starts from a heap in use. */
	pa_free(pa_malloc(1));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct fault_case *c = &cases[i];
		tu_case = c->name;
		memset(shared, 0, sizeof(*shared));
		char err[1024];
		int status = tu_run_child(run_case, (void *)c, err, sizeof(err));
		if (shared->setup_failed)
			fail_msg("%s: the child could not set the case up", c->name);
		tu_expect_fault_line(c->name, status, err, c->func, shared->ptr, c->fault);
	}
	munmap(shared, sizeof(*shared));
}

static void free_of_null_does_nothing_and_keeps_errno(void **state)
{
	(void)state;
	struct pa_malloc_stats before, after;
	assert_int_equal(pa_malloc_stats(&before), 0);
	errno = 1234;
	pa_free(NULL);
	TU_EQ(errno, 1234);
	pa_free_sized(NULL, 64);
	TU_EQ(errno, 1234);
	assert_int_equal(pa_malloc_stats(&after), 0);
	TU_EQ(after.live_objects, before.live_objects);
	TU_EQ(after.cached_bytes, before.cached_bytes);
}

/* No block is sampled: a sampled block is a span of its own (prof.h), so
 * a case whose block was sampled would not be built as it says (its span
 * shared, its batch stashed); "the child could not set the case up" in
 * about one run in 30 with sampling on. */
static int setup(void **state)
{
	(void)state;
	return pa_config_set("prof", "off");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(every_bad_pointer_aborts_with_one_line_naming_it),
	    TU_TEST(free_of_null_does_nothing_and_keeps_errno),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
