/*
 * test_stack.c — stack_capture (src/stack.h) walks a stack from the unwind
 * tables exactly: each frame's address is its return address minus one and
 * its function is the one the call is in, through code without frame
 * pointers, through a frame whose CFA is rbp-based (alloca), through the C
 * library's qsort calling back into us, and a second time from the cache:
 * the object of each run of frames looked up once, and no rule read from a
 * table again, the outermost frame's (where the walk ends) included; the
 * cache starts at one page and grows when its entries are evicted.
 *
 * The truth comes from the compiler: each level notes
 * __builtin_return_address(0), the address its caller resumes at, and the
 * functions' own addresses are the FDEs' starts.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <alloca.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "stack.h"

#define MAX 64

/* TU_EQ naming what it checks. */
#define EQ_IN(what, got, want)                                                                     \
	do {                                                                                       \
		tu_case = (what);                                                                  \
		TU_EQ(got, want);                                                                  \
	} while (0)

struct walk {
	uintptr_t pc[MAX], fn[MAX];
	unsigned n;
	unsigned max;     /* 0: MAX */
	uintptr_t ret[4]; /* __builtin_return_address(0) of levels 0..3 */
};

static struct walk w;

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif
/* Keep every call a call (no tail call), so each level has its frame. */
#define KEEP() __asm__ volatile("" ::: "memory")

NOINLINE void level0(void)
{
	w.ret[0] = (uintptr_t)__builtin_return_address(0);
	w.n = stack_capture(w.pc, w.fn, w.max != 0 ? w.max : MAX);
	KEEP();
}

NOINLINE void level1(void)
{
	w.ret[1] = (uintptr_t)__builtin_return_address(0);
	level0();
	KEEP();
}

/* A frame that needs rbp: its size is known only at run time. */
NOINLINE void level2_alloca(size_t n)
{
	w.ret[2] = (uintptr_t)__builtin_return_address(0);
	char *buf = alloca(n);
	memset(buf, 1, n);
	__asm__ volatile("" : : "r"(buf) : "memory");
	level1();
	KEEP();
}

NOINLINE void level3(void)
{
	w.ret[3] = (uintptr_t)__builtin_return_address(0);
	level2_alloca(1000 + (size_t)(w.ret[3] & 7));
	KEEP();
}

/* Frame k of the walk is in function f, resuming at ret. */
static void expect_frame(unsigned k, void (*f)(void), uintptr_t ret, const char *what)
{
	EQ_IN(what, w.fn[k], (uintptr_t)f);
	EQ_IN(what, w.pc[k] + 1, ret);
}

static void check_chain(void)
{
	TU_EQ(w.n >= 5, 1);
	/* Frame 0: level0, where stack_capture returns to. */
	TU_EQ(w.fn[0], (uintptr_t)level0);
	expect_frame(1, level1, w.ret[0], "level1");
	expect_frame(2, (void (*)(void))level2_alloca, w.ret[1], "level2_alloca");
	expect_frame(3, level3, w.ret[2], "level3");
	TU_EQ(w.pc[4] + 1, w.ret[3]);
}

static void a_walk_names_each_caller_and_its_return_address(void **state)
{
	(void)state;
	memset(&w, 0, sizeof(w));
	level3();
	check_chain();
	/* Again: the rules now come from the cache, and say the same. */
	struct walk first = w;
	memset(&w, 0, sizeof(w));
	level3();
	check_chain();
	TU_EQ(w.n, first.n);
	for (unsigned k = 4; k < w.n; k++)
		TU_EQ(w.fn[k], first.fn[k]);
}

/* Distinct call sites: SITES functions, each calling level0 from its own
 * return address (the asm keeps the compiler from folding them into one). */
