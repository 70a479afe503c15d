/*
 * test_scavenger_rss.c — the scavenger on the real default heap, seen by the
 * OS: resident memory falls after a large free and rises on reuse, reused
 * pages read as zero, pa_scavenge(0) leaves nothing free resident, the
 * memory limit bounds resident heap memory, and a forked child's scavenger
 * works.
 *
 * The OS's view of a range is mincore (exact, per 4 KiB page); the process's
 * is /proc/self/smaps_rollup Rss; ours is pa_stats (heap_mapped -
 * heap_released is what the heap believes may be resident). Waits for the
 * background thread poll for up to 10 s and then assert the final value.
 *
 * The tests share one process and one default heap, configured with
 * PAGEALLOC_CONF (scavenge_delay_ms=0) before the first pa_ call and with
 * pa_config_set per test. The first test relies on the heap being fresh (its
 * 64 MiB run is the lowest free run): keep it first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pagealloc.h"

#define MiB ((size_t)1 << 20)
#define CHUNK_BYTES (4 * MiB)
#define OS_PAGE 4096u
#define WAIT_NS 10000000000ull /* 10 s: the bound on every wait */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {0, (long)ms * 1000000L};
	nanosleep(&ts, NULL);
}

/* Bytes of [p, p + len) resident according to the OS. */
static size_t resident_bytes(const void *p, size_t len)
{
	static unsigned char vec[(256 * MiB) / OS_PAGE];
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(OS_PAGE - 1);
	size_t n = ((uintptr_t)p + len - a + OS_PAGE - 1) / OS_PAGE;
	if (n > sizeof(vec) || mincore((void *)a, n * OS_PAGE, vec) != 0)
		fail_msg("mincore(%p, %zu pages) failed", (void *)a, n);
	size_t r = 0;
	for (size_t i = 0; i < n; i++)
		r += vec[i] & 1;
	return r * OS_PAGE;
}

/* The process's resident set from /proc/self/smaps_rollup, in bytes. */
static size_t process_rss(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	assert_non_null(f);
	char line[256];
	size_t kb = 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Rss: %zu kB", &kb) == 1)
			break;
	fclose(f);
	assert_int_not_equal(kb, 0);
	return kb * 1024;
}

static struct pa_stats stats(void)
{
	struct pa_stats s;
	assert_int_equal(pa_stats(&s), 0);
	return s;
}

static size_t heap_resident(const struct pa_stats *s)
{
	return s->heap_mapped - s->heap_released;
}

static void set(const char *key, const char *value)
{
	assert_int_equal(pa_config_set(key, value), 0);
}

static void fill(void *p, size_t len, unsigned char v)
{
	memset(p, v, len);
}

/* Words in [p, p + len) that are not zero (two per 4 KiB page: first, last). */
static size_t nonzero_words(const void *p, size_t len)
{
	size_t bad = 0;
	for (size_t off = 0; off < len; off += OS_PAGE) {
		const volatile uint64_t *w = (const volatile uint64_t *)((const char *)p + off);
		bad += (w[0] != 0) + (w[OS_PAGE / 8 - 1] != 0);
	}
	return bad;
}

/*
 * A run of `bytes` at a 4 MiB (chunk) boundary, so it covers whole chunks and
 * whole huge pages: the background scavenger releases all of it under either
 * huge-page policy. *raw / *raw_pages: the allocation to free at the end,
 * minus the run (the guards below and above it stay allocated meanwhile).
 */
struct aligned_run {
	char *raw, *run;
	size_t raw_pages, run_pages;
};

static struct aligned_run alloc_aligned_run(size_t bytes)
{
	struct aligned_run r;
	r.run_pages = bytes / PA_PAGE_BYTES;
	r.raw_pages = r.run_pages + CHUNK_BYTES / PA_PAGE_BYTES - 1;
	r.raw = pa_pages_alloc(r.raw_pages);
	assert_non_null(r.raw);
	r.run = (char *)(((uintptr_t)r.raw + CHUNK_BYTES - 1) & ~(uintptr_t)(CHUNK_BYTES - 1));
	return r;
}

