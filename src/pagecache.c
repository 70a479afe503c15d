/*
 * pagecache.c — per-CPU page caches (pagecache.h explains the protocol).
 *
 * Fast paths (alloc from the CPU's group, free into it, queue a free) read a
 * snapshot seqlock-style (gen first, acquire) and commit with one rseq
 * store; everything else runs with the cache owned (gen odd) and, for heap
 * work, the heap lock taken after it. Lock order: cache gen, then heap lock.
 */
#include "pagecache.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "bits.h"
#include "os.h"
#include "rseq.h"

#define GROUP_PAGES 64u
#define GROUP_BYTES ((uintptr_t)GROUP_PAGES * PA_PAGE_SIZE)

void (*pagecache_fault_hook)(uintptr_t addr, size_t npages, enum pa_page_fault f) = NULL;

static inline uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}
static inline void st(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static void fault(uintptr_t addr, size_t npages, enum pa_page_fault f)
{
	if (pagecache_fault_hook != NULL)
		pagecache_fault_hook(addr, npages, f);
	else
		pageheap_report_fault(addr, npages, f, "(found when a per-CPU free queue drained)");
}

/* ---- setup -------------------------------------------------------------- */

int pagecache_init(struct pa_pagecache_set *pc, struct pa_pageheap *heap, enum pa_cache_mode mode)
{
	memset(pc, 0, sizeof(*pc));
	pc->heap = heap;
	if (mode == PA_CACHE_OFF)
		return 0;
	unsigned n = os_possible_cpus();
	/* Unknown, or more than we keep caches for: ids past the end go uncached. */
	if (n == 0 || n > PA_CACHE_MAX_CPUS)
		n = n == 0 ? 1024 : PA_CACHE_MAX_CPUS;
	pc->cpus = os_alloc(PA_ALIGN_UP(n * sizeof(struct pa_pagecache), os_page_size()));
	if (pc->cpus == NULL) {
		errno = ENOMEM;
		return -1;
	}
	pc->ncpus = n;
#if PA_HAVE_RSEQ_COMMIT
	if (mode == PA_CACHE_RSEQ && __rseq_size > 0 && rseq_cpu(rseq_area()) >= 0 &&
	    os_rseq_fence_register() == 0)
		pc->mode = PA_CACHE_RSEQ;
	else
		pc->mode = PA_CACHE_LOCKED;
#else
	pc->mode = PA_CACHE_LOCKED;
#endif
	return 0;
}

void pagecache_destroy(struct pa_pagecache_set *pc)
{
	if (pc->cpus != NULL) {
		pagecache_flush_all(pc);
		os_unmap(pc->cpus,
		         PA_ALIGN_UP(pc->ncpus * sizeof(struct pa_pagecache), os_page_size()));
	}
	memset(pc, 0, sizeof(*pc));
}

/* ---- owning a cache (slow paths) ---------------------------------------- */

static int current_cpu(const struct pa_pagecache_set *pc)
{
	if (pc->mode == PA_CACHE_RSEQ)
		return rseq_cpu(rseq_area());
	return os_getcpu();
}

int pagecache_current_cpu(const struct pa_pagecache_set *pc)
{
	return current_cpu(pc);
}

/* Take cache `cpu`: gen becomes odd. Returns the odd gen. */
static uint64_t pagecache_own(struct pa_pagecache_set *pc, int cpu)
{
	struct pa_pagecache *c = &pc->cpus[cpu];
	for (unsigned spins = 0;; spins++) {
		uint64_t g = __atomic_load_n(&c->gen, __ATOMIC_RELAXED);
		if (!(g & 1) && __atomic_compare_exchange_n(&c->gen, &g, g + 1, 0, __ATOMIC_ACQUIRE,
		                                            __ATOMIC_RELAXED)) {
			/* A sequence on that CPU that read the old gen may still
			 * commit unless we run there or fence it. */
			if (pc->mode == PA_CACHE_RSEQ && rseq_cpu(rseq_area()) != cpu)
				os_rseq_fence(cpu);
			return g + 1;
		}
		if (spins > 64)
			os_yield();
		else
			__builtin_ia32_pause();
	}
}

static void pagecache_release(struct pa_pagecache *c, uint64_t g)
{
	__atomic_store_n(&c->gen, g + 1, __ATOMIC_RELEASE);
}

/* ---- heap work, with the cache owned ------------------------------------- */

/*
 * Which cache holds a group (chunk.h's cached_by): 1 + its CPU, or 0, or
 * OWNER_SHARED when two caches have held it at once. That happens: a group's
 * pages handed out by one cache can be freed through another CPU's queue and
 * then refill a second cache. A shared group is checked against every cache.
 */
#define OWNER_SHARED 0xffffu

static uint16_t *owner_of(struct pa_pageheap *h, uintptr_t gbase)
{
	return &pageheap_chunk(h, gbase)->cached_by[(gbase & (PA_CHUNK_SIZE - 1)) / GROUP_BYTES];
}

/* Cache `cpu` took the group at gbase; heap lock held. */
static void owner_add(struct pa_pagecache_set *pc, uintptr_t gbase, int cpu)
{
	uint16_t *o = owner_of(pc->heap, gbase);
	*o = *o == 0 ? (uint16_t)(cpu + 1) : OWNER_SHARED;
}

static int pagecache_holds_group(const struct pa_pagecache_set *pc, uintptr_t gbase, int except)
{
	for (unsigned cpu = 0; cpu < pc->ncpus; cpu++)
		if ((int)cpu != except && ld(&pc->cpus[cpu].base) == gbase)
			return 1;
	return 0;
}

/* Cache `cpu` gave the group at gbase back; heap lock held. */
static void owner_remove(struct pa_pagecache_set *pc, uintptr_t gbase, int cpu)
{
	uint16_t *o = owner_of(pc->heap, gbase);
	if (*o == cpu + 1 || (*o == OWNER_SHARED && !pagecache_holds_group(pc, gbase, cpu)))
		*o = 0;
}

/*
 * Is any page of [a, a+n) sitting free in some CPU's cache? The heap's
 * bitmap counts cached pages as allocated, so only this catches a double
 * free of one. Heap lock held (owners change only under it).
 */
static int free_in_a_cache(struct pa_pagecache_set *pc, uintptr_t a, size_t n)
{
	uintptr_t end = a + n * PA_PAGE_SIZE;
	for (uintptr_t g = PA_ALIGN_DOWN(a, GROUP_BYTES); g < end; g += GROUP_BYTES) {
		unsigned owner = *owner_of(pc->heap, g);
		if (owner == 0)
			continue;
		uintptr_t lo = a > g ? a : g, hi = end < g + GROUP_BYTES ? end : g + GROUP_BYTES;
		uint64_t m = bits_mask((unsigned)((lo - g) / PA_PAGE_SIZE),
		                       (unsigned)((hi - lo) / PA_PAGE_SIZE));
		unsigned first = owner == OWNER_SHARED ? 0 : owner - 1;
		unsigned last = owner == OWNER_SHARED ? pc->ncpus : owner;
		for (unsigned cpu = first; cpu < last; cpu++) {
			const struct pa_pagecache *oc = &pc->cpus[cpu];
			if (ld(&oc->base) == g && (ld(&oc->free) & m) != 0)
				return 1;
		}
	}
	return 0;
}

/*
 * The 64-page group that wholly holds the npages (< 64) at addr, with *m set
 * to their bits in it; 0 when the run crosses a group edge or lies in the
 * group at address 0, which no cache holds (an empty cache has base 0).
 */
static inline uintptr_t group_of(uintptr_t addr, size_t npages, uint64_t *m)
{
	uintptr_t gbase = PA_ALIGN_DOWN(addr, GROUP_BYTES);
	unsigned idx = (unsigned)((addr - gbase) / PA_PAGE_SIZE);
	if (gbase == 0 || idx + npages > GROUP_PAGES)
		return 0;
	*m = bits_mask(idx, (unsigned)npages);
	return gbase;
}

/*
 * Are pages m of the group at gbase allocated in the heap? A free into a
 * cache group must be of pages the heap still counts as allocated: one
 * already freed through another CPU's queue is a double free. Read without
 * the heap lock: the word is written with relaxed atomic stores (bits.h).
 */
static int heap_holds(struct pa_pageheap *h, uintptr_t gbase, uint64_t m)
{
	const uint64_t *w =
	    &pageheap_chunk(h, gbase)->alloc[(gbase & (PA_CHUNK_SIZE - 1)) / GROUP_BYTES];
	return (__atomic_load_n(w, __ATOMIC_RELAXED) & m) == m;
}

/* Is [a, a+n) a live allocation the heap may take back? Heap lock held. */
static enum pa_page_fault heap_check_locked(struct pa_pagecache_set *pc, uintptr_t a, size_t n)
{
	enum pa_page_fault f = pageheap_check_locked(pc->heap, a, n);
	if (f == PA_PAGE_OK && free_in_a_cache(pc, a, n))
		f = PA_PAGE_NOT_ALLOCATED;
	return f;
}

/* Free [a, a+n) to the heap if it is a live allocation; heap lock held. */
static enum pa_page_fault heap_free_checked_locked(struct pa_pagecache_set *pc, uintptr_t a,
                                                   size_t n)
{
	enum pa_page_fault f = heap_check_locked(pc, a, n);
	if (f == PA_PAGE_OK)
		pageheap_free_locked(pc->heap, a, n);
	return f;
}

enum pa_page_fault pagecache_heap_free(struct pa_pagecache_set *pc, uintptr_t a, size_t n,
                                       uint64_t released)
{
	lock_acquire(&pc->heap->lock);
	enum pa_page_fault f = heap_free_checked_locked(pc, a, n);
	if (f == PA_PAGE_OK && released != 0)
		pageheap_mark_released_locked(pc->heap, a, n, released);
	lock_release(&pc->heap->lock);
	return f;
}

/*
 * Hand queued frees to the heap; heap lock held. The batch is sorted by
 * address and adjacent frees are joined, so a run of spans freed together
 * costs the heap one free and one summary update (the amortization the
 * design's "Prior Art" section suggests). Each entry is checked on its own
 * first; one that overlaps an earlier good entry of the same batch is a
 * double free. Bad entries go to fault(), in address order.
 */
static void drain_locked(struct pa_pagecache_set *pc, struct pa_pagecache *c)
{
	uint64_t n = ld(&c->nbatch), e[PA_CACHE_BATCH];
	if (n > PA_CACHE_BATCH)
		n = PA_CACHE_BATCH;
	/* Insertion sort on the address (stable: equal addresses keep queue order). */
	for (uint64_t i = 0; i < n; i++) {
		uint64_t v = ld(&c->batch[i]), j = i;
		for (; j > 0 && (e[j - 1] & ~(PA_PAGE_SIZE - 1)) > (v & ~(PA_PAGE_SIZE - 1)); j--)
			e[j] = e[j - 1];
		e[j] = v;
	}
	uintptr_t run = 0, run_end = 0; /* [run, run_end): good frees joined so far */
	for (uint64_t i = 0; i < n; i++) {
		uintptr_t a = e[i] & ~(PA_PAGE_SIZE - 1);
		size_t np = e[i] & (PA_PAGE_SIZE - 1);
		enum pa_page_fault f =
		    run != 0 && a < run_end ? PA_PAGE_NOT_ALLOCATED : heap_check_locked(pc, a, np);
		if (f != PA_PAGE_OK) {
			fault(a, np, f);
			continue;
		}
		if (run != 0 && a == run_end) {
			run_end += np * PA_PAGE_SIZE;
			continue;
		}
		if (run != 0)
			pageheap_free_locked(pc->heap, run, (run_end - run) / PA_PAGE_SIZE);
		run = a;
		run_end = a + np * PA_PAGE_SIZE;
	}
	if (run != 0)
		pageheap_free_locked(pc->heap, run, (run_end - run) / PA_PAGE_SIZE);
	st(&c->nbatch, 0);
	if (n)
		st(&c->drains, ld(&c->drains) + 1);
}

/* Give the cache's group back to the heap; heap lock held. */
static void return_group_locked(struct pa_pagecache_set *pc, struct pa_pagecache *c)
{
	uintptr_t base = ld(&c->base);
	if (base == 0)
		return;
	pageheap_return_group_locked(pc->heap, base, ld(&c->free), ld(&c->scav));
	st(&c->base, 0);
	owner_remove(pc, base, (int)(c - pc->cpus));
	st(&c->free, 0);
	st(&c->scav, 0);
}

static void flush_one(struct pa_pagecache_set *pc, int cpu)
{
	struct pa_pagecache *c = &pc->cpus[cpu];
	if (ld(&c->base) == 0 && ld(&c->nbatch) == 0)
		return;
	uint64_t g = pagecache_own(pc, cpu);
	lock_acquire(&pc->heap->lock);
	drain_locked(pc, c);
	return_group_locked(pc, c);
	lock_release(&pc->heap->lock);
	pagecache_release(c, g);
}

void pagecache_flush_all(struct pa_pagecache_set *pc)
{
	for (unsigned cpu = 0; cpu < pc->ncpus; cpu++)
		flush_one(pc, (int)cpu);
}

void pagecache_own_all(struct pa_pagecache_set *pc)
{
	for (unsigned cpu = 0; cpu < pc->ncpus; cpu++)
		pagecache_own(pc, (int)cpu);
}

void pagecache_release_all(struct pa_pagecache_set *pc)
{
	for (unsigned cpu = 0; cpu < pc->ncpus; cpu++)
		pagecache_release(&pc->cpus[cpu], ld(&pc->cpus[cpu].gen));
}

void pagecache_after_fork_child(struct pa_pagecache_set *pc)
{
	/* Owned by the forking thread in pagecache_own_all: just release. */
	pagecache_release_all(pc);
	if (pc->mode == PA_CACHE_RSEQ && os_rseq_fence_register() != 0)
		pc->mode = PA_CACHE_LOCKED;
}

/* ---- allocation ---------------------------------------------------------- */

/* Index of a run of npages in free, or 64. */
static inline unsigned run_in(uint64_t free, size_t npages)
{
	return npages == 1 ? bits_ctz(free) : bits_find_run(free, (unsigned)npages);
}

static uintptr_t alloc_slow(struct pa_pagecache_set *pc, size_t npages, size_t *scav)
{
	struct pa_pageheap *h = pc->heap;
	int cpu = current_cpu(pc);
	if (cpu < 0 || (unsigned)cpu >= pc->ncpus)
		return pageheap_alloc(h, npages, scav);
	struct pa_pagecache *c = &pc->cpus[cpu];
	uint64_t g = pagecache_own(pc, cpu);
	uint64_t free = ld(&c->free);
	unsigned i = run_in(free, npages);
	if (i >= 64 && free == 0) {
		/* Empty: refill with the first group that has a free page. */
		uintptr_t base;
		uint64_t s;
		lock_acquire(&h->lock);
		drain_locked(pc, c);
		return_group_locked(pc, c);
		if (pageheap_take_group_locked(h, &base, &free, &s) == 0) {
			owner_add(pc, base, cpu);
			st(&c->base, base);
			st(&c->scav, s);
			st(&c->free, free);
			st(&c->refills, ld(&c->refills) + 1);
		}
		lock_release(&h->lock);
		i = run_in(free, npages);
	}
	uintptr_t addr = 0;
	if (i < 64) {
		uint64_t m = bits_mask(i, (unsigned)npages);
		if (scav != NULL)
			*scav = bits_popcount(ld(&c->scav) & m);
		st(&c->free, free & ~m);
		addr = ld(&c->base) + (uintptr_t)i * PA_PAGE_SIZE;
	}
	pagecache_release(c, g);
	if (addr == 0) /* the group cannot hold the run: take it from the heap */
		return pageheap_alloc(h, npages, scav);
	pageheap_after_alloc(h); /* a refill may have passed the memory limit */
	return addr;
}

/*
 * The fast path, in rseq mode: one attempt to take npages from the current
 * CPU's group. Returns the address, FAST_FALLBACK when the cache cannot serve
 * the request (owned by a slow path, no run in its bits, CPU id unusable), or
 * FAST_RETRY when the sequence was aborted (preemption, migration, a racing
 * thread on this CPU). Neither is a page address: those are page-aligned and
 * nonzero.
 */
#define FAST_FALLBACK ((uintptr_t)0)
#define FAST_RETRY ((uintptr_t)1)

#if PA_HAVE_RSEQ_COMMIT
_Static_assert(offsetof(struct pa_pagecache, gen) == RSEQ_SLOT_GEN &&
                   offsetof(struct pa_pagecache, base) == RSEQ_SLOT_BASE &&
                   offsetof(struct pa_pagecache, free) == RSEQ_SLOT_FREE &&
                   offsetof(struct pa_pagecache, scav) == RSEQ_SLOT_SCAV,
               "rseq_take_lowest's slot layout");

/* One page: the whole read-modify-write inside one sequence (rseq.h). */
static inline __attribute__((always_inline)) uintptr_t alloc1_try(struct pa_pagecache_set *pc,
                                                                  size_t *scav)
{
	uint64_t i, base, s;
	int r = rseq_take_lowest(rseq_area(), pc->cpus, sizeof(struct pa_pagecache), pc->ncpus, &i,
	                         &base, &s);
	if (__builtin_expect(r != 0, 0))
		return r > 0 ? FAST_FALLBACK : FAST_RETRY;
	if (scav != NULL)
		*scav = (size_t)((s >> i) & 1);
	return base + (uintptr_t)i * PA_PAGE_SIZE;
}

static inline __attribute__((always_inline)) uintptr_t alloc_try(struct pa_pagecache_set *pc,
                                                                 size_t npages, size_t *scav)
{
	struct rseq *rs = rseq_area();
	uint32_t cpu = (uint32_t)rseq_cpu(rs); /* negative (unknown) becomes huge */
	if (__builtin_expect(cpu >= pc->ncpus, 0))
		return FAST_FALLBACK;
	struct pa_pagecache *c = &pc->cpus[cpu];
	uint64_t g = __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE);
	uint64_t free = ld(&c->free), base = ld(&c->base), s = ld(&c->scav);
	unsigned i = run_in(free, npages);
	if (__builtin_expect((g & 1) || i >= 64, 0))
		return FAST_FALLBACK;
	uint64_t m = bits_mask(i, (unsigned)npages);
	/* scav is compared too: a free and realloc of the same page by another
	 * thread on this CPU in between leaves `free` equal but may change it. */
	if (rseq_commit(rs, cpu, &c->gen, g, &c->free, free, &c->scav, s, s, free & ~m) != 0)
		return FAST_RETRY;
	if (scav != NULL)
		*scav = bits_popcount(s & m);
	return base + (uintptr_t)i * PA_PAGE_SIZE;
}
#endif

