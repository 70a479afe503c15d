/*
 * malloc.c — the pa_ malloc family and its exact glibc 2.36 / POSIX / C23
 * semantics, on top of the size classes (sizeclass_table.h), thread caches
 * (tcache.h), central lists (central.h), large objects (large.h) and the page
 * heap (pages.h). The small-object path is here; large objects are
 * large.c's, which this file hands the calling thread's large slots and
 * spare span records (from its thread cache).
 *
 *   pa_malloc(n) ── n <= 32 KiB ──► class ─► this thread's list ─pop─► object
 *        │                                        └─ empty: tcache_alloc_slow (central batch)
 *        └─ larger ──► alloc_large: the newest large slot, or large_alloc (large.h)
 *   pa_free(p) ── page map ─► class, span ─► checks ─► push on this thread's list
 *                                                └─ full, or class 0 (large): free_slow
 *                                                   (central batch; large slots or the heap)
 *
 * An object of a heap of its own (heap.h: pa_heap_malloc) fails the fast
 * path's bump check on purpose: the slow path hands it to its heap.
 *
 * Checks on every pa_free, before the object joins a list: the page map
 * knows the address (else: foreign pointer), the address starts an object of
 * its span (else: interior pointer), the span's alloc bit is set and the
 * object's second word is not its free-key (else: double free). Messages
 * name the C function ("free", "realloc", ...), as the preload exports them
 * (C++'s sized deletes, preload/malloc_names.c: "operator delete").
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "central.h"
#include "config.h"
#include "guard.h"
#include "heap.h"
#include "large.h"
#include "lock.h"
#include "msg.h"
#include "os.h"
#include "pagealloc.h"
#include "pagemap.h"
#include "pages.h"
#include "prof.h"
#include "span.h"
#include "sweep.h"
#include "tcache.h"
#include "vg.h"

/* ---- initialisation -------------------------------------------------------- */

static int malloc_ready_flag; /* 1 once malloc_init_locked ran (pages_once) */

static void fork_prepare(void)
{
	prof_fork(PA_FORK_PREPARE);
	guard_fork(PA_FORK_PREPARE);
	sweep_fork(PA_FORK_PREPARE);
	heap_fork(PA_FORK_PREPARE);
	central_lock_all();
	large_fork(PA_FORK_PREPARE);
	tcache_fork_prepare();
	span_fork(PA_FORK_PREPARE);
}

static void fork_parent(void)
{
	span_fork(PA_FORK_PARENT);
	tcache_fork_parent();
	large_fork(PA_FORK_PARENT);
	central_unlock_all();
	heap_fork(PA_FORK_PARENT);
	sweep_fork(PA_FORK_PARENT);
	guard_fork(PA_FORK_PARENT);
	prof_fork(PA_FORK_PARENT);
}

static void fork_child(void)
{
	/* The child draws its own samples: with the parent's generator the
	 * children of a preforking server would all sample the same blocks. */
	struct pa_tcache *tc = tcache_real();
	if (tc != NULL) {
		tc->prof.rng = 0;
		tcache_sample_start(tc);
	}
	span_fork(PA_FORK_CHILD);
	tcache_fork_child();
	central_reset_locks();
	large_fork(PA_FORK_CHILD);
	heap_fork(PA_FORK_CHILD);
	sweep_fork(PA_FORK_CHILD);
	guard_fork(PA_FORK_CHILD);
	prof_fork(PA_FORK_CHILD);
}

/* The scavenger's hook (pages_set_sweep), with the calling thread's large
 * slots and spare span records for the spans the stashes' decay retires. */
static size_t malloc_background(uint32_t now, uint32_t min_age, int heap_busy, uint32_t hold_ms)
{
	struct pa_tcache *tc = tcache_real();
	prof_background();
	return sweep_background(now, min_age, heap_busy, hold_ms, tcache_large(tc),
	                        tcache_spares(tc));
}

/* Under the page heap's init lock (pages_once): nothing here allocates. */
static int malloc_init_locked(void)
{
	if (tcache_global_init() != 0)
		return -1;
	span_key_secret = (uintptr_t)os_random_seed();
	vg_on = vg_memcheck_running();
	pages_set_fork_hooks(fork_prepare, fork_parent, fork_child);
	pages_set_sweep(malloc_background);
	pages_set_grow_hook(pagemap_prepare);
	prof_init();
	return 0;
}

static int __attribute__((noinline)) malloc_init(void)
{
	return pages_once(&malloc_ready_flag, malloc_init_locked);
}

static inline int malloc_ready(void)
{
	if (__builtin_expect(__atomic_load_n(&malloc_ready_flag, __ATOMIC_ACQUIRE), 1))
		return 0;
	return malloc_init();
}

/* The page level's background work (pages_background), which may start the
 * scavenger thread: pthread_create allocates (its thread's DTV) through us
 * on the allocator's behalf, not the program's, so this thread takes no
 * heap-profile sample meanwhile (it would be charged to the program's call
 * site, and stay live for ever: a false leak). */
static void background_work(void)
{
	struct pa_tcache *tc = tcache_real();
	if (tc != NULL)
		tc->prof.busy++;
	pages_background();
	if (tc != NULL)
		tc->prof.busy--;
}

/* An allocation failed: the heap could not grow, past memory_limit_hard or
 * because the OS refused (ulimit -v, overcommit). Give back what this thread
 * can, its cached objects and the per-CPU page caches (a thread that moved
 * between CPUs left runs of pages in the others'), so the pages they held
 * serve the one retry. Returns 1: retry. */
static int __attribute__((noinline, cold)) enomem_reclaim(void)
{
	pa_thread_cache_flush();
	pa_cache_flush();
	return 1;
}

/* ---- large objects (large.h) ---------------------------------------------- */

static void *alloc_large_slow(size_t n, size_t align, int zero);
static void *alloc_large(size_t n, size_t align, int zero);

/* ---- heap-profile samples (prof.h) ----------------------------------------- */

static void *small_alloc_slow(unsigned cls, size_t n, size_t align);
static void *aligned_alloc_pow2(size_t align, size_t n);

/* The functions a sample's stack is trimmed at (prof.h): the entry points
 * and what they may jump to in a tail call (their own frame then gone).
 * Each compilation of this file (pa_ names, and the C library's in the
 * preload) lists its own. */
static void free_other(void *p);
static void free_sized_other(void *p, size_t size, const char *func);
static void *realloc_guarded(void *p, size_t n);
static void guard_free_counted(const char *func, void *p);
/* ... and the frees, whose stacks a guarded block's report prints ("freed
 * at"): from the program's frame on, as the allocation's. */
static const prof_entry_fn prof_entries[] __attribute__((used, section("pa_prof_entry"))) = {
    (prof_entry_fn)pa_malloc,
    (prof_entry_fn)pa_calloc,
    (prof_entry_fn)pa_realloc,
    (prof_entry_fn)pa_reallocarray,
    (prof_entry_fn)pa_memalign,
    (prof_entry_fn)pa_aligned_alloc,
    (prof_entry_fn)pa_posix_memalign,
    (prof_entry_fn)pa_valloc,
    (prof_entry_fn)pa_pvalloc,
    (prof_entry_fn)small_alloc_slow,
    (prof_entry_fn)alloc_large,
    (prof_entry_fn)aligned_alloc_pow2,
    (prof_entry_fn)pa_free,
    (prof_entry_fn)free_other,
    (prof_entry_fn)pa_free_sized,
    (prof_entry_fn)pa_free_aligned_sized,
    (prof_entry_fn)free_sized_other,
    (prof_entry_fn)realloc_guarded,
    (prof_entry_fn)guard_free_counted,
};

