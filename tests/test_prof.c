/*
 * test_prof.c — the heap profiler's samples, seen from one thread: what
 * pa_prof_stats counts, what a sampled block looks like to the program,
 * pa_prof_active, pa_prof_dump, and the default sampling rate.
 *
 * Exact counts come from prof_sample=1: the thread's count-down is then an
 * exponential draw of mean 1 byte, floored (prof_next_count), so a malloc
 * of n bytes takes it below zero, and is sampled, unless the draw was at
 * least n: odds e^-n, under 1e-17 for the n >= 41 used here. A sample of n
 * bytes stands for 1 / (1 - e^(-n)) allocations, exactly 1.0 in a double
 * for n > 40 (prof.c computes 1 - e^-x as 1 for x > 40), so the estimated
 * bytes are the requested bytes, exactly. A new prof_sample applies from the
 * thread's next draw: sample_every_allocation() allocates until a sample has
 * been taken (the draw after it is of mean 1). Every figure is compared as
 * a difference from a snapshot taken after that, since sites and totals
 * only grow over the process's life.
 *
 * A sampled block is a large span of its own (prof.h): its usable size is
 * what it would be unsampled (its class's size, or whole pages), realloc
 * moves it, calloc zeroes it, aligned requests keep their alignment, free
 * and free_sized take it, a double free of it is reported in one line, and
 * its pages count in sample_bytes (a block of u usable bytes holds
 * ceil(u / PA_PAGE_SIZE) pages). pa_prof_active(0) stops sampling at once
 * (the thread's next count-down expiry finds it off); pa_prof_dump writes
 * a gzip file, or fails with errno set and nothing left behind.
 *
 * The sites' table grows with the sites: its size shows in meta_bytes
 * modulo 16 KiB, since each of the profiler's other mappings is a multiple
 * of 16 KiB.
 *
 * The last test runs the default prof_sample (512 KiB) over 256 MiB of
 * 64-byte mallocs: each malloc is sampled with chance 1 - e^(-64/512K)
 * independently (the draws are exponential, so memoryless), which makes
 * the count binomial, mean 511.97, standard deviation 22.6; it must lie
 * within 4 standard deviations of 512 (422..602). A correct allocator
 * fails that with odds 6.7e-5 (1.9e-5 below, 4.8e-5 above; summed exactly
 * from the binomial), about one run in 15,000.
 *
 * The scavenger is off: nothing but this thread touches the heap.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "testutil.h"

#include "layout.h"
#include "pagealloc.h"
#include "sizeclass_table.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* ---- helpers ---------------------------------------------------------------- */

static struct pa_prof_stats prof_now(void)
{
	struct pa_prof_stats st;
	memset(&st, 0, sizeof(st));
	pa_prof_stats(&st);
	return st;
}

/* The usable size a block of n bytes has without the profiler: its class's
 * size (the smallest in the table that holds n), or whole pages. Walks the
 * table instead of using the allocator's lookup. */
static size_t unsampled_usable(size_t n)
{
	if (n > PA_SC_MAX_SMALL)
		return (n + PA_PAGE_SIZE - 1) / PA_PAGE_SIZE * PA_PAGE_SIZE;
	for (unsigned c = 1; c < PA_SC_NUM_CLASSES; c++)
		if (pa_sizeclasses[c].size >= n)
			return pa_sizeclasses[c].size;
	return 0;
}

/* The bytes of the span a sampled block of `usable` bytes holds. */
static size_t span_bytes_of(size_t usable)
{
	return (usable + PA_PAGE_SIZE - 1) / PA_PAGE_SIZE * PA_PAGE_SIZE;
}

/* prof on, prof_sample=1, and a sample taken so that the thread's next
 * count-down is of mean 1: from here every malloc of more than 40 bytes
 * is sampled. */
