/*
 * test_malloc_thread_stats.c — what each thread allocated and freed
 * (pa_thread_stats, threadstats.h), exactly: a thread's own figures for
 * known sizes, small and large, a realloc that moves and frees of part of
 * them; a thread that frees another's blocks; the figures kept when threads
 * exit, the 64 that allocated the most each on its own row and the others
 * summed (one that allocated less than the table's least joins their sum); and named threads in the
 * heap's story, ranked by bytes allocated, live and exited, with their exact bytes.
 *
 * The tests share one process, so they run in this order: the exited
 * table's test first, while no thread has exited yet.
 */
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "testutil.h"

#include "pagealloc.h"
#include "stats_print.h"
#include "tcache.h"
#include "threadstats.h"

static int gettid_now(void)
{
	return (int)syscall(SYS_gettid);
}

static uint64_t class_size(size_t n)
{
	return pa_sizeclasses[pa_size_to_class(n)].size;
}

static struct pa_thread_stats thread_now(void)
{
	struct pa_thread_stats st;
	assert_int_equal(pa_thread_stats(&st), 0);
	return st;
}

/* ---- every thread's figures (tcache_each_figures) ------------------------ */

#define MAX_SEEN 256

struct seen {
	struct threadstats_figures f[MAX_SEEN];
	size_t n, exited;
	struct threadstats_figures others;
	uint64_t others_threads;
};

static void seen_note(const struct threadstats_figures *f, void *arg)
{
	struct seen *s = arg;
	if (!f->live)
		s->exited++;
	if (s->n < MAX_SEEN)
		s->f[s->n++] = *f;
}

static void seen_read(struct seen *s)
{
	memset(s, 0, sizeof(*s));
	tcache_each_figures(seen_note, s, &s->others, &s->others_threads);
}

static const struct threadstats_figures *seen_tid(const struct seen *s, int tid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->f[i].tid == tid)
			return &s->f[i];
	return NULL;
}

/* ---- threads that exit ----------------------------------------------------- */

#define EXITING 70
#define BLOCK_64K ((size_t)64 << 10)

struct exiting {
	unsigned blocks;
	int tid;
};

/* blocks 64 KiB blocks (large: 65536 usable bytes each), each freed. */
static void *exiting_thread(void *arg)
{
	struct exiting *e = arg;
	e->tid = gettid_now();
	for (unsigned k = 0; k < e->blocks; k++)
		pa_free(pa_malloc(BLOCK_64K));
	return NULL;
}

static void seventy_exited_threads_keep_the_64_largest_and_sum_the_others(void **state)
{
	(void)state;
	struct seen *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
	seen_read(before);
	TU_EQ(before->exited, 0); /* the first test: no thread has exited yet */
	TU_EQ(before->others_threads, 0);
	static struct exiting e[EXITING];
	for (unsigned k = 0; k < EXITING; k++) {
		/* thread k allocates k + 1 blocks: the 6 first are the least */
		e[k].blocks = k + 1;
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, exiting_thread, &e[k]), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
	}
	seen_read(after);
	TU_EQ(after->exited, THREADSTATS_EXITED);
	TU_EQ(after->others_threads, EXITING - THREADSTATS_EXITED);
	uint64_t others_blocks = 0;
	for (unsigned k = 0; k < EXITING - THREADSTATS_EXITED; k++) {
		TU_EQ(seen_tid(after, e[k].tid) == NULL || seen_tid(after, e[k].tid)->live, 1);
		others_blocks += e[k].blocks;
	}
	for (unsigned k = EXITING - THREADSTATS_EXITED; k < EXITING; k++) {
		tu_case = "a kept exited thread";
		const struct threadstats_figures *f = seen_tid(after, e[k].tid);
		assert_non_null(f);
		TU_EQ(f->live, 0);
		TU_EQ(f->alloc_count, e[k].blocks);
		TU_EQ(f->free_count, e[k].blocks);
		TU_EQ(f->alloc_bytes, e[k].blocks * BLOCK_64K);
		TU_EQ(f->free_bytes, e[k].blocks * BLOCK_64K);
		TU_EQ(f->requested, e[k].blocks * BLOCK_64K);
	}
	tu_case = "";
	TU_EQ(after->others.alloc_count, others_blocks);
	TU_EQ(after->others.alloc_bytes, others_blocks * BLOCK_64K);
	TU_EQ(after->others.free_bytes, others_blocks * BLOCK_64K);
	free(before);
	free(after);
}