/* Free what surrounds the run (the run itself was freed already). */
static void free_guards(const struct aligned_run *r)
{
	size_t below = (size_t)(r->run - r->raw) / PA_PAGE_BYTES;
	if (below != 0)
		pa_pages_free(r->raw, below);
	pa_pages_free(r->run + r->run_pages * PA_PAGE_BYTES, r->raw_pages - below - r->run_pages);
}

/* ---- background release and reuse ----------------------------------------- */

static void background_release_drops_rss_and_reuse_raises_it_with_zeroed_pages(void **state)
{
	(void)state;
	set("scavenger", "on");
	set("scavenge_delay_ms", "0");
	set("release", "dontneed");
	const size_t len = 64 * MiB;
	struct aligned_run r = alloc_aligned_run(len);
	fill(r.run, len, 0xa5);
	assert_int_equal(resident_bytes(r.run, len), len);
	size_t rss_touched = process_rss();

	pa_pages_free(r.run, r.run_pages);
	struct pa_stats s;
	uint64_t deadline = now_ns() + WAIT_NS;
	do {
		sleep_ms(10);
		s = stats();
	} while ((resident_bytes(r.run, len) != 0 || s.heap_released != s.heap_free) &&
	         now_ns() < deadline);
	/* Every page of the run went back, and the heap agrees: nothing free is
	 * resident. The process as a whole shrank by (nearly) the run. */
	assert_int_equal(resident_bytes(r.run, len), 0);
	assert_int_equal(s.heap_released, s.heap_free);
	assert_int_equal(s.scavenger_running, 1);
	size_t rss_released = process_rss();
	assert_true(rss_released + (len - MiB) <= rss_touched);

	/* Reuse: first fit hands back the same run (the lowest free one), its
	 * released pages read as zero, and touching it makes it resident. */
	char *again = pa_pages_alloc(r.run_pages);
	assert_ptr_equal(again, r.run);
	assert_int_equal(nonzero_words(again, len), 0);
	fill(again, len, 0x3c);
	assert_int_equal(resident_bytes(again, len), len);
	assert_true(process_rss() >= rss_released + (len - MiB));
	s = stats();
	assert_int_equal(s.heap_inuse, r.raw_pages * PA_PAGE_BYTES);

	pa_pages_free(again, r.run_pages);
	free_guards(&r);
}

/* ---- pa_scavenge(0) --------------------------------------------------------- */

#define SMALL_RUNS 200

static void scavenge_all_releases_every_free_page_and_empties_the_caches(void **state)
{
	(void)state;
	set("scavenger", "off");
	pa_cache_flush();
	size_t inuse0 = stats().heap_inuse;
	static char *p[SMALL_RUNS];
	static size_t n[SMALL_RUNS];
	for (unsigned i = 0; i < SMALL_RUNS; i++) {
		/* Mostly 1..15 pages (through the per-CPU caches), some larger. */
		n[i] = i % 10 == 9 ? 16 + i : 1 + i % 15;
		p[i] = pa_pages_alloc(n[i]);
		assert_non_null(p[i]);
		fill(p[i], n[i] * PA_PAGE_BYTES, 0x77);
	}
	for (unsigned i = 0; i < SMALL_RUNS; i++)
		pa_pages_free(p[i], n[i]);
	struct pa_stats before = stats();
	/* Meaningful only if the caches hold something to flush. */
	assert_true(before.cache_mode == 0 || before.cache_free + before.cache_queued > 0);

	size_t released = pa_scavenge(0);
	struct pa_stats after = stats();
	assert_true(released > 0);
	assert_int_equal(after.released_total - before.released_total, released);
	assert_int_equal(after.cache_free, 0);
	assert_int_equal(after.cache_queued, 0);
	assert_int_equal(after.heap_inuse, inuse0);
	assert_int_equal(after.heap_released, after.heap_free);
	size_t still_resident = 0;
	for (unsigned i = 0; i < SMALL_RUNS; i++)
		still_resident += resident_bytes(p[i], n[i] * PA_PAGE_BYTES);
	assert_int_equal(still_resident, 0);
	/* Nothing is left to release. */
	assert_int_equal(pa_scavenge(0), 0);
}