static void sample_every_allocation(void)
{
	assert_int_equal(pa_config_set("prof", "on"), 0);
	assert_int_equal(pa_config_set("prof_sample", "1"), 0);
	size_t before = prof_now().samples_total;
	/* The count left is at most 64 * 512 KiB (drawn while off) in all
	 * but e^-64 of cases: 1 MiB blocks reach below it in 33. */
	for (int i = 0; i < 1000 && prof_now().samples_total == before; i++)
		pa_free(pa_malloc(MIB));
	assert_true(prof_now().samples_total > before);
}

/* The two call sites of the site test: distinct functions whose calls are
 * not tail calls (the asm uses the result after the call), so each
 * leaves its own return address in the stack a sample records. */
static void *__attribute__((noinline)) site_a_malloc(size_t n)
{
	void *p = pa_malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static void *__attribute__((noinline)) site_b_malloc(size_t n)
{
	void *p = pa_malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

/* A fresh empty directory for files of one test. */
static void temp_dir(char *out, size_t cap)
{
	const char *base = getenv("TMPDIR");
	snprintf(out, cap, "%s/pa-prof-XXXXXX", base != NULL && *base ? base : "/tmp");
	assert_non_null(mkdtemp(out));
}

/* Entries of directory `dir` other than . and .. */
static size_t dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	size_t n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

/* The first two bytes of file `path` (-1 when it cannot be read). */
static int file_magic(const char *path, unsigned char magic[2])
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, magic, 2);
	close(fd);
	return n == 2 ? 0 : -1;
}

/* ---- what the stats count --------------------------------------------------- */

static const size_t site_a_sizes[] = {41, 64, 1000, 8193, 32768};
static const size_t site_b_sizes[] = {100, 40000, 100000};
#define NA (sizeof(site_a_sizes) / sizeof(site_a_sizes[0]))
#define NB (sizeof(site_b_sizes) / sizeof(site_b_sizes[0]))

static size_t sum(const size_t *v, size_t n)
{
	size_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += v[i];
	return s;
}

static size_t span_bytes_sum(const size_t *v, size_t n)
{
	size_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += span_bytes_of(unsampled_usable(v[i]));
	return s;
}

/* Round 1: site a's and site b's blocks, then a's freed; round 2: a's
 * again from the same stack (same site), then all freed. */
static void stats_count_every_sample_by_site_and_forget_freed_ones(void **state)
{
	(void)state;
	sample_every_allocation();
	struct pa_prof_stats b = prof_now(), st;
	void *a[NA], *bb[NB];
	size_t sa = sum(site_a_sizes, NA), sb = sum(site_b_sizes, NB);
	size_t pa = span_bytes_sum(site_a_sizes, NA), pb = span_bytes_sum(site_b_sizes, NB);
	for (size_t round = 1; round <= 2; round++) {
		for (size_t i = 0; i < NA; i++)
			assert_non_null(a[i] = site_a_malloc(site_a_sizes[i]));
		if (round == 1)
			for (size_t i = 0; i < NB; i++)
				assert_non_null(bb[i] = site_b_malloc(site_b_sizes[i]));

		tu_case = round == 1 ? "round 1, both sites live" : "round 2, both sites live";
		st = prof_now();
		TU_EQ(st.samples_total - b.samples_total, round * NA + NB);
		TU_EQ(st.samples_live - b.samples_live, NA + NB);
		TU_EQ(st.sites - b.sites, 2);
		TU_EQ(st.inuse_bytes - b.inuse_bytes, sa + sb);
		TU_EQ(st.alloc_bytes - b.alloc_bytes, round * sa + sb);
		TU_EQ(st.sample_bytes - b.sample_bytes, pa + pb);

		tu_case = round == 1 ? "round 1, site a freed" : "round 2, all freed";
		for (size_t i = 0; i < NA; i++)
			pa_free(a[i]);
		if (round == 2)
			for (size_t i = 0; i < NB; i++)
				pa_free(bb[i]);
		size_t live = round == 1 ? NB : 0;
		st = prof_now();
		TU_EQ(st.samples_total - b.samples_total, round * NA + NB);
		TU_EQ(st.samples_live - b.samples_live, live);
		TU_EQ(st.sites - b.sites, 2);
		TU_EQ(st.inuse_bytes - b.inuse_bytes, round == 1 ? sb : 0);
		TU_EQ(st.alloc_bytes - b.alloc_bytes, round * sa + sb);
		TU_EQ(st.sample_bytes - b.sample_bytes, round == 1 ? pb : 0);
	}
	tu_case = "";
}

