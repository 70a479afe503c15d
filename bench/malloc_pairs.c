/*
 * malloc_pairs.c — the cost of malloc+free, one program for every allocator.
 *
 * The source calls plain malloc and free and is built twice (bench/malloc.cmake):
 *
 *   malloc-pairs       force-includes bench/pa_as_malloc.h, so every call goes
 *                      to pa_malloc/pa_free (linked with libpagealloc.a);
 *   malloc-pairs-libc  calls the C library's malloc, so LD_PRELOAD of
 *                      jemalloc, tcmalloc or mimalloc replaces it.
 *
 * Cases, each timed with CLOCK_MONOTONIC over a fixed number of iterations
 * and repeated; the median of the repetitions is the figure:
 *
 *   pair     malloc(size), write its first byte, free it; one thread.
 *            Sizes 16 B .. 1 MiB. Only the first byte is written (through a
 *            volatile pointer, so the compiler cannot drop the allocation):
 *            writing every page of a large block would time page faults.
 *   pair-mt  the same loop in two threads at once; ns per pair per thread
 *            (the wall time of both divided by one thread's pairs).
 *   xthread  a producer thread mallocs objects of mixed sizes (16..1024 B,
 *            reported as size=0) and passes them through a bounded
 *            single-producer single-consumer ring to a consumer thread that
 *            frees them: the remote-free path. ns per object. With
 *            --size, every object is that size (size=BYTES: one class, as
 *            mimalloc's and tcmalloc's cross-thread benchmarks do).
 *
 * Usage:
 *   malloc-pairs [--reps R] [--iters N] [--case pair|pair-mt|xthread] [--size BYTES]
 *   malloc-pairs --callgrind-pair SIZE N
 *
 * One line per case and size:
 *   case=pair size=64 threads=1 ns_per_op=9.81 min=9.70 max=10.12 iters=20000000 reps=5
 *
 * Without --iters each case first calibrates its iteration count so that all
 * its repetitions together take about 0.2 s (one repetition at least 20 ms);
 * calibrating also warms the allocator up. The count is printed (iters=), so
 * a run can be repeated with exactly the same work.
 *
 * --callgrind-pair warms up with 1000 pairs, then does N pairs of SIZE in
 * pair_loop() and nothing else, for
 *   valgrind --tool=callgrind --toggle-collect=pair_loop malloc-pairs --callgrind-pair 64 100000
 * whose total divided by N is instructions per pair (tools/bench-malloc.sh).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TARGET_CASE_NS 200000000.0 /* all repetitions of one case: 0.2 s */
#define MIN_REP_NS 20000000.0      /* one repetition, at least: 20 ms */
#define MAX_REPS 101
#define RING_SLOTS 1024             /* xthread ring capacity, a power of two */
#define RING_BATCH (RING_SLOTS / 4) /* a side that had to wait waits for this many */
#define RING_PUBLISH 32             /* each side stores its index every this many objects */
#define MIXED_SIZES 4096            /* xthread's size table, a power of two */
#define MIXED_MIN_BYTES 16          /* ... its sizes lie in [MIXED_MIN_BYTES, MIXED_MAX_BYTES] */
#define MIXED_MAX_BYTES 1024

#if defined(__clang__)
#define NOCLONE
#else
#define NOCLONE __attribute__((noclone))
#endif

static const size_t pair_sizes[] = {16, 64, 256, 1024, 4096, 32768, 262144, 1048576};
#define NPAIR_SIZES (sizeof(pair_sizes) / sizeof(pair_sizes[0]))

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void out_of_memory(size_t size)
{
	fprintf(stderr, "malloc-pairs: malloc(%zu) returned NULL\n", size);
	exit(1);
}

/* A volatile store: the allocation is observable and cannot be elided. */
static inline void touch(void *p, unsigned long i)
{
	*(volatile unsigned char *)p = (unsigned char)i;
}

/* Extern, never inlined nor cloned: callgrind toggles collection on this name. */
void pair_loop(size_t size, unsigned long n);

__attribute__((noinline)) NOCLONE void pair_loop(size_t size, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		void *p = malloc(size);
		if (p == NULL)
			out_of_memory(size);
		touch(p, i);
		free(p);
	}
}

