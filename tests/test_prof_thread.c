/*
 * test_prof_thread.c — heap-profile samples taken and dropped by several
 * threads at once, profiles written meanwhile, and fork in the middle.
 *
 * Four workers allocate mixed sizes (mostly small, every 32nd large) at
 * prof_sample=4K, so that about one malloc in six is sampled and the
 * profiler's lock is busy. Each hands its blocks to the next worker's
 * mailbox, which frees them: a sample is taken by one thread and dropped by
 * another. Meanwhile a fifth thread writes the profile to a temporary file
 * with pa_prof_dump and reads pa_prof_stats, over and over; every dump must
 * succeed and the totals it reads must be consistent (no more live samples
 * than taken, samples_total never going back).
 *
 * Whether a block is sampled is read from the block itself: a sampled block
 * is a large span of its own (prof.h), so a small request whose span has
 * class 0, or a large one whose span points to a sample (span_sample). The
 * worker that allocates a block counts it if it is sampled, and the worker
 * that frees it counts it again before the free. At the end, every block
 * freed: samples_total grew by exactly the sampled blocks the allocating
 * threads saw, and by exactly those the freeing threads saw (no sample
 * lost, none counted twice, none left on an unsampled block);
 * samples_live, inuse_bytes and sample_bytes are 0 exactly; the workers
 * call pa_malloc from one place, so there is exactly one new site.
 *
 * The fork test runs the same workers and dumper without end while the main
 * thread forks: each child (single-threaded, whatever locks the parent's
 * threads held) must allocate until it takes a sample of its own
 * (samples_total grows in the child), write its profile with pa_prof_dump
 * (a gzip file), and exit 0. A child that hangs is killed by its alarm().
 *
 * The scavenger is off: a forked child would restart its thread, which
 * ThreadSanitizer refuses in the child of a threaded process.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>

#include "testutil.h"

#include "layout.h"
#include "pagealloc.h"
#include "pagemap.h"
#include "span.h"

#if TU_UNDER_SANITIZER
#define ROUNDS 20000.0
#define FORKS 20.0
#else
#define ROUNDS 200000.0
#define FORKS 100.0
#endif

#define WORKERS 4
#define MAILBOX 128
#define CHILD_ALARM_S 60

/* ---- helpers ---------------------------------------------------------------- */

static struct pa_prof_stats prof_now(void)
{
	struct pa_prof_stats st;
	memset(&st, 0, sizeof(st));
	pa_prof_stats(&st);
	return st;
}

/* Is live block p, asked for n bytes with pa_malloc, a sample? */
static int is_sampled(void *p, size_t n)
{
	struct pa_span *s = pagemap_lookup((uintptr_t)p);
	if (n <= PA_SC_MAX_SMALL)
		return s->cls == 0;
	return span_sample(s) != NULL;
}

static size_t mixed_size(uint64_t r)
{
	if (r % 32 == 0)
		return PA_SC_MAX_SMALL + 1 + (size_t)(r >> 8) % (96 << 10);
	return 1 + (size_t)(r >> 8) % (r % 3 == 0 ? 4096 : 256);
}

static void temp_dir(char *out, size_t cap)
{
	const char *base = getenv("TMPDIR");
	snprintf(out, cap, "%s/pa-prof-thread-XXXXXX", base != NULL && *base ? base : "/tmp");
	assert_non_null(mkdtemp(out));
}

static int file_is_gzip(const char *path)
{
	unsigned char m[2] = {0, 0};
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, m, 2);
	close(fd);
	return n == 2 && m[0] == 0x1f && m[1] == 0x8b;
}

/* ---- the workers ------------------------------------------------------------ */

struct block {
	unsigned char *p;
	size_t n;
	unsigned char fill;
};

/* Blocks handed to a worker to free. */
struct mailbox {
	pthread_mutex_t lock;
	unsigned count;
	struct block b[MAILBOX];
};

struct worker {
	pthread_t thread;
	unsigned id;
	uint64_t rng, rounds, limit;
	uint64_t sampled_alloc; /* blocks it allocated that were sampled */
	uint64_t sampled_free;  /* blocks it freed that were sampled */
	uint64_t bad;           /* NULL from malloc, or a broken pattern */
};

static struct mailbox mailboxes[WORKERS];
static struct worker workers[WORKERS];
static pthread_barrier_t drain_barrier;
static int stop; /* atomic: the fork test's workers and the dumper end */

