/*
 * test_cgroup.c — the container's limits (cgroup.c) read from fake trees,
 * and memory_limit=auto's limit computed from them (scavenger.c).
 *
 * Each case writes a small tree of files under a temporary directory (the
 * root that cgroup_find prefixes to every path): /proc/self/cgroup, the
 * cgroup's memory files and the PSI file, as the kernel has them. Cases are
 * named for the edge they cover: v2, v1, a hybrid machine, a container
 * without a cgroup namespace, a parent's limit binding, "max", v1's
 * "unlimited".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cgroup.h"
#include "pageheap.h"
#include "scavenger.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)
#define V1_UNLIMITED "9223372036854771712\n"

/* ---- fake trees -------------------------------------------------------------- */

struct file {
	const char *path; /* under the root */
	const char *text;
};

#define FILES_MAX 12

static char root[64];

/* Make root/path's directories and write text into it. */
static void put(const char *path, const char *text)
{
	char full[PA_CGROUP_PATH_MAX];
	snprintf(full, sizeof(full), "%s%s", root, path);
	for (char *p = full + strlen(root) + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(full, 0700);
		*p = '/';
	}
	FILE *f = fopen(full, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void make_tree(const struct file *files)
{
	strcpy(root, "/tmp/pa-cgroup-XXXXXX");
	assert_non_null(mkdtemp(root));
	for (size_t i = 0; i < FILES_MAX && files[i].path != NULL; i++)
		put(files[i].path, files[i].text);
}

static void remove_tree(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

/* ---- finding the cgroup and its limit ------------------------------------------ */

struct find_case {
	const char *name;
	struct file files[FILES_MAX];
	int version;
	const char *dir;  /* under the root */
	size_t limit;     /* bytes, 0: none */
	const char *from; /* the binding limit file under the root, NULL: none */
	const char *psi;  /* the pressure file under the root, "" none */
};

static const char v2_self[] = "0::/app.slice/svc\n";
static const char v1_self[] =
    "12:pids:/svc\n4:memory:/svc\n3:cpu,cpuacct:/svc\n1:name=systemd:/svc\n";

static const struct find_case find_cases[] = {
    {"v2_own_limit_parent_max",
     {{"/proc/self/cgroup", v2_self},
      {"/sys/fs/cgroup/app.slice/memory.max", "max\n"},
      {"/sys/fs/cgroup/app.slice/svc/memory.max", "52428800\n"},
      {"/sys/fs/cgroup/app.slice/svc/memory.pressure",
       "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"}},
     2,
     "/sys/fs/cgroup/app.slice/svc",
     50 * MIB,
     "/sys/fs/cgroup/app.slice/svc/memory.max",
     "/sys/fs/cgroup/app.slice/svc/memory.pressure"},
    {"v2_parent_limit_binds_a_child_with_max",
     {{"/proc/self/cgroup", v2_self},
      {"/sys/fs/cgroup/app.slice/memory.max", "67108864\n"},
      {"/sys/fs/cgroup/app.slice/svc/memory.max", "max\n"}},
     2,
     "/sys/fs/cgroup/app.slice/svc",
     64 * MIB,
     "/sys/fs/cgroup/app.slice/memory.max",
     ""},
    {"v2_smaller_of_own_and_parent",
     {{"/proc/self/cgroup", v2_self},
      {"/sys/fs/cgroup/app.slice/memory.max", "67108864\n"},
      {"/sys/fs/cgroup/app.slice/svc/memory.max", "134217728\n"},
      {"/proc/pressure/memory", "some avg10=1.50 avg60=0.00 avg300=0.00 total=10\n"}},
     2,
     "/sys/fs/cgroup/app.slice/svc",
     64 * MIB,
     "/sys/fs/cgroup/app.slice/memory.max",
     "/proc/pressure/memory"},
    {"v2_max_everywhere_is_none",
     {{"/proc/self/cgroup", v2_self},
      {"/sys/fs/cgroup/app.slice/memory.max", "max\n"},
      {"/sys/fs/cgroup/app.slice/svc/memory.max", "max\n"}},
     2,
     "/sys/fs/cgroup/app.slice/svc",
     0,
     NULL,
     ""},
    {"v2_container_without_namespace_uses_the_mount",
     {{"/proc/self/cgroup", "0::/docker/0123abcd\n"}, {"/sys/fs/cgroup/memory.max", "268435456\n"}},
     2,
     "/sys/fs/cgroup",
     256 * MIB,
     "/sys/fs/cgroup/memory.max",
     ""},
    {"v1_number",
     {{"/proc/self/cgroup", v1_self},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", V1_UNLIMITED},
      {"/sys/fs/cgroup/memory/svc/memory.limit_in_bytes", "104857600\n"},
      {"/proc/pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"}},
     1,
     "/sys/fs/cgroup/memory/svc",
     100 * MIB,
     "/sys/fs/cgroup/memory/svc/memory.limit_in_bytes",
     "/proc/pressure/memory"},
    {"v1_unlimited_is_none",
     {{"/proc/self/cgroup", v1_self},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", V1_UNLIMITED},
      {"/sys/fs/cgroup/memory/svc/memory.limit_in_bytes", V1_UNLIMITED}},
     1,
     "/sys/fs/cgroup/memory/svc",
     0,
     NULL,
     ""},
    {"hybrid_v2_without_memory_takes_v1",
     {{"/proc/self/cgroup", "0::/svc\n4:memory:/svc\n"},
      {"/sys/fs/cgroup/unified/svc/cgroup.procs", "1\n"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", V1_UNLIMITED},
      {"/sys/fs/cgroup/memory/svc/memory.limit_in_bytes", "83886080\n"}},
     1,
     "/sys/fs/cgroup/memory/svc",
     80 * MIB,
     "/sys/fs/cgroup/memory/svc/memory.limit_in_bytes",
     ""},
    {"no_memory_controller", {{"/proc/self/cgroup", "3:cpu,cpuacct:/svc\n"}}, 0, "", 0, NULL, ""},
    {"no_proc_file", {{"/sys/fs/cgroup/memory.max", "1048576\n"}}, 0, "", 0, NULL, ""},
};

static void under_root(char *out, const char *path)
{
	snprintf(out, PA_CGROUP_PATH_MAX, "%s%s", path[0] != '\0' ? root : "", path);
}

static void find_names_the_cgroup_its_limit_and_where_it_binds(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(find_cases) / sizeof(find_cases[0]); i++) {
		const struct find_case *c = &find_cases[i];
		tu_case = c->name;
		make_tree(c->files);
		struct pa_cgroup cg;
		TU_EQ(cgroup_find(&cg, root), c->version);
		TU_EQ(cg.version, c->version);
		char want[PA_CGROUP_PATH_MAX];
		under_root(want, c->dir);
		assert_string_equal(cg.dir, want);
		under_root(want, c->psi);
		assert_string_equal(cg.psi, want);
		size_t from = 99;
		TU_EQ(cgroup_limit(&cg, &from), c->limit);
		if (c->from == NULL) {
			TU_EQ(from, 0);
		} else {
			char file[PA_CGROUP_PATH_MAX];
			TU_EQ(cgroup_limit_file(&cg, from, file), 0);
			under_root(want, c->from);
			assert_string_equal(file, want);
		}
		remove_tree();
	}
	tu_case = "";
}

/* ---- the parsers ------------------------------------------------------------------ */

static void parse_limit_reads_max_numbers_and_v1_unlimited(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		int ret;
		size_t bytes;
	} cases[] = {
	    {"max\n", 0, 0},
	    {"max", 0, 0},
	    {"52428800\n", 0, 52428800},
	    {"4096", 0, 4096},
	    {V1_UNLIMITED, 0, 0},
	    {"4611686018427387904\n", 0, 0}, /* 2^62: none */
	    {"4611686018427387903\n", 0, ((size_t)1 << 62) - 1},
	    {"", -1, 7},
	    {"maximum\n", -1, 7},
	    {"12M\n", -1, 7},
	    {"-1\n", -1, 7},
	    {"99999999999999999999999\n", -1, 7}, /* past 64 bits */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tu_case = cases[i].text;
		size_t v = 7;
		TU_EQ(cgroup_parse_limit(cases[i].text, &v), cases[i].ret);
		TU_EQ(v, cases[i].bytes);
	}
	tu_case = "";
}

static void parse_psi_reads_some_avg10_in_hundredths(void **state)
{
	(void)state;
	unsigned v = 7;
	assert_int_equal(cgroup_parse_psi("some avg10=12.34 avg60=1.00 avg300=0.00 total=99\n"
	                                  "full avg10=3.00 avg60=0.00 avg300=0.00 total=5\n",
	                                  &v),
	                 0);
	assert_int_equal(v, 1234);
	assert_int_equal(cgroup_parse_psi("some avg10=100.00 avg60=0.00", &v), 0);
	assert_int_equal(v, 10000);
	assert_int_equal(cgroup_parse_psi("some avg10=0.00 avg60=0.00", &v), 0);
	assert_int_equal(v, 0);
	v = 7;
	assert_int_equal(cgroup_parse_psi("full avg10=3.00 avg60=0.00", &v), -1);
	assert_int_equal(cgroup_parse_psi("some avg10=3 avg60=0.00", &v), -1);
	assert_int_equal(cgroup_parse_psi("", &v), -1);
	assert_int_equal(v, 7);
}

static void parse_stat_finds_whole_keys_only(void **state)
{
	(void)state;
	const char *text = "anon 100\nfile 200\nactive_file 30\ninactive_file 40\n"
	                   "total_active_file 31\n";
	size_t v = 7;
	assert_int_equal(cgroup_parse_stat(text, "file", &v), 0);
	assert_int_equal(v, 200);
	assert_int_equal(cgroup_parse_stat(text, "active_file", &v), 0);
	assert_int_equal(v, 30);
	assert_int_equal(cgroup_parse_stat(text, "total_active_file", &v), 0);
	assert_int_equal(v, 31);
	v = 7;
	assert_int_equal(cgroup_parse_stat(text, "anon_thp", &v), -1);
	assert_int_equal(cgroup_parse_stat(text, "act", &v), -1);
	assert_int_equal(v, 7);
}

/* ---- usage and pressure -------------------------------------------------------------- */

static void unreclaimable_is_usage_less_file_pages_v2_and_v1(void **state)
{
	(void)state;
	static const struct file v2[] = {
	    {"/proc/self/cgroup", "0::/svc\n"},
	    {"/sys/fs/cgroup/svc/memory.max", "104857600\n"},
	    {"/sys/fs/cgroup/svc/memory.current", "41943040\n"},
	    {"/sys/fs/cgroup/svc/memory.stat",
	     "anon 20971520\nfile 20971520\nactive_file 10485760\ninactive_file 5242880\n"
	     "shmem 5242880\n"},
	    {"/sys/fs/cgroup/svc/memory.pressure",
	     "some avg10=7.50 avg60=0.00 avg300=0.00 total=1\n"},
	    {NULL, NULL},
	};
	make_tree(v2);
	struct pa_cgroup cg;
	assert_int_equal(cgroup_find(&cg, root), 2);
	size_t bytes = 0;
	assert_int_equal(cgroup_unreclaimable(&cg, &bytes), 0);
	assert_int_equal(bytes, 25 * MIB); /* 40 less 10 active and 5 inactive: shmem stays */
	unsigned psi = 0;
	assert_int_equal(cgroup_pressure(&cg, &psi), 0);
	assert_int_equal(psi, 750);
	remove_tree();

	/* v1: usage and the total_ lines count the children too. */
	static const struct file v1[] = {
	    {"/proc/self/cgroup", "4:memory:/svc\n"},
	    {"/sys/fs/cgroup/memory/memory.limit_in_bytes", V1_UNLIMITED},
	    {"/sys/fs/cgroup/memory/svc/memory.limit_in_bytes", "104857600\n"},
	    {"/sys/fs/cgroup/memory/svc/memory.usage_in_bytes", "41943040\n"},
	    {"/sys/fs/cgroup/memory/svc/memory.stat",
	     "cache 1\nactive_file 1\ninactive_file 1\ntotal_active_file 3145728\n"
	     "total_inactive_file 1048576\n"},
	    {NULL, NULL},
	};
	make_tree(v1);
	assert_int_equal(cgroup_find(&cg, root), 1);
	assert_int_equal(cgroup_unreclaimable(&cg, &bytes), 0);
	assert_int_equal(bytes, 36 * MIB);
	assert_int_equal(cgroup_pressure(&cg, &psi), -1); /* no /proc/pressure/memory here */
	remove_tree();
}

/* ---- memory_limit=auto ------------------------------------------------------------------- */

static void auto_limit_is_cgroup_limit_less_a_sixteenth_and_what_is_not_heap(void **state)
{
	(void)state;
	/* The heap: one chunk, 512 pages in use (4 MiB resident). The cgroup:
	 * 64 MiB limit, charged 16 MiB of which 4 MiB page cache: 12 MiB
	 * unreclaimable, 8 MiB of it not the heap's. */
	static const struct file tree[] = {
	    {"/proc/self/cgroup", "0::/svc\n"},
	    {"/sys/fs/cgroup/svc/memory.max", "67108864\n"},
	    {"/sys/fs/cgroup/svc/memory.current", "16777216\n"},
	    {"/sys/fs/cgroup/svc/memory.stat", "active_file 3145728\ninactive_file 1048576\n"},
	    {"/sys/fs/cgroup/svc/memory.pressure",
	     "some avg10=0.20 avg60=0.00 avg300=0.00 total=1\n"},
	    {NULL, NULL},
	};
	make_tree(tree);
	struct pa_pageheap h;
	struct pa_pageheap_opts opts = {.metadata_only = 1};
	assert_int_equal(pageheap_init(&h, &opts), 0);
	assert_int_equal(pageheap_grow_range(&h, TU_CHUNK(0), PA_CHUNK_PAGES), 0);
	size_t scav = 0;
	assert_int_equal(pageheap_alloc(&h, 512, &scav), TU_CHUNK(0));
	assert_int_equal(pageheap_resident_pages_locked(&h), 512);

	struct pa_scavenger s;
	struct pa_scav_config conf = {.enabled = 0, .percent = 1, .memory_limit = 32 * MIB};
	scav_init(&s, &h, NULL, &conf);
	assert_int_equal(s.conf.memory_limit, 32 * MIB);
	assert_int_equal(s.pressure, -1);
	s.cgroup_root = root;
	conf.memory_limit_auto = 1;
	scav_configure(&s, &conf);
	/* 64 - 64/16 - 8 = 52 MiB. */
	assert_int_equal(s.cgroup.version, 2);
	assert_int_equal(s.cgroup_max, 64 * MIB);
	assert_int_equal(s.cgroup_other, 8 * MIB);
	assert_int_equal(s.conf.memory_limit, 52 * MIB);
	assert_int_equal(h.limit_pages, 52 * MIB / PA_PAGE_SIZE);
	assert_int_equal(s.pressure, 20);

	/* The container's limit halves and the pressure rises: the next read
	 * follows both. 32 - 2 - 8 = 22 MiB. */
	put("/sys/fs/cgroup/svc/memory.max", "33554432\n");
	put("/sys/fs/cgroup/svc/memory.pressure",
	    "some avg10=9.99 avg60=0.00 avg300=0.00 total=1\n");
	scav_follow_cgroup(&s);
	assert_int_equal(s.conf.memory_limit, 22 * MIB);
	assert_int_equal(h.limit_pages, 22 * MIB / PA_PAGE_SIZE);
	assert_int_equal(s.pressure, 999);

	/* Everything else fills the cgroup: the heap keeps one page of limit
	 * (0 would be none). */
	put("/sys/fs/cgroup/svc/memory.current", "41943040\n");
	scav_follow_cgroup(&s);
	assert_int_equal(s.cgroup_other, 40 * MIB - 4 * MIB - 4 * MIB);
	assert_int_equal(s.conf.memory_limit, PA_PAGE_SIZE);

	/* The limit goes: none. */
	put("/sys/fs/cgroup/svc/memory.max", "max\n");
	scav_follow_cgroup(&s);
	assert_int_equal(s.cgroup_max, 0);
	assert_int_equal(s.conf.memory_limit, 0);
	assert_int_equal(h.limit_pages, 0);

	/* memory_limit=SIZE again: its size, whatever the cgroup says. */
	conf.memory_limit_auto = 0;
	conf.memory_limit = 16 * MIB;
	scav_configure(&s, &conf);
	assert_int_equal(s.conf.memory_limit, 16 * MIB);
	assert_int_equal(h.limit_pages, 16 * MIB / PA_PAGE_SIZE);
	/* A read the thread began before that configure (it saw auto on) and
	 * finishes after it leaves the size alone: the cgroup's "max" would
	 * make it 0 (test_pages_api's 64M once came back 0 so). */
	scav_follow_cgroup(&s);
	assert_int_equal(s.conf.memory_limit, 16 * MIB);
	assert_int_equal(h.limit_pages, 16 * MIB / PA_PAGE_SIZE);
	pageheap_destroy(&h);
	remove_tree();
}

static size_t released_pages(struct pa_pageheap *h)
{
	lock_acquire(&h->lock);
	size_t n = h->scav_pages;
	lock_release(&h->lock);
	return n;
}

/* Under pressure the thread releases memory free for any time: with
 * scavenge_delay_ms an hour, 512 pages freed a moment ago all go back. */
static void pressure_lets_the_thread_release_memory_just_freed(void **state)
{
	(void)state;
	static const struct file tree[] = {
	    {"/proc/self/cgroup", "0::/svc\n"},
	    {"/sys/fs/cgroup/svc/memory.max", "max\n"},
	    {"/sys/fs/cgroup/svc/memory.pressure",
	     "some avg10=50.00 avg60=9.00 avg300=1.00 total=9\n"},
	    {NULL, NULL},
	};
	make_tree(tree);
	struct pa_pageheap h;
	struct pa_pageheap_opts opts = {.metadata_only = 1};
	assert_int_equal(pageheap_init(&h, &opts), 0);
	assert_int_equal(pageheap_grow_range(&h, TU_CHUNK(0), PA_CHUNK_PAGES), 0);
	size_t scav = 0;
	assert_int_equal(pageheap_alloc(&h, 512, &scav), TU_CHUNK(0));
	pageheap_free(&h, TU_CHUNK(0), 512);
	assert_int_equal(h.scav_pages, PA_CHUNK_PAGES - 512);

	struct pa_scavenger s;
	struct pa_scav_config conf = {
	    .enabled = 1, .percent = 1, .burst_percent = 10, .delay_ms = 3600000};
	scav_init(&s, &h, NULL, &conf);
	s.cgroup_root = root;
	conf.memory_limit_auto = 1;
	scav_configure(&s, &conf);
	assert_int_equal(s.pressure, 5000);
	assert_int_equal(s.conf.memory_limit, 0);
	assert_int_equal(scav_start(&s), 0);
	/* A wait for the outcome, not a timing: 20 s is the test's patience. */
	for (int i = 0; i < 2000 && released_pages(&h) != PA_CHUNK_PAGES; i++)
		usleep(10000);
	scav_stop(&s);
	assert_int_equal(h.scav_pages, PA_CHUNK_PAGES);
	assert_int_equal(h.inuse_pages, 0);
	pageheap_destroy(&h);
	remove_tree();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(find_names_the_cgroup_its_limit_and_where_it_binds),
	    cmocka_unit_test(parse_limit_reads_max_numbers_and_v1_unlimited),
	    cmocka_unit_test(parse_psi_reads_some_avg10_in_hundredths),
	    cmocka_unit_test(parse_stat_finds_whole_keys_only),
	    cmocka_unit_test(unreclaimable_is_usage_less_file_pages_v2_and_v1),
	    cmocka_unit_test(auto_limit_is_cgroup_limit_less_a_sixteenth_and_what_is_not_heap),
	    cmocka_unit_test(pressure_lets_the_thread_release_memory_just_freed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