/* ---- the memory limit ------------------------------------------------------- */

#define LIMIT (32 * MiB)
#define ROUNDS 24 /* runs of 1..24 MiB: 300 MiB in all, at most 24 MiB live */

struct limit_run {
	char *p[ROUNDS];
	size_t pages[ROUNDS];
	size_t max_heap_resident, max_os_resident;
	uint64_t overruns;
};

/*
 * Allocate runs of 1, 2, ... ROUNDS MiB, each with one more page on top;
 * touch each; free all but that top page, which stays as a pin. Every freed
 * run is a hole smaller than the next run, so without a limit (and no
 * background scavenger) resident memory grows by the sum of the runs.
 */
static void limit_workload(struct limit_run *w)
{
	memset(w, 0, sizeof(*w));
	uint64_t overruns0 = stats().limit_overruns;
	for (unsigned i = 0; i < ROUNDS; i++) {
		size_t run = (i + 1) * MiB / PA_PAGE_BYTES;
		w->pages[i] = run + 1;
		w->p[i] = pa_pages_alloc(w->pages[i]);
		assert_non_null(w->p[i]);
		fill(w->p[i], w->pages[i] * PA_PAGE_BYTES, (unsigned char)(i + 1));
		pa_pages_free(w->p[i], run);
		struct pa_stats s = stats();
		if (heap_resident(&s) > w->max_heap_resident)
			w->max_heap_resident = heap_resident(&s);
		size_t os = 0;
		for (unsigned j = 0; j <= i; j++)
			os += resident_bytes(w->p[j], w->pages[j] * PA_PAGE_BYTES);
		if (os > w->max_os_resident)
			w->max_os_resident = os;
		assert_true(s.heap_inuse < LIMIT);
	}
	w->overruns = stats().limit_overruns - overruns0;
}

static void limit_workload_free(struct limit_run *w)
{
	for (unsigned i = 0; i < ROUNDS; i++)
		pa_pages_free(w->p[i] + (w->pages[i] - 1) * PA_PAGE_BYTES, 1);
}

static void memory_limit_bounds_resident_heap_memory_and_counts_overruns(void **state)
{
	(void)state;
	set("scavenger", "off");
	set("memory_limit", "0");
	pa_scavenge(0);
	struct pa_stats s0 = stats();
	assert_int_equal(heap_resident(&s0), s0.heap_inuse);
	static struct limit_run w;

	/* Without a limit: resident heap memory grows by every run allocated. */
	limit_workload(&w);
	size_t sum = 0;
	for (unsigned i = 0; i < ROUNDS; i++)
		sum += w.pages[i] * PA_PAGE_BYTES;
	assert_int_equal(sum, 300 * MiB + ROUNDS * PA_PAGE_BYTES);
	assert_int_equal(w.max_heap_resident, s0.heap_inuse + sum);
	assert_int_equal(w.max_os_resident, sum);
	limit_workload_free(&w);
	pa_scavenge(0);

	/* With a 32 MiB limit: the same workload stays within one chunk of it,
	 * by our count and by the OS's, and never overruns. */
	set("memory_limit", "32M");
	assert_int_equal(stats().memory_limit, LIMIT);
	limit_workload(&w);
	print_message("limit 32 MiB: heap resident <= %zu KiB, OS resident <= %zu KiB\n",
	              w.max_heap_resident >> 10, w.max_os_resident >> 10);
	assert_true(w.max_heap_resident <= LIMIT + CHUNK_BYTES);
	/* It reached the limit, and the limit released exactly the excess. */
	assert_int_equal(w.max_heap_resident, LIMIT);
	assert_true(w.max_os_resident <= LIMIT + CHUNK_BYTES);
	assert_int_equal(w.overruns, 0);

	/* One allocation that puts live memory itself over the limit: it
	 * stands, and exactly one overrun is counted. */
	uint64_t overruns0 = stats().limit_overruns;
	size_t big = 40 * MiB / PA_PAGE_BYTES;
	char *p = pa_pages_alloc(big);
	assert_non_null(p);
	struct pa_stats s = stats();
	assert_int_equal(s.limit_overruns - overruns0, 1);
	/* Everything free was released first: resident is exactly live. */
	assert_int_equal(heap_resident(&s), s.heap_inuse);
	pa_pages_free(p, big);
	limit_workload_free(&w);
	set("memory_limit", "0");
}

