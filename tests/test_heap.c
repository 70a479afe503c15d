/*
 * test_heap.c — heaps of the program's own (pa_heap_new, include/pagealloc.h)
 * in one thread: exact counts after known allocations, destroy gives every
 * page back, delete hands live objects to the default heap, the heap's
 * limit, realloc within and between heaps, aligned blocks, sized frees,
 * a forked child's use of its parent's heap, the faults (a
 * free of a destroyed heap's object, a destroyed heap's handle) and the
 * process-wide memory_limit_hard, read from PAGEALLOC_CONF by a child that
 * runs this program again. tests/test_heap_thread.c has the threads.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <valgrind/valgrind.h>

#include "testutil.h"

#include "pagealloc.h"

#define SMALL 100              /* a 112-byte class */
#define LARGE ((size_t)100000) /* 13 pages */

/* Page heap pages in use, per-CPU caches given back first. */
static size_t heap_inuse(void)
{
	struct pa_stats st;
	pa_cache_flush();
	assert_int_equal(pa_stats(&st), 0);
	return st.heap_inuse;
}

static struct pa_heap_stats hstats(pa_heap_t *h)
{
	struct pa_heap_stats st;
	assert_int_equal(pa_heap_stats(h, &st), 0);
	return st;
}

static void stats_are_exact_after_known_allocations(void **state)
{
	(void)state;
	pa_heap_t *h = pa_heap_new();
	assert_non_null(h);
	struct pa_heap_stats st = hstats(h);
	TU_EQ(st.live_objects, 0);
	TU_EQ(st.page_bytes, 0);
	void *small[200], *large[2];
	for (int i = 0; i < 200; i++)
		assert_non_null(small[i] = pa_heap_malloc(h, SMALL));
	for (int i = 0; i < 2; i++)
		assert_non_null(large[i] = pa_heap_malloc(h, LARGE));
	const size_t su = 112, lu = 13 * PA_PAGE_BYTES; /* what the heap counts */
	if (!RUNNING_ON_VALGRIND) { /* memcheck's usable size is the size asked for */
		TU_EQ(pa_malloc_usable_size(small[0]), su);
		TU_EQ(pa_malloc_usable_size(large[0]), lu);
	}
	st = hstats(h);
	TU_EQ(st.live_objects, 202);
	TU_EQ(st.live_bytes, 200 * su + 2 * lu);
	TU_EQ(st.allocs, 202);
	TU_EQ(st.frees, 0);
	TU_EQ(st.large_objects, 2);
	/* A 112-byte span is one page of 73 objects: 200 objects take 3. */
	TU_EQ(st.spans, 3);
	TU_EQ(st.page_bytes, 3 * PA_PAGE_BYTES + 2 * lu);
	for (int i = 0; i < 10; i++)
		pa_free(small[i]);
	pa_free(large[0]);
	st = hstats(h);
	TU_EQ(st.live_objects, 191);
	TU_EQ(st.live_bytes, 190 * su + lu);
	TU_EQ(st.frees, 11);
	TU_EQ(st.large_objects, 1);
	TU_EQ(st.page_bytes, 3 * PA_PAGE_BYTES + lu);
	pa_heap_destroy(h);
}

static void destroy_frees_every_object_and_gives_the_pages_back(void **state)
{
	(void)state;
	size_t before = heap_inuse();
	pa_heap_t *h = pa_heap_new();
	for (int i = 0; i < 20000; i++)
		assert_non_null(pa_heap_malloc(h, (size_t)(16 + i % 1000)));
	for (int i = 0; i < 10; i++)
		assert_non_null(pa_heap_malloc(h, 64 << 10));
	struct pa_heap_stats st = hstats(h);
	TU_EQ(st.live_objects, 20010);
	TU_EQ(heap_inuse() - before, st.page_bytes);
	pa_heap_destroy(h);
	TU_EQ(heap_inuse(), before);
	/* The slot is free again: a new heap starts empty. */
	pa_heap_t *h2 = pa_heap_new();
	st = hstats(h2);
	TU_EQ(st.live_objects, 0);
	TU_EQ(st.allocs, 0);
	TU_EQ(st.page_bytes, 0);
	pa_heap_destroy(h2);
}

