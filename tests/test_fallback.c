/*
 * test_fallback.c — a heap under a limited address space (ulimit -v).
 *
 *  - In a forked child with RLIMIT_AS at its current size + 256 MiB, the
 *    ~585 MiB summary reservation of the full 48-bit window is refused: the
 *    default heap must fall back to a narrower window (pa_stats says so),
 *    allocate inside it, and work.
 *  - pageheap_init with an explicit 64 GiB window: geometry, growth inside
 *    the window (across a level-0 edge and at its very top), none outside.
 *  - Out of memory under a small RLIMIT_AS: allocation returns NULL with
 *    errno = ENOMEM, never crashes, and the heap keeps working.
 *
 * This process never touches the default heap itself: the children must be
 * the first to build it, under their limits.
 */
#include <signal.h>
#include <sys/resource.h>

#include "testutil.h"

#include "pagealloc.h"

#define PG PA_PAGE_BYTES

/* In a child: report a failed check on stderr and exit with its line. */
#define CHILD_CHECK(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "child: %s:%d: %s (errno %d)\n", __FILE__, __LINE__,       \
			        #cond, errno);                                                     \
			_exit(1);                                                                  \
		}                                                                                  \
	} while (0)

/* VmSize of this process in bytes. */
static size_t vm_size(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t kb = 0;
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmSize: %zu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

static void limit_address_space(size_t headroom)
{
	size_t now = vm_size();
	CHILD_CHECK(now != 0);
	struct rlimit rl = {now + headroom, now + headroom};
	CHILD_CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
}

static void expect_child_ok(void (*fn)(void *), void *arg)
{
	char out[4096];
	int status = tu_run_child(fn, arg, out, sizeof(out));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("child status %#x; stderr: %s", status, out);
}

/* ---- the fallback window ------------------------------------------------------------ */

static int in_window(const struct pa_stats *s, const void *p, size_t npages)
{
	uintptr_t a = (uintptr_t)p;
	return a >= s->window_base && a + npages * PG <= s->window_base + s->window_bytes;
}

static void fallback_child(void *arg)
{
	(void)arg;
	limit_address_space((size_t)256 << 20);
	static const size_t sizes[] = {1, 15, 16, 1000, 3, 700};
	unsigned char *p[6];
	for (size_t i = 0; i < 6; i++) {
		p[i] = pa_pages_alloc(sizes[i]);
		CHILD_CHECK(p[i] != NULL);
		CHILD_CHECK((uintptr_t)p[i] % PG == 0);
		memset(p[i], (int)i + 1, sizes[i] * PG);
	}
	for (size_t i = 0; i < 6; i++)
		for (size_t b = 0; b < sizes[i] * PG; b += 4096)
			CHILD_CHECK((size_t)p[i][b] == i + 1);
	struct pa_stats s;
	CHILD_CHECK(pa_stats(&s) == 0);
	CHILD_CHECK(s.window_fallback == 1);
	CHILD_CHECK(s.window_bytes < (size_t)1 << 48);
	CHILD_CHECK(s.window_bytes >= (size_t)1 << PA_WINDOW_MIN_BITS);
	CHILD_CHECK(s.window_base % s.window_bytes == 0);
	CHILD_CHECK(s.summary_reserved < ((size_t)256 << 20));
	for (size_t i = 0; i < 6; i++)
		CHILD_CHECK(in_window(&s, p[i], sizes[i]));
	for (size_t i = 0; i < 6; i++)
		pa_pages_free(p[i], sizes[i]);
	/* And again after the frees. */
	unsigned char *q = pa_pages_alloc(2000);
	CHILD_CHECK(q != NULL);
	q[0] = q[2000 * PG - 1] = 7;
	CHILD_CHECK(pa_stats(&s) == 0);
	CHILD_CHECK(in_window(&s, q, 2000));
	pa_pages_free(q, 2000);
}

static void test_refused_summary_reservation_falls_back_to_narrow_window(void **state)
{
	(void)state;
	expect_child_ok(fallback_child, NULL);
}

/* ---- an explicit window -------------------------------------------------------------- */

#define WBASE ((uintptr_t)0x7a0000000000)
#define WBITS 36u
#define WCHUNK(k) (WBASE + (uintptr_t)(k)*PA_CHUNK_SIZE)
#define WPAGE(k, p) (WCHUNK(k) + (uintptr_t)(p)*PA_PAGE_SIZE)

static void test_explicit_window_covers_only_its_range(void **state)
{
	(void)state;
	struct tu_heap *t = tu_heap_new_window(WBITS, WBASE);
	const size_t nchunks = (size_t)1 << (WBITS - PA_CHUNK_SHIFT); /* 16384 */
	TU_EQ(t->h.window_base, WBASE);
	TU_EQ(t->h.window_bits, WBITS);
	TU_EQ(t->h.window_fallback, 0);
	TU_EQ(t->h.sum_len[0], 4);
	TU_EQ(t->h.sum_len[PA_SUM_LEVELS - 1], nchunks);
	TU_EQ(t->h.limit_hint, WBASE + ((uintptr_t)1 << WBITS));
	TU_EQ(pageheap_hint(&t->h), t->h.limit_hint);

	/* Across the first level-0 edge (16 GiB = 4096 chunks in), and the top chunk. */
	const size_t edge = 4096, top = nchunks - 1;
	TU_EQ(pageheap_grow_range(&t->h, WCHUNK(edge - 2), 4 * PA_CHUNK_PAGES), 0);
	tu_note_range(t, WCHUNK(edge - 2), WCHUNK(edge + 2));
	TU_EQ(pageheap_grow_range(&t->h, WCHUNK(top), PA_CHUNK_PAGES), 0);
	tu_note_range(t, WCHUNK(top), WCHUNK(top + 1));
	/* Outside the window: below it, at its end, straddling its end. */
	TU_EQ(pageheap_grow_range(&t->h, WBASE - PA_CHUNK_SIZE, PA_CHUNK_PAGES), -1);
	TU_EQ(pageheap_grow_range(&t->h, WCHUNK(nchunks), PA_CHUNK_PAGES), -1);
	TU_EQ(pageheap_grow_range(&t->h, WCHUNK(top), 2 * PA_CHUNK_PAGES), -1);
	TU_EQ(pageheap_hint(&t->h), WCHUNK(edge - 2));
	tu_check(t);

	size_t scav;
	TU_EQ(pageheap_alloc(&t->h, 4 * PA_CHUNK_PAGES + 1, &scav), 0);
	TU_EQ(pageheap_alloc(&t->h, PA_CHUNK_PAGES + 100, &scav), WCHUNK(edge - 2));
	TU_EQ(scav, PA_CHUNK_PAGES + 100);
	/* 900 pages from page 100 of edge-1 cross the level-0 edge, ending at edge + 488. */
	TU_EQ(pageheap_alloc(&t->h, 900, &scav), WPAGE(edge - 1, 100));
	TU_EQ(pageheap_alloc(&t->h, PA_CHUNK_PAGES, &scav), WPAGE(edge, 488));
	TU_EQ(pageheap_alloc(&t->h, PA_CHUNK_PAGES, &scav), WCHUNK(top));
	tu_check(t);
	TU_EQ(pageheap_alloc(&t->h, 25, &scav), 0);
	TU_EQ(pageheap_alloc(&t->h, 24, &scav), WPAGE(edge + 1, 488));
	TU_EQ(pageheap_alloc(&t->h, 1, &scav), 0);
	TU_EQ(pageheap_hint(&t->h), t->h.limit_hint);
	tu_check(t);
	/* The top chunk's leaf is the last entry of the leaf array. */
	pageheap_free(&t->h, WPAGE(top, 511), 1);
	TU_EQ(t->h.sum[PA_SUM_LEVELS - 1][nchunks - 1], sum_pack(0, 1, 1));
	TU_EQ(pageheap_alloc(&t->h, 1, &scav), WPAGE(top, 511));
	tu_check(t);
	tu_heap_free(t);
}

static void test_window_bits_out_of_range_are_refused(void **state)
{
	(void)state;
	struct pa_pageheap h;
	struct pa_pageheap_opts small = {.metadata_only = 1, .window_bits = PA_WINDOW_MIN_BITS - 1};
	errno = 0;
	TU_EQ(pageheap_init(&h, &small), -1);
	TU_EQ(errno, EINVAL);
	struct pa_pageheap_opts big = {.metadata_only = 1, .window_bits = PA_ADDR_BITS + 1};
	errno = 0;
	TU_EQ(pageheap_init(&h, &big), -1);
	TU_EQ(errno, EINVAL);
	/* The smallest window works: one level-0 entry. */
	struct tu_heap *t = tu_heap_new_window(PA_WINDOW_MIN_BITS, (uintptr_t)3 << 40);
	TU_EQ(t->h.sum_len[0], 1);
	tu_grow(t, ((uintptr_t)3 << 40) + 5 * PA_CHUNK_SIZE, 2);
	TU_EQ(pageheap_alloc(&t->h, 2 * PA_CHUNK_PAGES, NULL),
	      ((uintptr_t)3 << 40) + 5 * PA_CHUNK_SIZE);
	tu_check(t);
	tu_heap_free(t);
}

/* ---- out of memory --------------------------------------------------------------------- */

static void oom_child(void *arg)
{
	(void)arg;
	limit_address_space((size_t)1 << 30);
	static void *p[1024];
	size_t n = 0;
	for (; n < 1024; n++) {
		errno = 0;
		p[n] = pa_pages_alloc(1000);
		if (p[n] == NULL)
			break;
		((char *)p[n])[0] = 1;
	}
	CHILD_CHECK(n > 0 && n < 1024);
	CHILD_CHECK(errno == ENOMEM);
	/* More than the whole limit, and more than the address space. */
	errno = 0;
	CHILD_CHECK(pa_pages_alloc(((size_t)2 << 30) / PG) == NULL);
	CHILD_CHECK(errno == ENOMEM);
	errno = 0;
	CHILD_CHECK(pa_pages_alloc((size_t)1 << 40) == NULL);
	CHILD_CHECK(errno == ENOMEM);
	struct pa_stats s;
	CHILD_CHECK(pa_stats(&s) == 0);
	CHILD_CHECK(s.grow_failures >= 1);
	/* Freed memory is reused; the heap still works. */
	pa_pages_free(p[n / 2], 1000);
	void *again = pa_pages_alloc(1000);
	CHILD_CHECK(again != NULL);
	((char *)again)[1000 * PG - 1] = 2;
	p[n / 2] = again;
	void *one = pa_pages_alloc(1);
	if (one != NULL)
		pa_pages_free(one, 1);
	for (size_t i = 0; i < n; i++)
		pa_pages_free(p[i], 1000);
	CHILD_CHECK(pa_stats(&s) == 0);
	CHILD_CHECK(s.heap_inuse <= 64 * PG); /* at most a per-CPU cache group */
}

static void test_out_of_memory_returns_null_with_enomem(void **state)
{
	(void)state;
	expect_child_ok(oom_child, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(test_refused_summary_reservation_falls_back_to_narrow_window),
	    TU_TEST(test_explicit_window_covers_only_its_range),
	    TU_TEST(test_window_bits_out_of_range_are_refused),
	    TU_TEST(test_out_of_memory_returns_null_with_enomem),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