/* The workers' one call site. */
static unsigned char *__attribute__((noinline)) worker_malloc(size_t n)
{
	unsigned char *p = pa_malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static void block_free(struct worker *w, struct block b)
{
	w->bad += b.p[0] != b.fill || b.p[b.n - 1] != b.fill;
	w->sampled_free += (uint64_t)is_sampled(b.p, b.n);
	pa_free(b.p);
}

/* Up to `max` blocks from w's own mailbox, freed. */
static void drain(struct worker *w, unsigned max)
{
	struct mailbox *m = &mailboxes[w->id];
	struct block got[MAILBOX];
	pthread_mutex_lock(&m->lock);
	unsigned n = m->count < max ? m->count : max;
	m->count -= n;
	memcpy(got, &m->b[m->count], n * sizeof(got[0]));
	pthread_mutex_unlock(&m->lock);
	for (unsigned i = 0; i < n; i++)
		block_free(w, got[i]);
}

static void *worker_loop(void *arg)
{
	struct worker *w = arg;
	struct mailbox *next = &mailboxes[(w->id + 1) % WORKERS];
	while (w->rounds < w->limit && !__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t r = tu_xorshift(&w->rng);
		struct block b = {NULL, mixed_size(r), (unsigned char)(r >> 56 | 1)};
		b.p = worker_malloc(b.n);
		w->rounds++;
		if (b.p == NULL) {
			w->bad++;
			continue;
		}
		b.p[0] = b.p[b.n - 1] = b.fill;
		w->sampled_alloc += (uint64_t)is_sampled(b.p, b.n);
		/* Mostly to the next worker; every 8th, or when its mailbox is
		 * full, freed here. */
		int handed = 0;
		if (r % 8 != 0) {
			pthread_mutex_lock(&next->lock);
			if (next->count < MAILBOX) {
				next->b[next->count++] = b;
				handed = 1;
			}
			pthread_mutex_unlock(&next->lock);
		}
		if (!handed)
			block_free(w, b);
		if (r % 4 == 0)
			drain(w, 8);
	}
	/* Nothing more is handed to anyone after the barrier. */
	pthread_barrier_wait(&drain_barrier);
	drain(w, MAILBOX);
	pa_thread_cache_flush();
	return NULL;
}

static void workers_start(uint64_t limit)
{
	assert_int_equal(pthread_barrier_init(&drain_barrier, NULL, WORKERS), 0);
	for (unsigned t = 0; t < WORKERS; t++) {
		assert_int_equal(pthread_mutex_init(&mailboxes[t].lock, NULL), 0);
		mailboxes[t].count = 0;
	}
	for (unsigned t = 0; t < WORKERS; t++) {
		memset(&workers[t], 0, sizeof(workers[t]));
		workers[t].id = t;
		workers[t].rng = 0x9e3779b97f4a7c15ull * (t + 1);
		workers[t].limit = limit;
		assert_int_equal(pthread_create(&workers[t].thread, NULL, worker_loop, &workers[t]),
		                 0);
	}
}

/* Join the workers; sums of what they saw. */
static void workers_join(uint64_t *sampled_alloc, uint64_t *sampled_free, uint64_t *rounds)
{
	*sampled_alloc = *sampled_free = *rounds = 0;
	for (unsigned t = 0; t < WORKERS; t++) {
		assert_int_equal(pthread_join(workers[t].thread, NULL), 0);
		TU_EQ(workers[t].bad, 0);
		TU_EQ(mailboxes[t].count, 0);
		*sampled_alloc += workers[t].sampled_alloc;
		*sampled_free += workers[t].sampled_free;
		*rounds += workers[t].rounds;
		pthread_mutex_destroy(&mailboxes[t].lock);
	}
	pthread_barrier_destroy(&drain_barrier);
}

/* ---- the dumper ------------------------------------------------------------- */

struct dumper {
	pthread_t thread;
	char path[512];
	uint64_t dumps, failed, inconsistent;
	int err; /* errno of the first failed dump */
};

static void *dumper_loop(void *arg)
{
	struct dumper *d = arg;
	size_t last_total = 0;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		if (pa_prof_dump(d->path) != 0 && d->failed++ == 0)
			d->err = errno;
		d->dumps++;
		struct pa_prof_stats st = prof_now();
		d->inconsistent +=
		    st.samples_live > st.samples_total || st.samples_total < last_total;
		last_total = st.samples_total;
	}
	return NULL;
}

static void dumper_start(struct dumper *d, const char *dir)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "%s/heap.pb.gz", dir);
	assert_int_equal(pthread_create(&d->thread, NULL, dumper_loop, d), 0);
}

static void dumper_join(struct dumper *d)
{
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(d->thread, NULL), 0);
	if (d->failed != 0)
		fail_msg("%" PRIu64 " of %" PRIu64 " dumps failed, the first with errno %d (%s)",
		         d->failed, d->dumps, d->err, strerror(d->err));
	TU_EQ(d->inconsistent, 0);
	assert_true(d->dumps > 0);
	assert_true(file_is_gzip(d->path));
	unlink(d->path);
}

