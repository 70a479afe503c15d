/*
 * test_numa_thread.c — the default heap split per NUMA node (numa.h), on a machine
 * with one node: numa_fake=2 pretends CPU c is on node c % 2, and two
 * threads pinned to CPUs 0 and 1 (sched_setaffinity) show that everything
 * per node is kept apart: every page and every block a CPU of one node gets
 * lies in that node's window, a free from the other node's CPU goes back to
 * the owning node, each node's per-CPU caches refill from its own heap, the
 * scavenger releases in both, and the per-node figures add up exactly to
 * pa_stats; a heap pinned to a node (pa_heap_set_numa_node) takes its pages
 * there whatever CPU allocates. The scavenger thread is off (pa_scavenge is explicit), so no
 * figure moves behind the test's back.
 *
 * Re-executed children (`test_numa_thread --child SCENARIO`, PAGEALLOC_CONF set)
 * check the layouts that a process chooses once: numa=on on this one-node
 * machine is the one full-window heap of numa=off; numa=on,numa_fake=1 is
 * one per-node heap whose pages the kernel says are on node 0
 * (get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR) and move_pages(2)), with the
 * MPOL_PREFERRED policy set; numa=interleave sets MPOL_INTERLEAVE over the
 * online nodes.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "testutil.h"

#include "pagealloc.h"
#include "stats_print.h"

#define PG PA_PAGE_BYTES
#define MPOL_DEFAULT_ 0
#define MPOL_PREFERRED_ 1
#define MPOL_INTERLEAVE_ 3
#define MPOL_F_NODE_ 1
#define MPOL_F_ADDR_ 2

static struct pa_numa_stats node_stats(unsigned node)
{
	struct pa_numa_stats s;
	TU_EQ(pa_numa_stats(node, &s), 0);
	return s;
}

static int in_window(const void *p, unsigned node)
{
	struct pa_numa_stats s = node_stats(node);
	return (uintptr_t)p >= s.window_base && (uintptr_t)p - s.window_base < s.window_bytes;
}

/* ---- work done by a thread pinned to one CPU ------------------------------------- */

enum job_kind { JOB_ALLOC_PAGES, JOB_FREE_PAGES, JOB_MALLOC, JOB_HEAP_MALLOC };

#define JOB_RUNS 40

struct job {
	int cpu;
	enum job_kind kind;
	size_t npages[JOB_RUNS]; /* JOB_*_PAGES: a run of this many pages each */
	void *p[JOB_RUNS];
	size_t nblocks;  /* JOB_MALLOC: blocks of each of sizes[] */
	size_t sizes[3]; /* small, medium, large: sizes only this CPU's job uses */
	pa_heap_t *heap; /* JOB_HEAP_MALLOC: pa_heap_malloc from it */
	void *blocks[3][64];
	int ran_on; /* the CPU the thread found itself on */
};