/* Everything but the first attempt: retries, then the owned slow path, or
 * the heap itself when caches are off. Out of line so that the fast path
 * stays a leaf with no stack frame. */
static __attribute__((noinline)) uintptr_t alloc_rest(struct pa_pagecache_set *pc, size_t npages,
                                                      size_t *scav)
{
#if PA_HAVE_RSEQ_COMMIT
	if (pc->mode == PA_CACHE_RSEQ) {
		for (int tries = 0; tries < 3; tries++) {
			uintptr_t a =
			    npages == 1 ? alloc1_try(pc, scav) : alloc_try(pc, npages, scav);
			if (a == FAST_FALLBACK)
				break;
			if (a != FAST_RETRY)
				return a;
		}
	}
#endif
	if (pc->mode == PA_CACHE_OFF)
		return pageheap_alloc(pc->heap, npages, scav);
	return alloc_slow(pc, npages, scav);
}

/* The first attempt for 2 or more pages, out of line too: its find-run loop
 * and ten-register commit would otherwise give the 1-page path a frame. */
static __attribute__((noinline)) uintptr_t alloc_n(struct pa_pagecache_set *pc, size_t npages,
                                                   size_t *scav)
{
#if PA_HAVE_RSEQ_COMMIT
	if (pc->mode == PA_CACHE_RSEQ) {
		uintptr_t a = alloc_try(pc, npages, scav);
		if (a > FAST_RETRY)
			return a;
	}
#endif
	return alloc_rest(pc, npages, scav);
}

