/*
 * central.c — per-class central lists of spans (central.h).
 *
 * Write after free: both walks of objects here check the free-key (span.h)
 * of each, where they touch its first word anyway: give_locked, for a batch
 * going back to its spans, and take_from, for objects a refill takes from
 * a span that handed them out before (below bump, on pages not released).
 * A key found overwritten is reported as "malloc(PTR): write after free".
 * take_from writes the key into every object it takes (the one handed out
 * has it cleared by the caller), so objects on a thread's list hold it too.
 * Objects reused straight from a thread's list or a stashed batch are not
 * checked: pa_malloc's fast path does not read the key (docs/design.md).
 * Under valgrind nothing is checked: memcheck sees such writes itself.
 */
#include <errno.h>
#include <limits.h>

#include "bits.h"
#include "central.h"
#include "os.h"
#include "pagemap.h"
#include "pages.h"
#include "span.h"
#include "stash.h"
#include "vg.h"

/* Free object o was found written over its free-key; lock held. */
static _Noreturn void __attribute__((noinline, cold)) written(struct pa_central *c, void *o)
{
	lock_release(&c->lock);
	span_report("malloc", o, PA_OBJ_WRITTEN);
}

struct pa_central central[PA_SC_NUM_CLASSES];
struct pa_batch_stash central_stash[PA_SC_NUM_CLASSES];
void *central_stash_slot[PA_SC_NUM_CLASSES][CENTRAL_STASH_MAX] __attribute__((aligned(64)));

/* What each stash slot held at the last decay (central_stash_drain), and
 * how many of those were batches (relaxed atomic stores: a decay reads it
 * first without the lock, to pass over a class with nothing to look at):
 * under the class's lock. */
static void *stash_seen[PA_SC_NUM_CLASSES][CENTRAL_STASH_MAX];
static uint32_t stash_seen_n[PA_SC_NUM_CLASSES];

/* Objects of s out of it (in use: live, cached or stashed). */
static inline unsigned inuse_of(const struct pa_span *s)
{
	return pa_sizeclasses[s->cls].objects - s->nfree;
}

/* s, with `inuse` objects out and a free one, onto its list (central.h:
 * fullest first); lock held. */
static void list_push(struct pa_central *c, struct pa_span *s, unsigned inuse)
{
	unsigned b = central_bucket(inuse, c->bucket_mul);
	s->next = c->partial[b];
	if (s->next != NULL)
		s->next->prevnext = &s->next;
	s->prevnext = &c->partial[b];
	c->partial[b] = s;
	c->nonempty |= 1u << b;
	c->nbucket[b]++;
	c->npartial++;
	c->partial_inuse += inuse;
}

/* s off its list, where it was listed with `inuse` objects out; lock held. */
static void list_remove(struct pa_central *c, struct pa_span *s, unsigned inuse)
{
	unsigned b = central_bucket(inuse, c->bucket_mul);
	*s->prevnext = s->next;
	if (s->next != NULL)
		s->next->prevnext = s->prevnext;
	s->next = NULL;
	s->prevnext = NULL;
	if (c->partial[b] == NULL)
		c->nonempty &= ~(1u << b);
	c->nbucket[b]--;
	c->npartial--;
	c->partial_inuse -= inuse;
}

/* s had `was` objects out (listed with that count if listed) and has
 * inuse_of(s) now: onto the list it belongs to, or off the lists when it
 * is full; lock held. The caller retires it when it is empty. */
static int carved(const struct pa_central *c, const struct pa_span *s);

/*
 * Draining spans. A class is fragmented when at least DRAIN_MIN_PARTIAL of
 * its spans are partial and more than half of its spans' slots are free
 * slots in partial spans: most of its memory is pinned by few objects (a
 * key-value store after deleting most keys). A class that stays
 * fragmented throughout a decay period (central_stash_drain, every 250 ms:
 * `frag_since` below) is marked (`frag`), and there a sparse span (in the
 * DRAIN_LISTS lowest lists: at most a quarter in use) that no cache carves
 * drains: its fbump is 0, so pa_free's fast path sends each of its objects
 * to the slow path, which gives it straight back to the span
 * (central_give_draining) instead of a thread cache, where the next malloc
 * of the class would have put a new object back into the sparse span at
 * once. Refills take the fullest spans, so new objects go to dense spans
 * while the sparse ones empty and go back to the page heap, with no
 * cooperation from the program. A span's mark is decided whenever it
 * changes list or hands out objects or takes them back (relist), from the
 * class's mark then: a mark left stale by the class's later changes costs
 * that span's next free a look under the lock, which decides again.
 *
 * Why a whole period: a producer and its consumer pass through the same
 * state for a moment at a time (the consumer's frees back in their spans,
 * the producer's refills not yet taking them): xmalloc-test's 64-byte
 * class turned fragmented and back ~650 times a second when the mark
 * followed each relist, and while marked, its stash was bypassed and each
 * free of a sparse span's object took the lock. The mark goes as soon as
 * a relist finds the class not fragmented.
 */
#define DRAIN_MIN_PARTIAL 8u
#define DRAIN_LISTS 2u

/* frag_since (central.h): the class was not fragmented at its last relist;
 * fragmented at every relist since one after the last decay; since before
 * it (the next decay marks it). */
enum { FRAG_NO, FRAG_NEW, FRAG_HELD };

static inline int fragmented(const struct pa_central *c, size_t objects)
{
	return c->npartial >= DRAIN_MIN_PARTIAL &&
	       2 * (c->npartial * objects - c->partial_inuse) > c->spans * objects;
}