/* Distinct stacks: descend(bits, k) reaches its malloc through k calls,
 * each to branch_a or branch_b by one bit of bits, so each of the 2^k
 * values of bits is a stack of its own (the asm keeps the two branches from
 * being folded into one function, and every call from being a tail call). */
static void *descend(unsigned bits, unsigned k);

static void *__attribute__((noinline)) branch_a(unsigned bits, unsigned k)
{
	__asm__ volatile("# branch a" ::: "memory");
	void *p = descend(bits, k);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static void *__attribute__((noinline)) branch_b(unsigned bits, unsigned k)
{
	__asm__ volatile("# branch b" ::: "memory");
	void *p = descend(bits, k);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static void *__attribute__((noinline)) descend(unsigned bits, unsigned k)
{
	void *p = k == 0     ? pa_malloc(64)
	          : bits & 1 ? branch_a(bits >> 1, k - 1)
	                     : branch_b(bits >> 1, k - 1);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

/* New sites, one sampled stack at a time, until there are `want` in all. */
static void sites_up_to(size_t want, unsigned *bits)
{
	while (prof_now().sites < want) {
		assert_true(*bits < (1u << 11));
		pa_free(descend((*bits)++, 11));
	}
	TU_EQ(prof_now().sites, want);
}

/* The sites' table starts at one page of 512 chains and doubles when a
 * site past its chains' count comes, up to 2,048 chains (16 KiB). Seen in
 * meta_bytes: every other mapping of the profiler's is a multiple of 16
 * KiB (its carve blocks), so meta_bytes mod 16 KiB is the table's bytes. */
static void the_sites_table_starts_at_a_page_and_doubles_with_the_sites(void **state)
{
	(void)state;
	sample_every_allocation();
	unsigned bits = 0;
	TU_EQ(prof_now().sites <= 512, 1);
	tu_case = "512 sites: 512 chains";
	sites_up_to(512, &bits);
	TU_EQ(prof_now().meta_bytes % (16 * KIB), 4 * KIB);
	tu_case = "513 sites: 1,024 chains";
	sites_up_to(513, &bits);
	TU_EQ(prof_now().meta_bytes % (16 * KIB), 8 * KIB);
	tu_case = "1,024 sites: 1,024 chains";
	sites_up_to(1024, &bits);
	TU_EQ(prof_now().meta_bytes % (16 * KIB), 8 * KIB);
	tu_case = "1,025 sites: 2,048 chains";
	sites_up_to(1025, &bits);
	TU_EQ(prof_now().meta_bytes % (16 * KIB), 0);
	tu_case = "";
}

/* ---- what a sampled block looks like ---------------------------------------- */

#define MAX_SMALL_SWEEP PA_SC_MAX_SMALL
static const size_t large_sizes[] = {PA_SC_MAX_SMALL + 1, 40000, 65536, 100000, MIB + 1,
                                     3 * MIB + 5};
#define NLARGE (sizeof(large_sizes) / sizeof(large_sizes[0]))

/* Every small size from 41 bytes and some large ones: the usable size with
 * prof off, then sampled (each malloc checked to be a sample, alone live,
 * its span's pages in sample_bytes). */
static void a_sampled_block_has_the_usable_size_it_has_unsampled(void **state)
{
	(void)state;
	static size_t off[MAX_SMALL_SWEEP + 1 + NLARGE];
	size_t nsizes = 0;
	static size_t sizes[MAX_SMALL_SWEEP + 1 + NLARGE];
	for (size_t n = 41; n <= MAX_SMALL_SWEEP; n++)
		sizes[nsizes++] = n;
	for (size_t i = 0; i < NLARGE; i++)
		sizes[nsizes++] = large_sizes[i];

	pa_prof_active(0);
	size_t total_off = prof_now().samples_total;
	for (size_t i = 0; i < nsizes; i++) {
		void *p = pa_malloc(sizes[i]);
		assert_non_null(p);
		off[i] = pa_malloc_usable_size(p);
		pa_free(p);
	}
	TU_EQ(prof_now().samples_total, total_off);

	sample_every_allocation();
	char name[64];
	tu_case = name;
	for (size_t i = 0; i < nsizes; i++) {
		size_t n = sizes[i];
		snprintf(name, sizeof(name), "malloc(%zu)", n);
		struct pa_prof_stats b = prof_now();
		void *p = pa_malloc(n);
		assert_non_null(p);
		struct pa_prof_stats st = prof_now();
		TU_EQ(st.samples_total - b.samples_total, 1);
		TU_EQ(st.samples_live - b.samples_live, 1);
		TU_EQ(pa_malloc_usable_size(p), off[i]);
		TU_EQ(pa_malloc_usable_size(p), unsampled_usable(n));
		TU_EQ(st.sample_bytes - b.sample_bytes, span_bytes_of(unsampled_usable(n)));
		/* Every usable byte is the program's. */
		memset(p, 0x5a, pa_malloc_usable_size(p));
		pa_free(p);
		st = prof_now();
		TU_EQ(st.samples_live, b.samples_live);
		TU_EQ(st.sample_bytes, b.sample_bytes);
	}
	tu_case = "";
}

static void free_sized_takes_a_sampled_block_with_its_requested_or_usable_size(void **state)
{
	(void)state;
	static const size_t sizes[] = {41, 64, 100, 1000, 8192, 8193, 32768, 40000, 100000};
	sample_every_allocation();
	char name[64];
	tu_case = name;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int usable = 0; usable <= 1; usable++) {
			size_t n = sizes[i];
			struct pa_prof_stats b = prof_now();
			void *p = pa_malloc(n);
			assert_non_null(p);
			TU_EQ(prof_now().samples_live - b.samples_live, 1);
			size_t as = usable ? pa_malloc_usable_size(p) : n;
			snprintf(name, sizeof(name), "malloc(%zu), free_sized(p, %zu)", n, as);
			pa_free_sized(p, as);
			struct pa_prof_stats st = prof_now();
			TU_EQ(st.samples_live, b.samples_live);
			TU_EQ(st.inuse_bytes, b.inuse_bytes);
			TU_EQ(st.sample_bytes, b.sample_bytes);
		}
	}
	tu_case = "";
}

struct resize {
	size_t from, to;
};

static void realloc_of_a_sampled_block_moves_it_and_keeps_its_bytes(void **state)
{
	(void)state;
	/* Same class (in place when unsampled), smaller, larger, small to
	 * large, large to small, large within its pages. */
	static const struct resize cases[] = {
	    {100, 100},   {100, 110},     {1000, 600},     {100, 5000},      {5000, 40000},
	    {40000, 100}, {40000, 40001}, {100000, 90000}, {100000, 300000},
	};
	sample_every_allocation();
	char name[64];
	tu_case = name;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct resize c = cases[i];
		snprintf(name, sizeof(name), "realloc(malloc(%zu), %zu)", c.from, c.to);
		struct pa_prof_stats b = prof_now();
		unsigned char *p = pa_malloc(c.from);
		assert_non_null(p);
		tu_fill(p, c.from, i);
		unsigned char *q = pa_realloc(p, c.to);
		assert_non_null(q);
		assert_true(q != p);
		size_t keep = c.from < c.to ? c.from : c.to;
		TU_EQ(tu_pattern_break(q, keep, i), keep);
		struct pa_prof_stats st = prof_now();
		/* The old block's sample gone, the new block's taken. */
		TU_EQ(st.samples_total - b.samples_total, 2);
		TU_EQ(st.samples_live - b.samples_live, 1);
		TU_EQ(st.inuse_bytes - b.inuse_bytes, c.to);
		TU_EQ(pa_malloc_usable_size(q), unsampled_usable(c.to));
		pa_free(q);
		TU_EQ(prof_now().samples_live, b.samples_live);
	}
	tu_case = "";
}