/* ---- pair-mt -------------------------------------------------------------- */

struct pair_job {
	size_t size;
	unsigned long iters;
	pthread_barrier_t *start;
	uint64_t t0, t1;
};

static void *pair_thread(void *arg)
{
	struct pair_job *job = arg;
	pthread_barrier_wait(job->start);
	job->t0 = now_ns();
	pair_loop(job->size, job->iters);
	job->t1 = now_ns();
	return NULL;
}

/* Wall time of nthreads threads that each do iters pairs, divided by iters. */
static double run_pairs_threads(size_t size, unsigned long iters, int nthreads)
{
	pthread_t tid[2];
	struct pair_job job[2];
	pthread_barrier_t start;

	pthread_barrier_init(&start, NULL, (unsigned)nthreads);
	for (int t = 0; t < nthreads; t++) {
		job[t] = (struct pair_job){.size = size, .iters = iters, .start = &start};
		if (pthread_create(&tid[t], NULL, pair_thread, &job[t]) != 0) {
			fprintf(stderr, "malloc-pairs: pthread_create failed\n");
			exit(1);
		}
	}
	uint64_t first = UINT64_MAX, last = 0;
	for (int t = 0; t < nthreads; t++) {
		pthread_join(tid[t], NULL);
		first = job[t].t0 < first ? job[t].t0 : first;
		last = job[t].t1 > last ? job[t].t1 : last;
	}
	pthread_barrier_destroy(&start);
	return (double)(last - first) / (double)iters;
}

static double run_pairs(size_t size, unsigned long iters, int nthreads)
{
	if (nthreads > 1)
		return run_pairs_threads(size, iters, nthreads);
	uint64_t t0 = now_ns();
	pair_loop(size, iters);
	return (double)(now_ns() - t0) / (double)iters;
}

/* ---- xthread: malloc in one thread, free in another ----------------------- */

/* Single producer, single consumer. Each side caches the other's index and
 * reloads it only when the ring looks full (producer) or empty (consumer);
 * it then waits for RING_BATCH slots, not one, and each side publishes its
 * index every RING_PUBLISH objects, so the two threads do not hand the index
 * lines back and forth per object (which would time the interconnect, not the
 * allocator). Object memory still moves between the cores: that is the case. */
struct ring {
	_Alignas(64) atomic_ulong head; /* next slot to fill: written by the producer */
	_Alignas(64) atomic_ulong tail; /* next slot to empty: written by the consumer */
	_Alignas(64) void *slot[RING_SLOTS];
};

