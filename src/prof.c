/*
 * prof.c — heap profiles: the sampler's draws and weights, stack capture,
 * the sites and live samples, and when profiles are written (prof.h for
 * the design; profwrite.c encodes them).
 */
#include "prof.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "msg.h"
#include "os.h"
#include "pagealloc.h"
#include "profwrite.h"
#include "stack.h"
#include "vg.h"

/* ---- numbers --------------------------------------------------------------- */

#define PROF_LN2 0.69314718055994530942

/* ln x for x > 0: x = m * 2^e with m in [1, 2), ln m = 2 atanh((m-1)/(m+1)),
 * whose series in s = (m-1)/(m+1) <= 1/3 has converged to 1e-15 by s^29.
 * (libm is not ours to call: it may not be loaded, and this is enough.) */
static double prof_ln(double x)
{
	union {
		double d;
		uint64_t u;
	} v = {x};
	int e = (int)((v.u >> 52) & 0x7ff) - 1023;
	v.u = (v.u & ~((uint64_t)0x7ff << 52)) | ((uint64_t)1023 << 52);
	double s = (v.d - 1) / (v.d + 1), s2 = s * s, term = s, sum = 0;
	for (int k = 1; k < 30; k += 2) {
		sum += term / k;
		term *= s2;
	}
	return e * PROF_LN2 + 2 * sum;
}

/* 1 - e^(-x) for x >= 0, accurate for small x too (a sample's chance). */
static double prof_one_minus_exp_neg(double x)
{
	if (x < 0.5) {
		/* x - x^2/2! + x^3/3! - ...: 18 terms reach 1e-17 at x = 0.5. */
		double term = x, sum = 0;
		for (int k = 1; k <= 18; k++) {
			sum += term;
			term *= -x / (k + 1);
		}
		return sum;
	}
	if (x > 40)
		return 1;
	/* e^-x = 2^-k e^-r with r in [0, ln 2). */
	int k = (int)(x / PROF_LN2);
	double r = x - k * PROF_LN2, term = 1, e = 0;
	for (int i = 1; i <= 20; i++) {
		e += term;
		term *= -r / i;
	}
	while (k-- > 0)
		e *= 0.5;
	return 1 - e;
}

/* ---- state ----------------------------------------------------------------- */

/* The sites' hash table starts at one page of chains and doubles while
 * there are more sites than chains, up to PROF_TABLE_SIZE: a program with a
 * few dozen sampled stacks dirties one page of it, where its stacks' hashes
 * would land on every page of the largest table. */
#define PROF_TABLE_FIRST_BITS 9u
#define PROF_TABLE_BITS 11u
#define PROF_TABLE_FIRST ((size_t)1 << PROF_TABLE_FIRST_BITS)
#define PROF_TABLE_SIZE ((size_t)1 << PROF_TABLE_BITS)
/* Buckets and records are carved from blocks of 16 KiB, then twice as
 * large each time up to 256 KiB: what a program that samples little maps
 * stays small (under ulimit -v every mapping counts). */
#define PROF_BLOCK_FIRST ((size_t)16 << 10)
#define PROF_BLOCK_MAX ((size_t)256 << 10)
/* Frames captured before trimming: the allocator's own are at most a
 * handful (the sampler, malloc's slow path, an entry point or two). */
#define PROF_CAPTURE (PROF_MAX_DEPTH + 16u)
/* How far from the top the allocator's frames are looked for. */
#define PROF_TRIM_SCAN 16u

/*
 * A site's frames are kept packed: each the zigzag varint of its distance
 * from the frame before (from 0 for the first). A caller's return address
 * is most often within a few KiB or MiB of its callee's, in the same
 * object: 2-4 bytes a frame instead of 8. espresso's 1,421 sites of ~16
 * frames took 0.50 MiB, 192 bytes each; packed, ~112.
 */