static void calloc_of_a_sampled_block_reads_zero(void **state)
{
	(void)state;
	static const size_t sizes[] = {48, 64, 1000, 8192, 32768, 40000, 100000};
	sample_every_allocation();
	char name[64];
	tu_case = name;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		snprintf(name, sizeof(name), "calloc(1, %zu)", n);
		/* Dirty pages for the next sampled block of this size. */
		unsigned char *d = pa_malloc(n);
		assert_non_null(d);
		memset(d, 0xa5, pa_malloc_usable_size(d));
		pa_free(d);
		struct pa_prof_stats b = prof_now();
		unsigned char *p = pa_calloc(1, n);
		assert_non_null(p);
		TU_EQ(prof_now().samples_live - b.samples_live, 1);
		size_t nonzero = 0;
		for (size_t k = 0; k < n; k++)
			nonzero += p[k] != 0;
		TU_EQ(nonzero, 0);
		pa_free(p);
	}
	tu_case = "";
}

struct aligned {
	size_t align, n;
};

static void aligned_allocations_keep_their_alignment_when_sampled(void **state)
{
	(void)state;
	static const struct aligned cases[] = {
	    {64, 64},     {64, 100},     {64, 5000},     {64, 40000},
	    {4096, 100},  {4096, 5000},  {4096, 32768},  {4096, 40000},
	    {65536, 100}, {65536, 8192}, {65536, 40000}, {65536, 200000},
	};
	enum { NCASES = sizeof(cases) / sizeof(cases[0]) };
	size_t off[NCASES];
	pa_prof_active(0);
	for (size_t i = 0; i < NCASES; i++) {
		void *p = pa_aligned_alloc(cases[i].align, cases[i].n);
		assert_non_null(p);
		off[i] = pa_malloc_usable_size(p);
		pa_free(p);
	}
	sample_every_allocation();
	char name[64];
	tu_case = name;
	for (size_t i = 0; i < NCASES; i++) {
		struct aligned c = cases[i];
		snprintf(name, sizeof(name), "aligned_alloc(%zu, %zu)", c.align, c.n);
		struct pa_prof_stats b = prof_now();
		void *p = pa_aligned_alloc(c.align, c.n);
		assert_non_null(p);
		TU_EQ(prof_now().samples_live - b.samples_live, 1);
		TU_EQ((uintptr_t)p % c.align, 0);
		TU_EQ(pa_malloc_usable_size(p), off[i]);
		memset(p, 0x77, c.n);
		pa_free_aligned_sized(p, c.align, c.n);
		TU_EQ(prof_now().samples_live, b.samples_live);
	}
	tu_case = "";
}

