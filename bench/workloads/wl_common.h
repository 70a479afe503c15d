/*
 * wl_common.h — what every comparison workload shares (bench/workloads/).
 *
 * The workloads are plain programs: they call malloc/free/new/delete and link
 * nothing of libpagealloc, so one binary runs on glibc and, through
 * LD_PRELOAD, on jemalloc, tcmalloc, mimalloc and libpagealloc-preload.so
 * (tools/compare.sh). This header is everything they have in common, as
 * static inline functions (C11 and C++17 both include it):
 *
 *   wl_die         print "wl-NAME: message" and exit 1: a failed self-check
 *   wl_xmalloc     malloc that dies on NULL
 *   wl_xmalloc_lines  the same, 64-byte aligned and a whole number of cache
 *                  lines: arrays of per-thread records that must not share
 *                  a line (one thread's writes would slow its neighbours: the
 *                  harness's false sharing would be measured, not malloc)
 *   wl_rng         a seeded xorshift64* generator, and log-uniform sizes
 *   wl_rss_bytes   the resident set from /proc/self/statm (the OS's view)
 *   wl_trim        malloc_trim(0) where the running allocator has one (found
 *                  with dlsym and checked with dladdr to live in the same
 *                  object as malloc: glibc's malloc_trim would otherwise be
 *                  found under a preloaded jemalloc and trim an unused arena)
 *   wl_tracer      a helper thread that samples RSS every 50 ms into a buffer
 *                  allocated up front, written as "t_ms rss_bytes live_bytes"
 *                  lines to the --trace file when stopped
 *   wl_args        --quick, --trace FILE and NAME=VALUE numeric overrides
 *
 * Each program prints one result line, "wl-NAME ok key=value ...": a key
 * ending in _s, _mib or _ratio is a figure tools/compare.sh tabulates.
 */
#ifndef WL_COMMON_H
#define WL_COMMON_H

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WL_MIB (1024.0 * 1024.0)
#define WL_TRACE_PERIOD_MS 50
#define WL_TRACE_MAX_SAMPLES (1 << 16) /* 54 minutes at 50 ms */

static const char *wl_name = "wl";

static inline void wl_die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", wl_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static inline void *wl_xmalloc(size_t size)
{
	void *p = malloc(size);
	if (p == NULL)
		wl_die("malloc(%zu) returned NULL", size);
	return p;
}

#define WL_LINE 64

static inline void *wl_xmalloc_lines(size_t size)
{
	void *p = aligned_alloc(WL_LINE, (size + WL_LINE - 1) / WL_LINE * WL_LINE);
	if (p == NULL)
		wl_die("aligned_alloc(%zu) returned NULL", size);
	return p;
}

static inline uint64_t wl_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void wl_sleep_ms(unsigned ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- random numbers: xorshift64*, one state per thread ------------------- */

typedef struct {
	uint64_t s;
} wl_rng;

static inline wl_rng wl_rng_seed(uint64_t seed)
{
	wl_rng r = {seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull};
	if (r.s == 0)
		r.s = 1;
	return r;
}

static inline uint64_t wl_rand(wl_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, n). */
static inline uint64_t wl_below(wl_rng *r, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)wl_rand(r) * n) >> 64);
}

/* Log-uniform in [lo, hi]: a power of two picked uniformly, then uniform
 * inside it (no libm needed). lo and hi must be powers of two. */
static inline size_t wl_logsize(wl_rng *r, size_t lo, size_t hi)
{
	unsigned lo_bits = (unsigned)__builtin_ctzll(lo), hi_bits = (unsigned)__builtin_ctzll(hi);
	unsigned b = lo_bits + (unsigned)wl_below(r, hi_bits - lo_bits + 1);
	size_t base = (size_t)1 << b;
	if (b == hi_bits)
		return base;
	return base + (size_t)wl_below(r, base);
}

/* Tagged objects (wl-small, wl-threads, wl-larson): the first 8 bytes hold
 * owner << 50 | seq << 12 | size and the last byte the tag's bits 12..19, so
 * whoever frees the object checks that no other block overwrote it. size is
 * 8..4095. */