static void delete_keeps_objects_valid_and_freeable_with_pa_free(void **state)
{
	(void)state;
	pa_thread_cache_flush();
	struct pa_malloc_stats m0, m1, m2;
	assert_int_equal(pa_malloc_stats(&m0), 0);
	pa_heap_t *h = pa_heap_new();
	enum { N = 1000 };
	static unsigned char *p[N + 3];
	for (int i = 0; i < N + 3; i++) {
		size_t n = i < N ? (size_t)(8 + i % 300) : LARGE;
		assert_non_null(p[i] = pa_heap_malloc(h, n));
		memset(p[i], i & 0xff, n);
	}
	for (int i = 0; i < N; i += 2) { /* every other one freed in the heap */
		pa_free(p[i]);
		p[i] = NULL;
	}
	pa_heap_delete(h);
	assert_int_equal(pa_malloc_stats(&m1), 0);
	TU_EQ(m1.live_objects - m0.live_objects, N / 2 + 3);
	TU_EQ(m1.large_objects - m0.large_objects, 3);
	for (int i = 0; i < N + 3; i++) {
		if (p[i] == NULL)
			continue;
		size_t n = i < N ? (size_t)(8 + i % 300) : LARGE;
		for (size_t k = 0; k < n; k++)
			if (p[i][k] != (i & 0xff))
				fail_msg("object %d byte %zu changed", i, k);
		assert_true(pa_malloc_usable_size(p[i]) >= n);
	}
	/* Realloc and free through the default heap's paths. */
	p[1] = pa_realloc(p[1], 5000);
	assert_non_null(p[1]);
	TU_EQ(p[1][8], 1);
	for (int i = 0; i < N + 3; i++)
		pa_free(p[i]);
	pa_thread_cache_flush();
	assert_int_equal(pa_malloc_stats(&m2), 0);
	TU_EQ(m2.live_objects, m0.live_objects);
	TU_EQ(m2.large_objects, m0.large_objects);
}

static void limit_reached_gives_null_and_enomem_and_changes_nothing_else(void **state)
{
	(void)state;
	pa_heap_t *h = pa_heap_new();
	pa_heap_set_limit(h, 64 << 10);
	void *block[64];
	int got = 0;
	while (got < 64 && (block[got] = pa_heap_malloc(h, 4096)) != NULL)
		got++;
	TU_EQ(errno, ENOMEM);
	/* A 4096-byte span is one page of 2 objects: 8 spans fit 64 KiB. */
	TU_EQ(got, 16);
	struct pa_heap_stats a = hstats(h);
	TU_EQ(a.page_bytes, 8 * PA_PAGE_BYTES);
	TU_EQ(a.limit, 64 << 10);
	size_t inuse = heap_inuse();
	errno = 0;
	assert_null(pa_heap_malloc(h, 4096));
	TU_EQ(errno, ENOMEM);
	errno = 0;
	assert_null(pa_heap_malloc(h, 16)); /* a class with no span yet */
	TU_EQ(errno, ENOMEM);
	errno = 0;
	assert_null(pa_heap_malloc(h, LARGE));
	TU_EQ(errno, ENOMEM);
	errno = 0;
	assert_null(pa_heap_calloc(h, 1, 32 << 10));
	TU_EQ(errno, ENOMEM);
	struct pa_heap_stats b = hstats(h);
	TU_EQ(b.limit_failures, a.limit_failures + 4);
	b.limit_failures = a.limit_failures;
	assert_memory_equal(&a, &b, sizeof(a));
	TU_EQ(heap_inuse(), inuse);
	/* A freed block's room in its span serves again under the limit. */
	pa_free(block[0]);
	assert_non_null(block[0] = pa_heap_malloc(h, 4096));
	/* Without the limit the heap grows again. */
	pa_heap_set_limit(h, 0);
	assert_non_null(pa_heap_malloc(h, LARGE));
	pa_heap_destroy(h);
}