/* ---- faults on sampled blocks (in a child, as test_malloc_faults.c) --------- */

/* src/span.c's texts, word for word. */
#define FOREIGN "not a live block of this heap (foreign pointer, or freed already)"
#define FREE_PAGE                                                                                  \
	"not a live block of this heap (on a free page of its own: a block freed already, or "     \
	"never "                                                                                   \
	"one)"
#define DOUBLE_FREE "block is already free (double free)"
/* 113 is class 128's: the block's is 112 (a sample, on a page of its own) */
#define BAD_SIZE                                                                                   \
	"wrong size: 113 bytes passed for a 112-byte block (size class 7, which holds 97 to 112 "  \
	"bytes)"

/* Written by the child: the pointer of the faulting call (MAP_SHARED). */
struct shared {
	uintptr_t ptr;
	int setup_failed;
};
static struct shared *shared;

/* A sampled block of n bytes, or the child gives up. */
static void *sampled_malloc(size_t n)
{
	size_t live = prof_now().samples_live;
	void *p = pa_malloc(n);
	if (p == NULL || prof_now().samples_live != live + 1) {
		shared->setup_failed = 1;
		_exit(3);
	}
	return p;
}

/* A sampled small block's page goes back to the page heap at its free: the
 * page map no longer knows it. */