static void *job_main(void *arg)
{
	struct job *j = arg;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(j->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		return NULL;
	j->ran_on = sched_getcpu();
	switch (j->kind) {
	case JOB_ALLOC_PAGES:
		for (size_t i = 0; i < JOB_RUNS && j->npages[i] != 0; i++)
			j->p[i] = pa_pages_alloc(j->npages[i]);
		break;
	case JOB_FREE_PAGES:
		for (size_t i = 0; i < JOB_RUNS && j->npages[i] != 0; i++)
			pa_pages_free(j->p[i], j->npages[i]);
		break;
	case JOB_MALLOC:
		for (size_t k = 0; k < 3; k++)
			for (size_t i = 0; i < j->nblocks; i++)
				j->blocks[k][i] = pa_malloc(j->sizes[k]);
		break;
	case JOB_HEAP_MALLOC:
		for (size_t k = 0; k < 3; k++)
			for (size_t i = 0; i < j->nblocks; i++)
				j->blocks[k][i] = pa_heap_malloc(j->heap, j->sizes[k]);
		break;
	}
	return NULL;
}

/* Run j on its CPU and wait for it. */
static void run_job(struct job *j)
{
	pthread_t t;
	TU_EQ(pthread_create(&t, NULL, job_main, j), 0);
	TU_EQ(pthread_join(t, NULL), 0);
	TU_EQ(j->ran_on, j->cpu);
}

/* Runs of 1..15 pages go through the per-CPU caches, longer ones to the
 * heap itself: both, on each CPU. */
static void fill_runs(struct job *j, size_t n)
{
	static const size_t mix[] = {1, 1, 2, 3, 7, 15, 16, 17, 64, 300};
	for (size_t i = 0; i < n; i++)
		j->npages[i] = mix[i % (sizeof(mix) / sizeof(mix[0]))];
}

/* ---- the fake two-node process ------------------------------------------------------- */

static void test_two_fake_nodes_have_adjacent_windows_of_their_own(void **state)
{
	(void)state;
	TU_EQ(pa_numa_nodes(), 2);
	struct pa_numa_stats n0 = node_stats(0), n1 = node_stats(1);
	TU_EQ(n0.fake, 1);
	/* 4 TiB each, or less where the address space is short of room (a
	 * ThreadSanitizer build): the same for both, at least 64 GiB. */
	TU_EQ(n1.window_bytes, n0.window_bytes);
	TU_EQ(n0.window_bytes & (n0.window_bytes - 1), 0);
	assert_true(n0.window_bytes >= (size_t)64 << 30 && n0.window_bytes <= (size_t)4 << 40);
	if (!TU_UNDER_SANITIZER)
		TU_EQ(n0.window_bytes, (size_t)4 << 40);
	TU_EQ(n0.window_base % n0.window_bytes, 0);
	TU_EQ(n1.window_base, n0.window_base + n0.window_bytes);
	/* Node 0 exists on this machine and keeps its policy; node 1 does not. */
	TU_EQ(n0.bound_node, 0);
	TU_EQ(n1.bound_node, -1);
	TU_EQ(n0.cpus + n1.cpus, (unsigned)sysconf(_SC_NPROCESSORS_CONF));
	struct pa_stats s;
	TU_EQ(pa_stats(&s), 0);
	TU_EQ(s.window_base, n0.window_base);
	TU_EQ(s.window_bytes, 2 * n0.window_bytes);
	struct pa_numa_stats none;
	errno = 0;
	TU_EQ(pa_numa_stats(2, &none), -1);
	TU_EQ(errno, EINVAL);
}

static void test_every_page_a_cpu_gets_is_in_its_nodes_window(void **state)
{
	(void)state;
	for (int cpu = 0; cpu < 2; cpu++) {
		struct job j = {.cpu = cpu, .kind = JOB_ALLOC_PAGES};
		fill_runs(&j, JOB_RUNS);
		run_job(&j);
		for (size_t i = 0; i < JOB_RUNS; i++) {
			assert_non_null(j.p[i]);
			if (!in_window(j.p[i], (unsigned)cpu) ||
			    !in_window((char *)j.p[i] + j.npages[i] * PG - 1, (unsigned)cpu))
				fail_msg(
				    "cpu %d: run %zu of %zu pages at %p is not in node %d's window",
				    cpu, i, j.npages[i], j.p[i], cpu);
		}
		j.kind = JOB_FREE_PAGES;
		run_job(&j);
	}
}

static void test_blocks_of_sizes_only_one_cpu_uses_come_from_its_node(void **state)
{
	(void)state;
	/* Each CPU's sizes have classes of their own: spans made for them, and
	 * large blocks, take the pages of the CPU that asked. (A class both
	 * use may hand one node's span's objects to the other's threads: the
	 * central lists are shared, docs/design.md.) */
	static const size_t sizes[2][3] = {{3072, 20480, (size_t)3 << 20},
	                                   {3584, 28672, (size_t)5 << 20}};
	for (int cpu = 0; cpu < 2; cpu++) {
		struct job j = {.cpu = cpu, .kind = JOB_MALLOC, .nblocks = 64};
		memcpy(j.sizes, sizes[cpu], sizeof(j.sizes));
		run_job(&j);
		for (size_t k = 0; k < 3; k++) {
			for (size_t i = 0; i < j.nblocks; i++) {
				assert_non_null(j.blocks[k][i]);
				if (!in_window(j.blocks[k][i], (unsigned)cpu))
					fail_msg(
					    "cpu %d: block %zu of %zu bytes at %p is not in node "
					    "%d's window",
					    cpu, i, j.sizes[k], j.blocks[k][i], cpu);
			}
		}
		/* Freed from this thread, the other node's CPU's blocks too. */
		for (size_t k = 0; k < 3; k++)
			for (size_t i = 0; i < j.nblocks; i++)
				pa_free(j.blocks[k][i]);
	}
}

static void test_frees_from_the_other_nodes_cpu_go_back_to_the_owner(void **state)
{
	(void)state;
	pa_cache_flush();
	struct pa_numa_stats a0 = node_stats(0), a1 = node_stats(1);
	TU_EQ(a0.cache_queued + a1.cache_queued, 0);
	/* CPU 0 takes ten single pages and a 40-page run from node 0. */
	struct job j = {.cpu = 0, .kind = JOB_ALLOC_PAGES};
	for (size_t i = 0; i < 10; i++)
		j.npages[i] = 1;
	j.npages[10] = 40;
	run_job(&j);
	/* CPU 1 frees them: the single pages wait in CPU 1's queue of node 0's
	 * cache set, the run goes straight to node 0's heap. */
	j.cpu = 1;
	j.kind = JOB_FREE_PAGES;
	run_job(&j);
	struct pa_numa_stats b0 = node_stats(0), b1 = node_stats(1);
	TU_EQ(b0.cache_queued, 10 * PG);
	TU_EQ(b1.cache_queued, 0);
	TU_EQ(b1.heap_inuse, a1.heap_inuse);
	pa_cache_flush();
	struct pa_numa_stats c0 = node_stats(0), c1 = node_stats(1);
	TU_EQ(c0.heap_inuse, a0.heap_inuse);
	TU_EQ(c1.heap_inuse, a1.heap_inuse);
	TU_EQ(c1.heap_mapped, a1.heap_mapped);
}

static void test_each_nodes_caches_refill_from_its_heap(void **state)
{
	(void)state;
	for (int cpu = 0; cpu < 2; cpu++) {
		pa_cache_flush();
		struct pa_numa_stats mine = node_stats((unsigned)cpu), other = node_stats(1u - cpu);
		TU_EQ(mine.cache_free, 0);
		struct job j = {.cpu = cpu, .kind = JOB_ALLOC_PAGES, .npages = {1}};
		run_job(&j);
		struct pa_numa_stats m2 = node_stats((unsigned)cpu), o2 = node_stats(1u - cpu);
		TU_EQ(m2.cache_refills, mine.cache_refills + 1);
		TU_EQ(o2.cache_refills, other.cache_refills);
		/* The group the refill took is allocated in this node's heap:
		 * the page handed out and what the cache keeps. */
		TU_EQ(m2.heap_inuse - mine.heap_inuse, m2.cache_free + PG);
		TU_EQ(o2.heap_inuse, other.heap_inuse);
		assert_true(in_window(j.p[0], (unsigned)cpu));
		j.kind = JOB_FREE_PAGES;
		run_job(&j);
	}
	pa_cache_flush();
}

static void test_the_scavenger_releases_in_both_nodes(void **state)
{
	(void)state;
	struct job j[2] = {{.cpu = 0, .kind = JOB_ALLOC_PAGES},
	                   {.cpu = 1, .kind = JOB_ALLOC_PAGES}};
	for (int cpu = 0; cpu < 2; cpu++) {
		j[cpu].npages[0] = 600;
		j[cpu].npages[1] = 5;
		run_job(&j[cpu]);
		memset(j[cpu].p[0], 1, 600 * PG); /* resident */
		j[cpu].kind = JOB_FREE_PAGES;
		run_job(&j[cpu]);
	}
	size_t released = pa_scavenge(0);
	size_t total = 0;
	for (unsigned n = 0; n < 2; n++) {
		struct pa_numa_stats s = node_stats(n);
		/* Everything free is released, in each node's heap. */
		TU_EQ(s.heap_released, s.heap_mapped - s.heap_inuse);
		assert_true(s.heap_released >= 600 * PG);
		TU_EQ(s.cache_free + s.cache_queued, 0);
		total += s.heap_released;
	}
	assert_true(released <= total);
	assert_true(released >= 2 * 600 * PG);
}

static void test_per_node_figures_add_up_to_pa_stats(void **state)
{
	(void)state;
	/* Some of everything first: cached pages, queued frees, live runs. */
	struct job j = {.cpu = 0, .kind = JOB_ALLOC_PAGES, .npages = {3, 1, 20}};
	run_job(&j);
	j.cpu = 1;
	j.npages[2] = 0;
	j.kind = JOB_FREE_PAGES;
	run_job(&j);
	struct pa_stats s;
	TU_EQ(pa_stats(&s), 0);
	struct pa_numa_stats n0 = node_stats(0), n1 = node_stats(1);
	TU_EQ(s.heap_reserved, n0.heap_reserved + n1.heap_reserved);
	TU_EQ(s.heap_mapped, n0.heap_mapped + n1.heap_mapped);
	TU_EQ(s.heap_inuse, n0.heap_inuse + n1.heap_inuse);
	TU_EQ(s.heap_released, n0.heap_released + n1.heap_released);
	TU_EQ(s.grow_count, n0.grow_count + n1.grow_count);
	TU_EQ(s.cache_free, n0.cache_free + n1.cache_free);
	TU_EQ(s.cache_queued, n0.cache_queued + n1.cache_queued);
	TU_EQ(s.cache_refills, n0.cache_refills + n1.cache_refills);
	TU_EQ(s.cache_drains, n0.cache_drains + n1.cache_drains);
	TU_EQ(n0.cache_queued, 4 * PG); /* CPU 1's frees of node 0's pages */
	pa_pages_free(j.p[2], 20);
}

static void test_a_heap_pinned_to_a_node_takes_its_pages_there_from_any_cpu(void **state)
{
	(void)state;
	/* Heaps have spans of their own: any size will do. */
	static const size_t sizes[3] = {48, 9000, (size_t)1 << 20};
	for (int node = 0; node < 2; node++) {
		for (int cpu = 0; cpu < 2; cpu++) {
			pa_heap_t *h = pa_heap_new();
			assert_non_null(h);
			TU_EQ(pa_heap_set_numa_node(h, node), 0);
			struct job j = {
			    .cpu = cpu, .kind = JOB_HEAP_MALLOC, .nblocks = 16, .heap = h};
			memcpy(j.sizes, sizes, sizeof(j.sizes));
			run_job(&j);
			for (size_t k = 0; k < 3; k++)
				for (size_t i = 0; i < j.nblocks; i++)
					if (j.blocks[k][i] == NULL ||
					    !in_window(j.blocks[k][i], node))
						fail_msg(
						    "heap pinned to node %d, cpu %d: block of %zu "
						    "bytes at %p is not in the node's window",
						    node, cpu, sizes[k], j.blocks[k][i]);
			/* Unpinned, new pages come from the allocating CPU's node
			 * again (a large block's; small ones still fill the
			 * spans the heap holds). */
			TU_EQ(pa_heap_set_numa_node(h, -1), 0);
			j.nblocks = 1;
			run_job(&j);
			assert_true(in_window(j.blocks[2][0], (unsigned)cpu));
			pa_heap_destroy(h);
		}
	}
	pa_heap_t *h = pa_heap_new();
	errno = 0;
	TU_EQ(pa_heap_set_numa_node(h, 2), -1);
	TU_EQ(errno, EINVAL);
	errno = 0;
	TU_EQ(pa_heap_set_numa_node(h, -2), -1);
	TU_EQ(errno, EINVAL);
	pa_heap_destroy(h);
}

static void test_the_heap_story_has_a_line_per_node(void **state)
{
	(void)state;
	static char story[65536];
	size_t n = stats_print_render(story, sizeof(story) - 1);
	story[n] = '\0';
	assert_non_null(strstr(story, "\nNUMA (2 nodes, pretend ones: numa_fake)\n"));
	char want[2][128];
	for (unsigned i = 0; i < 2; i++) {
		unsigned cpus = node_stats(i).cpus;
		snprintf(want[i], sizeof(want[i]), "\n  node %u              %u CPU%s, %s: ", i,
		         cpus, cpus == 1 ? "" : "s", i == 0 ? "memory of node 0" : "no policy");
		if (strstr(story, want[i]) == NULL)
			fail_msg("no line \"%s\" in the story:\n%s", want[i] + 1, story);
	}
}

static void test_a_free_outside_both_windows_is_refused(void **state)
{
	(void)state;
	static char not_heap[2 * 8192] __attribute__((aligned(8192)));
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 2);
		pa_pages_free(not_heap, 1);
		_exit(0);
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	assert_true(WIFSIGNALED(status));
	TU_EQ(WTERMSIG(status), SIGABRT);
}