uintptr_t pagecache_alloc(struct pa_pagecache_set *pc, size_t npages, size_t *scav)
{
#if PA_HAVE_RSEQ_COMMIT
	if (__builtin_expect(npages == 1 && pc->mode == PA_CACHE_RSEQ, 1)) {
		uintptr_t a = alloc1_try(pc, scav);
		if (__builtin_expect(a > FAST_RETRY, 1))
			return a;
		return alloc_rest(pc, npages, scav);
	}
#endif
	return alloc_n(pc, npages, scav);
}

/* ---- free ---------------------------------------------------------------- */

static enum pa_page_fault free_slow(struct pa_pagecache_set *pc, uintptr_t addr, size_t npages)
{
	struct pa_pageheap *h = pc->heap;
	int cpu = current_cpu(pc);
	if (cpu < 0 || (unsigned)cpu >= pc->ncpus)
		return pagecache_heap_free(pc, addr, npages, 0);
	struct pa_pagecache *c = &pc->cpus[cpu];
	uint64_t g = pagecache_own(pc, cpu);
	enum pa_page_fault f = PA_PAGE_OK;
	uint64_t m;
	uintptr_t gbase = group_of(addr, npages, &m);
	if (gbase != 0 && ld(&c->base) == gbase) {
		uint64_t free = ld(&c->free);
		if ((free & m) || !heap_holds(h, gbase, m)) {
			f = PA_PAGE_NOT_ALLOCATED;
		} else {
			st(&c->scav, ld(&c->scav) & ~m);
			st(&c->free, free | m);
		}
	} else {
		uint64_t n = ld(&c->nbatch);
		if (n == PA_CACHE_BATCH) {
			lock_acquire(&h->lock);
			drain_locked(pc, c);
			lock_release(&h->lock);
			n = 0;
		}
		st(&c->batch[n], addr | npages);
		st(&c->nbatch, n + 1);
	}
	pagecache_release(c, g);
	return f;
}