/* After every block is freed: exact figures. */
static void expect_all_forgotten(const struct pa_prof_stats *before, uint64_t sampled_alloc,
                                 uint64_t sampled_free)
{
	struct pa_prof_stats st = prof_now();
	TU_EQ(st.samples_total - before->samples_total, sampled_alloc);
	TU_EQ(st.samples_total - before->samples_total, sampled_free);
	TU_EQ(st.samples_live, 0);
	TU_EQ(st.inuse_bytes, 0);
	TU_EQ(st.sample_bytes, 0);
}

/* ---- the tests -------------------------------------------------------------- */

static void four_threads_sampling_and_freeing_each_others_blocks_leave_exact_totals(void **state)
{
	(void)state;
	assert_int_equal(pa_config_set("prof", "on"), 0);
	assert_int_equal(pa_config_set("prof_sample", "4K"), 0);
	char dir[256];
	temp_dir(dir, sizeof(dir));
	struct pa_prof_stats before = prof_now();
	__atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
	struct dumper d;
	dumper_start(&d, dir);
	workers_start((uint64_t)(ROUNDS * tu_scale()));
	uint64_t sampled_alloc, sampled_free, rounds;
	workers_join(&sampled_alloc, &sampled_free, &rounds);
	dumper_join(&d);
	print_message("%" PRIu64 " mallocs, %" PRIu64 " sampled, %" PRIu64 " profiles written\n",
	              rounds, sampled_alloc, d.dumps);
	expect_all_forgotten(&before, sampled_alloc, sampled_free);
	/* About rounds / 6; e^-(thousands) that there are none. */
	assert_true(sampled_alloc > 0);
	/* All from worker_malloc's one stack. */
	TU_EQ(prof_now().sites - before.sites, 1);
	assert_int_equal(rmdir(dir), 0);
}

/* The child: allocate until a sample of its own is taken, then write the
 * profile. Exit 0; 2 out of memory; 3 no sample in 1 GiB; 4 the dump
 * failed; 5 not a gzip file. */
static void child_work(const char *path)
{
	alarm(CHILD_ALARM_S);
	size_t before = prof_now().samples_total;
	for (size_t done = 0; prof_now().samples_total == before; done += 64 << 10) {
		if (done >= ((size_t)1 << 30))
			_exit(3);
		void *p = pa_malloc(64 << 10), *q = pa_malloc(100);
		if (p == NULL || q == NULL)
			_exit(2);
		pa_free(p);
		pa_free(q);
	}
	if (pa_prof_dump(path) != 0)
		_exit(4);
	if (!file_is_gzip(path))
		_exit(5);
	_exit(0);
}

static void
fork_while_threads_sample_and_dump_leaves_the_child_able_to_sample_and_dump(void **state)
{
	(void)state;
	assert_int_equal(pa_config_set("prof", "on"), 0);
	assert_int_equal(pa_config_set("prof_sample", "4K"), 0);
	char dir[256], path[600];
	temp_dir(dir, sizeof(dir));
	struct pa_prof_stats before = prof_now();
	__atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
	struct dumper d;
	dumper_start(&d, dir);
	workers_start(UINT64_MAX);
	unsigned forks = (unsigned)(FORKS * tu_scale()), failed = 0;
	int first_status = 0;
	for (unsigned i = 0; i < forks; i++) {
		snprintf(path, sizeof(path), "%s/child.%u.pb.gz", dir, i);
		fflush(NULL);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			child_work(path);
		int status;
		while (waitpid(pid, &status, 0) < 0)
			assert_int_equal(errno, EINTR);
		if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && failed++ == 0)
			first_status = status;
		unlink(path);
	}
	uint64_t sampled_alloc, sampled_free, rounds;
	dumper_join(&d); /* sets stop: the workers end too */
	workers_join(&sampled_alloc, &sampled_free, &rounds);
	print_message("%u forks while the workers made %" PRIu64 " mallocs (%" PRIu64
	              " sampled) and %" PRIu64 " profiles were written\n",
	              forks, rounds, sampled_alloc, d.dumps);
	if (failed != 0)
		fail_msg("%u of %u children failed; the first: %s %d (exit 3: no sample, 4: "
		         "dump failed, 5: not gzip)",
		         failed, forks, WIFSIGNALED(first_status) ? "signal" : "exit status",
		         WIFSIGNALED(first_status) ? WTERMSIG(first_status)
		                                   : WEXITSTATUS(first_status));
	expect_all_forgotten(&before, sampled_alloc, sampled_free);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	if (pa_config_set("scavenger", "off") != 0)
		return 1;
	/* The heap is built before any thread starts: these tests are about
	 * samples, not about the first malloc racing the first dump. */
	pa_free(pa_malloc(1));
	const struct CMUnitTest tests[] = {
	    TU_TEST(four_threads_sampling_and_freeing_each_others_blocks_leave_exact_totals),
	    TU_TEST(fork_while_threads_sample_and_dump_leaves_the_child_able_to_sample_and_dump),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