#define WL_TAG_SIZE_BITS 12

static inline uint64_t wl_tag_new(void *obj, size_t owner, uint64_t seq, size_t size)
{
	unsigned char *p = (unsigned char *)obj;
	uint64_t tag = (uint64_t)owner << 50 | seq << WL_TAG_SIZE_BITS | size;
	memcpy(p, &tag, sizeof(tag));
	p[size - 1] = (unsigned char)(tag >> WL_TAG_SIZE_BITS);
	return tag;
}

/* Check object obj (sizes min..max), free it, return its tag. */
static inline uint64_t wl_tag_free(void *obj, size_t min, size_t max)
{
	unsigned char *p = (unsigned char *)obj;
	uint64_t tag;
	memcpy(&tag, p, sizeof(tag));
	size_t size = tag & ((1u << WL_TAG_SIZE_BITS) - 1);
	if (size < min || size > max || p[size - 1] != (unsigned char)(tag >> WL_TAG_SIZE_BITS))
		wl_die("object %llx corrupted", (unsigned long long)tag);
	free(p);
	return tag;
}

/* ---- memory as the OS sees it --------------------------------------------- */

static inline size_t wl_rss_bytes(void)
{
	unsigned long size, resident;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f == NULL)
		return 0;
	int n = fscanf(f, "%lu %lu", &size, &resident);
	fclose(f);
	if (n != 2)
		return 0;
	return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static inline double wl_rss_mib(void)
{
	return (double)wl_rss_bytes() / WL_MIB;
}

/* malloc_trim(0) if the allocator in use has it; returns 1 if it ran. */
static inline int wl_trim(void)
{
	union {
		void *obj;
		int (*fn)(size_t);
	} trim;
	Dl_info trim_info, malloc_info;
	trim.obj = dlsym(RTLD_DEFAULT, "malloc_trim");
	void *m = dlsym(RTLD_DEFAULT, "malloc");
	if (trim.obj == NULL || m == NULL || dladdr(trim.obj, &trim_info) == 0 ||
	    dladdr(m, &malloc_info) == 0 || trim_info.dli_fbase != malloc_info.dli_fbase)
		return 0;
	trim.fn(0);
	return 1;
}

/* ---- RSS over time ------------------------------------------------------------ */

struct wl_sample {
	uint32_t t_ms;
	uint64_t rss, live;
};

struct wl_tracer {
	const char *path;      /* NULL: no trace file, samples still taken */
	uint64_t start_ns;     /* time 0 of the trace */
	volatile size_t *live; /* the workload's live-bytes counter (may be NULL) */
	struct wl_sample *buf; /* WL_TRACE_MAX_SAMPLES, allocated before sampling */
	size_t n;              /* samples taken; read after join */
	int stop;              /* set by wl_tracer_stop, under mu */
	size_t peak_rss;       /* largest sample */
	pthread_t thread;
	pthread_mutex_t mu;  /* the sampler waits on wake between samples, */
	pthread_cond_t wake; /* so that wl_tracer_stop ends it at once: the
	                      * workload's wall time holds no part of a period */
};