#define SITE(i)                                                                                    \
	NOINLINE static void site##i(void)                                                         \
	{                                                                                          \
		__asm__ volatile("# site " #i ::: "memory");                                       \
		level0();                                                                          \
		KEEP();                                                                            \
	}
#define SITES4(i) SITE(i##0) SITE(i##1) SITE(i##2) SITE(i##3)
#define SITES16(i) SITES4(i##0) SITES4(i##1) SITES4(i##2) SITES4(i##3)
SITES16(1)
SITES16(2)
SITES16(3)
SITES16(4)
SITES16(5)
SITES16(6)
SITES16(7)
SITES16(8)
SITES16(9)
#define REF(i) site##i,
#define REFS4(i) REF(i##0) REF(i##1) REF(i##2) REF(i##3)
#define REFS16(i) REFS4(i##0) REFS4(i##1) REFS4(i##2) REFS4(i##3)
static void (*const sites[])(void) = {REFS16(1) REFS16(2) REFS16(3) REFS16(4) REFS16(5) REFS16(6)
                                          REFS16(7) REFS16(8) REFS16(9)};

static void the_cache_starts_at_one_page_and_grows_past_its_evictions(void **state)
{
	(void)state;
	TU_EQ(stack_cache_entries(), 0); /* no capture yet */
	memset(&w, 0, sizeof(w));
	level3();
	check_chain();
	TU_EQ(stack_cache_entries(), 64); /* one page of 40-byte entries */
	/* 144 return addresses more than the small table's 64 slots hold: at
	 * least 80 evictions, past the 64 that move the cache to its full table. */
	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
		memset(&w, 0, sizeof(w));
		sites[i]();
		EQ_IN("a site's frame", w.fn[1], (uintptr_t)sites[i]);
	}
	memset(&w, 0, sizeof(w));
	level3();
	check_chain();
	TU_EQ(stack_cache_entries(), 512);
	/* And from the full table's entries, the same walk. */
	memset(&w, 0, sizeof(w));
	level3();
	check_chain();
}

/* A walk of at most max frames (0: MAX) from level0, always from this one
 * call site, so that every walk passes the same return addresses. */
NOINLINE void walk_from_here(unsigned max)
{
	memset(&w, 0, sizeof(w));
	w.max = max;
	level3();
	KEEP();
}

static void a_second_walk_reads_no_table_and_finds_each_object_once(void **state)
{
	(void)state;
	/* Three times from one call site (the walk goes on up through this
	 * function): the first puts the rules into the cache, the last frame's
	 * "none" too. Its inserts may evict enough entries (where the
	 * addresses fall, which ASLR moves) to move the cache to its full
	 * table, which the second walk then fills; the third reads nothing. */
	uint64_t objects0, tables0, files0, objects1, tables1, files1;
	for (volatile int i = 0; i < 3; i++) { /* volatile: not unrolled into three sites */
		stack_counts(&objects0, &tables0, &files0);
		walk_from_here(0);
		stack_counts(&objects1, &tables1, &files1);
	}
	check_chain();
	EQ_IN("rules read from a table on the third walk", tables1 - tables0, 0);
	/* Four frames: stack_capture's rule and level0's to level3's, five
	 * addresses in this program, which holds stack.c: the walk starts in
	 * that object, kept from the first walk, and never leaves it, so it
	 * looks up none (once a frame: 5). */
	stack_counts(&objects0, &tables0, &files0);
	walk_from_here(4);
	stack_counts(&objects1, &tables1, &files1);
	TU_EQ(w.n, 4);
	expect_frame(1, level1, w.ret[0], "level1");
	expect_frame(2, (void (*)(void))level2_alloca, w.ret[1], "level2_alloca");
	expect_frame(3, level3, w.ret[2], "level3");
	EQ_IN("objects looked up in one program's frames", objects1 - objects0, 0);
	EQ_IN("rules read from a table", tables1 - tables0, 0);
}

static int compare_walks; /* the comparisons that still walk */

static int compare_calls(const void *a, const void *b)
{
	if (compare_walks != 0) {
		compare_walks--;
		level1();
	}
	return memcmp(a, b, sizeof(int));
}

NOINLINE void sort_here(void)
{
	w.ret[2] = (uintptr_t)__builtin_return_address(0);
	int v[16];
	for (int i = 0; i < 16; i++)
		v[i] = 16 - i;
	compare_walks = 1;
	qsort(v, 16, sizeof(int), compare_calls);
	KEEP();
}

