/*
 * tcache.h — thread caches: per-thread object caches, the malloc fast path.
 *
 * Each thread that allocates owns a struct pa_tcache: per size class, a
 * singly linked list of free objects (linked through their first word) with
 * a bound and counts whose difference is the room left under it (struct
 * pa_tcache). pa_malloc pops, pa_free pushes: no lock, no atomic
 * read-modify-write, nothing shared written. An empty list refills with a
 * batch from the class's central list; a list over its bound gives a batch
 * back (central.h). Bounds: a batch is 16 KiB worth of objects, at least 1
 * and at most 32; a list holds PA_TC_LIST_BATCHES batches, more in a run of
 * refills (below). See docs/design.md for why per-thread caches and not
 * per-CPU ones.
 *
 * Together the caches hold about thread_cache_total bytes (config.h,
 * tcmalloc's overall budget). Every 8th slow path a cache sums its bytes
 * and notes them as its claim (at least PA_TC_RESERVE) in a shared sum.
 * Its allowance is thread_cache_total less the other caches' claims, and at
 * least the fair share (half of thread_cache_total over the caches, at
 * least PA_TC_MIN_BUDGET): a thread that bursts while the others hold
 * little may use what they leave; with 64 threads on the default 16 MiB
 * each keeps 128 KiB. Over its allowance a cache gives back the older half
 * of every list and its oldest large slots.
 *
 * The thread's cache pointer is initial-exec TLS (8 bytes: the only
 * thread-local state of the allocator). Until the thread's first slow path
 * it points to tcache_empty, whose lists are empty with bound 0, so both
 * fast paths miss without a test for "no cache yet"; the slow path then
 * builds the thread's cache. When the thread exits (a pthread key
 * destructor) its objects go back to the central lists and the pointer is
 * set to tcache_gone: the thread's remaining mallocs and frees (in later
 * destructors) go straight to the central lists.
 *
 * A cache also holds what the modules below it keep per thread, which it
 * hands them: its large slots (large.h) and its spare span records
 * (span.h), passed down by malloc.c and this file; nothing below includes
 * this file (tools/check_layers.py).
 *
 * Concurrency: a cache is written only by its thread. The counts are
 * written with relaxed atomic stores and read, racily, by pa_malloc_stats
 * through the registry of caches (a list under its own lock).
 */
#ifndef PA_TCACHE_H
#define PA_TCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "central.h"
#include "large.h"
#include "prof.h"
#include "sizeclass_table.h"
#include "span.h"
#include "threadstats.h"

/* A list's bound, in batches, once slow start has brought it to a batch.
 * Each overflow or underflow past it moves a batch through the central
 * stash, where another thread may take it: objects of two threads then sit
 * side by side, and their writes to a shared cache line slow both (wl-small
 * with two threads: 0.38-0.40 s at two batches against 0.20 s for one
 * thread alone; 0.27 s at four; eight or 64 batches were no faster). A
 * list's count moves by one up or down at each malloc or free, so the
 * time between trips grows with the square of the bound. */
#define PA_TC_LIST_BATCHES 4u

/* Past PA_TC_LIST_BATCHES batches a list's bound grows by a batch at a
 * refill of the empty list once its refills outnumber its overflows by
 * PA_TC_LIST_SWING since the bound last moved (a thread allocating far more
 * than it frees, not the random walk of one whose mallocs and frees
 * balance), up to PA_TC_LIST_MAX objects, while the bounds of all the
 * cache's lists fit its allowance; overflows outnumbering refills by as
 * many take a batch off it again (tcmalloc's dynamic list length, with a
 * guard). */
#define PA_TC_LIST_MAX 8192u
#define PA_TC_LIST_SWING 8u
/* A cache's PA_TC_DRAIN-th overflow with no refill of any class between
 * (a thread freeing far more than it allocates: the end of a phase, which
 * it may idle after) cuts all its grown lists back to PA_TC_LIST_BATCHES
 * batches. */
#define PA_TC_DRAIN 1024u