#if PA_HAVE_RSEQ_COMMIT
/* free_try's answers besides a pa_page_fault (which are all >= 0). */
#define FREE_FALLBACK (-1)
#define FREE_RETRY (-2)

/*
 * The fast path, in rseq mode: one attempt to put npages at addr into the
 * current CPU's group bits (when they belong to its group) or its free queue.
 * Returns PA_PAGE_OK, PA_PAGE_NOT_ALLOCATED (a double free seen on a stable
 * snapshot), FREE_FALLBACK or FREE_RETRY as alloc_try.
 */
static inline __attribute__((always_inline)) int free_try(struct pa_pagecache_set *pc,
                                                          uintptr_t addr, size_t npages)
{
	struct rseq *rs = rseq_area();
	uint32_t cpu = (uint32_t)rseq_cpu(rs);
	if (__builtin_expect(cpu >= pc->ncpus, 0))
		return FREE_FALLBACK;
	struct pa_pagecache *c = &pc->cpus[cpu];
	uint64_t g = __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE);
	if (__builtin_expect(g & 1, 0))
		return FREE_FALLBACK;
	uint64_t m;
	uintptr_t gbase = group_of(addr, npages, &m);
	if (gbase != 0 && ld(&c->base) == gbase) {
		uint64_t free = ld(&c->free), s = ld(&c->scav);
		if (__builtin_expect((free & m) || !heap_holds(pc->heap, gbase, m), 0)) {
			/* Looks like a double free: confirm on a stable snapshot. */
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&c->gen, __ATOMIC_RELAXED) == g)
				return PA_PAGE_NOT_ALLOCATED;
			return FREE_RETRY;
		}
		/* The scav store is harmless if we abort: bits of pages not
		 * free in the cache mean nothing. */
		if (rseq_commit(rs, cpu, &c->gen, g, &c->free, free, &c->scav, s, s & ~m,
		                free | m) == 0)
			return PA_PAGE_OK;
		return FREE_RETRY;
	}
	uint64_t n = ld(&c->nbatch);
	if (n >= PA_CACHE_BATCH)
		return FREE_FALLBACK;
	/* A slot past nbatch is dead until the commit. */
	if (rseq_commit(rs, cpu, &c->gen, g, &c->nbatch, n, &c->batch[n], ld(&c->batch[n]),
	                addr | npages, n + 1) == 0)
		return PA_PAGE_OK;
	return FREE_RETRY;
}
#endif