static void realloc_stays_in_its_heap_or_moves_between_heaps(void **state)
{
	(void)state;
	pa_heap_t *h1 = pa_heap_new(), *h2 = pa_heap_new();
	char *p = pa_heap_malloc(h1, 100);
	memcpy(p, "heap one", 9);
	/* Fits its 112-byte block: where it is (under memcheck, which knows
	 * blocks by their requested size, every realloc moves). */
	if (!RUNNING_ON_VALGRIND) {
		assert_ptr_equal(pa_realloc(p, 110), p);
		assert_ptr_equal(pa_heap_realloc(h1, p, 105), p);
	}
	/* Grows: a new block of the same heap. */
	char *q = pa_realloc(p, 5000);
	assert_string_equal(q, "heap one");
	struct pa_heap_stats s1 = hstats(h1);
	TU_EQ(s1.live_objects, 1);
	TU_EQ(s1.allocs - s1.frees, 1);
	/* Into another heap, even when it would fit. */
	char *r = pa_heap_realloc(h2, q, 4000);
	assert_ptr_not_equal(r, q);
	assert_string_equal(r, "heap one");
	TU_EQ(hstats(h1).live_objects, 0);
	TU_EQ(hstats(h2).live_objects, 1);
	/* A large block, and back out of the default heap into h1. */
	char *big = pa_heap_realloc(h2, r, LARGE);
	assert_string_equal(big, "heap one");
	TU_EQ(hstats(h2).large_objects, 1);
	char *d = pa_malloc(40);
	memcpy(d, "default", 8);
	char *e = pa_heap_realloc(h1, d, 40);
	assert_string_equal(e, "default");
	TU_EQ(hstats(h1).live_objects, 1);
	/* NULL and 0: malloc and free. */
	char *f = pa_heap_realloc(h1, NULL, 10);
	TU_EQ(hstats(h1).live_objects, 2);
	assert_null(pa_heap_realloc(h1, f, 0));
	TU_EQ(hstats(h1).live_objects, 1);
	pa_free(e);
	pa_free(big);
	TU_EQ(hstats(h1).live_objects, 0);
	TU_EQ(hstats(h2).live_objects, 0);
	pa_heap_destroy(h1);
	pa_heap_destroy(h2);
}

static void aligned_alloc_gives_every_alignment(void **state)
{
	(void)state;
	pa_heap_t *h = pa_heap_new();
	size_t live = 0;
	for (size_t a = 1; a <= ((size_t)1 << 21); a <<= 1) {
		for (size_t n = 1; n <= (size_t)100 << 10; n *= 7) {
			tu_case = "alignment";
			char *p = pa_heap_aligned_alloc(h, a, n);
			assert_non_null(p);
			TU_EQ((uintptr_t)p % (a < 16 ? 16 : a), 0);
			assert_true(pa_malloc_usable_size(p) >= n);
			memset(p, 1, n);
			live++;
		}
	}
	TU_EQ(hstats(h).live_objects, live);
	/* Not a power of two: rounded up, as pa_aligned_alloc does. */
	char *p = pa_heap_aligned_alloc(h, 48, 10);
	TU_EQ((uintptr_t)p % 64, 0);
	errno = 0;
	assert_null(pa_heap_aligned_alloc(h, SIZE_MAX / 2 + 2, 10));
	TU_EQ(errno, EINVAL);
	pa_heap_destroy(h);
}

static void sized_frees_take_a_heaps_objects(void **state)
{
	(void)state;
	pa_heap_t *h = pa_heap_new();
	void *a = pa_heap_malloc(h, 100), *b = pa_heap_aligned_alloc(h, 256, 200);
	void *c = pa_heap_malloc(h, LARGE);
	pa_free_sized(a, 100);
	pa_free_aligned_sized(b, 256, 200);
	pa_free_sized(c, LARGE);
	struct pa_heap_stats st = hstats(h);
	TU_EQ(st.live_objects, 0);
	TU_EQ(st.frees, 3);
	pa_heap_destroy(h);
}