/* ---- children with a layout of their own ------------------------------------------ */

static long get_mempolicy_(int *mode, unsigned long *mask, unsigned long maxnode, void *addr,
                           unsigned long flags)
{
	return syscall(SYS_get_mempolicy, mode, mask, maxnode, addr, flags);
}

/* The node the kernel placed the page at p on, by both queries; -1 if they
 * disagree or fail. */
static int node_of_page(void *p)
{
	int node = -1, status = -99;
	if (get_mempolicy_(&node, NULL, 0, p, MPOL_F_NODE_ | MPOL_F_ADDR_) != 0)
		return -1;
	void *pages[1] = {p};
	if (syscall(SYS_move_pages, 0, 1ul, pages, NULL, &status, 0) != 0 || status != node)
		return -1;
	return node;
}

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s: %s:%d: %s\n", scenario, __FILE__, __LINE__, #cond);   \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

static int child_main(const char *scenario)
{
	char *small = pa_pages_alloc(1), *large = pa_pages_alloc(100);
	char *block = pa_malloc(100);
	CHECK(small != NULL && large != NULL && block != NULL);
	memset(small, 1, PG);
	memset(large, 1, 100 * PG);
	struct pa_stats s;
	CHECK(pa_stats(&s) == 0);
	struct pa_numa_stats n;
	CHECK(pa_numa_stats(0, &n) == 0);
	int mode = -1;
	unsigned long mask = 0;
	CHECK(get_mempolicy_(&mode, &mask, 64, large, MPOL_F_ADDR_) == 0);
	if (strcmp(scenario, "one_heap") == 0) {
		/* numa=on or off on a one-node machine: the full-window heap. */
		CHECK(pa_numa_nodes() == 1);
		CHECK(s.window_base == 0 && s.window_bytes == (size_t)1 << 48);
		CHECK(n.window_bytes == s.window_bytes && n.bound_node == -1 && n.fake == 0);
		CHECK(mode == MPOL_DEFAULT_);
	} else if (strcmp(scenario, "node0") == 0) {
		/* numa_fake=1: one per-node heap, its arenas preferring node 0. */
		CHECK(pa_numa_nodes() == 1);
		CHECK(n.window_bytes >= (size_t)64 << 30 && n.window_bytes <= (size_t)4 << 40);
		CHECK(n.bound_node == 0);
		CHECK(n.mpol_failures == 0);
		CHECK(mode == MPOL_PREFERRED_ && mask == 1);
		for (char *p = small; p != NULL; p = p == small ? large : p == large ? block : NULL)
			CHECK((uintptr_t)p - n.window_base < n.window_bytes);
	} else if (strcmp(scenario, "interleave") == 0) {
		CHECK(pa_numa_nodes() == 1);
		CHECK(s.window_bytes == (size_t)1 << 48);
		CHECK(mode == MPOL_INTERLEAVE_ && mask == 1);
	} else {
		CHECK(!"a known scenario");
	}
	/* Wherever the policy, this machine has one node: every page is on 0. */
	CHECK(node_of_page(small) == 0);
	CHECK(node_of_page(large) == 0);
	CHECK(node_of_page(large + 99 * PG) == 0);
	pa_free(block);
	pa_pages_free(small, 1);
	pa_pages_free(large, 100);
	return 0;
}