#define PROF_PACKED_MAX (PROF_MAX_DEPTH * PROFW_VARINT_MAX)

struct prof_bucket {
	struct prof_bucket *next; /* hash chain */
	uint64_t hash;
	/* Estimates (sums of the samples' weights, and weights times bytes). */
	double alloc_objects, alloc_bytes, free_objects, free_bytes;
	uint16_t depth;   /* frames */
	uint16_t len;     /* bytes of packed */
	uint8_t packed[]; /* the frames, innermost first (above) */
};

struct prof_sample {
	struct prof_bucket *bucket; /* NULL while on the free list */
	struct prof_sample *next_free;
	double weight; /* the allocations it stands for */
	size_t size;   /* requested */
	size_t usable; /* malloc_usable_size */
	size_t held;   /* bytes of the span holding it */
};

/* Everything under prof_lock. */
static pa_lock prof_lock = PA_LOCK_INIT;
static struct prof_bucket **table; /* table_size chains, mapped at first use */
static size_t table_size;
static char *carve_at, *carve_end; /* the current block */
static struct prof_sample *free_samples;
static size_t meta_bytes, nsites, samples_live, samples_total, held_bytes, extra_bytes;
static size_t frames; /* the sites' frames, all told */
static double inuse_bytes, alloc_bytes;
static double peak_written;  /* live estimate at the last peak profile */
static double interval_next; /* allocated estimate at which the next interval one is due */

/* Files: write_lock serialises them (sequence numbers in order). */
static pa_lock write_lock = PA_LOCK_INIT;
static uint32_t file_seq; /* under write_lock */
static size_t files_written, write_errors;
static uint64_t start_ns;            /* realtime at init */
static int signal_pending;           /* set by prof_signal's handler */
static int want_peak, want_interval; /* a sample found one due (atomics) */

static const int prof_signals[] = {0, SIGUSR1, SIGUSR2, SIGHUP};

int prof_active(void)
{
	return __atomic_load_n(&pa_conf.prof, __ATOMIC_RELAXED) && !vg_active();
}

static uint64_t prof_rand(struct prof_thread *pt)
{
	if (pt->rng == 0)
		pt->rng = os_random_seed() | 1;
	uint64_t x = pt->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	pt->rng = x;
	return x * 0x2545F4914F6CDD1DULL;
}

int64_t prof_draw(struct prof_thread *pt, double mean)
{
	/* U uniform in (0, 1]: 53 random bits, plus one so it is never 0. */
	double u = (double)((prof_rand(pt) >> 11) + 1) * (1.0 / 9007199254740992.0);
	double next = -prof_ln(u) * mean;
	return next >= 9.0e18 ? INT64_MAX : (int64_t)next;
}

int64_t prof_next_count(struct prof_thread *pt)
{
	size_t mean = __atomic_load_n(&pa_conf.prof_sample, __ATOMIC_RELAXED);
	if (!prof_active())
		return (int64_t)(mean < ((size_t)1 << 50) ? mean * 64 : (size_t)1 << 56);
	return prof_draw(pt, (double)mean);
}

/* Memory for buckets and records, under prof_lock: NULL when out. */
static void *carve(size_t bytes)
{
	bytes = (bytes + 15) & ~(size_t)15;
	if (carve_at == NULL || (size_t)(carve_end - carve_at) < bytes) {
		static size_t block = PROF_BLOCK_FIRST;
		size_t len = bytes > block ? bytes : block;
		if (block < PROF_BLOCK_MAX)
			block *= 2;
		char *b = os_alloc(len);
		if (b == NULL)
			return NULL;
		meta_bytes += len;
		carve_at = b;
		carve_end = b + len;
	}
	void *p = carve_at;
	carve_at += bytes;
	return p;
}

/* ---- stacks ---------------------------------------------------------------- */

/* The allocator's functions: malloc.c and preload/new_delete.cc list theirs
 * in this section (each copy of malloc.c compiled). */