struct xthread_job {
	struct ring *ring;
	unsigned long n;
	const unsigned short *sizes;
	pthread_barrier_t *start;
	uint64_t t0, t1;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Spin a little (polling slowly, so as not to pull the other side's index
 * line away from it at every store), then let the other thread have the core: with two cores
 * and other load on the machine, pure spinning can stall for a time slice. */
static void ring_wait(unsigned *spins)
{
	if (++*spins > 64) {
		sched_yield();
		*spins = 0;
		return;
	}
	for (int k = 0; k < 32; k++)
		cpu_relax();
}

static void *xthread_producer(void *arg)
{
	struct xthread_job *job = arg;
	struct ring *r = job->ring;
	unsigned long tail_seen = 0;

	pthread_barrier_wait(job->start);
	job->t0 = now_ns();
	for (unsigned long i = 0; i < job->n; i++) {
		size_t size = job->sizes[i & (MIXED_SIZES - 1)];
		void *p = malloc(size);
		if (p == NULL)
			out_of_memory(size);
		touch(p, i);
		if (i - tail_seen == RING_SLOTS) {
			unsigned spins = 0;
			for (;;) {
				tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
				if (RING_SLOTS - (i - tail_seen) >= RING_BATCH)
					break;
				ring_wait(&spins);
			}
		}
		r->slot[i & (RING_SLOTS - 1)] = p;
		if ((i + 1) % RING_PUBLISH == 0 || i + 1 == job->n)
			atomic_store_explicit(&r->head, i + 1, memory_order_release);
	}
	return NULL;
}

static void *xthread_consumer(void *arg)
{
	struct xthread_job *job = arg;
	struct ring *r = job->ring;
	unsigned long head_seen = 0;

	pthread_barrier_wait(job->start);
	for (unsigned long i = 0; i < job->n; i++) {
		if (i == head_seen) {
			unsigned long want = job->n - i < RING_BATCH ? job->n - i : RING_BATCH;
			unsigned spins = 0;
			for (;;) {
				head_seen = atomic_load_explicit(&r->head, memory_order_acquire);
				if (head_seen - i >= want)
					break;
				ring_wait(&spins);
			}
		}
		free(r->slot[i & (RING_SLOTS - 1)]);
		if ((i + 1) % RING_PUBLISH == 0)
			atomic_store_explicit(&r->tail, i + 1, memory_order_release);
	}
	job->t1 = now_ns();
	return NULL;
}

static unsigned short mixed_sizes[MIXED_SIZES];

/* fixed != 0: every object of xthread is fixed bytes. */
static void mixed_sizes_init(size_t fixed)
{
	if (fixed != 0) {
		for (int i = 0; i < MIXED_SIZES; i++)
			mixed_sizes[i] = (unsigned short)fixed;
		return;
	}
	uint64_t x = 0x9e3779b97f4a7c15u; /* xorshift64: the same sizes every run */
	for (int i = 0; i < MIXED_SIZES; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		mixed_sizes[i] =
		    (unsigned short)(MIXED_MIN_BYTES + x % (MIXED_MAX_BYTES - MIXED_MIN_BYTES + 1));
	}
}

/* ns per object from the producer's first malloc to the consumer's last free. */
static double run_xthread(unsigned long n)
{
	static struct ring ring;
	pthread_barrier_t start;
	struct xthread_job job = {.ring = &ring, .n = n, .sizes = mixed_sizes, .start = &start};
	struct xthread_job cjob = job;
	pthread_t prod, cons;

	atomic_store(&ring.head, 0);
	atomic_store(&ring.tail, 0);
	pthread_barrier_init(&start, NULL, 2);
	if (pthread_create(&prod, NULL, xthread_producer, &job) != 0 ||
	    pthread_create(&cons, NULL, xthread_consumer, &cjob) != 0) {
		fprintf(stderr, "malloc-pairs: pthread_create failed\n");
		exit(1);
	}
	pthread_join(prod, NULL);
	pthread_join(cons, NULL);
	pthread_barrier_destroy(&start);
	return (double)(cjob.t1 - job.t0) / (double)n;
}

/* ---- cases, calibration, statistics --------------------------------------- */

struct bench_case {
	const char *name;
	int threads;
	int sized; /* runs once per pair_sizes[] entry; else once, size=0 */
};

static const struct bench_case cases[] = {
    {"pair", 1, 1},
    {"pair-mt", 2, 1},
    {"xthread", 2, 0},
};

static double run_case(const struct bench_case *c, size_t size, unsigned long iters)
{
	if (!c->sized)
		return run_xthread(iters);
	return run_pairs(size, iters, c->threads);
}

/* Two significant digits: iteration counts that read well in the output. */
static unsigned long round_iters(double x)
{
	unsigned long scale = 1;
	while (x >= 100.0) {
		x /= 10.0;
		scale *= 10;
	}
	unsigned long v = (unsigned long)(x + 0.5) * scale;
	return v < 1000 ? 1000 : v;
}

/* Grow the iteration count until one run takes a measurable time (10 ms),
 * then scale it to the time budget of one repetition. An allocator's first
 * runs can be much slower than its steady state (heap growth, a lock that
 * starts out contended), so the estimate is only kept once it comes from a
 * run of at least a quarter of the budget; else it is taken again, up to
 * three times. */
static unsigned long calibrate(const struct bench_case *c, size_t size, int reps)
{
	double rep_ns = TARGET_CASE_NS / reps;
	if (rep_ns < MIN_REP_NS)
		rep_ns = MIN_REP_NS;
	unsigned long iters = 1000;
	double ns;
	for (int pass = 0;; pass++) {
		for (;;) {
			ns = run_case(c, size, iters);
			if (ns * (double)iters >= 10000000.0 || iters >= (1ul << 32))
				break;
			iters *= 4;
		}
		if (ns < 0.01)
			ns = 0.01;
		if (ns * (double)iters >= rep_ns / 4 || pass == 2)
			return round_iters(rep_ns / ns);
		iters = (unsigned long)(rep_ns / 4 / ns) + 1;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void measure(const struct bench_case *c, size_t size, int reps, unsigned long iters)
{
	double ns[MAX_REPS];

	if (iters == 0)
		iters = calibrate(c, size, reps);
	for (int r = 0; r < reps; r++)
		ns[r] = run_case(c, size, iters);
	qsort(ns, (size_t)reps, sizeof(ns[0]), cmp_double);
	double median = reps % 2 ? ns[reps / 2] : (ns[reps / 2 - 1] + ns[reps / 2]) / 2;
	printf("case=%s size=%zu threads=%d ns_per_op=%.2f min=%.2f max=%.2f iters=%lu reps=%d\n",
	       c->name, size, c->threads, median, ns[0], ns[reps - 1], iters, reps);
	fflush(stdout);
}

/* ---- command line --------------------------------------------------------- */

static void usage(const char *prog)
{
	fprintf(stderr,
	        "usage: %s [--reps R] [--iters N] [--case pair|pair-mt|xthread] [--size BYTES]\n"
	        "       %s --callgrind-pair SIZE N\n",
	        prog, prog);
	exit(2);
}

static unsigned long parse_number(const char *prog, const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (*s == '\0' || *end != '\0')
		usage(prog);
	return v;
}

static int callgrind_pair(size_t size, unsigned long n)
{
	/* Warm up outside pair_loop: symbol binding, heap and thread-cache setup. */
	for (unsigned long i = 0; i < 1000; i++) {
		void *p = malloc(size);
		if (p == NULL)
			out_of_memory(size);
		touch(p, i);
		free(p);
	}
	pair_loop(size, n);
	printf("callgrind-pair size=%zu n=%lu\n", size, n);
	return 0;
}

int main(int argc, char **argv)
{
	int reps = 5;
	unsigned long iters = 0;
	const char *only_case = NULL;
	size_t only_size = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--callgrind-pair") == 0 && i + 2 < argc)
			return callgrind_pair(parse_number(argv[0], argv[i + 1]),
			                      parse_number(argv[0], argv[i + 2]));
		if (i + 1 >= argc)
			usage(argv[0]);
		if (strcmp(a, "--reps") == 0)
			reps = (int)parse_number(argv[0], argv[++i]);
		else if (strcmp(a, "--iters") == 0)
			iters = parse_number(argv[0], argv[++i]);
		else if (strcmp(a, "--case") == 0)
			only_case = argv[++i];
		else if (strcmp(a, "--size") == 0)
			only_size = parse_number(argv[0], argv[++i]);
		else
			usage(argv[0]);
	}
	if (reps < 1 || reps > MAX_REPS) {
		fprintf(stderr, "%s: --reps must be 1..%d\n", argv[0], MAX_REPS);
		return 2;
	}

	if (only_size > 65535) {
		fprintf(stderr, "%s: --size must be at most 65535\n", argv[0]);
		return 2;
	}
	mixed_sizes_init(only_case != NULL && strcmp(only_case, "xthread") == 0 ? only_size : 0);
	int ran = 0;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct bench_case *bc = &cases[c];
		if (only_case != NULL && strcmp(only_case, bc->name) != 0)
			continue;
		if (!bc->sized) {
			if (only_size != 0 && only_case == NULL)
				continue;
			measure(bc, only_size, reps, iters);
			ran++;
			continue;
		}
		for (size_t s = 0; s < NPAIR_SIZES; s++) {
			if (only_size != 0 && only_size != pair_sizes[s])
				continue;
			measure(bc, pair_sizes[s], reps, iters);
			ran++;
		}
	}
	if (ran == 0) {
		fprintf(stderr, "%s: no case matches\n", argv[0]);
		return 2;
	}
	return 0;
}