static void expect_child(const char *conf, const char *scenario)
{
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(len > 0);
	self[len] = '\0';
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("PAGEALLOC_CONF", conf, 1);
		char *argv[] = {self, (char *)"--child", (char *)scenario, NULL};
		execv(self, argv);
		_exit(127);
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("PAGEALLOC_CONF=%s %s: status %#x", conf, scenario, status);
}

static void test_numa_on_with_one_node_is_the_one_full_window_heap(void **state)
{
	(void)state;
	expect_child("numa=on", "one_heap");
	expect_child("numa=off", "one_heap");
}

static void test_numa_fake_1_places_pages_on_node_0(void **state)
{
	(void)state;
	expect_child("numa=on,numa_fake=1", "node0");
}

static void test_numa_interleave_spreads_arenas_over_the_online_nodes(void **state)
{
	(void)state;
	expect_child("numa=interleave", "interleave");
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2]);
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		fprintf(stderr, "test_numa_thread: needs CPUs 0 and 1\n");
		return 77;
	}
	/* Before the heap is built: these shape it. */
	if (pa_config("numa=on,numa_fake=2,scavenger=off") != 0)
		return 1;
	const struct CMUnitTest tests[] = {
	    TU_TEST(test_two_fake_nodes_have_adjacent_windows_of_their_own),
	    TU_TEST(test_every_page_a_cpu_gets_is_in_its_nodes_window),
	    TU_TEST(test_blocks_of_sizes_only_one_cpu_uses_come_from_its_node),
	    TU_TEST(test_frees_from_the_other_nodes_cpu_go_back_to_the_owner),
	    TU_TEST(test_each_nodes_caches_refill_from_its_heap),
	    TU_TEST(test_the_scavenger_releases_in_both_nodes),
	    TU_TEST(test_per_node_figures_add_up_to_pa_stats),
	    TU_TEST(test_a_heap_pinned_to_a_node_takes_its_pages_there_from_any_cpu),
	    TU_TEST(test_the_heap_story_has_a_line_per_node),
	    TU_TEST(test_a_free_outside_both_windows_is_refused),
	    TU_TEST(test_numa_on_with_one_node_is_the_one_full_window_heap),
	    TU_TEST(test_numa_fake_1_places_pages_on_node_0),
	    TU_TEST(test_numa_interleave_spreads_arenas_over_the_online_nodes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