extern const prof_entry_fn __start_pa_prof_entry[] __attribute__((weak, visibility("hidden")));
extern const prof_entry_fn __stop_pa_prof_entry[] __attribute__((weak, visibility("hidden")));

/* The lowest and highest of them (prof_init): the program's frames, outside
 * the allocator's code, are told apart in two compares. */
static uintptr_t entry_lo = UINTPTR_MAX, entry_hi;

static int is_entry(uintptr_t fn)
{
	/* (the section may hold zeros: the padding the compiler aligns each
	 * file's array with; a frame with no function found has fn 0) */
	if (fn < entry_lo || fn > entry_hi)
		return 0;
	for (const prof_entry_fn *e = __start_pa_prof_entry; e < __stop_pa_prof_entry; e++)
		if ((uintptr_t)*e == fn)
			return 1;
	return 0;
}

unsigned prof_stack(uintptr_t *pc, unsigned max)
{
	uintptr_t raw[PROF_CAPTURE], fn[PROF_CAPTURE];
	unsigned n = stack_capture(raw, fn, PROF_CAPTURE);
	/* The allocator's last frame near the top: the program's own frames
	 * are all after it. */
	unsigned first = 0;
	for (unsigned i = 0; i < n && i < PROF_TRIM_SCAN; i++)
		if (is_entry(fn[i]))
			first = i + 1;
	unsigned depth = n - first;
	if (depth > max)
		depth = max;
	memcpy(pc, raw + first, depth * sizeof(pc[0]));
	return depth;
}

static uint64_t stack_hash(const uintptr_t *pc, unsigned depth)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ depth;
	for (unsigned i = 0; i < depth; i++) {
		h ^= pc[i];
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h;
}

/* The table at its first size, or twice its size with its chains moved
 * over and the old one unmapped; under prof_lock. 0 when out of memory (the
 * old one stays). */
static int table_grow(void)
{
	size_t n = table == NULL ? PROF_TABLE_FIRST : 2 * table_size;
	struct prof_bucket **t = os_alloc(n * sizeof(*t));
	if (t == NULL)
		return 0;
	for (size_t i = 0; i < table_size; i++) {
		struct prof_bucket *next;
		for (struct prof_bucket *b = table[i]; b != NULL; b = next) {
			next = b->next;
			b->next = t[b->hash & (n - 1)];
			t[b->hash & (n - 1)] = b;
		}
	}
	if (table != NULL) {
		os_unmap(table, table_size * sizeof(*table));
		meta_bytes -= table_size * sizeof(*table);
	}
	meta_bytes += n * sizeof(*t);
	table = t;
	table_size = n;
	return 1;
}

/* Pack depth frames into out (PROF_PACKED_MAX bytes); returns the bytes. */
static unsigned frames_pack(const uintptr_t *pc, unsigned depth, uint8_t *out)
{
	unsigned n = 0;
	uintptr_t prev = 0;
	for (unsigned i = 0; i < depth; i++) {
		uint64_t d = (uint64_t)(pc[i] - prev);
		uint64_t z = (d << 1) ^ (uint64_t)((int64_t)d >> 63); /* zigzag */
		prev = pc[i];
		n += (unsigned)profw_varint(out + n, z);
	}
	return n;
}

/* The frames of b into pc (b->depth of them). */
static void frames_unpack(const struct prof_bucket *b, uintptr_t *pc)
{
	const uint8_t *in = b->packed;
	uintptr_t prev = 0;
	for (unsigned i = 0; i < b->depth; i++) {
		uint64_t z = 0;
		unsigned shift = 0;
		for (;; shift += 7) {
			uint8_t c = *in++;
			z |= (uint64_t)(c & 0x7f) << shift;
			if (c < 0x80)
				break;
		}
		prev += (uintptr_t)((z >> 1) ^ ((uint64_t)0 - (z & 1)));
		pc[i] = prev;
	}
}

