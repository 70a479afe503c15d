/*
 * test_pages_api.c — the public page API (pagealloc.h) on the process's real
 * default heap: alignment and writability, EINVAL for 0 pages, a 2 GiB run,
 * exact heap_inuse deltas, NULL frees, bad frees (in forked children: each
 * must abort with SIGABRT after exactly one stderr line naming the pointer
 * and the fault), and configuration through pa_config_set and through
 * PAGEALLOC_CONF (in re-executed children, because the environment is read
 * once, when the default heap is built).
 *
 * Run as `test_pages_api --child SCENARIO [ARG]` the binary is such a child.
 */
#include <signal.h>
#include <sys/resource.h>

#include "cgroup.h"
#include "testutil.h"

#include "pagealloc.h"

#define PG PA_PAGE_BYTES

static struct pa_stats stats_now(void)
{
	struct pa_stats s;
	assert_int_equal(pa_stats(&s), 0);
	return s;
}

/* ---- allocation ------------------------------------------------------------------- */

static void test_one_page_is_page_aligned_and_writable(void **state)
{
	(void)state;
	unsigned char *p = pa_pages_alloc(1), *q = pa_pages_alloc(1);
	assert_non_null(p);
	assert_non_null(q);
	TU_EQ((uintptr_t)p % PG, 0);
	TU_EQ((uintptr_t)q % PG, 0);
	assert_true(p + PG <= q || q + PG <= p); /* distinct pages */
	memset(p, 0xa5, PG);
	memset(q, 0x5a, PG);
	for (size_t i = 0; i < PG; i++) {
		if (p[i] != 0xa5 || q[i] != 0x5a)
			fail_msg("byte %zu: %#x %#x", i, p[i], q[i]);
	}
	pa_pages_free(p, 1);
	pa_pages_free(q, 1);
}

static void test_zero_pages_fails_with_einval(void **state)
{
	(void)state;
	errno = 0;
	assert_null(pa_pages_alloc(0));
	TU_EQ(errno, EINVAL);
}

static void test_two_gib_run_is_usable_end_to_end(void **state)
{
	(void)state;
	const size_t n = ((size_t)2 << 30) / PG;
	struct pa_stats before = stats_now();
	unsigned char *p = pa_pages_alloc(n);
	assert_non_null(p);
	TU_EQ((uintptr_t)p % PG, 0);
	struct pa_stats mid = stats_now();
	TU_EQ(mid.heap_inuse - before.heap_inuse, n * PG);
	assert_true(mid.heap_mapped >= mid.heap_inuse);
	p[0] = 1;
	p[PG] = 2;
	p[(n - 1) * PG] = 3;
	p[n * PG - 1] = 4;
	TU_EQ(p[0] + p[PG] + p[(n - 1) * PG] + p[n * PG - 1], 10);
	pa_pages_free(p, n);
	TU_EQ(stats_now().heap_inuse, before.heap_inuse);
}

/* Runs of 16 pages and more bypass the per-CPU caches: heap_inuse moves by
 * exactly the run. (Smaller runs: see the percpu_cache=off child.) */
static void test_stats_inuse_moves_by_exactly_the_run(void **state)
{
	(void)state;
	static const size_t sizes[] = {16, 17, 64, 100, 511, 512, 513, 4096, 8193};
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct pa_stats a = stats_now();
		void *p = pa_pages_alloc(sizes[k]);
		assert_non_null(p);
		struct pa_stats b = stats_now();
		TU_EQ(b.heap_inuse - a.heap_inuse, sizes[k] * PG);
		TU_EQ(b.heap_free, b.heap_mapped - b.heap_inuse);
		assert_true(b.heap_released <= b.heap_free);
		pa_pages_free(p, sizes[k]);
		struct pa_stats c = stats_now();
		TU_EQ(c.heap_inuse, a.heap_inuse);
		TU_EQ(c.heap_free, c.heap_mapped - c.heap_inuse);
	}
}

static void test_stats_describe_a_full_window(void **state)
{
	(void)state;
	struct rlimit rl;
	assert_int_equal(getrlimit(RLIMIT_AS, &rl), 0);
	if (rl.rlim_cur != RLIM_INFINITY)
		skip(); /* a limited address space may take the narrow-window fallback */
	void *p = pa_pages_alloc(20);
	assert_non_null(p);
	struct pa_stats s = stats_now();
	TU_EQ(s.window_fallback, 0);
	TU_EQ(s.window_base, 0);
	TU_EQ(s.window_bytes, (size_t)1 << 48);
	assert_true(s.heap_ranges >= 1);
	assert_true(s.heap_reserved >= s.heap_mapped);
	assert_true(s.summary_reserved > 0);
	pa_pages_free(p, 20);
	errno = 0;
	TU_EQ(pa_stats(NULL), -1);
	TU_EQ(errno, EINVAL);
}