static void a_forked_child_uses_and_destroys_its_parents_heap(void **state)
{
	(void)state;
	assert_int_equal(pa_config_set("scavenger", "off"), 0);
	pa_heap_t *h = pa_heap_new();
	void *p = pa_heap_malloc(h, 64);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct pa_heap_stats st;
		void *q = pa_heap_malloc(h, 64);
		pa_free(p);
		pa_heap_stats(h, &st);
		int ok = q != NULL && st.live_objects == 1 && st.frees == 1;
		pa_heap_destroy(h);
		_exit(ok ? 0 : 1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	TU_EQ(WEXITSTATUS(status), 0);
	TU_EQ(hstats(h).live_objects, 1); /* the parent's heap is its own */
	pa_heap_destroy(h);
}

/* ---- faults: children that must die with one line --------------------------- */

static uintptr_t *fault_ptr; /* a shared page: the pointer the child names */

static void free_after_destroy(void *arg)
{
	(void)arg;
	pa_heap_t *h = pa_heap_new();
	pa_heap_malloc(h, 64);
	void *p = pa_heap_malloc(h, 64);
	*fault_ptr = (uintptr_t)p;
	pa_heap_destroy(h);
	pa_free(p);
}

static void free_after_destroy_pages_reused(void *arg)
{
	(void)arg;
	pa_heap_t *h = pa_heap_new();
	pa_heap_malloc(h, 64);
	void *p = pa_heap_malloc(h, 64);
	*fault_ptr = (uintptr_t)p;
	pa_heap_destroy(h);
	/* A new heap's span of the class on the same page: p is its second
	 * object, never handed out there. */
	pa_heap_t *h2 = pa_heap_new();
	pa_heap_malloc(h2, 64);
	pa_free(p);
}

static void malloc_from_destroyed_heap(void *arg)
{
	(void)arg;
	pa_heap_t *h = pa_heap_new();
	*fault_ptr = (uintptr_t)h;
	pa_heap_destroy(h);
	pa_heap_malloc(h, 10);
}

static void double_free_of_a_heap_object(void *arg)
{
	(void)arg;
	pa_heap_t *h = pa_heap_new();
	void *p = pa_heap_malloc(h, 64);
	pa_heap_malloc(h, 64);
	*fault_ptr = (uintptr_t)p;
	pa_free(p);
	pa_free(p);
}

static void bad_heap_uses_abort_with_one_line(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		void (*run)(void *);
		const char *func, *fault;
	} cases[] = {
	    {"free after destroy", free_after_destroy, "free",
	     "not a live block of this heap (on a free page of its own: a block freed already, or "
	     "never one)"},
	    {"free after destroy, pages reused", free_after_destroy_pages_reused, "free",
	     "not a live block of this heap (at a block its span has not handed out: freed "
	     "already, or never one)"},
	    {"malloc from a destroyed heap", malloc_from_destroyed_heap, "pa_heap_malloc",
	     "not a live heap (destroyed or deleted already, or not from pa_heap_new)"},
	    {"double free", double_free_of_a_heap_object, "free",
	     "block is already free (double free)"},
	};
	fault_ptr = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(fault_ptr != MAP_FAILED);
	assert_int_equal(pa_config_set("scavenger", "off"), 0);
	pa_free(pa_malloc(1));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tu_case = cases[i].name;
		*fault_ptr = 0;
		char err[1024];
		int status = tu_run_child(cases[i].run, NULL, err, sizeof(err));
		tu_expect_fault_line(cases[i].name, status, err, cases[i].func, *fault_ptr,
		                     cases[i].fault);
	}
	munmap(fault_ptr, 4096);
}

/* ---- memory_limit_hard, from PAGEALLOC_CONF -------------------------------- */

#define HARD_LIMIT ((size_t)24 << 20)

/* The child's side (this program run again with PAGEALLOC_CONF set): exit
 * 0 when the limit held, else a code naming what failed. */
static int hard_limit_child(void)
{
	static void *blocks[64];
	int n = 0;
	while (n < 64 && (blocks[n] = pa_malloc((size_t)1 << 20)) != NULL)
		n++;
	if (n == 64 || errno != ENOMEM)
		return 1;
	struct pa_stats st;
	pa_stats(&st);
	if (st.memory_limit_hard != HARD_LIMIT || st.heap_mapped > HARD_LIMIT ||
	    st.hard_limit_refusals == 0)
		return 2;
	/* A heap of its own is under it too. */
	pa_heap_t *h = pa_heap_new();
	if (h == NULL || pa_heap_malloc(h, (size_t)8 << 20) != NULL || errno != ENOMEM)
		return 3;
	/* What was freed serves again. */
	pa_free(blocks[--n]);
	if ((blocks[n] = pa_malloc((size_t)1 << 20)) == NULL)
		return 4;
	pa_stats(&st);
	return st.heap_mapped <= HARD_LIMIT ? 0 : 5;
}

static void memory_limit_hard_reached_gives_enomem(void **state)
{
	(void)state;
	if (RUNNING_ON_VALGRIND) /* the child would run outside it */
		skip();
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = {(char *)"test_heap", (char *)"hard-limit-child", NULL};
		char *envp[] = {(char *)"PAGEALLOC_CONF=memory_limit_hard=24M,scavenger=off", NULL};
		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	TU_EQ(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "hard-limit-child") == 0)
		return hard_limit_child();
	const struct CMUnitTest tests[] = {
	    TU_TEST(stats_are_exact_after_known_allocations),
	    TU_TEST(destroy_frees_every_object_and_gives_the_pages_back),
	    TU_TEST(delete_keeps_objects_valid_and_freeable_with_pa_free),
	    TU_TEST(limit_reached_gives_null_and_enomem_and_changes_nothing_else),
	    TU_TEST(realloc_stays_in_its_heap_or_moves_between_heaps),
	    TU_TEST(aligned_alloc_gives_every_alignment),
	    TU_TEST(sized_frees_take_a_heaps_objects),
	    TU_TEST(a_forked_child_uses_and_destroys_its_parents_heap),
	    TU_TEST(bad_heap_uses_abort_with_one_line),
	    TU_TEST(memory_limit_hard_reached_gives_enomem),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