/* The bucket of a stack, made if new; under prof_lock. NULL when out of
 * memory. */
static struct prof_bucket *bucket_of(const uintptr_t *pc, unsigned depth)
{
	if ((table == NULL || (nsites >= table_size && table_size < PROF_TABLE_SIZE)) &&
	    !table_grow() && table == NULL)
		return NULL;
	uint8_t packed[PROF_PACKED_MAX];
	unsigned len = frames_pack(pc, depth, packed);
	uint64_t h = stack_hash(pc, depth);
	struct prof_bucket **head = &table[h & (table_size - 1)];
	for (struct prof_bucket *b = *head; b != NULL; b = b->next)
		if (b->hash == h && b->depth == depth && b->len == len &&
		    memcmp(b->packed, packed, len) == 0)
			return b;
	struct prof_bucket *b = carve(offsetof(struct prof_bucket, packed) + len);
	if (b == NULL)
		return NULL;
	memset(b, 0, sizeof(*b));
	b->hash = h;
	b->depth = (uint16_t)depth;
	b->len = (uint16_t)len;
	memcpy(b->packed, packed, len);
	b->next = *head;
	*head = b;
	nsites++;
	frames += depth;
	return b;
}

/* ---- files ----------------------------------------------------------------- */

enum prof_kind { KIND_FINAL, KIND_PEAK, KIND_INTERVAL, KIND_SIGNAL, KIND_DUMP };
static const char *const kind_names[] = {"final", "peak", "interval", "signal", "dump"};

static size_t put_str(char *buf, size_t at, size_t cap, const char *s)
{
	for (; *s != '\0' && at + 1 < cap; s++)
		buf[at++] = *s;
	buf[at] = '\0';
	return at;
}

/* v in decimal, zero-padded to width digits. */
static size_t put_uint(char *buf, size_t at, size_t cap, uint64_t v, unsigned width)
{
	char digits[MSG_UINT_MAX + 1];
	size_t n = msg_format_uint(digits, v);
	for (; width > n && at + 1 < cap; width--)
		buf[at++] = '0';
	digits[n] = '\0';
	return put_str(buf, at, cap, digits);
}

/* Snapshot the sites (under prof_lock) and write them to `path`, or to
 * PREFIX.PID.SEQ.KIND.pb.gz when path is NULL. 0 or -1 (errno). */
static int write_profile(enum prof_kind kind, const char *path)
{
	char name[2 * PA_CONF_PATH_MAX];
	lock_acquire(&write_lock);
	if (path == NULL) {
		const char *prefix =
		    pa_conf.prof_prefix[0] != '\0' ? pa_conf.prof_prefix : "pagealloc";
		size_t at = put_str(name, 0, sizeof(name), prefix);
		at = put_str(name, at, sizeof(name), ".");
		at = put_uint(name, at, sizeof(name), (uint64_t)os_getpid(), 1);
		at = put_str(name, at, sizeof(name), ".");
		at = put_uint(name, at, sizeof(name), ++file_seq, 4);
		at = put_str(name, at, sizeof(name), ".");
		at = put_str(name, at, sizeof(name), kind_names[kind]);
		put_str(name, at, sizeof(name), ".pb.gz");
		path = name;
	}
	/* Snapshot: the sites' figures copied, their frames unpacked after
	 * them in the same mapping. */
	lock_acquire(&prof_lock);
	size_t n = nsites, slots = n > 0 ? n : 1;
	size_t len = slots * sizeof(struct profw_site) + frames * sizeof(uintptr_t);
	struct profw_site *sites = os_alloc(len);
	size_t k = 0;
	if (sites != NULL && table != NULL) {
		uintptr_t *pcs = (uintptr_t *)(sites + slots);
		for (size_t i = 0; i < table_size && k < n; i++) {
			for (struct prof_bucket *b = table[i]; b != NULL && k < n; b = b->next) {
				struct profw_site *s = &sites[k++];
				frames_unpack(b, pcs);
				s->pc = pcs;
				s->depth = b->depth;
				pcs += b->depth;
				s->alloc_objects = (int64_t)(b->alloc_objects + 0.5);
				s->alloc_space = (int64_t)(b->alloc_bytes + 0.5);
				s->inuse_objects =
				    (int64_t)(b->alloc_objects - b->free_objects + 0.5);
				s->inuse_space = (int64_t)(b->alloc_bytes - b->free_bytes + 0.5);
			}
		}
	}
	lock_release(&prof_lock);
	int rc = -1;
	if (sites != NULL) {
		uint64_t now = os_realtime_ns();
		struct profw_info info = {
		    .period = (int64_t)pa_conf.prof_sample,
		    .time_ns = (int64_t)now,
		    .duration_ns = (int64_t)(now - start_ns),
		};
		rc = profw_write(path, sites, k, &info);
		os_unmap(sites, len);
	}
	if (rc == 0) {
		__atomic_add_fetch(&files_written, 1, __ATOMIC_RELAXED);
	} else {
		struct pa_msg m;
		msg_begin(&m);
		int err = errno;
		msg_str(&m, "heap profile '");
		msg_str(&m, path);
		msg_str(&m, "' not written: ");
		msg_errno(&m, err);
		msg_end(&m);
		errno = err;
		__atomic_add_fetch(&write_errors, 1, __ATOMIC_RELAXED);
	}
	lock_release(&write_lock);
	return rc;
}