/* The least a cache may hold, however many there are. */
#define PA_TC_MIN_BUDGET ((size_t)32 << 10)
/* What a cache is counted as holding, at least, when another asks how
 * much of thread_cache_total is left for it. */
#define PA_TC_RESERVE ((size_t)512 << 10)

struct pa_tcache {
	/* Per size class, a list of free objects linked through their first
	 * word (head), its bound (max: a free that would take the list past
	 * it gives a batch back) and two counts: freed, the objects pa_free
	 * pushed onto it since the cache was built, and limit, the value of
	 * freed at which the list is full. pa_malloc's pop adds one to limit;
	 * a slow path that sets the list sets limit to freed plus the room it
	 * leaves (tcache_list_set). So a free pushes while freed != limit
	 * (the test a room count took), and the thread's figures come from the
	 * counts at no cost to the fast paths: freed counts its fast frees,
	 * limit - limit_set its fast mallocs since the list was last set
	 * (docs/design.md). Separate arrays and not one of structs: indexed by
	 * class with the CPU's scaled addressing and tested without the bound,
	 * the fast paths save five instructions a pair. 64 bits: they never
	 * wrap. limit, freed and max are written with relaxed atomic stores
	 * (the stats read them). head first: pa_malloc's pop then loads and
	 * stores it at the class's scaled index with no displacement, and gcc
	 * keeps no second register for it (one instruction a pair). */
	void *head[PA_SC_NUM_CLASSES];
	uint64_t limit[PA_SC_NUM_CLASSES];
	/* The page map's leaf that pa_free last looked up (pagemap.h), and
	 * its leaf index (p >> 30): pa_free of an address in it takes the leaf from here
	 * and loads nothing that depends on the address before the page's
	 * class byte (docs/design.md). Leaves live for ever, so the pointer
	 * never goes stale. TCACHE_NO_LEAF in the placeholders, which no
	 * thread writes: it matches no address. */
	uintptr_t leaf_r;
	struct pa_span **leaf;
	uint64_t freed[PA_SC_NUM_CLASSES];
	uint32_t max[PA_SC_NUM_CLASSES];
	/* pa_sizeclasses[cls].div_magic, 0 for class 0 and in the
	 * placeholders: pa_free's fast path finds it at the cache's address,
	 * which it holds, with no table address to load and no 12-byte stride
	 * (two instructions a free). A magic of 0 fails its exactness check,
	 * so a large block's free, or any free on a placeholder, goes past it. */
	uint32_t magic[PA_SC_NUM_CLASSES];
	/* Bytes this thread may still allocate before its next heap-profile
	 * sample (prof.h): every malloc subtracts its size, the one that
	 * takes it below 0 is sampled and draws it again. */
	int64_t sample_left;
	struct prof_thread prof; /* the thread's sampler */
	/* sample_left counts to the nearer of two events: the next heap-profile
	 * sample (prof_left bytes away when it was aimed) and the next guarded
	 * block (guard_left: guard.h; INT64_MAX while guarded sampling is off).
	 * sample_set: what it was aimed at, so the slow path knows the bytes
	 * counted since (tcache_sample_fire). The fast path reads none of them. */
	int64_t sample_set, prof_left, guard_left;
	struct pa_large_slots large;     /* large objects freed by this thread (large.h),
	                                  * handed to large.c's functions */
	uint64_t fresh_seen;             /* central_fresh_count() at its last refill (central.h) */
	uint32_t slow;                   /* slow paths taken: the budget is checked every 8th */
	uint32_t drain;                  /* overflows since the last refill of any class */
	size_t claim;                    /* what it held at its last check, at least
	                                  * PA_TC_RESERVE (relaxed atomic stores) */
	size_t bound_bytes;              /* the lists' bounds in bytes: sum of max * size */
	int8_t swing[PA_SC_NUM_CLASSES]; /* refills less overflows since the bound last
	                                  * moved past PA_TC_LIST_BATCHES batches */
	struct pa_span_spares spares;    /* free span records (span.h), handed to
	                                  * whoever makes or retires a span */
	/* Classes in whose carve slots this cache may be (central_take): bit
	 * cls of word cls / 64; central_uncarve them when it is released. */
	uint64_t carving[(PA_SC_NUM_CLASSES + 63) / 64];
	/* The thread's figures (threadstats.h) beyond the fast paths' counts:
	 * limit as the slow path last set it, per class; the pops the slow
	 * paths folded in (the count between two sets) and their bytes,
	 * blocks the slow paths handed out or took back (small ones past the
	 * lists, large ones, sampled and guarded ones), and the requested
	 * bytes counted before the heap profile's count was last aimed
	 * (tcache_sample_fire). Written by the thread with relaxed atomic
	 * stores (the stats read them). */
	uint64_t limit_set[PA_SC_NUM_CLASSES];
	struct tcache_count {
		uint64_t count, bytes;
	} popped, slow_alloc, slow_free;
	uint64_t requested, requested_seen; /* requested_seen: published for the stats */
	int tid;
	char name[THREADSTATS_NAME]; /* its name (prctl): at the cache's birth, at exit */
	/* Registry links, under the registry lock. */
	struct pa_tcache *next, **prevnext;
};