/* ---- a thread's own figures ------------------------------------------------ */

struct own {
	struct pa_thread_stats first, last;
	int tid;
};

/* 10 blocks of 100 bytes, 3 of 1000, one of 200000 (large); a realloc of
 * a 100-byte block to 5000 (it moves: a malloc and a free); 4 of the
 * 100-byte blocks and the large one freed. */
static void *own_thread(void *arg)
{
	struct own *o = arg;
	o->tid = gettid_now();
	o->first = thread_now();
	void *a[10], *b[3];
	for (int k = 0; k < 10; k++)
		a[k] = pa_malloc(100);
	for (int k = 0; k < 3; k++)
		b[k] = pa_malloc(1000);
	void *big = pa_malloc(200000);
	void *moved = pa_realloc(a[9], 5000);
	assert_true(moved != a[9]);
	for (int k = 0; k < 4; k++)
		pa_free(a[k]);
	size_t big_usable = pa_malloc_usable_size(big);
	TU_EQ(big_usable,
	      200000 + PA_PAGE_BYTES - 1 - (200000 + PA_PAGE_BYTES - 1) % PA_PAGE_BYTES);
	pa_free(big);
	o->last = thread_now();
	struct pa_thread_stats want = {
	    .mallocs = 10 + 3 + 1 + 1,
	    .frees = 1 + 4 + 1,
	    .allocated =
	        10 * class_size(100) + 3 * class_size(1000) + big_usable + class_size(5000),
	    .freed = 5 * class_size(100) + big_usable,
	    .requested = 10 * 100 + 3 * 1000 + 200000 + 5000,
	};
	TU_EQ(o->last.mallocs, want.mallocs);
	TU_EQ(o->last.frees, want.frees);
	TU_EQ(o->last.allocated, want.allocated);
	TU_EQ(o->last.freed, want.freed);
	TU_EQ(o->last.requested, want.requested);
	/* pa_malloc_stats changes nothing in them */
	struct pa_malloc_stats ms;
	pa_malloc_stats(&ms);
	struct pa_thread_stats again = thread_now();
	TU_EQ(memcmp(&again, &o->last, sizeof(again)), 0);
	for (int k = 4; k < 9; k++)
		pa_free(a[k]);
	for (int k = 0; k < 3; k++)
		pa_free(b[k]);
	pa_free(moved);
	return NULL;
}

static void a_threads_own_figures_are_exact_and_kept_at_its_exit(void **state)
{
	(void)state;
	struct seen *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
	seen_read(before);
	struct own o;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, own_thread, &o), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* Before its first malloc the thread had no cache: nothing counted. */
	TU_EQ(o.first.mallocs, 0);
	TU_EQ(o.first.allocated, 0);
	/* At its exit every block is freed: freed = allocated. It allocated
	 * less than the least of the full table (the previous test's), so it
	 * joins the others' row. */
	seen_read(after);
	TU_EQ(seen_tid(after, o.tid) == NULL, 1);
	TU_EQ(after->others_threads - before->others_threads, 1);
	TU_EQ(after->others.alloc_count - before->others.alloc_count, o.last.mallocs);
	TU_EQ(after->others.alloc_bytes - before->others.alloc_bytes, o.last.allocated);
	TU_EQ(after->others.requested - before->others.requested, o.last.requested);
	TU_EQ(after->others.free_count - before->others.free_count, o.last.mallocs);
	TU_EQ(after->others.free_bytes - before->others.free_bytes, o.last.allocated);
	free(before);
	free(after);
}

/* ---- frees of another thread's blocks -------------------------------------- */

#define HANDED 500

static void *handed[HANDED];

static void *producer(void *arg)
{
	for (int k = 0; k < HANDED; k++)
		handed[k] = pa_malloc(64);
	*(struct pa_thread_stats *)arg = thread_now();
	return NULL;
}

static void *consumer(void *arg)
{
	for (int k = 0; k < HANDED; k++)
		pa_free(handed[k]);
	*(struct pa_thread_stats *)arg = thread_now();
	return NULL;
}