/* Everything but the first attempt, out of line as alloc_rest. */
static __attribute__((noinline)) enum pa_page_fault free_rest(struct pa_pagecache_set *pc,
                                                              uintptr_t addr, size_t npages)
{
	if (addr & (PA_PAGE_SIZE - 1))
		return PA_PAGE_UNALIGNED;
	if (npages == 0 || npages >= PA_CACHE_MAX_PAGES)
		return PA_PAGE_BAD_SIZE;
	if (pc->mode == PA_CACHE_OFF)
		return pagecache_heap_free(pc, addr, npages, 0);
#if PA_HAVE_RSEQ_COMMIT
	if (pc->mode == PA_CACHE_RSEQ) {
		for (int tries = 0; tries < 4; tries++) {
			int r = free_try(pc, addr, npages);
			if (r == FREE_FALLBACK)
				break;
			if (r != FREE_RETRY)
				return (enum pa_page_fault)r;
		}
	}
#endif
	return free_slow(pc, addr, npages);
}

enum pa_page_fault pagecache_free(struct pa_pagecache_set *pc, uintptr_t addr, size_t npages)
{
#if PA_HAVE_RSEQ_COMMIT
	/* One test covers the mode, the alignment and 1 <= npages < 16. */
	if (__builtin_expect(pc->mode == PA_CACHE_RSEQ && (addr & (PA_PAGE_SIZE - 1)) == 0 &&
	                         npages - 1 < PA_CACHE_MAX_PAGES - 1,
	                     1)) {
		uint64_t m;
		uintptr_t gbase = group_of(addr, npages, &m);
		struct rseq *rs = rseq_area();
		uint32_t cpu = (uint32_t)rseq_cpu(rs);
		/* A racy look at the CPU's group only picks the path: a base
		 * once stored is heap, so heap_holds may read its bitmap, and
		 * the sequence re-checks everything. */
		if (__builtin_expect(gbase != 0 && cpu < pc->ncpus &&
		                         ld(&pc->cpus[cpu].base) == gbase &&
		                         heap_holds(pc->heap, gbase, m),
		                     1) &&
		    rseq_give_back(rs, pc->cpus, sizeof(struct pa_pagecache), pc->ncpus, gbase,
		                   m) == 0)
			return PA_PAGE_OK;
	}
#endif
	return free_rest(pc, addr, npages);
}