/* leaf_r of a cache that holds no leaf: above every leaf index. */
#define TCACHE_NO_LEAF UINTPTR_MAX

extern struct pa_tcache tcache_empty PA_HIDDEN;
extern __thread struct pa_tcache *tcache_self __attribute__((tls_model("initial-exec")));

/* The calling thread's cache, or NULL while it has none: the placeholders
 * tcache_empty and tcache_gone (list bounds of 0) keep nothing, no large
 * slots, no spare span records, no counts. */
static inline struct pa_tcache *tcache_real(void)
{
	struct pa_tcache *tc = tcache_self;
	return tc->max[1] != 0 ? tc : NULL;
}

struct pa_tcache *tcache_get_slow(void);

/* Draw both of tc's counts afresh (a new cache, a forked child) and aim
 * sample_left at the nearer. */
void tcache_sample_start(struct pa_tcache *tc);

/* tc's sample_left went below zero: which events came due (TCACHE_FIRED_
 * bits: a heap-profile sample, a guarded block), their counts drawn again
 * and sample_left aimed anew. */
#define TCACHE_FIRED_PROF 1u
#define TCACHE_FIRED_GUARD 2u
unsigned tcache_sample_fire(struct pa_tcache *tc);

/* The calling thread's cache, built if it has none yet; NULL when it cannot
 * have one (thread_cache off, memcheck, out of memory, or exiting). */
static inline struct pa_tcache *tcache_get(void)
{
	struct pa_tcache *tc = tcache_self;
	return tc->max[1] != 0 ? tc : tcache_get_slow();
}

/* What tc hands down, NULL when tc is NULL (the calling thread has no
 * cache: tcache_real): its spare span records, for span_new and span_delete
 * (span.h), and its large slots (large.h). */
static inline struct pa_span_spares *tcache_spares(struct pa_tcache *tc)
{
	return tc != NULL ? &tc->spares : NULL;
}

static inline struct pa_large_slots *tcache_large(struct pa_tcache *tc)
{
	return tc != NULL ? &tc->large : NULL;
}

/* The fast paths' counts move (limit: a malloc's pop, freed: a free's
 * push): one instruction that adds to memory. Only the owning thread
 * writes them; the stats read them racily with relaxed atomic loads and
 * see the value before or after (an aligned 8-byte store). An atomic
 * store of the loaded value plus one took three instructions (load, add,
 * store), which gcc does not merge: with the heap profile's count (two
 * more in pa_malloc) the pair would have been 81 instructions, where
 * tcmalloc's, sampling included, is 79. */
static inline void tcache_count_up(uint64_t *count)
{
#if defined(__x86_64__)
	__asm__("addq $1, %0" : "+m"(*count));
#else
	__atomic_store_n(count, *count + 1, __ATOMIC_RELAXED);
#endif
}