/* Does s drain, in class c whose mark is frag? */
static inline int drains(const struct pa_central *c, const struct pa_span *s, int frag)
{
	return frag && s->prevnext != NULL &&
	       inuse_of(s) * CENTRAL_BUCKETS <
	           DRAIN_LISTS * (unsigned)pa_sizeclasses[s->cls].objects &&
	       !carved(c, s);
}

/* s's fbump (span.h): 0 while a page is released or the span drains, else
 * bump; lock held. */
static inline void fbump_mark(const struct pa_central *c, struct pa_span *s, int frag)
{
	span_set_fbump(s, s->relmap != 0 || drains(c, s, frag) ? 0 : s->bump);
}

/* The class's mark set (every span of the DRAIN_LISTS lowest lists marked:
 * one that nothing touches meanwhile would not be, and its objects would
 * go on through the thread caches) or cleared; lock held. */
static void __attribute__((noinline)) frag_changed(struct pa_central *c, int frag)
{
	__atomic_store_n(&c->frag, (uint32_t)frag, __ATOMIC_RELAXED);
	for (unsigned b = 0; frag && b < DRAIN_LISTS; b++)
		for (struct pa_span *t = c->partial[b]; t != NULL; t = t->next)
			fbump_mark(c, t, frag);
}

/* The class's mark after a change to its counts: frag_since follows
 * fragmented(), and the mark goes when the class is not; lock held. */
static inline int frag_update(struct pa_central *c, size_t objects)
{
	if (fragmented(c, objects)) {
		if (c->frag_since == FRAG_NO)
			__atomic_store_n(&c->frag_since, FRAG_NEW, __ATOMIC_RELAXED);
	} else if (c->frag_since != FRAG_NO) {
		__atomic_store_n(&c->frag_since, FRAG_NO, __ATOMIC_RELAXED);
		if (c->frag)
			frag_changed(c, 0);
	}
	return (int)c->frag;
}

/* A decay's look at class c (central_stash_drain); lock held. */
static void frag_decay(struct pa_central *c)
{
	if (c->frag_since == FRAG_NEW)
		__atomic_store_n(&c->frag_since, FRAG_HELD, __ATOMIC_RELAXED);
	else if (c->frag_since == FRAG_HELD && !c->frag)
		frag_changed(c, 1);
}

static int draining(struct pa_central *c, const struct pa_span *s)
{
	return drains(c, s, frag_update(c, pa_sizeclasses[s->cls].objects));
}

/* fbump_mark, with the class's mark brought up to date; lock held. */
static inline void fbump_set(struct pa_central *c, struct pa_span *s)
{
	fbump_mark(c, s, frag_update(c, pa_sizeclasses[s->cls].objects));
}

static void relist(struct pa_central *c, struct pa_span *s, unsigned was)
{
	unsigned now = inuse_of(s);
	if (s->prevnext != NULL) {
		if (s->nfree != 0 &&
		    central_bucket(was, c->bucket_mul) == central_bucket(now, c->bucket_mul)) {
			c->partial_inuse += (size_t)now - was;
			fbump_set(c, s);
			return;
		}
		list_remove(c, s, was);
	}
	if (s->nfree != 0)
		list_push(c, s, now);
	fbump_set(c, s);
}

/* The fullest listed span: the first of the highest non-empty list (NULL:
 * none); lock held. */
static inline struct pa_span *fullest(const struct pa_central *c)
{
	return c->nonempty != 0 ? c->partial[63u - bits_clz(c->nonempty)] : NULL;
}

/*
 * The last pages, for the smallest objects. Under an address-space limit
 * (ulimit -v) the heap can find no more room for good; a program that filled
 * it with larger blocks still gets its small ones (an error message, a name)
 * from RESERVE_PAGES pages set aside when the first span is built under a
 * limit, for classes of at most RESERVE_MAX_SIZE bytes. glibc's heap has the
 * same kind of last room: the tail of its top chunk that a larger block no
 * longer fits. Without a limit nothing is set aside.
 */
#define RESERVE_PAGES 4u
#define RESERVE_MAX_SIZE 256u
enum { RESERVE_UNSET, RESERVE_TAKING, RESERVE_NONE, RESERVE_READY };
static int reserve_state;        /* atomic, RESERVE_* */
static uintptr_t reserve_hidden; /* pa_addr_hide(its first page), once READY */
static uint32_t reserve_left;    /* atomic: pages not handed out, from the end */