static void sampled_small_double_free(void)
{
	void *p = sampled_malloc(64);
	pa_free(p);
	shared->ptr = (uintptr_t)p;
	pa_free(p);
}

/* A sampled large block waits in the thread's large slots after its free,
 * its alloc bit clear, as an unsampled one does. */
static void sampled_large_double_free(void)
{
	void *p = sampled_malloc(100000);
	pa_free(p);
	shared->ptr = (uintptr_t)p;
	pa_free(p);
}

static void sampled_small_free_sized_past_its_class(void)
{
	void *p = sampled_malloc(100);
	shared->ptr = (uintptr_t)p;
	pa_free_sized(p, pa_malloc_usable_size(p) + 1);
}

struct fault_case {
	const char *name;
	void (*run)(void);
	const char *func, *fault;
};

static const struct fault_case fault_cases[] = {
    {"sampled small block freed twice", sampled_small_double_free, "free", FREE_PAGE},
    {"sampled large block freed twice", sampled_large_double_free, "free", DOUBLE_FREE},
    {"sampled small block, free_sized past its class", sampled_small_free_sized_past_its_class,
     "free_sized", BAD_SIZE},
};

static void run_fault(void *arg)
{
	((const struct fault_case *)arg)->run();
}

static void a_fault_on_a_sampled_block_aborts_with_one_line_naming_it(void **state)
{
	(void)state;
	shared =
	    mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(shared != MAP_FAILED);
	sample_every_allocation();
	for (size_t i = 0; i < sizeof(fault_cases) / sizeof(fault_cases[0]); i++) {
		const struct fault_case *c = &fault_cases[i];
		tu_case = c->name;
		memset(shared, 0, sizeof(*shared));
		char err[1024];
		int status = tu_run_child(run_fault, (void *)c, err, sizeof(err));
		if (shared->setup_failed)
			fail_msg("%s: the child's block was not sampled", c->name);
		tu_expect_fault_line(c->name, status, err, c->func, shared->ptr, c->fault);
	}
	tu_case = "";
	munmap(shared, sizeof(*shared));
}

/* ---- pa_prof_active --------------------------------------------------------- */

struct rate {
	const char *prof_sample;
	size_t bytes_off; /* allocated while off: some samples were due */
};

static void prof_active_off_stops_new_samples_and_on_resumes_them(void **state)
{
	(void)state;
	/* 16 MiB at 512K: 32 samples were due; e^-32 that none was. */
	static const struct rate cases[] = {{"1", 64 * KIB}, {"512K", 16 * MIB}};
	char name[64];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sample_every_allocation();
		assert_int_equal(pa_config_set("prof_sample", cases[i].prof_sample), 0);
		snprintf(name, sizeof(name), "prof_sample=%s", cases[i].prof_sample);
		tu_case = name;
		/* Spend the draw of mean 1: the next is of this prof_sample,
		 * made while on; off, its expiry must not sample. */
		pa_free(pa_malloc(64));
		TU_EQ(pa_prof_active(-1), 1);
		TU_EQ(pa_prof_active(0), 1);
		TU_EQ(pa_prof_active(-1), 0);
		struct pa_prof_stats b = prof_now();
		for (size_t done = 0; done < cases[i].bytes_off; done += 64)
			pa_free(pa_malloc(64));
		void *big = pa_malloc(100000), *c = pa_calloc(1, 200),
		     *al = pa_aligned_alloc(4096, 100);
		assert_true(big != NULL && c != NULL && al != NULL);
		struct pa_prof_stats st = prof_now();
		TU_EQ(st.samples_total, b.samples_total);
		TU_EQ(st.samples_live, b.samples_live);
		TU_EQ(st.alloc_bytes, b.alloc_bytes);
		TU_EQ(pa_malloc_usable_size(big),
		      100000 / PA_PAGE_SIZE * PA_PAGE_SIZE + PA_PAGE_SIZE);
		pa_free(big);
		pa_free(c);
		pa_free(al);

		/* On again: the count drawn while off was 64 * prof_sample,
		 * so sampling resumes once that much more is allocated. */
		TU_EQ(pa_prof_active(1), 0);
		TU_EQ(pa_prof_active(-1), 1);
		size_t mean = strcmp(cases[i].prof_sample, "1") == 0 ? 1 : 512 * KIB;
		size_t done = 0;
		while (prof_now().samples_total == b.samples_total && done <= 64 * mean + 64) {
			pa_free(pa_malloc(100));
			done += 100;
		}
		if (prof_now().samples_total == b.samples_total)
			fail_msg("%s: no sample within %zu bytes of pa_prof_active(1)", name, done);
	}
	tu_case = "";
}