/* Write what the last samples (or a signal) found due. Called with no
 * lock held, by the thread that sampled or the scavenger. */
static void write_due(void)
{
	if (pa_conf.prof_prefix[0] == '\0')
		return;
	if (__atomic_exchange_n(&want_peak, 0, __ATOMIC_ACQ_REL))
		write_profile(KIND_PEAK, NULL);
	if (__atomic_exchange_n(&want_interval, 0, __ATOMIC_ACQ_REL))
		write_profile(KIND_INTERVAL, NULL);
	if (__atomic_exchange_n(&signal_pending, 0, __ATOMIC_ACQ_REL))
		write_profile(KIND_SIGNAL, NULL);
}

void prof_background(void)
{
	if (__atomic_load_n(&signal_pending, __ATOMIC_RELAXED))
		write_due();
}

static void on_prof_signal(int sig)
{
	(void)sig;
	__atomic_store_n(&signal_pending, 1, __ATOMIC_RELEASE);
}

/* ---- samples --------------------------------------------------------------- */

struct prof_sample *prof_record(struct prof_thread *pt, size_t n, size_t usable, size_t held)
{
	if (pt->busy || !prof_active())
		return NULL;
	pt->busy = 1;
	uintptr_t pc[PROF_MAX_DEPTH];
	unsigned depth = prof_stack(pc, PROF_MAX_DEPTH);
	size_t mean = pa_conf.prof_sample;
	double weight = 1 / prof_one_minus_exp_neg((double)n / (double)(mean != 0 ? mean : 1));
	double bytes = weight * (double)n;