static void reserve_setup(void)
{
	int unset = RESERVE_UNSET;
	if (__atomic_load_n(&reserve_state, __ATOMIC_ACQUIRE) != RESERVE_UNSET ||
	    !__atomic_compare_exchange_n(&reserve_state, &unset, RESERVE_TAKING, 0,
	                                 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	uintptr_t base = 0;
	if (os_addr_space_limit() != SIZE_MAX)
		base = pages_alloc(RESERVE_PAGES, NULL);
	if (base != 0) {
		reserve_hidden = pa_addr_hide(base);
		__atomic_store_n(&reserve_left, RESERVE_PAGES, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&reserve_state, base != 0 ? RESERVE_READY : RESERVE_NONE,
	                 __ATOMIC_RELEASE);
}

/* npages of the reserve for class cls, or 0. */
static uintptr_t reserve_take(unsigned cls, size_t npages)
{
	if (pa_sizeclasses[cls].size > RESERVE_MAX_SIZE ||
	    __atomic_load_n(&reserve_state, __ATOMIC_ACQUIRE) != RESERVE_READY)
		return 0;
	uint32_t left = __atomic_load_n(&reserve_left, __ATOMIC_RELAXED);
	do {
		if (left < npages)
			return 0;
	} while (!__atomic_compare_exchange_n(&reserve_left, &left, left - (uint32_t)npages, 0,
	                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return pa_addr_show(reserve_hidden) + (left - npages) * PA_PAGE_SIZE;
}

uint64_t central_fresh;

/* A new empty span of class cls, listed, its record from sp (span.h); lock
 * held. NULL when out of memory. */
static struct pa_span *grow_locked(struct pa_central *c, unsigned cls, struct pa_span_spares *sp)
{
	struct pa_span *s = span_new(cls, sp);
	if (s == NULL)
		return NULL;
	c->bucket_mul = central_bucket_mul(pa_sizeclasses[cls].objects);
	reserve_setup();
	size_t released = 0;
	uintptr_t base = pages_alloc(pa_sizeclasses[cls].pages, &released);
	if (released != 0)
		__atomic_add_fetch(&central_fresh, 1, __ATOMIC_RELAXED);
	if (base == 0 && (base = reserve_take(cls, pa_sizeclasses[cls].pages)) == 0) {
		span_delete(s, sp);
		return NULL;
	}
	if (vg_active())
		VALGRIND_MAKE_MEM_NOACCESS((void *)base, pa_sizeclasses[cls].pages * PA_PAGE_SIZE);
	if (span_init_small(s, cls, base) != 0) {
		pages_free(base, pa_sizeclasses[cls].pages);
		span_delete(s, sp);
		errno = ENOMEM;
		return NULL;
	}
	if (released != 0 && c->grows != 0)
		c->fresh = s;
	c->grows++;
	c->spans++;
	list_push(c, s, 0);
	return s;
}

/* The free objects of s (alloc bit 0, below bump) that start on 4 KiB
 * page j, which was released and reads as zero: their free-keys back
 * (span.h); lock held. */
static void rekey_page(struct pa_span *s, unsigned j)
{
	const uintptr_t size = span_size(s), base = span_base(s);
	unsigned i = (unsigned)(((uintptr_t)j * PA_SPAN_RELPAGE + size - 1) / size);
	unsigned end = (unsigned)(((uintptr_t)(j + 1u) * PA_SPAN_RELPAGE + size - 1) / size);
	end = end < s->bump ? end : s->bump;
	for (; i < end; i++)
		if (!(s->alloc[i / 64u] >> (i % 64u) & 1)) {
			void **o = (void **)(base + i * size);
			o[1] = (void *)span_free_key(o);
		}
}

/* Object i of s is handed out again: its 4 KiB pages are no longer released
 * (the first touch faults them back in as zero pages), and the other free
 * objects on them get their free-keys back; lock held. */
static void unrelease(struct pa_central *c, struct pa_span *s, unsigned i)
{
	const uintptr_t size = span_size(s), off = (uintptr_t)i * size;
	unsigned first = (unsigned)(off / PA_SPAN_RELPAGE);
	unsigned last = (unsigned)((off + size - 1) / PA_SPAN_RELPAGE);
	uint32_t m = (uint32_t)bits_mask(first, last - first + 1u) & s->relmap;
	s->relmap &= ~m; /* take_from then updates fbump */
	c->rel_pages -= bits_popcount(m);
	for (uint32_t t = m; t != 0; t &= t - 1)
		rekey_page(s, bits_ctz(t));
}

/*
 * Fault in the pages that the want (<= s->nfree) objects take_from is about
 * to hand out from s lie on and that may not be resident, one call a run of
 * them, before its writes of their links (and the program's writes) fault
 * them in a page at a time: each fault is a trap, and on a virtual machine
 * an exit to the host (10.6 us a 4 KiB page on the AMD EPYC VM of
 * docs/benchmarks.md, where populating costs 0.6-1.5 us a page and the first
 * write after it 5). Those pages are the ones a sweep released (relmap)
 * and, in the class's newest span grown from pages the heap had released
 * (c->fresh), every page from the one holding object `bump` on (never
 * handed out). Only that span: a span grown on resident pages would make
 * the call for nothing (on resident pages it is a page-table walk, and
 * xmalloc-test's spans, retired and grown again, made 8,352 such calls in
 * 5 s), and the page heap knows no other. Pages a sweep released in a span
 * that then retired go back to the heap as resident ones, and fault. A
 * class's first span is left to fault: a program that uses one object of a
 * class need not have that object's later pages resident. Lock held.
 */
static void populate_taken(const struct pa_central *c, const struct pa_span *s, unsigned want)
{
	const uintptr_t size = span_size(s);
	const unsigned pages = s->npages * (PA_PAGE_SIZE / PA_SPAN_RELPAGE);
	uint32_t mask = s->relmap;
	unsigned from = (unsigned)((uintptr_t)s->bump * size / PA_SPAN_RELPAGE);
	if (s == c->fresh && from < pages)
		mask |= (uint32_t)bits_mask(from, pages - from);
	if (mask == 0)
		return;
	/* The first and the last object taken: the lowest want free ones. */
	unsigned w = s->scan / 64u, got = 0, first = UINT_MAX, last = 0;
	uint64_t x = ~s->alloc[w] & (~(uint64_t)0 << (s->scan % 64u));
	while (got < want) {
		while (x == 0)
			x = ~s->alloc[++w];
		if (first == UINT_MAX)
			first = w * 64u + bits_ctz(x);
		unsigned n = (unsigned)bits_popcount(x);
		if (got + n >= want) {
			for (unsigned k = want - got; k > 1; k--)
				x &= x - 1;
			last = w * 64u + bits_ctz(x);
			break;
		}
		got += n;
		x = 0;
	}
	unsigned lo = (unsigned)((uintptr_t)first * size / PA_SPAN_RELPAGE);
	unsigned hi = (unsigned)(((uintptr_t)last * size + size - 1) / PA_SPAN_RELPAGE);
	mask &= (uint32_t)bits_mask(lo, hi - lo + 1u);
	if (mask != 0)
		os_populate_mask((void *)span_base(s), mask, PA_SPAN_RELPAGE);
}

/*
 * Take up to want (<= s->nfree) objects from s, lowest indices first, a
 * bitmap word at a time, appending them to the list whose last link is
 * **tail (so a batch is handed out in address order); lock held. The lowest s->nfree zero bits
 * of the bitmap are the span's free objects (the bits past the last object
 * are zero too, but above every real one). Returns how many.
 */
static unsigned take_from(struct pa_central *c, struct pa_span *s, unsigned want, void ***tail)
{
	const uintptr_t base = span_base(s), size = span_size(s), secret = span_key_secret;
	const int vg = vg_active();
	/* Objects below it were handed out before and hold their free-key,
	 * unless their page was released (relmap) */
	const unsigned keyed = vg ? 0 : s->bump;
	if (!vg && (s->relmap != 0 || s == c->fresh))
		populate_taken(c, s, want);
	void **link = *tail;
	unsigned got = 0, w = s->scan / 64u, last = 0;
	uint64_t x = ~s->alloc[w] & (~(uint64_t)0 << (s->scan % 64u));
	while (got < want) {
		while (x == 0)
			x = ~s->alloc[++w];
		const uint64_t x0 = x;
		const uintptr_t wbase = base + (uintptr_t)w * 64u * size;
		do {
			const unsigned bit = bits_ctz(x);
			void **o = (void **)(wbase + (uintptr_t)bit * size);
			x &= x - 1;
			if (__builtin_expect(vg, 0))
				vg_links_open(o);
			else if (w * 64u + bit < keyed &&
			         __builtin_expect(o[1] != (void *)(secret ^ (uintptr_t)o), 0) &&
			         !(s->relmap >> ((uintptr_t)o - base) / PA_SPAN_RELPAGE & 1))
				written(c, o);
			else
				o[1] = (void *)(secret ^ (uintptr_t)o); /* span_free_key */
			*link = o;
			link = &o[0];
		} while (++got < want && x != 0);
		const uint64_t taken = x0 ^ x;
		last = w * 64u + 63u - bits_clz(taken);
		/* pa_free reads the bits without the lock */
		__atomic_store_n(&s->alloc[w], s->alloc[w] | taken, __ATOMIC_RELAXED);
		if (__builtin_expect(s->relmap != 0, 0))
			for (uint64_t t = taken; t != 0; t &= t - 1)
				unrelease(c, s, w * 64u + bits_ctz(t));
	}
	s->scan = (uint16_t)(last + 1);
	if (last >= s->bump) /* pa_free reads it without the lock */
		__atomic_store_n(&s->bump, (uint16_t)(last + 1), __ATOMIC_RELAXED);
	span_fbump_update(s); /* the same */
	s->nfree = (uint16_t)(s->nfree - got);
	*tail = link;
	return got;
}

/* Stash batches a class may hold (CENTRAL_STASH_MAX, PA_STASH_BYTES), as
 * many objects as batches of at most CENTRAL_BATCH would make: a tiny
 * class's larger batches (central.h) make fewer trips, not a deeper stash
 * (with the slots' count kept, mstress's stashes held 0.9 MiB more). */
static unsigned stash_cap(unsigned cls)
{
	unsigned b = central_batch(cls), unit = b < CENTRAL_BATCH ? b : CENTRAL_BATCH;
	return stash_cap_of((size_t)unit * pa_sizeclasses[cls].size, CENTRAL_STASH_MAX) * unit / b;
}

/* Free carve slot k of c; lock held. */
static void carve_clear(struct pa_central *c, unsigned k)
{
	c->carve[k].owner = NULL;
	c->carve[k].span = NULL;
}

/* Is s in one of c's carve slots? Lock held. */
static int carved(const struct pa_central *c, const struct pa_span *s)
{
	for (unsigned k = 0; k < CENTRAL_CARVE_SLOTS; k++)
		if (c->carve[k].span == s)
			return 1;
	return 0;
}

/* The span to take from next for a refill (central.h); lock held. NULL:
 * out of memory. *carving: whether owner holds a slot afterwards. A new
 * span takes its record from owner's spares. */
static struct pa_span *take_span(struct pa_central *c, unsigned cls, struct pa_span_spares *owner,
                                 int *carving)
{
	struct pa_span *top = fullest(c);
	if (carving == NULL)
		return top != NULL ? top : grow_locked(c, cls, owner);
	unsigned mine = CENTRAL_CARVE_SLOTS, idle = CENTRAL_CARVE_SLOTS;
	for (unsigned k = 0; k < CENTRAL_CARVE_SLOTS; k++) {
		if (c->carve[k].owner == owner)
			mine = k;
		else if (c->carve[k].owner == NULL && idle == CENTRAL_CARVE_SLOTS)
			idle = k;
	}
	if (mine < CENTRAL_CARVE_SLOTS) {
		if (c->carve[mine].span->nfree != 0) {
			*carving = 1;
			return c->carve[mine].span;
		}
		idle = mine; /* full: a new one in its place */
	}
	/* The fullest listed span no one carves: among the first SLOTS + 1
	 * listed from the fullest down there is one, as at most SLOTS are
	 * carved. */
	struct pa_span *s = NULL;
	for (uint32_t m = c->nonempty; s == NULL && m != 0; m &= ~(1u << (63u - bits_clz(m))))
		for (s = c->partial[63u - bits_clz(m)]; s != NULL && carved(c, s);)
			s = s->next;
	if (idle == CENTRAL_CARVE_SLOTS) {
		*carving = 0; /* every slot is another cache's: share */
		return s != NULL ? s : top != NULL ? top : grow_locked(c, cls, owner);
	}
	if (s == NULL && (s = grow_locked(c, cls, owner)) == NULL) {
		carve_clear(c, idle);
		*carving = 0;
		return NULL;
	}
	c->carve[idle].owner = owner;
	c->carve[idle].span = s;
	*carving = 1;
	return s;
}

/* Set or clear one of st's marks (full, empty): a store only when it
 * changes, so that the hand-offs do not write the line for nothing. */
static inline void stash_mark(uint32_t *mark, uint32_t v)
{
	if (__atomic_load_n(mark, __ATOMIC_RELAXED) != v)
		__atomic_store_n(mark, v, __ATOMIC_RELAXED);
}

/* The newest batch of cls's stash, or NULL: no lock (central.h). From the
 * hint down, then (unless the stash was found empty since the last give)
 * from the cap down to the hint: a batch that a race left above the hint
 * is found too. An empty stash sets the hint to 0, where the next gives
 * start. */
static void *stash_take(unsigned cls)
{
	struct pa_batch_stash *st = &central_stash[cls];
	void **slot = central_stash_slot[cls];
	uint32_t cap = stash_cap(cls), top = __atomic_load_n(&st->top, __ATOMIC_RELAXED);
	top = top < cap ? top : cap;
	for (uint32_t k = top, end = 0, pass = 0; pass < 2; k = cap, end = top, pass++) {
		if (pass == 1 && !__atomic_load_n(&st->given, __ATOMIC_RELAXED))
			break;
		while (k-- > end) {
			if (__atomic_load_n(&slot[k], __ATOMIC_RELAXED) == NULL)
				continue;
			void *b = __atomic_exchange_n(&slot[k], NULL, __ATOMIC_ACQUIRE);
			if (b != NULL) {
				__atomic_store_n(&st->top, k, __ATOMIC_RELAXED);
				stash_mark(&st->full, 0);
				return b;
			}
		}
	}
	/* Written only where they change (central.h). */
	stash_mark(&st->top, 0);
	stash_mark(&st->given, 0);
	return NULL;
}

/* Put batch b in an empty slot of cls's stash below its cap: 1, or 0 when
 * it is full (central.h). From the hint up, then (unless the stash was
 * found full since the last refill) from 0 up to the hint: a slot that a
 * race left empty below the hint is used too. */
static int stash_give(unsigned cls, void *b)
{
	struct pa_batch_stash *st = &central_stash[cls];
	void **slot = central_stash_slot[cls];
	uint32_t cap = stash_cap(cls), top = __atomic_load_n(&st->top, __ATOMIC_RELAXED);
	top = top < cap ? top : cap;
	for (uint32_t k = top, end = cap, pass = 0; pass < 2; k = 0, end = top, pass++) {
		if (pass == 1 && __atomic_load_n(&st->full, __ATOMIC_RELAXED))
			break;
		for (; k < end; k++) {
			void *empty = NULL;
			if (__atomic_load_n(&slot[k], __ATOMIC_RELAXED) == NULL &&
			    __atomic_compare_exchange_n(&slot[k], &empty, b, 0, __ATOMIC_RELEASE,
			                                __ATOMIC_RELAXED)) {
				__atomic_store_n(&st->top, k + 1, __ATOMIC_RELAXED);
				stash_mark(&st->given, 1);
				stash_mark(&st->used, 1);
				return 1;
			}
		}
	}
	stash_mark(&st->full, 1);
	return 0;
}

static void give_locked(struct pa_central *c, void *head, unsigned n, struct pa_span_spares *sp);

/*
 * A stashed batch's address tree, so that a refill brings the batch's lines
 * in together and not one link after another. The batch's objects are
 * linked through their first word, in the order the pops take them: each
 * pop's address is the previous object's link, and where the giver's frees
 * just wrote those lines in another core's cache, each is a miss the next
 * pop waits for (xmalloc-test: 82% of the producers' malloc samples on that
 * load). So the giver, whose walk over the batch reads lines it holds,
 * also writes in each object's free words past the link and the free-key
 * the addresses of up to tree_fan(cls) later objects of the batch (object
 * k's hold objects k*F + 1 ... k*F + F: an implicit tree), and the refill
 * reads the tree: its loads depend on each other only level by level (a 64-
 * byte class, fan 6: four levels for its batch of 128, against 127 links),
 * and the lines arrive together, before the pops. A scratch reader of 32 lines
 * another core had just written: 34-46 ns a line down the links, 7.4 down
 * the tree, 9.3 from a known array of addresses.
 */
#define TREE_FAN_MAX (CENTRAL_BATCH_MAX - 1u)

/* The addresses an object of cls holds in the tree: its words past the
 * link and the free-key; 0 below two (one is the links' own chain). */
static inline unsigned tree_fan(unsigned cls, unsigned n)
{
	size_t words = pa_sizeclasses[cls].size / sizeof(void *);
	if (n <= 2 || words < 4)
		return 0;
	return words - 2 < TREE_FAN_MAX ? (unsigned)(words - 2) : TREE_FAN_MAX;
}

/* Write the tree of batch b (n objects linked from b, fan f). */
static void tree_write(void *b, unsigned n, unsigned f)
{
	void **a[CENTRAL_BATCH_MAX];
	void **o = b;
	for (unsigned k = 0; k < n; k++, o = o[0]) {
		a[k] = o;
		if (k != 0)
			a[(k - 1) / f][2 + (k - 1) % f] = o;
	}
}

/* Ask for p's line for writing: the pops' stores then find it owned. */
static inline void prefetch_owned(const void *p, int prefetchw)
{
#if defined(__x86_64__)
	if (prefetchw) {
		__asm__ volatile("prefetchw (%0)" ::"r"(p));
		return;
	}
#endif
	(void)prefetchw;
	__builtin_prefetch(p, 1);
}

/* Bring in every line of batch b of cls (n objects, its tree of fan f),
 * each asked for writing as soon as its address is known, before its
 * children's addresses are read from it: the pops' loads and the stores of
 * malloc and its caller then find the lines in this core's cache, owned
 * (read only, the lines arrived shared and each store waited for the other
 * core to let go: xmalloc-test was no faster). An address that is not on a
 * page of cls (a write into a freed object, after its free) ends the walk
 * before anything is read through it: the pops then walk the links. */
static void tree_read(unsigned cls, void *b, unsigned n, unsigned f)
{
	void **a[CENTRAL_BATCH_MAX];
	int w = os_cpu_prefetchw();
	uintptr_t r = UINTPTR_MAX;
	struct pa_span **leaf = NULL;
	unsigned known = 1;
	a[0] = b;
	prefetch_owned(b, w);
	for (unsigned k = 0; known < n; k++)
		for (unsigned i = 0; i < f && known < n; i++) {
			void **x = a[k][2 + i];
			uintptr_t xa = (uintptr_t)x, xr = xa >> PA_PAGEMAP_LEAF_SHIFT;
			if (xr != r) {
				if ((leaf = pagemap_leaf_bounded(xr)) == NULL)
					return;
				r = xr;
			}
			size_t page = (xa >> PA_PAGE_SHIFT) & (PA_PAGEMAP_LEAF_LEN - 1);
			if (__atomic_load_n(&pagemap_leaf_classes(leaf)[page], __ATOMIC_RELAXED) !=
			    cls)
				return;
			prefetch_owned(x, w);
			a[known++] = x;
		}
}

unsigned central_take(unsigned cls, unsigned n, void **head, struct pa_span_spares *owner,
                      int *carving)
{
	struct pa_central *c = &central[cls];
	void *list = NULL, **tail = &list;
	unsigned got = 0;
	int frag = __atomic_load_n(&c->frag, __ATOMIC_RELAXED);
	unsigned batch = central_batch(cls);
	/* A refill in slow start (n below a batch) looks only where the hint
	 * says a batch is: its look at an empty stash would write the stash's
	 * marks and dirty a page for every class a program uses. */
	if (owner != NULL && !frag &&
	    (n == batch ||
	     (n < batch && __atomic_load_n(&central_stash[cls].top, __ATOMIC_RELAXED) != 0)) &&
	    (*head = stash_take(cls)) != NULL) {
		unsigned f = tree_fan(cls, batch);
		if (f != 0)
			tree_read(cls, *head, batch, f);
		return batch;
	}
	lock_acquire(&c->lock);
	void *b;
	if (frag && (b = stash_take(cls)) != NULL) /* its objects back to their spans */
		give_locked(c, b, central_batch(cls), owner);
	while (got < n) {
		struct pa_span *s = take_span(c, cls, owner, carving);
		if (s == NULL)
			break;
		unsigned was = inuse_of(s);
		got += take_from(c, s, n - got < s->nfree ? n - got : s->nfree, &tail);
		relist(c, s, was);
	}
	*tail = NULL;
	c->out += got;
	lock_release(&c->lock);
	*head = list;
	return got;
}

void central_uncarve_held(unsigned cls, const void *owner)
{
	struct pa_central *c = &central[cls];
	for (unsigned k = 0; k < CENTRAL_CARVE_SLOTS; k++)
		if (c->carve[k].owner == owner)
			carve_clear(c, k);
}

void central_uncarve(unsigned cls, const void *owner)
{
	lock_acquire(&central[cls].lock);
	central_uncarve_held(cls, owner);
	lock_release(&central[cls].lock);
}

/* The heap pages of s whose 4 KiB pages the sweep all released (bit i:
 * page i of the span). */
static uint64_t released_heap_pages(const struct pa_span *s)
{
	const unsigned per = (unsigned)(PA_PAGE_SIZE / PA_SPAN_RELPAGE);
	const uint32_t whole = (uint32_t)bits_mask(0, per);
	uint64_t m = 0;
	for (unsigned i = 0; i < s->npages; i++)
		if ((s->relmap >> (i * per) & whole) == whole)
			m |= (uint64_t)1 << i;
	return m;
}

/* Every object of s is back: give its pages to the heap and its record to
 * sp (span.h); lock held, s off the lists. Heap pages the sweep released
 * whole go back as released ones; a heap page half released counts as
 * resident (it may be: the scavenger releases it again in its own time). */
static void retire_locked(struct pa_central *c, struct pa_span *s, struct pa_span_spares *sp)
{
	for (unsigned k = 0; k < CENTRAL_CARVE_SLOTS; k++)
		if (c->carve[k].span == s)
			carve_clear(c, k);
	if (c->fresh == s)
		c->fresh = NULL;
	c->spans--;
	c->rel_pages -= bits_popcount(s->relmap);
	c->dirty -= s->dirty;
	pagemap_set(span_base(s), s->npages, NULL);
	pages_free_released(span_base(s), s->npages, s->relmap != 0 ? released_heap_pages(s) : 0);
	if (vg_active() && s->vg_sizes != NULL) /* a long record (span.h) */
		os_unmap(s->vg_sizes, span_objects(s) * sizeof(uint32_t));
	span_delete(s, sp);
}

/* Give n objects, linked from head, back to their spans; lock held. */
static void give_locked(struct pa_central *c, void *head, unsigned n, struct pa_span_spares *sp)
{
	uint32_t now = pages_epoch();
	struct pa_span *s = NULL;
	uintptr_t span_bytes = 0;
	unsigned was = 0; /* s's objects out when the run of its objects began */
	for (unsigned k = 0; k < n; k++) {
		void **o = head;
		head = o[0];
		/* Objects of one batch often share a span: look up only a new one
		 * (and move the last one to its list once). */
		if (s == NULL || (uintptr_t)o + s->neg_base >= span_bytes) {
			if (s != NULL)
				relist(c, s, was);
			s = pagemap_lookup((uintptr_t)o);
			was = inuse_of(s);
			span_bytes = s->npages * PA_PAGE_SIZE;
			if (!s->dirty) {
				__atomic_store_n(&s->dirty, 1, __ATOMIC_RELAXED);
				c->dirty++;
			}
			s->gave_epoch = (uint16_t)(now >> PA_SPAN_AGE_SHIFT);
		}
		int exact;
		unsigned i = span_index(s, (uintptr_t)o, &exact);
		uint64_t word = s->alloc[i / 64u], bit = (uint64_t)1 << (i % 64u);
		if (!(word & bit)) {
			lock_release(&c->lock);
			span_report("free", o, PA_OBJ_DOUBLE_FREE);
		}
		if (__builtin_expect(o[1] != (void *)span_free_key(o), 0) && !vg_active())
			written(c, o);
		/* pa_free reads the bits without the lock */
		__atomic_store_n(&s->alloc[i / 64u], word & ~bit, __ATOMIC_RELAXED);
		if (i < s->scan)
			s->scan = (uint16_t)i;
		if (++s->nfree == span_objects(s)) {
			if (s->prevnext != NULL)
				list_remove(c, s, was);
			retire_locked(c, s, sp);
			s = NULL;
		}
	}
	if (s != NULL)
		relist(c, s, was);
	c->out -= n;
}

void central_give(unsigned cls, void *head, unsigned n, struct pa_span_spares *sp)
{
	struct pa_central *c = &central[cls];
	lock_acquire(&c->lock);
	give_locked(c, head, n, sp);
	lock_release(&c->lock);
}

void central_give_or_stash(unsigned cls, void *head, unsigned n, struct pa_span_spares *sp)
{
	if (n == central_batch(cls) && !__atomic_load_n(&central[cls].frag, __ATOMIC_RELAXED)) {
		unsigned f = tree_fan(cls, n);
		if (f != 0)
			tree_write(head, n, f);
		if (stash_give(cls, head))
			return;
	}
	central_give(cls, head, n, sp);
}

void central_adopt(struct pa_span *s, struct pa_span_spares *sp)
{
	unsigned cls = s->cls;
	struct pa_central *c = &central[cls];
	lock_acquire(&c->lock);
	s->next = NULL;
	s->prevnext = NULL;
	__atomic_store_n(&s->relmap, 0, __ATOMIC_RELAXED); /* heap_id: heap_of reads it */
	s->gave_epoch = 0;
	/* A free of one of its objects in another thread now goes to a
	 * thread cache, and from there to this list: after the lock. */
	__atomic_store_n(&s->dirty, 0, __ATOMIC_RELAXED);
	c->bucket_mul = central_bucket_mul(pa_sizeclasses[cls].objects);
	c->spans++;
	if (s->nfree == span_objects(s)) {
		retire_locked(c, s, sp);
	} else {
		c->out += span_objects(s) - s->nfree;
		if (s->nfree != 0)
			list_push(c, s, inuse_of(s));
		fbump_set(c, s); /* the fast path's from here on */
	}
	lock_release(&c->lock);
}

unsigned central_stash_batches(unsigned cls)
{
	unsigned n = 0, cap = stash_cap(cls); /* no give goes past the cap */
	if (!__atomic_load_n(&central_stash[cls].used, __ATOMIC_RELAXED))
		return 0; /* its slots never written: not read either (central.h) */
	for (unsigned k = 0; k < cap; k++)
		n += __atomic_load_n(&central_stash_slot[cls][k], __ATOMIC_RELAXED) != NULL;
	return n;
}

size_t central_stashed(unsigned cls)
{
	return (size_t)central_stash_batches(cls) * central_batch(cls);
}

/*
 * The decay compares each slot with what it held at the previous one
 * (stash_seen): a batch still there sat unused all period and goes to its
 * spans. A batch taken and given back to the same slot meanwhile with the
 * same first object looks unused and goes too: a batch's worth of work
 * for the refill after, once a period at most.
 */
size_t central_stash_drain(int all, struct pa_span_spares *sp)
{
	size_t moved = 0;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++) {
		struct pa_central *c = &central[cls];
		struct pa_batch_stash *st = &central_stash[cls];
		void **seen = stash_seen[cls], **slot = central_stash_slot[cls];
		if (central_stash_batches(cls) == 0 &&
		    __atomic_load_n(&stash_seen_n[cls], __ATOMIC_RELAXED) == 0 &&
		    __atomic_load_n(&c->frag_since, __ATOMIC_RELAXED) == FRAG_NO)
			continue;
		unsigned batch = central_batch(cls);
		uint32_t seen_n = 0, top = 0;
		lock_acquire(&c->lock);
		frag_decay(c);
		/* A stash never given to: no slot to read (central.h). */
		unsigned cap = __atomic_load_n(&st->used, __ATOMIC_RELAXED) ? stash_cap(cls) : 0;
		for (unsigned k = 0; k < cap; k++) {
			void *b = __atomic_load_n(&slot[k], __ATOMIC_RELAXED);
			if (b != NULL && (all || b == seen[k]) &&
			    __atomic_compare_exchange_n(&slot[k], &b, NULL, 0, __ATOMIC_ACQUIRE,
			                                __ATOMIC_RELAXED)) {
				give_locked(c, b, batch, sp);
				moved += batch;
			}
			seen[k] = __atomic_load_n(&slot[k], __ATOMIC_RELAXED);
			if (seen[k] != NULL) {
				seen_n++;
				top = k + 1;
			}
		}
		/* The hint past the newest batch left, so the gives fill the
		 * slots just emptied. */
		stash_mark(&st->top, top);
		stash_mark(&st->full, 0);
		__atomic_store_n(&stash_seen_n[cls], seen_n, __ATOMIC_RELAXED);
		lock_release(&c->lock);
	}
	return moved;
}

void central_lock_all(void)
{
	for (unsigned i = 1; i < PA_SC_NUM_CLASSES; i++)
		lock_acquire(&central[i].lock);
}

void central_unlock_all(void)
{
	for (unsigned i = PA_SC_NUM_CLASSES; i-- > 1;)
		lock_release(&central[i].lock);
}

void central_reset_locks(void)
{
	for (unsigned i = 1; i < PA_SC_NUM_CLASSES; i++)
		lock_init(&central[i].lock);
}

/* ---- the defrag contract (central.h) ---------------------------------------- */

/* Looked at from the fullest list down, the listed span other than `not`
 * with the most objects out among the first DEFRAG_LOOK of the first list
 * that has one (a list's spans differ by up to an eighth of a span); lock
 * held. NULL: no span listed but `not`. */
#define DEFRAG_LOOK 4u
static struct pa_span *fullest_other(const struct pa_central *c, const struct pa_span * not )
{
	for (uint32_t m = c->nonempty; m != 0; m &= ~(1u << (63u - bits_clz(m)))) {
		struct pa_span *best = NULL;
		unsigned k = 0;
		for (struct pa_span *t = c->partial[63u - bits_clz(m)];
		     t != NULL && k < DEFRAG_LOOK; t = t->next) {
			if (t == not )
				continue;
			if (best == NULL || inuse_of(t) > inuse_of(best))
				best = t;
			k++;
		}
		if (best != NULL)
			return best;
	}
	return NULL;
}

/* central_defrag_hint with the lock held. */
static int hint_locked(const struct pa_central *c, const struct pa_span *s)
{
	if (s->prevnext == NULL || carved(c, s))
		return 0; /* full, or a cache's to carve */
	unsigned inuse = inuse_of(s);
	if (!central_defrag_rule(inuse, c->npartial, c->partial_inuse))
		return 0;
	const struct pa_span *t = fullest_other(c, s);
	return t != NULL && inuse_of(t) >= inuse;
}

int central_defrag_hint(struct pa_span *s)
{
	struct pa_central *c = &central[s->cls];
	lock_acquire(&c->lock);
	int worth = hint_locked(c, s);
	lock_release(&c->lock);
	return worth;
}

void *central_defrag_take(unsigned cls, struct pa_span *from, struct pa_span_spares *sp)
{
	struct pa_central *c = &central[cls];
	void *list = NULL, **tail = &list;
	lock_acquire(&c->lock);
	struct pa_span *t = fullest_other(c, from);
	if (from != NULL && (t == NULL || inuse_of(t) < inuse_of(from)))
		t = NULL; /* nowhere fuller to go */
	else if (t == NULL)
		t = grow_locked(c, cls, sp);
	if (t != NULL) {
		unsigned was = inuse_of(t);
		take_from(c, t, 1, &tail);
		relist(c, t, was);
		c->out++;
	}
	lock_release(&c->lock);
	if (list != NULL)
		((void **)list)[1] = NULL; /* live: no free-key */
	return list;
}

/* Live object p straight back to its span, with the free-key a free into
 * a list writes (give_locked checks it); lock held. */
static void give_one_locked(struct pa_central *c, void *p, struct pa_span_spares *sp)
{
	((void **)p)[0] = NULL;
	((void **)p)[1] = (void *)span_free_key(p);
	give_locked(c, p, 1, sp);
}

void central_defrag_give(void *p, struct pa_span_spares *sp)
{
	struct pa_span *s = pagemap_lookup((uintptr_t)p);
	struct pa_central *c = &central[s->cls];
	lock_acquire(&c->lock);
	give_one_locked(c, p, sp);
	lock_release(&c->lock);
}

int central_give_draining(void *p, struct pa_span_spares *sp)
{
	struct pa_span *s = pagemap_lookup((uintptr_t)p);
	struct pa_central *c = &central[s->cls];
	lock_acquire(&c->lock);
	if (!draining(c, s)) {
		fbump_mark(c, s, (int)c->frag); /* stale */
		lock_release(&c->lock);
		return 0;
	}
	give_one_locked(c, p, sp);
	lock_release(&c->lock);
	return 1;
}

void central_occupancy(unsigned cls, struct central_occupancy *o)
{
	struct pa_central *c = &central[cls];
	lock_acquire(&c->lock);
	o->spans = c->spans;
	o->partial = c->npartial;
	o->partial_free = c->npartial * pa_sizeclasses[cls].objects - c->partial_inuse;
	for (unsigned b = 0; b < CENTRAL_BUCKETS; b++)
		o->bucket_spans[b] = c->nbucket[b];
	lock_release(&c->lock);
}