/* Block p (large span s) is sampled for n requested bytes, usable bytes: its
 * record goes into s. 0, or -1 when the profiler did not take it. */
static int sample_attach(struct pa_tcache *tc, struct pa_span *s, size_t n, size_t usable)
{
	struct prof_sample *r = prof_record(&tc->prof, n, usable, s->npages * PA_PAGE_SIZE);
	if (r == NULL)
		return -1;
	span_set_sample(s, r);
	return 0;
}

static void free_large(struct pa_span *s);

/* The calling thread's figures (threadstats.h) on the slow paths: n blocks
 * of `bytes` bytes in all handed out (count_alloc) or freed (count_free),
 * negative to take some back; nothing without a thread cache. */
static inline void count_alloc(struct pa_tcache *tc, int64_t n, int64_t bytes)
{
	if (tc != NULL)
		tcache_count_add(&tc->slow_alloc, n, bytes);
}

static inline void count_free(struct pa_tcache *tc, int64_t n, int64_t bytes)
{
	if (tc != NULL)
		tcache_count_add(&tc->slow_free, n, bytes);
}

/* guard_free, counted. The call stays a call, not a jump (the asm): this
 * function is where guard_free's stack ("freed at") is trimmed (prof.h,
 * prof_entries above), and its callers may reach it by a jump. */
static void __attribute__((noinline)) guard_free_counted(const char *func, void *p)
{
	count_free(tcache_real(), 1, (int64_t)guard_size(func, p));
	guard_free(func, p);
	__asm__ volatile("" ::: "memory");
}

/* Large block p of n bytes (for an `align`-aligned request) took the
 * thread's count below zero: what came due, a guarded block (guard.h) in
 * its place, or a sample of p. Returns the block to hand out. */
static void *__attribute__((noinline))
large_sampled(struct pa_tcache *tc, void *p, size_t n, size_t align)
{
	unsigned fired = tcache_sample_fire(tc);
	struct pa_span *s = pagemap_lookup((uintptr_t)p);
	if ((fired & TCACHE_FIRED_GUARD) && !tc->prof.busy) {
		void *q = guard_alloc(n, align);
		if (q != NULL) {
			/* counted as p, which was not handed out */
			count_alloc(tc, 0,
			            (int64_t)guard_size("malloc", q) -
			                (int64_t)s->npages * PA_PAGE_SIZE);
			free_large(s);
			return q;
		}
	}
	if ((fired & TCACHE_FIRED_PROF) && prof_active())
		sample_attach(tc, s, n, s->npages * PA_PAGE_SIZE);
	return p;
}

/* Count large block p of n bytes against the calling thread's sampler,
 * building the thread's cache if it has none yet (a thread whose first
 * blocks are large has none: without one they would go unsampled). The
 * call is kept a call, not a jump, so its caller's frame stays on the
 * stack for the trimming. */
static inline void *large_count_sample(void *p, size_t n, size_t align)
{
	struct pa_tcache *tc;
	if (p == NULL || (tc = tcache_get()) == NULL)
		return p;
	count_alloc(tc, 1, (int64_t)pagemap_lookup((uintptr_t)p)->npages * PA_PAGE_SIZE);
	if (__builtin_expect((tc->sample_left -= (int64_t)n) < 0, 0)) {
		p = large_sampled(tc, p, n, align);
		__asm__ volatile("" ::: "memory");
	}
	return p;
}

/* A large block of n bytes at an `align`-aligned address (a power of two:
 * the program's, 16 for malloc; the heap's blocks are page-aligned
 * whatever it is); with zero, the first n bytes read as zero. */
static void *__attribute__((noinline)) alloc_large(size_t n, size_t align, int zero)
{
	if (align <= PA_PAGE_SIZE && n <= PA_LARGE_SLOT_MAX_PAGES * PA_PAGE_SIZE) {
		/* The newest large slot, same size: no errno, no search. */
		void *p = large_take_newest(&tcache_self->large, n, zero);
		if (p != NULL)
			return large_count_sample(p, n, align);
	}
	return large_count_sample(
	    alloc_large_slow(n, align < PA_PAGE_SIZE ? PA_PAGE_SIZE : align, zero), n, align);
}

static void *__attribute__((noinline)) alloc_large_slow(size_t n, size_t align, int zero)
{
	int saved = errno; /* a success leaves errno alone, whatever the OS said */
	background_work(); /* no allocator lock is held here */
	void *p = NULL;
	if (large_size_ok(n, align) && malloc_ready() == 0) {
		struct pa_tcache *tc = tcache_real();
		p = large_alloc(n, align, zero, tcache_large(tc), tcache_spares(tc));
		if (p == NULL && enomem_reclaim())
			p = large_alloc(n, align, zero, tcache_large(tc), tcache_spares(tc));
	}
	errno = p != NULL ? saved : ENOMEM;
	return p;
}

/* pa_free of large block s past the fast path: into this thread's large
 * slots (its cache built for them if it has none yet), or back to the page
 * heap. */
static void __attribute__((noinline)) free_large(struct pa_span *s)
{
	int saved = errno;
	struct pa_tcache *tc;
	if (large_slots_may_keep(s) && (tc = tcache_get()) != NULL) {
		large_keep(s, &tc->large, &tc->spares);
	} else {
		tc = tcache_real();
		large_release(s, tcache_large(tc), tcache_spares(tc));
	}
	errno = saved;
}

/* Under valgrind, remember the requested size memcheck knows block p of
 * span s by (p's span is ours: we just allocated it). */
static void vg_note_size(void *p, size_t n)
{
	struct pa_span *s = pagemap_lookup((uintptr_t)p);
	if (s->cls == 0) {
		s->vg_req = n;
		return;
	}
	int exact;
	unsigned i = span_index(s, (uintptr_t)p, &exact);
	uint32_t *sizes =
	    os_alloc_once((void **)&s->vg_sizes, span_objects(s) * sizeof(uint32_t), NULL);
	if (sizes == NULL)
		return;
	sizes[i] = (uint32_t)n;
}

/* What a block holds: its class size or pages (under valgrind, what was
 * asked for, as with valgrind's own malloc_usable_size). */
static inline size_t span_usable_of(const struct pa_span *s, const void *p)
{
	if (vg_active()) {
		if (s->cls == 0)
			return s->vg_req;
		int exact;
		unsigned i = span_index(s, (uintptr_t)p, &exact);
		if (s->vg_sizes != NULL)
			return s->vg_sizes[i];
	}
	if (s->cls != 0)
		return span_size(s);
	struct prof_sample *r = span_sample(s);
	return r != NULL ? prof_sample_usable(r) : s->npages * PA_PAGE_SIZE;
}

/* ---- small objects ------------------------------------------------------- */

static void *small_sampled(size_t n, struct pa_tcache *tc, unsigned cls, size_t align, void *o);