/* ---- fork ------------------------------------------------------------------- */

enum child_result {
	CHILD_OK = 0,
	CHILD_THREAD_INHERITED = 10, /* scavenger_running before the child used the heap */
	CHILD_ALLOC_FAILED = 11,
	CHILD_NOT_RESTARTED = 12,
	CHILD_NOT_RELEASED = 13,
	CHILD_NOT_RETIRED = 14,        /* the flush did not give the span's pages back */
	CHILD_STARTED_UNDER_LOCK = 15, /* the scavenger started inside that flush */
	CHILD_STARTED_IDLE = 16,       /* it started with no work: no page back to the heap */
	CHILD_NOT_GROWN = 17,          /* the big block did not grow the heap */
	CHILD_RELEASED_YOUNG = 18,     /* it released pages freed within scavenge_delay_ms */
};

/*
 * The parent's scavenger thread (running: every caller checks) has begun
 * its steps, past its start-up. Under ASan that start-up allocates (the
 * sanitizer's thread init calls pthread_getattr_np, which mallocs and
 * frees) under a lock of the sanitizer's allocator, which GCC 12's ASan
 * does not take across fork: a fork just then copied it held into the
 * child, and the child's own scavenger thread waited on it for ever in its
 * start-up (the CI failure of the 2026-11-29 log, 30% of runs of the ASan
 * build beside two busy loops). The thread's CPU time moves at each step.
 */
static void wait_scavenger_stepped(void)
{
	uint64_t cpu0 = stats().scavenger_cpu_ns;
	uint64_t deadline = now_ns() + WAIT_NS;
	while (stats().scavenger_cpu_ns == cpu0 && now_ns() < deadline)
		sleep_ms(10);
	assert_int_not_equal(stats().scavenger_cpu_ns, cpu0);
}

/* Fork, run body in the child, and return its exit status (the child must
 * exit normally). */