/* ---- statistics ---------------------------------------------------------- */

/* Set the bits of [a, a + np pages) that fall in the chunk at chunk_base. */
static void mark_pages(uintptr_t chunk_base, uintptr_t a, size_t np, uint64_t *held)
{
	for (size_t i = 0; i < np; i++, a += PA_PAGE_SIZE)
		if (a - chunk_base < PA_CHUNK_SIZE) {
			size_t p = (a - chunk_base) / PA_PAGE_SIZE;
			held[p / 64] |= (uint64_t)1 << (p % 64);
		}
}

void pagecache_held_locked(const struct pa_pagecache_set *pc, uintptr_t chunk_base,
                           uint64_t held[PA_CHUNK_WORDS])
{
	for (unsigned cpu = 0; cpu < pc->ncpus; cpu++) {
		const struct pa_pagecache *c = &pc->cpus[cpu];
		uintptr_t base = ld(&c->base);
		if (base != 0 && base - chunk_base < PA_CHUNK_SIZE)
			held[(base - chunk_base) / GROUP_BYTES] |= ld(&c->free);
		uint64_t n = ld(&c->nbatch);
		for (uint64_t i = 0; i < n && i < PA_CACHE_BATCH; i++) {
			uint64_t e = ld(&c->batch[i]);
			mark_pages(chunk_base, e & ~(PA_PAGE_SIZE - 1), e & (PA_PAGE_SIZE - 1),
			           held);
		}
	}
}

void pagecache_stats(const struct pa_pagecache_set *pc, struct pa_pagecache_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned cpu = 0; cpu < pc->ncpus; cpu++) {
		const struct pa_pagecache *c = &pc->cpus[cpu];
		out->cached_pages += bits_popcount(ld(&c->free));
		uint64_t n = ld(&c->nbatch);
		for (uint64_t i = 0; i < n && i < PA_CACHE_BATCH; i++)
			out->queued_pages += ld(&c->batch[i]) & (PA_PAGE_SIZE - 1);
		out->refills += ld(&c->refills);
		out->drains += ld(&c->drains);
	}
}