static void test_free_of_null_is_ignored(void **state)
{
	(void)state;
	struct pa_stats a = stats_now();
	pa_pages_free(NULL, 1);
	pa_pages_free(NULL, 0);
	pa_pages_free(NULL, 100);
	struct pa_stats b = stats_now();
	TU_EQ(b.heap_inuse, a.heap_inuse);
	TU_EQ(b.heap_mapped, a.heap_mapped);
}

/* ---- bad frees abort with one line --------------------------------------------------- */

struct bad_free {
	const char *name;
	void (*act)(struct bad_free *);
	uintptr_t ptr; /* the pointer the message must name */
	size_t npages;
};

static void act_free_once(struct bad_free *b)
{
	pa_pages_free((void *)b->ptr, b->npages);
}

static void act_free_once_then_flush(struct bad_free *b)
{
	pa_pages_free((void *)b->ptr, b->npages);
	pa_cache_flush(); /* small frees may be queued; the drain checks them */
}

static void act_free_twice(struct bad_free *b)
{
	pa_pages_free((void *)b->ptr, b->npages);
	pa_pages_free((void *)b->ptr, b->npages);
	pa_cache_flush();
}

static void run_bad_free(void *arg)
{
	struct bad_free *b = arg;
	signal(SIGABRT, SIG_DFL);
	b->act(b);
	/* Reaching here means no abort: exit 0 and let the parent fail. */
}

static void expect_abort_naming(struct bad_free *b, const char *fault)
{
	char out[2048], hex[32];
	tu_case = b->name;
	int status = tu_run_child(run_bad_free, b, out, sizeof(out));
	snprintf(hex, sizeof(hex), "%#" PRIxPTR, b->ptr);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
		fail_msg("%s: child status %#x, want SIGABRT; stderr: %s", b->name, status, out);
	if (tu_count_lines(out) != 1 || out[strlen(out) - 1] != '\n')
		fail_msg("%s: want exactly one line on stderr, got: %s", b->name, out);
	if (strstr(out, hex) == NULL)
		fail_msg("%s: message does not name %s: %s", b->name, hex, out);
	if (strstr(out, fault) == NULL)
		fail_msg("%s: message does not say '%s': %s", b->name, fault, out);
	tu_case = "";
}

static void test_free_of_stack_pointer_aborts_not_from_heap(void **state)
{
	(void)state;
	char buf[3 * PG];
	uintptr_t p = PA_ALIGN_UP((uintptr_t)buf, PG);
	struct bad_free big = {"stack pointer, 16 pages", act_free_once, p, 16};
	expect_abort_naming(&big, "not from the page heap");
	struct bad_free small = {"stack pointer, 1 page", act_free_once_then_flush, p, 1};
	expect_abort_naming(&small, "not from the page heap");
}

static void test_free_of_misaligned_heap_pointer_aborts(void **state)
{
	(void)state;
	char *p = pa_pages_alloc(20), *q = pa_pages_alloc(1);
	assert_non_null(p);
	assert_non_null(q);
	struct bad_free big = {"heap pointer + 8, 20 pages", act_free_once, (uintptr_t)p + 8, 20};
	expect_abort_naming(&big, "misaligned");
	struct bad_free small = {"heap pointer + 4096, 1 page", act_free_once_then_flush,
	                         (uintptr_t)q + 4096, 1};
	expect_abort_naming(&small, "misaligned");
	pa_pages_free(p, 20);
	pa_pages_free(q, 1);
}

static void test_double_free_aborts(void **state)
{
	(void)state;
	char *p = pa_pages_alloc(20), *q = pa_pages_alloc(1);
	assert_non_null(p);
	assert_non_null(q);
	struct bad_free big = {"double free, 20 pages", act_free_twice, (uintptr_t)p, 20};
	expect_abort_naming(&big, "double free");
	struct bad_free small = {"double free, 1 page", act_free_twice, (uintptr_t)q, 1};
	expect_abort_naming(&small, "double free");
	/* The parent's copies are still live and free normally. */
	pa_pages_free(p, 20);
	pa_pages_free(q, 1);
}

/* ---- configuration -------------------------------------------------------------------- */

/* Call fn with stderr captured; returns what it wrote. */
static void capture_stderr(void (*fn)(void *), void *arg, char *out, size_t cap)
{
	int fds[2], saved = dup(2);
	assert_true(saved >= 0);
	assert_int_equal(pipe(fds), 0);
	dup2(fds[1], 2);
	close(fds[1]);
	fn(arg);
	dup2(saved, 2);
	close(saved);
	ssize_t n = read(fds[0], out, cap - 1);
	out[n > 0 ? n : 0] = '\0';
	close(fds[0]);
}