	lock_acquire(&prof_lock);
	struct prof_sample *r = NULL;
	struct prof_bucket *b = bucket_of(pc, depth);
	if (b != NULL) {
		r = free_samples;
		if (r != NULL)
			free_samples = r->next_free;
		else
			r = carve(sizeof(*r));
	}
	if (r != NULL) {
		r->bucket = b;
		r->weight = weight;
		r->size = n;
		r->usable = usable;
		r->held = held;
		b->alloc_objects += weight;
		b->alloc_bytes += bytes;
		samples_live++;
		samples_total++;
		held_bytes += held;
		extra_bytes += held - usable;
		inuse_bytes += bytes;
		alloc_bytes += bytes;
		double peak_min = 32.0 * (double)mean;
		if (inuse_bytes >= peak_min && inuse_bytes >= 1.1 * peak_written) {
			peak_written = inuse_bytes;
			__atomic_store_n(&want_peak, 1, __ATOMIC_RELAXED);
		}
		size_t interval = pa_conf.prof_interval;
		if (interval != 0 && interval_next == 0)
			interval_next = (double)interval; /* the first is due after one interval */
		if (interval != 0 && alloc_bytes >= interval_next) {
			while (interval_next <= alloc_bytes)
				interval_next += (double)interval;
			__atomic_store_n(&want_interval, 1, __ATOMIC_RELAXED);
		}
	}
	lock_release(&prof_lock);
	if (__atomic_load_n(&want_peak, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&want_interval, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&signal_pending, __ATOMIC_RELAXED))
		write_due();
	pt->busy = 0;
	return r;
}

void prof_unrecord(struct prof_sample *r)
{
	lock_acquire(&prof_lock);
	struct prof_bucket *b = r->bucket;
	b->free_objects += r->weight;
	b->free_bytes += r->weight * (double)r->size;
	inuse_bytes -= r->weight * (double)r->size;
	samples_live--;
	held_bytes -= r->held;
	extra_bytes -= r->held - r->usable;
	r->bucket = NULL;
	r->next_free = free_samples;
	free_samples = r;
	lock_release(&prof_lock);
}

size_t prof_sample_usable(const struct prof_sample *r)
{
	return r->usable;
}

void prof_totals(struct prof_totals *t)
{
	lock_acquire(&prof_lock);
	t->samples_live = samples_live;
	t->samples_total = samples_total;
	t->sites = nsites;
	t->meta_bytes = meta_bytes;
	t->sample_pages = held_bytes;
	t->sample_extra = extra_bytes;
	t->inuse_bytes = inuse_bytes;
	t->alloc_bytes = alloc_bytes;
	lock_release(&prof_lock);
	t->files_written = __atomic_load_n(&files_written, __ATOMIC_RELAXED);
	t->write_errors = __atomic_load_n(&write_errors, __ATOMIC_RELAXED);
}

/* ---- set-up, fork, exit, the API ------------------------------------------- */

void prof_init(void)
{
	start_ns = os_realtime_ns();
	for (const prof_entry_fn *e = __start_pa_prof_entry; e < __stop_pa_prof_entry; e++) {
		uintptr_t fn = (uintptr_t)*e;
		if (fn == 0)
			continue;
		if (fn < entry_lo)
			entry_lo = fn;
		if (fn > entry_hi)
			entry_hi = fn;
	}
	unsigned sig = (unsigned)pa_conf.prof_signal;
	if (sig != 0 && sig < sizeof(prof_signals) / sizeof(prof_signals[0]))
		os_signal_catch_if_default(prof_signals[sig], on_prof_signal);
}

void prof_fork(enum pa_fork_phase phase)
{
	if (phase == PA_FORK_PREPARE) {
		lock_acquire(&write_lock);
		lock_acquire(&prof_lock);
	} else if (phase == PA_FORK_PARENT) {
		lock_release(&prof_lock);
		lock_release(&write_lock);
	} else {
		/* The child's files: its own pid, numbered from 1 again. */
		lock_init(&prof_lock);
		lock_init(&write_lock);
		file_seq = 0;
	}
}

__attribute__((destructor)) static void prof_fini(void)
{
	if (pa_conf.prof_prefix[0] == '\0' || !prof_active())
		return;
	write_profile(KIND_FINAL, NULL);
}

int prof_dump(const char *path)
{
	return write_profile(KIND_DUMP, path);
}

int prof_set_active(int on)
{
	int was = (int)__atomic_load_n(&pa_conf.prof, __ATOMIC_RELAXED);
	if (on >= 0)
		__atomic_store_n(&pa_conf.prof, (size_t)(on != 0), __ATOMIC_RELAXED);
	return was;
}