/* sort_here again, from return addresses of its own. */
NOINLINE void sort_there(void)
{
	w.ret[2] = (uintptr_t)__builtin_return_address(0);
	int v[16];
	for (int i = 0; i < 16; i++)
		v[i] = i;
	compare_walks = 1;
	qsort(v, 16, sizeof(int), compare_calls);
	KEEP();
}

/* The frames of a walk from level0 through qsort's, up to sorter. */
static void check_sort_walk(void (*sorter)(void))
{
	TU_EQ(w.fn[0], (uintptr_t)level0);
	expect_frame(1, level1, w.ret[0], "level1");
	TU_EQ(w.fn[2], (uintptr_t)compare_calls);
	TU_EQ(w.pc[2] + 1, w.ret[1]);
	/* Then qsort's own frames in libc, then the sorter. */
	unsigned k = 3;
	while (k < w.n && w.fn[k] != (uintptr_t)sorter)
		k++;
	EQ_IN("the sorter is found above qsort's frames", k < w.n, 1);
	EQ_IN("qsort has frames of its own", k > 3, 1);
	EQ_IN("a frame above the sorter's", k + 1 < w.n, 1);
	EQ_IN("the sorter's return address", w.pc[k + 1] + 1, w.ret[2]);
}

static void a_walk_goes_through_the_c_librarys_frames(void **state)
{
	(void)state;
	memset(&w, 0, sizeof(w));
	uint64_t objects0, tables0, files0, objects1, tables1, files1;
	stack_counts(&objects0, &tables0, &files0);
	sort_here();
	stack_counts(&objects1, &tables1, &files1);
	/* One lookup each time the walk passes into another object than the
	 * last frame's (dladdr's truth), from the one holding stack.c. */
	Dl_info info;
	TU_EQ(dladdr((void *)(uintptr_t)stack_capture, &info) != 0, 1);
	const void *base = info.dli_fbase;
	unsigned changes = 0;
	for (unsigned k = 0; k < w.n; k++) {
		TU_EQ(dladdr((void *)w.pc[k], &info) != 0, 1);
		changes += info.dli_fbase != base;
		base = info.dli_fbase;
	}
	EQ_IN("objects looked up: one per change of object", objects1 - objects0, changes);
	EQ_IN("the walk passes through the C library and back", changes >= 2, 1);
	check_sort_walk(sort_here);
	/* qsort's frames were new to the cache: their rules, and sort_here's,
	 * were read from the files of libc and of this program (both have a
	 * build-id), not through their mappings. */
	EQ_IN("rules read from tables", tables1 - tables0 >= 3, 1);
	EQ_IN("rules read from files", files1 - files0, tables1 - tables0);
}

static void a_walk_reads_the_same_rules_through_the_mappings(void **state)
{
	(void)state;
	memset(&w, 0, sizeof(w));
	uint64_t objects0, tables0, files0, objects1, tables1, files1;
	stack_read_files(0);
	stack_counts(&objects0, &tables0, &files0);
	sort_there();
	stack_counts(&objects1, &tables1, &files1);
	stack_read_files(1);
	/* qsort's rules come from the cache; sort_there's and this
	 * function's are new, read through the mapping, and give the same
	 * frames as the files gave sort_here. */
	check_sort_walk(sort_there);
	EQ_IN("rules read from tables", tables1 - tables0 >= 2, 1);
	EQ_IN("rules read from files", files1 - files0, 0);
}

static void a_walk_stops_at_max_frames(void **state)
{
	(void)state;
	uintptr_t pc[2], fn[2];
	TU_EQ(stack_capture(pc, fn, 2), 2);
	TU_EQ(fn[0], (uintptr_t)a_walk_stops_at_max_frames);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    /* First: it sees the cache before any capture. */
	    TU_TEST(the_cache_starts_at_one_page_and_grows_past_its_evictions),
	    TU_TEST(a_walk_names_each_caller_and_its_return_address),
	    TU_TEST(a_second_walk_reads_no_table_and_finds_each_object_once),
	    TU_TEST(a_walk_goes_through_the_c_librarys_frames),
	    /* After it: qsort's rules are then in the cache. */
	    TU_TEST(a_walk_reads_the_same_rules_through_the_mappings),
	    TU_TEST(a_walk_stops_at_max_frames),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