/* Objects on tc's list of cls: exact in tc's own thread, an estimate in
 * another (the stats), which may see room and max from different times. */
static inline uint32_t tcache_list_count(const struct pa_tcache *tc, unsigned cls)
{
	uint32_t max = __atomic_load_n(&tc->max[cls], __ATOMIC_RELAXED);
	uint64_t room = __atomic_load_n(&tc->limit[cls], __ATOMIC_RELAXED) -
	                __atomic_load_n(&tc->freed[cls], __ATOMIC_RELAXED);
	return room < max ? max - (uint32_t)room : 0;
}

/* c's count and bytes moved by n blocks of `bytes` bytes in all (negative:
 * taken back); by tc's own thread. */
static inline void tcache_count_add(struct tcache_count *c, int64_t n, int64_t bytes)
{
	__atomic_store_n(&c->count, c->count + (uint64_t)n, __ATOMIC_RELAXED);
	__atomic_store_n(&c->bytes, c->bytes + (uint64_t)bytes, __ATOMIC_RELAXED);
}

/* Set tc's list of cls to count objects (its head set by the caller) under
 * bound max >= count. */
static inline void tcache_list_set(struct pa_tcache *tc, unsigned cls, uint32_t count, uint32_t max)
{
	size_t size = pa_sizeclasses[cls].size;
	tc->bound_bytes += ((size_t)max - tc->max[cls]) * size;
	/* The fast path's pops since the last set, folded in before limit
	 * moves. */
	uint64_t pops = tc->limit[cls] - tc->limit_set[cls];
	tcache_count_add(&tc->popped, (int64_t)pops, (int64_t)(pops * size));
	uint64_t limit = tc->freed[cls] + (max - count);
	__atomic_store_n(&tc->max[cls], max, __ATOMIC_RELAXED);
	__atomic_store_n(&tc->limit_set[cls], limit, __ATOMIC_RELAXED);
	__atomic_store_n(&tc->limit[cls], limit, __ATOMIC_RELAXED);
}

/* The list of cls was empty: refill it and return one object, or NULL
 * (errno = ENOMEM). */
void *tcache_alloc_slow(unsigned cls);

/* The list of cls is full (or there is no cache yet): push p, which
 * pa_free has checked, giving a batch back if needed. */
void tcache_free_slow(unsigned cls, void *p);

/* Give every object of the calling thread's cache back. */
void tcache_flush_self(void);

/* Sums over every cache: objects held per class, large spans and their
 * pages in the large slots; and how many caches there are. *made_objects
 * and *made_pages: large objects and pages held by the program and the
 * slots (large_held_objects, large_held_pages and every cache's deltas). */
void tcache_totals(size_t held[PA_SC_NUM_CLASSES], size_t *large_spans, size_t *large_pages,
                   size_t *ncaches, size_t *made_objects, size_t *made_pages);

/* fork: the registry lock (prepare/parent), and in the child drop the
 * caches of threads that do not exist there (their objects are lost to
 * the child, as glibc's tcache entries are). */
void tcache_fork_prepare(void);
void tcache_fork_parent(void);
void tcache_fork_child(void);
/* The calling thread's allowance (0 while it has no cache), and the
 * caches' claims together, in bytes (see the top of this file). */
size_t tcache_allowance_self(void);
size_t tcache_claimed(void);

/* The figures of tc, the calling thread's cache (exact), or of another
 * thread's (racy: counts of some moment of each list); tid, name and live
 * are the cache's. */
void tcache_figures(const struct pa_tcache *tc, struct threadstats_figures *f);

/* fn(figures, arg) for every thread: those with a cache (live), then the
 * exited threads' table; *others and *others_threads: the exited threads
 * outside the table (threadstats.h). Under the registry lock: fn takes no
 * lock and does not allocate. */
void tcache_each_figures(void (*fn)(const struct threadstats_figures *f, void *arg), void *arg,
                         struct threadstats_figures *others, uint64_t *others_threads);

/* Called once by malloc init (pthread key for thread exit). 0 or -1. */
int tcache_global_init(void);

#endif