struct set_call {
	const char *key, *value;
	int ret, err;
};

static void do_set(void *arg)
{
	struct set_call *c = arg;
	errno = 0;
	c->ret = pa_config_set(c->key, c->value);
	c->err = errno;
}

static void test_config_set_refuses_unknown_key_with_one_warning(void **state)
{
	(void)state;
	char out[1024];
	struct set_call c = {"bogus_key", "1", 0, 0};
	capture_stderr(do_set, &c, out, sizeof(out));
	TU_EQ(c.ret, -1);
	TU_EQ(c.err, EINVAL);
	TU_EQ(tu_count_lines(out), 1);
	assert_non_null(strstr(out, "bogus_key"));
}

static void test_config_set_refuses_bad_size_naming_it(void **state)
{
	(void)state;
	char out[1024];
	struct set_call c = {"arena_size", "notasize", 0, 0};
	capture_stderr(do_set, &c, out, sizeof(out));
	TU_EQ(c.ret, -1);
	TU_EQ(c.err, EINVAL);
	TU_EQ(tu_count_lines(out), 1);
	assert_non_null(strstr(out, "notasize"));
}

static void test_config_set_accepts_arena_size(void **state)
{
	(void)state;
	char out[1024];
	struct set_call c = {"arena_size", "128M", 0, 0};
	capture_stderr(do_set, &c, out, sizeof(out));
	TU_EQ(c.ret, 0);
	TU_EQ(strlen(out), 0);
	errno = 0;
	TU_EQ(pa_config_set(NULL, "1"), -1);
	TU_EQ(errno, EINVAL);
}

/* memory_limit=auto on the default heap: the limit and its source are the
 * machine's own cgroup's (whatever it is: cgroup.c reads it the same way
 * here), a wrong word is refused naming it and keeps auto, a size ends it. */
static void test_config_set_memory_limit_auto_follows_this_cgroup(void **state)
{
	(void)state;
	char out[1024];
	assert_non_null(pa_pages_alloc(1));
	struct set_call c = {"memory_limit", "auto", 0, 0};
	capture_stderr(do_set, &c, out, sizeof(out));
	TU_EQ(c.ret, 0);
	TU_EQ(strlen(out), 0);
	struct pa_cgroup cg;
	int version = cgroup_find(&cg, "");
	size_t cgroup_max = cgroup_limit(&cg, NULL);
	struct pa_stats st;
	TU_EQ(pa_stats(&st), 0);
	TU_EQ(st.memory_limit_auto, 1);
	TU_EQ(st.cgroup_version, version);
	TU_EQ(st.cgroup_limit, cgroup_max);
	if (cgroup_max == 0)
		TU_EQ(st.memory_limit, 0);
	else
		assert_true(st.memory_limit >= PA_PAGE_SIZE &&
		            st.memory_limit <= cgroup_max - cgroup_max / 16);

	struct set_call bad = {"memory_limit", "automatic", 0, 0};
	capture_stderr(do_set, &bad, out, sizeof(out));
	TU_EQ(bad.ret, -1);
	TU_EQ(bad.err, EINVAL);
	assert_string_equal(out, "pagealloc: pa_config_set: bad value 'automatic' for memory_limit "
	                         "(expected a size such as 2G, 0 for none, or auto for the "
	                         "container's); keeping auto\n");
	TU_EQ(pa_stats(&st), 0);
	TU_EQ(st.memory_limit_auto, 1);

	struct set_call size = {"memory_limit", "64M", 0, 0};
	capture_stderr(do_set, &size, out, sizeof(out));
	TU_EQ(size.ret, 0);
	TU_EQ(pa_stats(&st), 0);
	TU_EQ(st.memory_limit_auto, 0);
	TU_EQ(st.memory_limit, (size_t)64 << 20);
	TU_EQ(st.cgroup_version, 0);
	TU_EQ(st.memory_pressure, -1);
	TU_EQ(pa_config_set("memory_limit", "0"), 0);
}

/* Re-execute this binary as `--child scenario arg` with PAGEALLOC_CONF set
 * to conf (unset if NULL); returns the wait status and its stderr. */