static int child_exit_code(int (*body)(void))
{
	wait_scavenger_stepped();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(body());
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static int child_main(void)
{
	struct pa_stats s;
	pa_stats(&s);
	if (s.scavenger_running != 0)
		return CHILD_THREAD_INHERITED;
	uint64_t released0 = s.released_total, calls0 = s.release_calls;
	const size_t len = 8 * MiB;
	size_t raw_pages = (len + CHUNK_BYTES) / PA_PAGE_BYTES - 1;
	char *raw = pa_pages_alloc(raw_pages);
	if (raw == NULL)
		return CHILD_ALLOC_FAILED;
	char *run = (char *)(((uintptr_t)raw + CHUNK_BYTES - 1) & ~(uintptr_t)(CHUNK_BYTES - 1));
	memset(run, 0x42, len);
	pa_pages_free(run, len / PA_PAGE_BYTES);
	uint64_t deadline = now_ns() + WAIT_NS;
	for (;;) {
		pa_stats(&s);
		if (s.scavenger_running && s.released_total - released0 >= len &&
		    resident_bytes(run, len) == 0)
			return CHILD_OK;
		if (now_ns() > deadline) {
			fprintf(
			    stderr,
			    "child: released %llu of %zu bytes in %llu madvise calls, the run's "
			    "resident %zu; heap free %zu, released %zu\n",
			    (unsigned long long)(s.released_total - released0), len,
			    (unsigned long long)(s.release_calls - calls0),
			    resident_bytes(run, len), s.heap_free, s.heap_released);
			return s.scavenger_running ? CHILD_NOT_RELEASED : CHILD_NOT_RESTARTED;
		}
		sleep_ms(10);
	}
}

static void forked_child_restarts_its_scavenger_which_releases(void **state)
{
	(void)state;
	set("memory_limit", "0");
	set("scavenge_delay_ms", "0");
	set("scavenger", "on");
	void *x = pa_pages_alloc(16); /* starts the thread */
	assert_non_null(x);
	pa_pages_free(x, 16);
	uint64_t deadline = now_ns() + WAIT_NS;
	while (!stats().scavenger_running && now_ns() < deadline)
		sleep_ms(10);
	assert_int_equal(stats().scavenger_running, 1);
	/* Leave the child as little else to release as can be: its scavenger
	 * (highest address first) must reach the child's own run, not memory
	 * the earlier tests freed higher up. The stashes go first: their
	 * batches' spans would empty in the child's first decay. And no
	 * pacing: what is tested is that the child's thread runs and
	 * releases, not how fast. */
	set("scavenge_percent", "100");
	pa_thread_cache_flush();
	pa_scavenge(0);

	assert_int_equal(child_exit_code(child_main), CHILD_OK);
	/* The parent's thread is unaffected. */
	assert_int_equal(stats().scavenger_running, 1);
	set("scavenge_percent", "1");
}

/* A span of the 3 KiB class: 3 heap pages, 8 objects (sizeclass_table.c). */
#define LOCK_TEST_SIZE 3000u
#define LOCK_TEST_SPAN_BYTES (3u * 8192u)

/* A malloc in a class whose thread list is empty: one that takes the
 * slow path, where a wanted scavenger starts. */
static int malloc_slow_path(size_t size)
{
	void *q = pa_malloc(size);
	if (q == NULL)
		return -1;
	pa_free(q);
	return 0;
}

static int scavenger_running(void)
{
	struct pa_stats s;
	pa_stats(&s);
	return s.scavenger_running;
}

/* The parent's run, freed just before the fork (young_child_main). */
static struct aligned_run young;
#define YOUNG_LEN (8 * MiB)

/* The child's thread goes on with the parent's clock: the run its parent
 * freed a moment ago is young to it too, and stays resident through
 * scavenge_delay_ms (a minute). With a clock of its own from zero, the
 * parent's free stamps, seconds ahead of it, read as the distant past. */
static int young_child_main(void)
{
	if (scavenger_running())
		return CHILD_THREAD_INHERITED;
	void *one = pa_pages_alloc(1); /* the page API starts the thread at once */
	if (one == NULL)
		return CHILD_ALLOC_FAILED;
	pa_pages_free(one, 1);
	if (!scavenger_running())
		return CHILD_NOT_RESTARTED;
	/* Its first step comes at once; half a second is five of its idle
	 * polls. */
	for (int i = 0; i < 50; i++) {
		if (resident_bytes(young.run, YOUNG_LEN) != YOUNG_LEN)
			return CHILD_RELEASED_YOUNG;
		sleep_ms(10);
	}
	return CHILD_OK;
}

static void forked_childs_scavenger_keeps_the_parents_clock(void **state)
{
	(void)state;
	set("memory_limit", "0");
	set("scavenger", "on");
	set("scavenge_delay_ms", "60000");
	/* A step the parent's thread began before the new delay may still be
	 * scanning: two of its idle polls go by first. */
	sleep_ms(200);
	young = alloc_aligned_run(YOUNG_LEN);
	fill(young.run, YOUNG_LEN, 0x5a);
	pa_pages_free(young.run, young.run_pages);
	assert_int_equal(stats().scavenger_running, 1);
	assert_int_equal(child_exit_code(young_child_main), CHILD_OK);
	/* The parent's own thread kept it too. */
	assert_int_equal(resident_bytes(young.run, YOUNG_LEN), YOUNG_LEN);
	set("scavenge_delay_ms", "0");
	free_guards(&young);
}

/*
 * The child's first heap call gives a span's last objects back, so that
 * its pages are freed under the class's central lock. Starting the
 * scavenger there (as pa_pages_free does) would be a self-deadlock waiting
 * to happen: pthread_create may allocate (a DTV, when a dlopen'ed library
 * added TLS; under the preload library, from us) from that very class.
 * Nor does a forked child start it without work (it may be about to exec):
 * the span's 3 pages stay in a per-CPU page cache, and a malloc's slow path
 * leaves the thread unstarted. Once pages reach the heap (the per-CPU caches
 * flushed), the next slow path, which holds no lock, starts it.
 */
static int child_flush_main(void)
{
	struct pa_malloc_stats m;
	struct pa_stats before, after;
	if (scavenger_running())
		return CHILD_THREAD_INHERITED;
	pa_malloc_stats(&m);
	size_t inuse0 = m.heap_inuse;
	pa_stats(&before);
	pa_thread_cache_flush();
	pa_stats(&after);
	pa_malloc_stats(&m);
	if (inuse0 - m.heap_inuse != LOCK_TEST_SPAN_BYTES)
		return CHILD_NOT_RETIRED;
	if (scavenger_running())
		return CHILD_STARTED_UNDER_LOCK;
	/* The span's pages usually stay in a CPU's cache. Now and then (about
	 * one run in a hundred under load, which way not seen) they reach the
	 * heap: the CPU's queue of frees was full, or the parent's sweep had
	 * released some of them (released pages go to the heap: central.c,
	 * retire_locked). Then the heap has work, and the slow path starts
	 * the thread. */
	int heap_got_pages = after.heap_free != before.heap_free;
	if (malloc_slow_path(LOCK_TEST_SIZE) != 0)
		return CHILD_ALLOC_FAILED;
	if (heap_got_pages)
		return scavenger_running() ? CHILD_OK : CHILD_NOT_RESTARTED;
	if (scavenger_running()) {
		fprintf(
		    stderr,
		    "child: the flush left the heap's free bytes at %zu, queued %zu -> %zu, "
		    "drains %llu -> %llu, growths %llu -> %llu\n",
		    after.heap_free, before.cache_queued, after.cache_queued,
		    (unsigned long long)before.cache_drains, (unsigned long long)after.cache_drains,
		    (unsigned long long)before.grow_count, (unsigned long long)after.grow_count);
		return CHILD_STARTED_IDLE;
	}
	pa_cache_flush();                /* the span's pages go back to the heap */
	if (malloc_slow_path(5000) != 0) /* another class: its list is empty too */
		return CHILD_ALLOC_FAILED;
	return scavenger_running() ? CHILD_OK : CHILD_NOT_RESTARTED;
}

static void forked_childs_scavenger_starts_outside_the_locks_once_it_has_work(void **state)
{
	(void)state;
	set("scavenger", "on");
	pa_thread_cache_flush();
	pa_cache_flush();
	/* A refill carves a new span of the class (no earlier test uses it);
	 * the objects the free leaves in the thread list are all of it. */
	void *p = pa_malloc(LOCK_TEST_SIZE);
	assert_non_null(p);
	pa_free(p);
	assert_int_equal(stats().scavenger_running, 1);
	assert_int_equal(child_exit_code(child_flush_main), CHILD_OK);
	pa_thread_cache_flush();
}

/* A child whose heap grows has work for the scavenger too: the block larger
 * than every free run grows the heap (the malloc's slow path checks before
 * growing, so the thread is not started yet), and the next slow path
 * starts it. */
static int child_grow_main(void)
{
	struct pa_stats s;
	if (scavenger_running())
		return CHILD_THREAD_INHERITED;
	pa_stats(&s);
	uint64_t grows0 = s.grow_count;
	void *big = pa_malloc(s.heap_free + 8 * MiB);
	if (big == NULL)
		return CHILD_ALLOC_FAILED;
	pa_stats(&s);
	if (s.grow_count == grows0)
		return CHILD_NOT_GROWN;
	if (s.scavenger_running)
		return CHILD_STARTED_IDLE;
	if (malloc_slow_path(7000) != 0)
		return CHILD_ALLOC_FAILED;
	int running = scavenger_running();
	pa_free(big);
	return running ? CHILD_OK : CHILD_NOT_RESTARTED;
}

static void forked_childs_scavenger_starts_when_its_heap_grows(void **state)
{
	(void)state;
	set("scavenger", "on");
	pa_thread_cache_flush();
	assert_int_equal(stats().scavenger_running, 1);
	assert_int_equal(child_exit_code(child_grow_main), CHILD_OK);
}

/* Does this kernel populate (MADV_POPULATE_WRITE, Linux 5.14)? */
static int kernel_populates(void)
{
	void *m = mmap(NULL, OS_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	int ok = madvise(m, OS_PAGE, 23 /* MADV_POPULATE_WRITE */) == 0;
	munmap(m, OS_PAGE);
	return ok;
}

/* A refill from a class's newest span grown from released pages (past its
 * first) faults in, in one call, the pages its objects lie on (central.c:
 * populate_taken): objects of 20 KB span five or six 4 KiB pages, and every
 * one of them is resident as malloc returns it, before anything is written
 * past its first 16 bytes. Without it only the first page of each is (the
 * refill's write of its link). Here every span comes from pages the heap
 * never touched. The first span of a class is left to fault: the first
 * objects are not asked about. */
static void later_spans_refill_faults_in_the_pages_of_its_objects(void **state)
{
	(void)state;
	if (!kernel_populates())
		skip();
	set("prof", "off"); /* a sampled block comes from pages of its own */
	enum { N = 48, SIZE = 20000, FIRST = 8 };
	void *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = pa_malloc(SIZE);
		assert_non_null(p[i]);
		if (i < FIRST)
			continue;
		uintptr_t a = (uintptr_t)p[i] & ~(uintptr_t)(OS_PAGE - 1);
		size_t pages = ((uintptr_t)p[i] + SIZE - a + OS_PAGE - 1) / OS_PAGE;
		assert_int_equal(resident_bytes(p[i], SIZE), pages * OS_PAGE);
	}
	for (int i = 0; i < N; i++)
		pa_free(p[i]);
}

int main(void)
{
	/* Before the first pa_ call: the default heap reads it once. */
	setenv("PAGEALLOC_CONF", "scavenge_delay_ms=0", 1);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(background_release_drops_rss_and_reuse_raises_it_with_zeroed_pages),
	    cmocka_unit_test(scavenge_all_releases_every_free_page_and_empties_the_caches),
	    cmocka_unit_test(memory_limit_bounds_resident_heap_memory_and_counts_overruns),
	    cmocka_unit_test(forked_child_restarts_its_scavenger_which_releases),
	    cmocka_unit_test(forked_childs_scavenger_keeps_the_parents_clock),
	    cmocka_unit_test(forked_childs_scavenger_starts_outside_the_locks_once_it_has_work),
	    cmocka_unit_test(forked_childs_scavenger_starts_when_its_heap_grows),
	    cmocka_unit_test(later_spans_refill_faults_in_the_pages_of_its_objects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