/* ---- pa_prof_dump ----------------------------------------------------------- */

struct bad_path {
	const char *name;
	const char *make; /* made first in the directory: "dir" or "file", or NULL */
	const char *path; /* relative to the directory */
	int err;
	const char *why; /* the warning's reason (msg_errno) */
};

static const struct bad_path bad_paths[] = {
    {"directory missing", NULL, "missing/heap.pb.gz", ENOENT, "no such file or directory"},
    {"parent is a file", "file", "file/heap.pb.gz", ENOTDIR, "not a directory"},
    {"path is a directory", "dir", "dir", EISDIR, "is a directory"},
};

struct dump_child {
	const char *path;
	int err;
};

/* Exit 0 when pa_prof_dump failed as it should; 4 it returned 0; 5 errno;
 * 6 the counts. */
static void dump_in_child(void *arg)
{
	const struct dump_child *d = arg;
	struct pa_prof_stats b = prof_now();
	errno = 0;
	int rc = pa_prof_dump(d->path);
	int err = errno;
	struct pa_prof_stats st = prof_now();
	if (rc != -1)
		_exit(4);
	if (err != d->err)
		_exit(5);
	if (st.write_errors != b.write_errors + 1 || st.files_written != b.files_written)
		_exit(6);
}

static void prof_dump_to_an_unwritable_path_fails_with_errno_and_leaves_no_file(void **state)
{
	(void)state;
	sample_every_allocation();
	void *live = pa_malloc(1000); /* the profile has a site */
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
		const struct bad_path *c = &bad_paths[i];
		tu_case = c->name;
		char dir[256], made[512], path[512], err[1024], want[600];
		temp_dir(dir, sizeof(dir));
		if (c->make != NULL) {
			snprintf(made, sizeof(made), "%s/%s", dir, c->make);
			if (strcmp(c->make, "dir") == 0)
				assert_int_equal(mkdir(made, 0700), 0);
			else
				assert_int_equal(close(open(made, O_CREAT | O_WRONLY, 0600)), 0);
		}
		snprintf(path, sizeof(path), "%s/%s", dir, c->path);
		struct dump_child d = {path, c->err};
		int status = tu_run_child(dump_in_child, &d, err, sizeof(err));
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail_msg("%s: child status %#x (4: returned 0, 5: errno, 6: counts); "
			         "stderr \"%s\"",
			         c->name, status, err);
		snprintf(want, sizeof(want), "pagealloc: heap profile '%s' not written: %s\n", path,
		         c->why);
		if (strcmp(err, want) != 0)
			fail_msg("%s: stderr is\n\"%s\"\nwant\n\"%s\"", c->name, err, want);
		/* Nothing left but what the case made: no temporary file. */
		TU_EQ(dir_entries(dir), c->make != NULL);
		if (c->make != NULL && strcmp(c->make, "dir") == 0) {
			TU_EQ(dir_entries(made), 0);
			rmdir(made);
		} else if (c->make != NULL) {
			unlink(made);
		}
		assert_int_equal(rmdir(dir), 0);
	}
	tu_case = "";
	pa_free(live);
}