static int run_exec(const char *conf, const char *scenario, const char *arg, char *out, size_t cap)
{
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(len > 0);
	self[len] = '\0';
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		close(fds[1]);
		if (conf != NULL)
			setenv("PAGEALLOC_CONF", conf, 1);
		else
			unsetenv("PAGEALLOC_CONF");
		char *argv[] = {self, (char *)"--child", (char *)scenario, (char *)arg, NULL};
		execv(self, argv);
		_exit(127);
	}
	close(fds[1]);
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fds[0], out + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (n += (size_t)r) == cap - 1)
			break;
	}
	out[n] = '\0';
	close(fds[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

static void expect_exec(const char *conf, const char *scenario, const char *arg, size_t lines,
                        const char *must_contain)
{
	char out[4096];
	int status = run_exec(conf, scenario, arg, out, sizeof(out));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("PAGEALLOC_CONF=%s %s: status %#x; stderr: %s", conf ? conf : "(unset)",
		         scenario, status, out);
	if (tu_count_lines(out) != lines)
		fail_msg("PAGEALLOC_CONF=%s: want %zu stderr lines, got: %s",
		         conf ? conf : "(unset)", lines, out);
	if (must_contain != NULL && strstr(out, must_contain) == NULL)
		fail_msg("PAGEALLOC_CONF=%s: stderr does not name '%s': %s", conf, must_contain,
		         out);
}

static void test_conf_env_unknown_key_warns_once_naming_it(void **state)
{
	(void)state;
	expect_exec("bogus_key=1", "reserve", "67108864", 1, "bogus_key");
}

static void test_conf_env_bad_size_warns_naming_the_value(void **state)
{
	(void)state;
	expect_exec("arena_size=notasize", "reserve", "67108864", 1, "notasize");
}

static void test_conf_env_arena_size_sets_the_reservation(void **state)
{
	(void)state;
	expect_exec(NULL, "reserve", "67108864", 0, NULL);
	expect_exec("arena_size=128M", "reserve", "134217728", 0, NULL);
	expect_exec("bogus_key=1,arena_size=128M", "reserve", "134217728", 1, "bogus_key");
}

static void test_small_runs_move_inuse_exactly_without_caches(void **state)
{
	(void)state;
	expect_exec("percpu_cache=off", "inuse-small", "", 0, NULL);
}

/* ---- the child side ------------------------------------------------------------------- */

#define CHILD_CHECK(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "child: %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

static int child_main(const char *scenario, const char *arg)
{
	struct pa_stats s;
	if (strcmp(scenario, "reserve") == 0) {
		/* The first allocation reserves one arena of the configured size. */
		unsigned char *p = pa_pages_alloc(1);
		CHILD_CHECK(p != NULL);
		p[0] = 1;
		CHILD_CHECK(pa_stats(&s) == 0);
		CHILD_CHECK(s.heap_reserved == strtoull(arg, NULL, 10));
		pa_pages_free(p, 1);
		return 0;
	}
	if (strcmp(scenario, "inuse-small") == 0) {
		CHILD_CHECK(pa_stats(&s) == 0);
		CHILD_CHECK(s.cache_mode == 0);
		for (size_t n = 1; n < 16; n++) {
			struct pa_stats a, b, c;
			CHILD_CHECK(pa_stats(&a) == 0);
			void *p = pa_pages_alloc(n);
			CHILD_CHECK(p != NULL);
			CHILD_CHECK(pa_stats(&b) == 0);
			CHILD_CHECK(b.heap_inuse - a.heap_inuse == n * PG);
			pa_pages_free(p, n);
			CHILD_CHECK(pa_stats(&c) == 0);
			CHILD_CHECK(c.heap_inuse == a.heap_inuse);
		}
		return 0;
	}
	return 2;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2], argc >= 4 ? argv[3] : "");
	const struct CMUnitTest tests[] = {
	    TU_TEST(test_one_page_is_page_aligned_and_writable),
	    TU_TEST(test_zero_pages_fails_with_einval),
	    TU_TEST(test_two_gib_run_is_usable_end_to_end),
	    TU_TEST(test_stats_inuse_moves_by_exactly_the_run),
	    TU_TEST(test_stats_describe_a_full_window),
	    TU_TEST(test_free_of_null_is_ignored),
	    TU_TEST(test_free_of_stack_pointer_aborts_not_from_heap),
	    TU_TEST(test_free_of_misaligned_heap_pointer_aborts),
	    TU_TEST(test_double_free_aborts),
	    TU_TEST(test_config_set_refuses_unknown_key_with_one_warning),
	    TU_TEST(test_config_set_refuses_bad_size_naming_it),
	    TU_TEST(test_config_set_accepts_arena_size),
	    TU_TEST(test_config_set_memory_limit_auto_follows_this_cgroup),
	    TU_TEST(test_conf_env_unknown_key_warns_once_naming_it),
	    TU_TEST(test_conf_env_bad_size_warns_naming_the_value),
	    TU_TEST(test_conf_env_arena_size_sets_the_reservation),
	    TU_TEST(test_small_runs_move_inuse_exactly_without_caches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