static void a_thread_freeing_anothers_blocks_counts_them_as_its_frees(void **state)
{
	(void)state;
	struct pa_thread_stats made, freed;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, producer, &made), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(pthread_create(&t, NULL, consumer, &freed), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	TU_EQ(made.mallocs, HANDED);
	TU_EQ(made.allocated, HANDED * 64);
	TU_EQ(made.frees, 0);
	TU_EQ(made.freed, 0);
	TU_EQ(freed.mallocs, 0);
	TU_EQ(freed.allocated, 0);
	TU_EQ(freed.frees, HANDED);
	TU_EQ(freed.freed, HANDED * 64);
}

/* ---- named threads in the story ------------------------------------------- */

#define MIB ((size_t)1 << 20)

struct named {
	const char *name;
	unsigned blocks; /* 1 MiB blocks allocated, all freed but the last
	                  * when it stays */
	int stays;       /* live while the story is read */
	int tid;
	sem_t ready, done;
};

static void *named_thread(void *arg)
{
	struct named *n = arg;
	n->tid = gettid_now();
	void *p = pa_malloc(MIB);
	/* named after its cache was built: the story reads the name anew */
	pthread_setname_np(pthread_self(), n->name);
	for (unsigned k = 1; k < n->blocks; k++) {
		pa_free(p);
		p = pa_malloc(MIB);
	}
	if (!n->stays) {
		pa_free(p);
		return NULL;
	}
	sem_post(&n->ready);
	sem_wait(&n->done);
	pa_free(p);
	return NULL;
}

/* The story's row for a thread, as stats_print.c writes it. */
static void story_row(char *buf, size_t cap, const struct named *n, uint64_t freed_blocks)
{
	uint64_t alloc = n->blocks * MIB, freed = freed_blocks * MIB;
	snprintf(buf, cap, "%10d  %-21s%15" PRIu64 "%16" PRIu64 "%16" PRIu64 "  %s\n", n->tid,
	         n->name, alloc, freed, alloc - freed, n->stays ? "live" : "exited");
}

static void named_threads_lead_the_storys_threads_with_exact_bytes(void **state)
{
	(void)state;
	/* More than any other thread of this process allocates. */
	static struct named n[] = {
	    {.name = "ts-big-50", .blocks = 50},
	    {.name = "ts-big-70-live", .blocks = 70, .stays = 1},
	    {.name = "ts-big-60", .blocks = 60},
	};
	pthread_t t[3];
	for (int k = 0; k < 3; k++) {
		sem_init(&n[k].ready, 0, 0);
		sem_init(&n[k].done, 0, 0);
		assert_int_equal(pthread_create(&t[k], NULL, named_thread, &n[k]), 0);
		if (n[k].stays)
			sem_wait(&n[k].ready);
		else
			assert_int_equal(pthread_join(t[k], NULL), 0);
	}
	static char story[1 << 16];
	size_t len = stats_print_render(story, sizeof(story) - 1);
	story[len] = '\0';
	const char *head = strstr(story, "top threads by bytes allocated");
	assert_non_null(head);
	/* the header, its column names, then the three, the most first */
	const char *row = strchr(strchr(head, '\n') + 1, '\n') + 1;
	const struct {
		int k;
		uint64_t freed_blocks;
	} order[] = {{1, 69}, {2, 60}, {0, 50}};
	for (int i = 0; i < 3; i++) {
		char want[256];
		story_row(want, sizeof(want), &n[order[i].k], order[i].freed_blocks);
		if (strncmp(row, want, strlen(want)) != 0)
			fail_msg("row %d of the threads is\n%.*s\nwant\n%s", i,
			         (int)(strchr(row, '\n') - row + 1), row, want);
		row += strlen(want);
	}
	sem_post(&n[1].done);
	assert_int_equal(pthread_join(t[1], NULL), 0);
	for (int k = 0; k < 3; k++) {
		sem_destroy(&n[k].ready);
		sem_destroy(&n[k].done);
	}
}

static void null_is_einval(void **state)
{
	(void)state;
	errno = 0;
	TU_EQ(pa_thread_stats(NULL), -1);
	TU_EQ(errno, EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(seventy_exited_threads_keep_the_64_largest_and_sum_the_others),
	    TU_TEST(a_threads_own_figures_are_exact_and_kept_at_its_exit),
	    TU_TEST(a_thread_freeing_anothers_blocks_counts_them_as_its_frees),
	    TU_TEST(named_threads_lead_the_storys_threads_with_exact_bytes),
	    TU_TEST(null_is_einval),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