static inline void *wl_tracer_main(void *arg)
{
	struct wl_tracer *t = (struct wl_tracer *)arg;
	pthread_mutex_lock(&t->mu);
	while (!t->stop && t->n < WL_TRACE_MAX_SAMPLES) {
		pthread_mutex_unlock(&t->mu);
		struct wl_sample *s = &t->buf[t->n++];
		s->t_ms = (uint32_t)((wl_now_ns() - t->start_ns) / 1000000u);
		s->rss = wl_rss_bytes();
		s->live = t->live ? __atomic_load_n(t->live, __ATOMIC_RELAXED) : 0;
		if (s->rss > t->peak_rss)
			t->peak_rss = s->rss;
		uint64_t due = wl_now_ns() + (uint64_t)WL_TRACE_PERIOD_MS * 1000000u;
		struct timespec ts = {(time_t)(due / 1000000000u), (long)(due % 1000000000u)};
		pthread_mutex_lock(&t->mu);
		while (!t->stop && pthread_cond_timedwait(&t->wake, &t->mu, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

static inline void wl_tracer_start(struct wl_tracer *t, const char *path, volatile size_t *live)
{
	memset(t, 0, sizeof(*t));
	t->path = path;
	t->live = live;
	t->buf = (struct wl_sample *)wl_xmalloc(WL_TRACE_MAX_SAMPLES * sizeof(*t->buf));
	memset(t->buf, 0, WL_TRACE_MAX_SAMPLES * sizeof(*t->buf)); /* no faults while sampling */
	pthread_condattr_t ca;
	if (pthread_mutex_init(&t->mu, NULL) != 0 || pthread_condattr_init(&ca) != 0 ||
	    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&t->wake, &ca) != 0)
		wl_die("pthread_cond_init failed");
	pthread_condattr_destroy(&ca);
	t->start_ns = wl_now_ns();
	if (pthread_create(&t->thread, NULL, wl_tracer_main, t) != 0)
		wl_die("pthread_create failed");
}

static inline void wl_tracer_stop(struct wl_tracer *t)
{
	pthread_mutex_lock(&t->mu);
	t->stop = 1;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->thread, NULL);
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->mu);
	if (t->path != NULL) {
		FILE *f = fopen(t->path, "w");
		if (f == NULL)
			wl_die("cannot write %s: %s", t->path, strerror(errno));
		for (size_t i = 0; i < t->n; i++)
			fprintf(f, "%u %llu %llu\n", t->buf[i].t_ms,
			        (unsigned long long)t->buf[i].rss,
			        (unsigned long long)t->buf[i].live);
		if (fclose(f) != 0)
			wl_die("cannot write %s", t->path);
	}
	free(t->buf);
	t->buf = NULL;
}

/* ---- arguments ----------------------------------------------------------------- */

/* A workload's tunables: name, default, --quick value. */
struct wl_param {
	const char *name;
	double value, quick;
};

struct wl_args {
	int quick;
	const char *trace; /* --trace FILE, or NULL */
};

/* Usage: wl-NAME [--quick] [--trace FILE] [NAME=VALUE ...]. The params'
 * values become their --quick values first, then NAME=VALUE overrides. */
static inline struct wl_args wl_parse(int argc, char **argv, const char *name,
                                      struct wl_param *params, size_t nparams)
{
	struct wl_args a = {0, NULL};
	wl_name = name;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--quick") == 0)
			a.quick = 1;
	for (size_t p = 0; a.quick && p < nparams; p++)
		params[p].value = params[p].quick;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0)
			continue;
		if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
			a.trace = argv[++i];
			continue;
		}
		const char *eq = strchr(argv[i], '=');
		size_t p = 0;
		for (; eq != NULL && p < nparams; p++)
			if (strlen(params[p].name) == (size_t)(eq - argv[i]) &&
			    strncmp(params[p].name, argv[i], (size_t)(eq - argv[i])) == 0)
				break;
		if (eq == NULL || p == nparams) {
			fprintf(stderr, "usage: %s [--quick] [--trace FILE]", name);
			for (size_t q = 0; q < nparams; q++)
				fprintf(stderr, " [%s=%g]", params[q].name, params[q].value);
			fputc('\n', stderr);
			exit(2);
		}
		char *end;
		params[p].value = strtod(eq + 1, &end);
		if (*end != '\0' || end == eq + 1)
			wl_die("%s: not a number", argv[i]);
	}
	return a;
}

/* Spin-free barrier: pthread_barrier_t (glibc's, not the allocator's). */
static inline void wl_barrier_init(pthread_barrier_t *b, unsigned n)
{
	if (pthread_barrier_init(b, NULL, n) != 0)
		wl_die("pthread_barrier_init failed");
}

static inline void wl_thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
	if (pthread_create(t, NULL, fn, arg) != 0)
		wl_die("pthread_create failed");
}

#endif /* WL_COMMON_H */