static void *__attribute__((noinline)) small_alloc_slow(unsigned cls, size_t n, size_t align)
{
	int saved = errno; /* a success leaves errno alone, whatever the OS said */
	if (malloc_ready() != 0) {
		errno = ENOMEM;
		return NULL;
	}
	background_work(); /* no allocator lock is held here */
	void *p = tcache_alloc_slow(cls);
	if (p == NULL && enomem_reclaim())
		p = tcache_alloc_slow(cls);
	if (p == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	errno = saved;
	if (vg_active()) {
		VALGRIND_MAKE_MEM_NOACCESS(p, pa_sizeclasses[cls].size);
		vg_block_live(p, n, 0);
		vg_note_size(p, n);
		return p; /* no thread cache under memcheck: nothing sampled */
	}
	struct pa_tcache *tc = tcache_real();
	/* The refill's object: not a pop of the list (tcache_alloc_slow) */
	count_alloc(tc, 1, pa_sizeclasses[cls].size);
	if (tc != NULL && __builtin_expect((tc->sample_left -= (int64_t)n) < 0, 0)) {
		p = small_sampled(n, tc, cls, align, p);
		__asm__ volatile("" ::: "memory");
	}
	return p;
}

/* Object of class cls for a request of n bytes (n: for the sampler and
 * valgrind) at an `align`-aligned address (a constant where it is inlined:
 * only the sampler's calls read it). */
static inline void *small_alloc(size_t cls, size_t n, size_t align)
{
	struct pa_tcache *tc = tcache_self;
	void **o = tc->head[cls];
	if (__builtin_expect(o != NULL, 1)) {
		/* Load the next link before the count: the other order measured
		 * ~11-13 ns per pair against ~9 ns on this project's AMD EPYC
		 * machines (same instructions, in-run comparison). */
		void **next = o[0];
		tc->head[cls] = next;
		/* The next malloc of this class loads next's link and clears
		 * its free-key: start bringing its line in now. That load was
		 * the miss of the fast path (wl-service: malloc 16% of the
		 * run's CPU, most of it on this load); with the prefetch its
		 * user time fell from 0.57 s to 0.50 s (medians of 5). */
		__builtin_prefetch(next, 1);
		tcache_count_up(&tc->limit[cls]);
		o[1] = NULL; /* the free-key: this block is live now */
		/* The heap profile's count (prof.h): a subtraction from memory
		 * and a branch. The call below stays a call (the asm), so the
		 * entry point's frame stays on the stack for the trimming. */
		if (__builtin_expect((tc->sample_left -= (int64_t)n) < 0, 0)) {
			void *q = small_sampled(n, tc, cls, align, o);
			__asm__ volatile("" ::: "memory");
			return q;
		}
		return o;
	}
	return small_alloc_slow(cls, n, align);
}

/* pa_free of checked block p past the fast path: a large object, or a full
 * (or not yet built) thread list. */
static void __attribute__((noinline)) free_rest_of(struct pa_span *s, void *p)
{
	if (s->cls == 0) {
		/* Waiting in large slots already, its free-key overwritten. */
		if (!span_bit(s, 0))
			span_report("free", p, PA_OBJ_DOUBLE_FREE);
		free_large(s);
	} else {
		int saved = errno;
		tcache_free_slow(s->cls, p);
		errno = saved;
	}
	background_work(); /* no allocator lock is held here */
	/* After the allocator's last write to the block: from here on any
	 * access to it is the program's, and memcheck reports it. */
	if (vg_active())
		VALGRIND_FREELIKE_BLOCK(p, 0);
}

/* pa_free of live sampled block p (its large span s, record r): the
 * profile forgets it, and its pages go back to the heap (a sampled small
 * block's page would only crowd the large slots). */
static void __attribute__((noinline))
free_sampled(struct pa_span *s, void *p, struct prof_sample *r)
{
	int saved = errno;
	span_set_sample(s, NULL);
	size_t usable = prof_sample_usable(r);
	prof_unrecord(r);
	if (usable <= PA_SC_MAX_SMALL) {
		struct pa_tcache *tc = tcache_real();
		large_release(s, tcache_large(tc), tcache_spares(tc));
	} else {
		free_large(s);
	}
	errno = saved;
	background_work(); /* no allocator lock is held here */
	(void)p;
}

/* Checked block p past the fast path (s: its span, or NULL when pa_free's
 * fast checks did not look it up). */
static void __attribute__((noinline)) free_slow(struct pa_span *s, void *p)
{
	if (s == NULL)
		s = pagemap_lookup((uintptr_t)p);
	if (s->cls != 0 || span_bit(s, 0)) {
		struct prof_sample *r = s->cls == 0 ? span_sample(s) : NULL;
		size_t usable = s->cls != 0 ? span_size(s)
		                : r != NULL ? prof_sample_usable(r)
		                            : s->npages * PA_PAGE_SIZE;
		count_free(tcache_get(), 1, (int64_t)usable);
	}
	if (s->cls == 0 && span_bit(s, 0)) {
		struct prof_sample *r = span_sample(s);
		if (r != NULL) {
			free_sampled(s, p, r);
			return;
		}
		/* A large block into a free slot of this thread's cache: no frame. */
		if (large_put_room(tcache_large(tcache_real()), s))
			return;
	}
	free_rest_of(s, p);
}

/* ---- checking a pointer -------------------------------------------------- */

/* pa_free's page-map leaf for leaf index r when it is not the one the
 * thread's cache holds (tcache.h: leaf): the map's, or NULL, also for an
 * index past the map (a pointer with bits above the 47th set: the fast
 * checks read only the address's low 30 bits once its leaf is found). A
 * real cache then holds it (not a placeholder, which every thread reads). */
static inline struct pa_span **free_leaf_miss(struct pa_tcache *tc, uintptr_t r)
{
	struct pa_span **leaf = pagemap_leaf_bounded(r);
	if (leaf != NULL && tc->max[1] != 0) {
		tc->leaf_r = r;
		tc->leaf = leaf;
	}
	return leaf;
}

/* Which check does block p fail? PA_OBJ_FOREIGN .. PA_OBJ_DOUBLE_FREE, or
 * -1 when it is a live block; *span gets its span. With `fast` (pa_free's
 * fast path, a constant) the checks read the page map's entry of p's page
 * (pagemap.h: class, index in its span, fbump) in the leaf that tc holds
 * when p is in its GiB (else free_leaf_miss's), and no span record: *span
 * is NULL, *cls gets the class, which the push uses (it then waits for one
 * load after p); the offset in the span is the page's offset and p's in
 * its page, its index and exactness the class's magic's; the alloc bit is
 * not read (a load whose address depends on the object index cost ~5 ns per
 * pair, docs/design.md) and the bound is fbump, not bump: while no page of
 * the span is released the bump index and the free-key catch the same
 * faults unless the freed block was written after the free (the bit is
 * checked again when the object returns to its span); after, fbump is 0
 * and every block fails, as does every block of a large object (class 0:
 * its magic is 0) and any address on a page no span holds (an entry of
 * zeros). A block that fails the fast checks is checked again without
 * `fast` (free_other), which frees it or names its fault. */
static inline __attribute__((always_inline)) int
block_check_as(void *p, struct pa_span **span, struct pa_tcache *tc, size_t *cls, int fast)
{
	uintptr_t a = (uintptr_t)p;
	struct pa_span *s;
	if (fast) {
		struct pa_span **leaf = tc->leaf;
		uintptr_t r = a >> PA_PAGEMAP_LEAF_SHIFT;
		*span = NULL;
		if (__builtin_expect(r != tc->leaf_r, 0)) {
			leaf = free_leaf_miss(tc, r);
			if (leaf == NULL)
				return PA_OBJ_FOREIGN;
		}
		size_t c = __atomic_load_n(
		    &pagemap_leaf_classes(leaf)[(a >> PA_PAGE_SHIFT) & (PA_PAGEMAP_LEAF_LEN - 1)],
		    __ATOMIC_RELAXED);
		*cls = c;
		uint16_t fbump = pagemap_leaf_fbump(leaf, a); /* first: no index kept */
		uint32_t off = (uint32_t)(a & (PA_PAGE_SIZE - 1)) +
		               (pagemap_leaf_page(leaf, a) << PA_PAGE_SHIFT);
		uint32_t magic = tc->magic[c];
		uint64_t x = (uint64_t)off * magic;
		if (__builtin_expect((uint32_t)x >= magic, 0))
			return PA_OBJ_INTERIOR;
		/* The index in 16 bits: off is below the span's bytes. */
		_Static_assert(PA_SC_MAX_PAGES * PA_PAGE_SIZE / 16 <= UINT16_MAX,
		               "index in 16 bits");
		if (__builtin_expect((uint16_t)(x >> 32) >= fbump, 0))
			return PA_OBJ_FOREIGN; /* an object the span never handed out */
		if (__builtin_expect(((void **)p)[1] == (void *)span_free_key(p), 0))
			return PA_OBJ_DOUBLE_FREE;
		return -1;
	}
	s = pagemap_lookup(a);
	*span = s;
	if (__builtin_expect(s == NULL, 0))
		return PA_OBJ_FOREIGN;
	/* A large object passes the same checks as a one-object span. */
	int exact;
	unsigned i = span_index(s, a, &exact);
	if (__builtin_expect(!exact || i >= span_objects(s), 0))
		return PA_OBJ_INTERIOR;
	if (__builtin_expect(i >= __atomic_load_n(&s->bump, __ATOMIC_RELAXED), 0))
		return PA_OBJ_FOREIGN; /* an object the span never handed out */
	if (__builtin_expect(!span_bit(s, i) || ((void **)p)[1] == (void *)span_free_key(p), 0))
		return PA_OBJ_DOUBLE_FREE;
	return -1;
}

static inline int block_check(void *p, struct pa_span **span)
{
	return block_check_as(p, span, NULL, NULL, 0);
}

/* Out of line, so the fast paths keep no frame for the report. */
/* func(p), p failing the page map's checks as foreign (span s, or NULL):
 * where p is in this heap's own memory, say precisely what is there (abort);
 * else return (span_report's words: another's memory, or a large block's
 * inside). */
static void __attribute__((cold)) foreign_in_heap(const char *func, void *p, struct pa_span *s)
{
	const char *what = NULL;
	if (s != NULL && s->cls != 0) {
		what = "at a block its span has not handed out: freed already, or never one";
	} else if (s == NULL) {
		struct pages_chunk_view v;
		uintptr_t a = (uintptr_t)p;
		if (pages_chunk_view(a, &v) && a - v.base < PA_CHUNK_SIZE) {
			size_t i = (a - v.base) >> PA_PAGE_SHIFT;
			uint64_t bit = (uint64_t)1 << (i % 64);
			if (!(v.alloc[i / 64] & bit) || (v.cached[i / 64] & bit))
				what = "on a free page of its own: a block freed already, or never "
				       "one";
		}
	}
	if (what == NULL)
		return;
	struct pa_msg m;
	msg_begin(&m);
	msg_str(&m, func);
	msg_str(&m, "(");
	msg_hex(&m, (uintptr_t)p);
	msg_str(&m, "): not a live block of this heap (");
	msg_str(&m, what);
	msg_str(&m, ")");
	msg_end(&m);
	os_abort();
}

static _Noreturn void __attribute__((noinline, cold)) block_fault(const char *func, void *p)
{
	struct pa_span *s;
	enum pa_obj_fault f = (enum pa_obj_fault)block_check(p, &s);
	if (f == PA_OBJ_FOREIGN)
		foreign_in_heap(func, p, s);
	span_report(func, p, f);
}

static void free_sized_other(void *p, size_t size, const char *func);

/* Checked block p onto this thread's list of its class, or free_slow. With
 * `func` not NULL (C++'s sized delete, preload/malloc_names.c, past
 * pa_free's fast checks) only a block whose size's class is its own
 * (pa_sc_sizes: one compare) and that goes onto the list; free_sized_other
 * takes anything else: a wrong size, a large block (class 0 holds no size,
 * and has no room), a full list, and every block under memcheck (no thread
 * cache: no room).
 * free_block's NULL, a constant, leaves no code for it. */
static inline void free_block_as(struct pa_tcache *tc, struct pa_span *s, size_t cls, void *p,
                                 size_t size, const char *func)
{
	void **o = p;
	int full = tc->freed[cls] == tc->limit[cls];
	if (func != NULL &&
	    __builtin_expect(size - pa_sc_sizes.lo[cls] >= pa_sc_sizes.width[cls] || full, 0)) {
		free_sized_other(p, size, func);
		return;
	}
	o[1] = (void *)span_free_key(p);
	/* List 0 (large objects) has bound 0, so no room, in every cache. */
	if (__builtin_expect(full, 0)) {
		free_slow(s, p);
		return;
	}
	o[0] = tc->head[cls];
	tc->head[cls] = o;
	tcache_count_up(&tc->freed[cls]);
}

static inline void free_block(struct pa_span *s, void *p)
{
	free_block_as(tcache_self, s, s->cls, p, 0, NULL);
}

/* Checked block p of a heap's span s (span_heaps) into its heap, under the
 * name of func: 1, or 0 when the heap was deleted meanwhile (p is the
 * default heap's now). */
static int __attribute__((noinline)) free_heaps(struct pa_span *s, void *p, const char *func)
{
	int saved = errno;
	int done = heap_free(s, p, func, tcache_spares(tcache_real()));
	errno = saved;
	if (!done)
		return 0;
	if (vg_active())
		VALGRIND_FREELIKE_BLOCK(p, 0);
	background_work(); /* no allocator lock is held here */
	return 1;
}

/* Checked small block p of span s, whose fbump is 0, straight back to its
 * span when the span drains (central.h): 1, else 0. */
static int __attribute__((noinline)) free_draining(struct pa_span *s, void *p)
{
	int saved = errno;
	struct pa_tcache *tc = tcache_real();
	if (!central_give_draining(p, tcache_spares(tc)))
		return 0;
	count_free(tc, 1, (int64_t)span_size(s));
	errno = saved;
	if (vg_active())
		VALGRIND_FREELIKE_BLOCK(p, 0);
	return 1;
}

/* Checked block p of span s, past pa_free's fast path: into its heap when
 * s is a heap's, back to its span when the span drains, else free_block. */
static inline void free_checked(struct pa_span *s, void *p, const char *func)
{
	if (span_heaps(s) && free_heaps(s, p, func))
		return;
	if (s->cls != 0 && __atomic_load_n(&s->fbump, __ATOMIC_RELAXED) == 0 && free_draining(s, p))
		return;
	free_block(s, p);
}

/* Small block o of class cls, for n bytes at an `align`-aligned address,
 * took the thread's count below zero: hand out instead what came due, a
 * guarded block (guard.h) or a sampled block with a page of its own
 * (prof.h), o going back to the list. Without either (off, busy in this
 * thread, or out of room) o itself. */
static void *__attribute__((noinline))
small_sampled(size_t n, struct pa_tcache *tc, unsigned cls, size_t align, void *o)
{
	unsigned fired = tcache_sample_fire(tc);
	if (tc->prof.busy)
		return o;
	/* o was counted handed out, and its return to the list is counted
	 * freed: both taken back, the block handed out in its place counted. */
	int64_t size = pa_sizeclasses[cls].size;
	if (fired & TCACHE_FIRED_GUARD) {
		void *q = guard_alloc(n, align);
		if (q != NULL) {
			free_block(pagemap_lookup((uintptr_t)o), o);
			count_free(tc, -1, -size);
			count_alloc(tc, 0, (int64_t)guard_size("malloc", q) - size);
			return q;
		}
	}
	size_t usable = pa_sizeclasses[cls].size;
	if (!(fired & TCACHE_FIRED_PROF) || !prof_active())
		return o;
	void *p = large_alloc(usable, PA_PAGE_SIZE, 0, &tc->large, &tc->spares);
	if (p == NULL)
		return o;
	struct pa_span *s = pagemap_lookup((uintptr_t)p);
	if (sample_attach(tc, s, n, usable) != 0) {
		large_release(s, &tc->large, &tc->spares);
		return o;
	}
	free_block(pagemap_lookup((uintptr_t)o), o);
	count_free(tc, -1, -size);
	return p;
}

/* ---- the API ------------------------------------------------------------- */

void *pa_malloc(size_t n)
{
	/* pa_size_to_class's own test first: the common sizes take one
	 * compare and no taken branch to their class (one instruction and a
	 * jump a pair less than testing PA_SC_MAX_SMALL first). */
	size_t cls;
	if (__builtin_expect(n <= PA_SC_SMALL_MAX, 1))
		cls = pa_size_to_class(n);
	else if (n <= PA_SC_MAX_SMALL)
		cls = pa_size_to_class(n);
	else
		return alloc_large(n, 16, 0);
	return small_alloc(cls, n, 16);
}

/* pa_free of a block that failed the fast checks: NULL, a bad pointer
 * (reported), or a live block of a span with a released page. */
static void __attribute__((noinline)) free_other(void *p)
{
	struct pa_span *s;
	if (p == NULL)
		return;
	if (block_check(p, &s) >= 0) {
		if (guard_owns(p)) {
			guard_free_counted("free", p);
			return;
		}
		block_fault("free", p);
	}
	free_checked(s, p, "free");
}

void pa_free(void *p)
{
	struct pa_tcache *tc = tcache_self;
	struct pa_span *s;
	size_t cls;
	/* NULL is never in the page map: it takes free_other's path. */
	if (__builtin_expect(block_check_as(p, &s, tc, &cls, 1) >= 0, 0)) {
		free_other(p);
		return;
	}
	free_block_as(tc, s, cls, p, 0, NULL);
}

/* The class of a block of n bytes at an `align`-aligned address (a power of
 * two; up to 16: malloc's) as the allocation gives it: the smallest whose
 * size is a multiple of the alignment (spans are page-aligned, so its
 * objects are aligned), or 0: whole pages (a large block). */
static unsigned block_class(size_t align, size_t n)
{
	if (n > PA_SC_MAX_SMALL || align > PA_PAGE_SIZE)
		return 0;
	if (align <= 16)
		return pa_size_to_class(n);
	unsigned cls = pa_size_to_class(n < align ? align : n);
	while (cls < PA_SC_NUM_CLASSES && pa_sizeclasses[cls].size % align != 0)
		cls++;
	return cls < PA_SC_NUM_CLASSES ? cls : 0;
}

static int fits_in_place(const struct pa_span *s, size_t n);

/* Was block p of span s asked for with `size` bytes (and `align`, 0 for
 * none)? The size must give the block's own class, or for a large block its
 * page count. With `exact` (C++'s sized delete: operator new's block as it
 * was made) nothing else; without (free_sized) also a size realloc kept the
 * block for in place (fits_in_place, large_resize). */
static int sized_ok(const struct pa_span *s, size_t size, size_t align, int exact)
{
	unsigned cls = block_class(align, size);
	if (s->cls != 0)
		return cls == s->cls || (!exact && fits_in_place(s, size));
	/* A sampled small block on a page of its own (realloc moves it), or a
	 * large block (sampled or not): its class's size, or its pages. */
	struct prof_sample *r = span_sample(s);
	if (r != NULL && cls != 0 && pa_sizeclasses[cls].size == prof_sample_usable(r))
		return 1;
	if (r != NULL && prof_sample_usable(r) < s->npages * PA_PAGE_SIZE)
		return 0; /* a small class's sample, not whole pages */
	size_t pages = large_pages_of(size);
	return large_pages_fit(s->npages, pages != 0 ? pages : 1) && (cls == 0 || !exact);
}

/* func(p, size): the size is not the block's. The report names the size
 * passed, the block's and the sizes its class (or page count) holds; for a
 * guarded block (`guarded`, s NULL) its exact size and allocation stack. */
static _Noreturn void __attribute__((noinline, cold))
sized_fault(const char *func, void *p, size_t size, size_t align, const struct pa_span *s,
            size_t guarded)
{
	struct pa_msg m;
	msg_begin(&m);
	msg_str(&m, func);
	msg_str(&m, "(");
	msg_hex(&m, (uintptr_t)p);
	msg_str(&m, "): wrong size: ");
	msg_uint(&m, size);
	msg_str(&m, size == 1 ? " byte passed for a " : " bytes passed for a ");
	if (s == NULL) {
		msg_uint(&m, guarded);
		msg_str(&m, "-byte guarded block (its size exactly)");
		guard_msg_alloc_stack(&m, p);
		msg_end(&m);
		os_abort();
	}
	struct prof_sample *r = s->cls == 0 ? span_sample(s) : NULL;
	size_t usable = s->cls != 0 ? span_size(s)
	                : r != NULL ? prof_sample_usable(r)
	                            : s->npages * PA_PAGE_SIZE;
	unsigned cls = s->cls != 0                              ? s->cls
	               : r != NULL && usable <= PA_SC_MAX_SMALL ? pa_size_to_class(usable)
	                                                        : 0;
	msg_uint(&m, usable);
	msg_str(&m, "-byte block (");
	if (cls != 0) {
		msg_str(&m, "size class ");
		msg_uint(&m, cls);
		msg_str(&m, ", which holds ");
		/* For an alignment past 16 the class holds the sizes above the
		 * class below it whose size is a multiple of the alignment. */
		size_t lo = pa_sc_sizes.lo[cls];
		if (align > 16) {
			unsigned c = cls - 1;
			while (c > 0 && pa_sizeclasses[c].size % align != 0)
				c--;
			lo = c > 0 ? pa_sizeclasses[c].size + 1 : 0;
		}
		msg_uint(&m, lo);
		msg_str(&m, " to ");
		msg_uint(&m, pa_sizeclasses[cls].size);
	} else {
		/* The fewest pages it may have been asked for (large_pages_fit) */
		size_t least = s->npages;
		while (least > 1 && large_pages_fit(s->npages, least - 1))
			least--;
		msg_uint(&m, s->npages);
		msg_str(&m, s->npages == 1 ? " page, which holds " : " pages, which hold ");
		msg_uint(&m, (least - 1) * PA_PAGE_SIZE + 1);
		msg_str(&m, " to ");
		msg_uint(&m, usable);
	}
	msg_str(&m, " bytes)");
	msg_end(&m);
	os_abort();
}

/* A free_sized, free_aligned_sized or sized delete of p under the name of
 * `func`: checked (sized_ok, or a guarded block's exact size; the
 * alignment, where one is given), then freed. */
static void free_sized_checked(void *p, size_t size, size_t align, const char *func, int exact)
{
	if (p == NULL)
		return;
	struct pa_span *s;
	if (block_check(p, &s) >= 0) {
		if (!guard_owns(p))
			block_fault(func, p);
		size_t n = guard_size(func, p);
		if (size != n)
			sized_fault(func, p, size, align, NULL, n);
		if (align != 0 && ((uintptr_t)p & (align - 1)) != 0)
			span_report(func, p, PA_OBJ_BAD_ALIGN);
		guard_free_counted(func, p);
		return;
	}
	if (!sized_ok(s, size, align, exact))
		sized_fault(func, p, size, align, s, 0);
	if (align != 0 && ((uintptr_t)p & (align - 1)) != 0)
		span_report(func, p, PA_OBJ_BAD_ALIGN);
	free_checked(s, p, func);
}

void pa_free_sized(void *p, size_t size)
{
	free_sized_checked(p, size, 0, "free_sized", 0);
}

/* A C++ sized delete past the fast path (free_block_as): checked exactly. */
static void __attribute__((noinline)) free_sized_other(void *p, size_t size, const char *func)
{
	free_sized_checked(p, size, 0, func, 1);
}

void pa_free_aligned_sized(void *p, size_t alignment, size_t size)
{
	free_sized_checked(p, size, alignment, "free_aligned_sized", 0);
}

void *pa_calloc(size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	if (total > PA_SC_MAX_SMALL)
		return alloc_large(total, 16, 1);
	void *p = small_alloc(pa_size_to_class(total), total, 16);
	if (p != NULL)
		memset(p, 0, total);
	return p;
}

/* Power-of-two alignment > 16: a class whose size is a multiple of the
 * alignment (spans are page-aligned, so its objects are aligned), else
 * whole pages at an aligned address. */
static void *aligned_alloc_pow2(size_t align, size_t n)
{
	if (align <= 16)
		return pa_malloc(n);
	unsigned cls = block_class(align, n);
	if (cls != 0)
		return small_alloc(cls, n, align);
	return alloc_large(n, align, 0);
}

/* glibc 2.36's _mid_memalign: alignments up to 16 are malloc's, others are
 * rounded up to a power of two; more than SIZE_MAX / 2 + 1 is EINVAL. */
void *pa_memalign(size_t alignment, size_t size)
{
	if (alignment <= 16)
		return pa_malloc(size);
	if (alignment > SIZE_MAX / 2 + 1) {
		errno = EINVAL;
		return NULL;
	}
	if ((alignment & (alignment - 1)) != 0) {
		size_t a = 32;
		while (a < alignment)
			a <<= 1;
		alignment = a;
	}
	return aligned_alloc_pow2(alignment, size);
}

/* glibc 2.36 makes aligned_alloc an alias of memalign (the power-of-two
 * check came in 2.38). */
void *pa_aligned_alloc(size_t alignment, size_t size)
{
	return pa_memalign(alignment, size);
}

int pa_posix_memalign(void **out, size_t alignment, size_t size)
{
	if (alignment % sizeof(void *) != 0 || alignment == 0 ||
	    ((alignment / sizeof(void *)) & (alignment / sizeof(void *) - 1)) != 0)
		return EINVAL;
	void *p = pa_memalign(alignment, size);
	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}

#define OS_PAGE ((size_t)4096)

void *pa_valloc(size_t size)
{
	return pa_memalign(OS_PAGE, size);
}

void *pa_pvalloc(size_t size)
{
	size_t rounded;
	if (__builtin_add_overflow(size, OS_PAGE - 1, &rounded)) {
		errno = ENOMEM;
		return NULL;
	}
	return pa_memalign(OS_PAGE, rounded & ~(OS_PAGE - 1));
}

/* pa_malloc_usable_size_as of a block that failed pa_free's fast checks:
 * NULL, a guarded block, a bad pointer (reported), or a live block of a
 * span with a released page. */
static size_t __attribute__((noinline)) usable_size_other(void *p, const char *func)
{
	if (p == NULL)
		return 0;
	struct pa_span *s;
	if (block_check(p, &s) >= 0) {
		if (!guard_owns(p))
			block_fault(func, p);
		return guard_size(func, p);
	}
	return span_usable_of(s, p);
}

size_t pa_malloc_usable_size_as(void *p, const char *func)
{
	/* pa_free's fast checks first (the page map's entry in the thread's
	 * leaf, no span record, no alloc bit: block_check_as), out of the way
	 * of a frame: a program that keeps count of its heap asks at every
	 * malloc and free (Redis's zmalloc; the full check alone was 2.5% of a
	 * GET-bound server's CPU). What passes them is a small block of the
	 * default heap, whose size is its class's (under memcheck no block
	 * passes: no thread cache, no magics). A block that fails them is
	 * checked in full, which names its fault. */
	struct pa_span *s;
	size_t cls;
	if (__builtin_expect(block_check_as(p, &s, tcache_self, &cls, 1) < 0, 1))
		return pa_sizeclasses[cls].size;
	return usable_size_other(p, func);
}

size_t pa_malloc_usable_size(void *p)
{
	return pa_malloc_usable_size_as(p, "malloc_usable_size");
}

/* Can the block of small span s hold n bytes where it is? Shrinking it to
 * half its size or less moves it, so memory follows the size. (A large
 * block: large_resize.) */
static int fits_in_place(const struct pa_span *s, size_t n)
{
	return n <= span_size(s) && (n > span_size(s) / 2 || s->cls == 1);
}

static void *realloc_into(struct pa_heap *h, struct pa_span *s, void *p, size_t n);

/* pa_realloc of p, which failed the page map's checks: a guarded block
 * (guard.h) moves to a new block, anything else is reported. */
static void *__attribute__((noinline, cold)) realloc_guarded(void *p, size_t n)
{
	if (!guard_owns(p))
		block_fault("realloc", p);
	size_t old = guard_size("realloc", p);
	void *q = pa_malloc(n);
	if (q == NULL)
		return NULL;
	memcpy(q, p, old < n ? old : n);
	guard_free_counted("realloc", p);
	return q;
}

void *pa_realloc(void *p, size_t n)
{
	if (p == NULL)
		return pa_malloc(n);
	if (n == 0) {
		pa_free(p);
		return NULL;
	}
	struct pa_span *s;
	if (block_check(p, &s) >= 0)
		return realloc_guarded(p, n);
	if (span_heaps(s))
		return realloc_into(heap_of(s), s, p, n);
	if (vg_active())
		goto move; /* memcheck knows the block by its requested size */
	if (s->cls != 0 && fits_in_place(s, n))
		return p;
	if (s->cls == 0 && span_sample(s) == NULL) {
		/* (a sampled block moves: its sample is of the old size) */
		int64_t before = (int64_t)s->npages * PA_PAGE_SIZE;
		struct pa_tcache *tc = tcache_real();
		if (large_resize(s, n, tcache_large(tc))) {
			/* grown: more allocated; shrunk: its tail freed */
			int64_t grew = (int64_t)s->npages * PA_PAGE_SIZE - before;
			if (grew > 0)
				count_alloc(tc, 0, grew);
			else
				count_free(tc, 0, -grew);
			return p;
		}
	}
move:;
	void *q = pa_malloc(n);
	if (q == NULL)
		return NULL;
	size_t old = span_usable_of(s, p);
	vg_copy(q, p, old < n ? old : n);
	free_block(s, p);
	return q;
}

void *pa_reallocarray(void *p, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return pa_realloc(p, total);
}

void pa_thread_cache_flush(void)
{
	/* The stashes first: spans they empty leave their records in this
	 * thread's spares, which the cache's flush gives back. */
	struct pa_tcache *tc = tcache_real();
	sweep_stashes(1, tcache_large(tc), tcache_spares(tc));
	tcache_flush_self();
}

int pa_malloc_trim(size_t pad)
{
	pa_thread_cache_flush();
	pa_cache_flush();
	size_t swept = sweep_spans(pages_epoch(), 0, UINT_MAX);
	swept += span_meta_trim(1); /* pages of span descriptors that are all free */
	size_t mapped, released, inuse;
	pages_totals(&mapped, &released, &inuse);
	size_t free_resident = mapped - released - inuse;
	if (free_resident <= pad)
		return swept > 0;
	return (pa_scavenge(pad == 0 ? 0 : free_resident - pad) | swept) > 0;
}

/* ---- heap profiles (prof.h): after the heap's set-up, which reads
 * PAGEALLOC_CONF and starts the profile's clock ---------------------------- */

int pa_prof_dump(const char *path)
{
	if (malloc_ready() != 0) {
		errno = ENOMEM;
		return -1;
	}
	return prof_dump(path);
}

int pa_prof_active(int on)
{
	malloc_ready();
	return prof_set_active(on);
}

void pa_prof_stats(struct pa_prof_stats *st)
{
	struct prof_totals t;
	malloc_ready();
	prof_totals(&t);
	st->samples_live = t.samples_live;
	st->samples_total = t.samples_total;
	st->sites = t.sites;
	st->meta_bytes = t.meta_bytes;
	st->sample_bytes = t.sample_pages;
	st->sample_overhead = t.sample_extra;
	st->inuse_bytes = t.inuse_bytes > 0 ? (size_t)(t.inuse_bytes + 0.5) : 0;
	st->alloc_bytes = t.alloc_bytes > 0 ? (size_t)(t.alloc_bytes + 0.5) : 0;
	st->files_written = t.files_written;
	st->write_errors = t.write_errors;
}

/* ---- heaps of the program's own (heap.h) ------------------------------------- */

pa_heap_t *pa_heap_new(void)
{
	if (malloc_ready() != 0) {
		errno = ENOMEM;
		return NULL;
	}
	return heap_new();
}

/* A block of n bytes of heap h at an `align`-aligned address (a power of
 * two, at least 16), reading as zero with zero: a class whose size is a
 * multiple of align, else whole pages. NULL with errno = ENOMEM. */
static void *heap_block(struct pa_heap *h, size_t n, size_t align, int zero)
{
	int saved = errno; /* a success leaves errno alone, whatever the OS said */
	struct pa_span_spares *sp = tcache_spares(tcache_real());
	unsigned cls = PA_SC_NUM_CLASSES;
	if (n <= PA_SC_MAX_SMALL && align <= PA_PAGE_SIZE) {
		cls = pa_size_to_class(n < align ? align : n);
		/* Every class is a multiple of 16 (the division is ~30% of a
		 * heap's malloc when it runs for every one). */
		while (align > 16 && cls < PA_SC_NUM_CLASSES &&
		       pa_sizeclasses[cls].size % align != 0)
			cls++;
	}
	void *p = NULL;
	if (cls < PA_SC_NUM_CLASSES) {
		p = heap_alloc_small(h, cls, sp);
		if (p == NULL && errno == ENOMEM && enomem_reclaim())
			p = heap_alloc_small(h, cls, sp);
		if (p != NULL) {
			vg_block_live(p, n, zero);
			if (zero)
				memset(p, 0, n);
		}
	} else if (large_size_ok(n, align)) {
		size_t a = align < PA_PAGE_SIZE ? PA_PAGE_SIZE : align;
		p = heap_alloc_large(h, n, a, zero, sp);
		if (p == NULL && errno == ENOMEM && enomem_reclaim())
			p = heap_alloc_large(h, n, a, zero, sp);
		/* No allocator lock is held here. (Small blocks leave it to the
		 * destroy, whose free pages are the scavenger's work.) */
		background_work();
	}
	errno = p != NULL ? saved : ENOMEM;
	return p;
}

void *pa_heap_malloc(pa_heap_t *h, size_t n)
{
	return heap_block(heap_check(h, "pa_heap_malloc"), n, 16, 0);
}

void *pa_heap_calloc(pa_heap_t *h, size_t n, size_t size)
{
	struct pa_heap *hp = heap_check(h, "pa_heap_calloc");
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return heap_block(hp, total, 16, 1);
}

/* pa_memalign's rules: at most 16 is malloc's, others round up to a power
 * of two, more than SIZE_MAX / 2 + 1 is EINVAL. */
void *pa_heap_aligned_alloc(pa_heap_t *h, size_t alignment, size_t n)
{
	struct pa_heap *hp = heap_check(h, "pa_heap_aligned_alloc");
	if (alignment > SIZE_MAX / 2 + 1) {
		errno = EINVAL;
		return NULL;
	}
	size_t a = 16;
	while (a < alignment)
		a <<= 1;
	return heap_block(hp, n, a, 0);
}

/* Checked block p of span s as a block of n > 0 bytes of heap h: where it
 * is when it is h's and fits, else moved into h (and p freed). */
static void *realloc_into(struct pa_heap *h, struct pa_span *s, void *p, size_t n)
{
	if (span_heaps(s) && heap_of(s) == h && !vg_active() && heap_fits(s, n))
		return p;
	void *q = heap_block(h, n, 16, 0);
	if (q == NULL)
		return NULL;
	size_t old = span_usable_of(s, p);
	vg_copy(q, p, old < n ? old : n);
	free_checked(s, p, "realloc");
	return q;
}

void *pa_heap_realloc(pa_heap_t *h, void *p, size_t n)
{
	struct pa_heap *hp = heap_check(h, "pa_heap_realloc");
	if (p == NULL)
		return heap_block(hp, n, 16, 0);
	if (n == 0) {
		pa_free(p);
		return NULL;
	}
	struct pa_span *s;
	if (block_check(p, &s) >= 0) {
		if (!guard_owns(p))
			block_fault("pa_heap_realloc", p);
		size_t old = guard_size("pa_heap_realloc", p);
		void *q = heap_block(hp, n, 16, 0);
		if (q != NULL) {
			memcpy(q, p, old < n ? old : n);
			guard_free("pa_heap_realloc", p);
		}
		return q;
	}
	return realloc_into(hp, s, p, n);
}

void pa_heap_destroy(pa_heap_t *h)
{
	if (h == NULL)
		return;
	heap_destroy(heap_check(h, "pa_heap_destroy"));
	background_work(); /* no allocator lock is held here */
}

void pa_heap_delete(pa_heap_t *h)
{
	if (h == NULL)
		return;
	heap_delete(heap_check(h, "pa_heap_delete"), tcache_spares(tcache_real()));
}

int pa_heap_stats(pa_heap_t *h, struct pa_heap_stats *st)
{
	struct pa_heap *hp = heap_check(h, "pa_heap_stats");
	if (st == NULL) {
		errno = EINVAL;
		return -1;
	}
	heap_stats(hp, st);
	return 0;
}

void pa_heap_set_limit(pa_heap_t *h, size_t bytes)
{
	heap_set_limit(heap_check(h, "pa_heap_set_limit"), bytes);
}

int pa_heap_set_numa_node(pa_heap_t *h, int node)
{
	return heap_set_numa_node(heap_check(h, "pa_heap_set_numa_node"), node);
}

/* ---- defragmentation (central.h, heap.h: the defrag contract) ----------------- */

/* p checked as pa_free checks it, under func's name (a bad pointer: its one
 * line): its span when p is a live small block of a span (a heap's or the
 * central lists'), else NULL (NULL, a guarded, large or sampled block:
 * nothing defrag judges). */
static struct pa_span *defrag_span(const char *func, const void *p)
{
	struct pa_span *s;
	if (p == NULL || malloc_ready() != 0)
		return NULL;
	if (block_check((void *)p, &s) >= 0) {
		if (guard_owns(p))
			return NULL;
		block_fault(func, (void *)p);
	}
	return s->cls != 0 ? s : NULL;
}

/* The span of p when it is a live small block of the default heap's. */
static struct pa_span *defrag_central_span(const char *func, const void *p)
{
	struct pa_span *s = defrag_span(func, p);
	return s != NULL && !span_heaps(s) ? s : NULL;
}

int pa_defrag_hint(const void *p)
{
	struct pa_span *s = defrag_central_span("pa_defrag_hint", p);
	return s != NULL && central_defrag_hint(s);
}

/* The allocation's counts and, under memcheck, its block (the object came
 * straight from a span: no thread cache). */
static void *defrag_got(void *p, unsigned cls, size_t n)
{
	count_alloc(tcache_real(), 1, pa_sizeclasses[cls].size);
	if (vg_active()) {
		VALGRIND_MAKE_MEM_NOACCESS(p, pa_sizeclasses[cls].size);
		vg_block_live(p, n, 0);
		vg_note_size(p, n);
	}
	return p;
}

void *pa_defrag_malloc(size_t n)
{
	if (n > PA_SC_MAX_SMALL)
		return pa_malloc(n);
	if (malloc_ready() != 0) {
		errno = ENOMEM;
		return NULL;
	}
	int saved = errno;
	unsigned cls = pa_size_to_class(n);
	void *p = central_defrag_take(cls, NULL, tcache_spares(tcache_real()));
	if (p == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	errno = saved;
	return defrag_got(p, cls, n);
}

/* Live small block p of central span s straight back to its span. */
static void defrag_give(struct pa_span *s, void *p)
{
	int saved = errno;
	struct pa_tcache *tc = tcache_real();
	count_free(tc, 1, (int64_t)span_size(s));
	central_defrag_give(p, tcache_spares(tc));
	if (vg_active())
		VALGRIND_FREELIKE_BLOCK(p, 0);
	errno = saved;
}

void pa_defrag_free(void *p)
{
	struct pa_span *s = defrag_central_span("pa_defrag_free", p);
	if (s == NULL) {
		pa_free(p); /* a heap's block goes to its span all the same */
		return;
	}
	defrag_give(s, p);
}

void *pa_defrag_move(void *p)
{
	struct pa_span *s = defrag_central_span("pa_defrag_move", p);
	if (s == NULL || !central_defrag_hint(s))
		return p;
	size_t n = span_usable_of(s, p);
	void *q = central_defrag_take(s->cls, s, tcache_spares(tcache_real()));
	if (q == NULL)
		return p; /* another thread filled the destination meanwhile */
	defrag_got(q, s->cls, n);
	vg_copy(q, p, n);
	defrag_give(s, p);
	return q;
}

size_t pa_defrag_frag_bytes(void)
{
	size_t bytes = 0;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++) {
		struct central_occupancy o;
		central_occupancy(cls, &o);
		bytes += o.partial_free * pa_sizeclasses[cls].size;
	}
	return bytes;
}

/* The span of p when it is a live small block of heap h's. */
static struct pa_span *defrag_heap_span(struct pa_heap *h, const char *func, const void *p)
{
	struct pa_span *s = defrag_span(func, p);
	return s != NULL && span_heaps(s) && heap_of(s) == h ? s : NULL;
}

int pa_heap_defrag_hint(pa_heap_t *h, const void *p)
{
	struct pa_heap *hp = heap_check(h, "pa_heap_defrag_hint");
	struct pa_span *s = defrag_heap_span(hp, "pa_heap_defrag_hint", p);
	return s != NULL && heap_defrag_hint(hp, s);
}

void *pa_heap_defrag_malloc(pa_heap_t *h, size_t n)
{
	struct pa_heap *hp = heap_check(h, "pa_heap_defrag_malloc");
	if (n > PA_SC_MAX_SMALL)
		return heap_block(hp, n, 16, 0);
	int saved = errno;
	unsigned cls = pa_size_to_class(n);
	void *p = heap_defrag_take(hp, cls, NULL, tcache_spares(tcache_real()));
	if (p == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	errno = saved;
	vg_block_live(p, n, 0);
	return p;
}

void pa_heap_defrag_free(pa_heap_t *h, void *p)
{
	struct pa_heap *hp = heap_check(h, "pa_heap_defrag_free");
	(void)hp;
	pa_free(p); /* a heap's blocks go straight to their spans */
}

void *pa_heap_defrag_move(pa_heap_t *h, void *p)
{
	struct pa_heap *hp = heap_check(h, "pa_heap_defrag_move");
	struct pa_span *s = defrag_heap_span(hp, "pa_heap_defrag_move", p);
	if (s == NULL || !heap_defrag_hint(hp, s))
		return p;
	size_t n = span_usable_of(s, p);
	void *q = heap_defrag_take(hp, s->cls, s, tcache_spares(tcache_real()));
	if (q == NULL)
		return p;
	vg_block_live(q, n, 0);
	vg_copy(q, p, n);
	free_checked(s, p, "pa_heap_defrag_move");
	return q;
}