static void prof_dump_writes_a_gzip_file_and_counts_it(void **state)
{
	(void)state;
	sample_every_allocation();
	void *live[2] = {site_a_malloc(1000), site_b_malloc(50000)};
	char dir[256], path[512];
	temp_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/heap.pb.gz", dir);
	char name[32];
	tu_case = name;
	/* Twice: the second replaces the first. */
	for (int k = 0; k < 2; k++) {
		snprintf(name, sizeof(name), "dump %d", k + 1);
		struct pa_prof_stats b = prof_now();
		errno = 1234;
		TU_EQ(pa_prof_dump(path), 0);
		TU_EQ(errno, 1234);
		struct pa_prof_stats st = prof_now();
		TU_EQ(st.files_written - b.files_written, 1);
		TU_EQ(st.write_errors, b.write_errors);
		unsigned char magic[2] = {0, 0};
		TU_EQ(file_magic(path, magic), 0);
		TU_EQ(magic[0], 0x1f);
		TU_EQ(magic[1], 0x8b);
		TU_EQ(dir_entries(dir), 1); /* no temporary file left */
	}
	tu_case = "";
	unlink(path);
	assert_int_equal(rmdir(dir), 0);
	pa_free(live[0]);
	pa_free(live[1]);
}

/* ---- the default rate ------------------------------------------------------- */

static void default_sampling_takes_one_sample_per_512k_allocated_within_4_sigma(void **state)
{
	(void)state;
	sample_every_allocation();
	assert_int_equal(pa_config_set("prof_sample", "512K"), 0);
	/* This malloc spends the draw of mean 1 (sampled but for odds
	 * e^-64); the next draw is of mean 512 KiB, and the count starts. */
	pa_free(pa_malloc(64));
	size_t before = prof_now().samples_total;
	for (size_t done = 0; done < 256 * MIB; done += 64)
		pa_free(pa_malloc(64));
	size_t got = prof_now().samples_total - before;
	print_message("256 MiB in 64-byte blocks at prof_sample=512K: %zu samples (want 512 "
	              "+- 90)\n",
	              got);
	if (got < 422 || got > 602)
		fail_msg("%zu samples of 256 MiB at prof_sample=512K, want 422..602 (512 +- 4 "
		         "standard deviations; a correct allocator fails this 1 run in 15,000)",
		         got);
	TU_EQ(prof_now().samples_live, 0);
}

int main(void)
{
	if (pa_config_set("scavenger", "off") != 0)
		return 1;
	const struct CMUnitTest tests[] = {
	    TU_TEST(stats_count_every_sample_by_site_and_forget_freed_ones),
	    TU_TEST(the_sites_table_starts_at_a_page_and_doubles_with_the_sites),
	    TU_TEST(a_sampled_block_has_the_usable_size_it_has_unsampled),
	    TU_TEST(free_sized_takes_a_sampled_block_with_its_requested_or_usable_size),
	    TU_TEST(realloc_of_a_sampled_block_moves_it_and_keeps_its_bytes),
	    TU_TEST(calloc_of_a_sampled_block_reads_zero),
	    TU_TEST(aligned_allocations_keep_their_alignment_when_sampled),
	    TU_TEST(a_fault_on_a_sampled_block_aborts_with_one_line_naming_it),
	    TU_TEST(prof_active_off_stops_new_samples_and_on_resumes_them),
	    TU_TEST(prof_dump_to_an_unwritable_path_fails_with_errno_and_leaves_no_file),
	    TU_TEST(prof_dump_writes_a_gzip_file_and_counts_it),
	    TU_TEST(default_sampling_takes_one_sample_per_512k_allocated_within_4_sigma),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
