/*
 * heap.c — heaps of the program's own (heap.h): their spans, lists, counts
 * and limit, and the table of heaps.
 */
#include "heap.h"

#include <errno.h>

#include "bits.h"
#include "central.h"
#include "large.h"
#include "msg.h"
#include "os.h"
#include "pagealloc.h"
#include "pagemap.h"
#include "pages.h"
#include "span.h"
#include "vg.h"

/* ---- the table ------------------------------------------------------------ */

static pa_lock registry_lock = PA_LOCK_INIT;
/* Under registry_lock (table: also read without it once set, release). */
static struct pa_heap *table;     /* HEAP_MAX slots, mapped at the first heap_new */
static uint32_t table_used;       /* slots ever handed out: [0, table_used) */
static struct pa_heap *free_slot; /* slots of heaps that went, linked by next_free */

struct pa_heap *heap_new(void)
{
	lock_acquire(&registry_lock);
	if (table == NULL)
		__atomic_store_n(&table, os_alloc(HEAP_MAX * sizeof(struct pa_heap)),
		                 __ATOMIC_RELEASE);
	struct pa_heap *h = NULL;
	if (table == NULL) {
		h = NULL;
	} else if (free_slot != NULL) {
		h = free_slot;
		free_slot = h->next_free;
	} else if (table_used < HEAP_MAX) {
		h = &table[table_used];
		h->id = table_used++;
		lock_init(&h->lock);
	}
	if (h == NULL) {
		lock_release(&registry_lock);
		errno = ENOMEM;
		return NULL;
	}
	lock_acquire(&h->lock);
	for (unsigned c = 0; c < PA_SC_NUM_CLASSES; c++) {
		h->partial[c] = h->full[c] = NULL;
		h->npartial[c] = h->partial_inuse[c] = 0;
	}
	h->large = NULL;
	h->spans = h->large_objects = h->page_bytes = 0;
	h->live_bytes = h->live_objects = 0;
	h->allocs = h->frees = h->limit_failures = 0;
	h->limit = 0;
	h->numa_node = -1;
	h->next_free = NULL;
	__atomic_store_n(&h->live, 1, __ATOMIC_RELAXED);
	lock_release(&h->lock);
	lock_release(&registry_lock);
	return h;
}

struct pa_heap *heap_check(const void *hv, const char *func)
{
	struct pa_heap *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
	uintptr_t off = (uintptr_t)hv - (uintptr_t)t;
	if (t != NULL && hv != NULL && off < HEAP_MAX * sizeof(struct pa_heap) &&
	    off % sizeof(struct pa_heap) == 0) {
		struct pa_heap *h = (struct pa_heap *)(uintptr_t)hv;
		if (__atomic_load_n(&h->live, __ATOMIC_RELAXED))
			return h;
	}
	struct pa_msg m;
	msg_begin(&m);
	msg_str(&m, func);
	msg_str(&m, "(");
	msg_hex(&m, (uintptr_t)hv);
	msg_str(&m, "): not a live heap (destroyed or deleted already, or not from pa_heap_new)");
	msg_end(&m);
	os_abort();
}

struct pa_heap *heap_of(const struct pa_span *s)
{
	return &__atomic_load_n(&table,
	                        __ATOMIC_ACQUIRE)[__atomic_load_n(&s->heap_id, __ATOMIC_RELAXED)];
}

/* h's slot back to the registry (h's lists empty, h no longer live). */
static void slot_free(struct pa_heap *h)
{
	lock_acquire(&registry_lock);
	h->next_free = free_slot;
	free_slot = h;
	lock_release(&registry_lock);
}

/* ---- lists ------------------------------------------------------------------ */

static void list_push(struct pa_span **head, struct pa_span *s)
{
	s->next = *head;
	if (s->next != NULL)
		s->next->prevnext = &s->next;
	s->prevnext = head;
	*head = s;
}

static void list_remove(struct pa_span *s)
{
	*s->prevnext = s->next;
	if (s->next != NULL)
		s->next->prevnext = s->prevnext;
	s->next = NULL;
	s->prevnext = NULL;
}

/* Mark s as h's (span.h), before any of its objects is handed out. */
static void mark(struct pa_heap *h, struct pa_span *s)
{
	__atomic_store_n(&s->heap_id, h->id, __ATOMIC_RELAXED);
	span_set_fbump(s, 0);
	__atomic_store_n(&s->dirty, PA_SPAN_HEAPS, __ATOMIC_RELAXED);
}

/* May h take bytes more pages? A refusal is counted, and errno set to
 * EDQUOT (heap.h); lock held. */
static int limit_allows(struct pa_heap *h, size_t bytes)
{
	if (h->limit == 0 || (h->page_bytes <= h->limit && bytes <= h->limit - h->page_bytes))
		return 1;
	h->limit_failures++;
	errno = EDQUOT;
	return 0;
}

/* ---- small objects -------------------------------------------------------- */

/* A new empty span of class cls, on h's partial list; lock held. NULL:
 * ENOMEM, or EDQUOT (over h's limit). */
static struct pa_span *grow(struct pa_heap *h, unsigned cls, struct pa_span_spares *sp)
{
	size_t npages = pa_sizeclasses[cls].pages;
	if (!limit_allows(h, npages * PA_PAGE_SIZE))
		return NULL;
	struct pa_span *s = span_new(cls, sp);
	if (s == NULL)
		return NULL;
	uintptr_t base = pages_alloc_on(h->numa_node, npages, NULL);
	if (base == 0) {
		span_delete(s, sp);
		return NULL;
	}
	if (vg_active())
		VALGRIND_MAKE_MEM_NOACCESS((void *)base, npages * PA_PAGE_SIZE);
	/* Mapped with fbump and bump 0: every free of it fails until marked. */
	if (span_init_small(s, cls, base) != 0) {
		pages_free(base, npages);
		span_delete(s, sp);
		return NULL;
	}
	mark(h, s);
	list_push(&h->partial[cls], s);
	h->npartial[cls]++;
	h->spans++;
	h->page_bytes += npages * PA_PAGE_SIZE;
	return s;
}

/* An object of h's partial span s of class cls; lock held, released. */
static void *take_one(struct pa_heap *h, unsigned cls, struct pa_span *s)
{
	/* The lowest free index at or above scan (below it every bit is 1). */
	unsigned w = s->scan / 64u;
	uint64_t x = ~s->alloc[w] & (~(uint64_t)0 << (s->scan % 64u));
	while (x == 0)
		x = ~s->alloc[++w];
	unsigned i = w * 64u + bits_ctz(x);
	span_bit_set(s, i, 1);
	s->scan = (uint16_t)(i + 1);
	if (i >= s->bump) /* pa_free's slow path reads it without the lock */
		__atomic_store_n(&s->bump, (uint16_t)(i + 1), __ATOMIC_RELAXED);
	if (--s->nfree == 0) {
		list_remove(s);
		list_push(&h->full[cls], s);
		h->npartial[cls]--;
		h->partial_inuse[cls] -= span_objects(s) - 1u;
	} else {
		h->partial_inuse[cls]++;
	}
	h->live_objects++;
	h->live_bytes += span_size(s);
	h->allocs++;
	lock_release(&h->lock);
	void **o = (void **)(span_base(s) + (uintptr_t)i * span_size(s));
	vg_links_open(o);
	o[1] = NULL; /* a free-key an earlier block here may have left */
	return o;
}

void *heap_alloc_small(struct pa_heap *h, unsigned cls, struct pa_span_spares *sp)
{
	lock_acquire(&h->lock);
	struct pa_span *s = h->partial[cls];
	if (s == NULL && (s = grow(h, cls, sp)) == NULL) {
		lock_release(&h->lock);
		if (errno != EDQUOT)
			errno = ENOMEM;
		return NULL;
	}
	return take_one(h, cls, s);
}

/* The partial span of h's class cls other than `not` with the most objects
 * out among the first HEAP_DEFRAG_LOOK listed (NULL: none); lock held. */
#define HEAP_DEFRAG_LOOK 8u
static struct pa_span *fullest_other(struct pa_heap *h, unsigned cls, const struct pa_span * not )
{
	struct pa_span *best = NULL;
	unsigned k = 0;
	for (struct pa_span *t = h->partial[cls]; t != NULL && k < HEAP_DEFRAG_LOOK; t = t->next) {
		if (t == not )
			continue;
		if (best == NULL || t->nfree < best->nfree)
			best = t;
		k++;
	}
	return best;
}

int heap_defrag_hint(struct pa_heap *h, struct pa_span *s)
{
	lock_acquire(&h->lock);
	unsigned cls = s->cls;
	int worth = 0;
	if (span_heaps(s) && heap_of(s) == h && s->nfree != 0) {
		unsigned inuse = span_objects(s) - s->nfree;
		const struct pa_span *t = fullest_other(h, cls, s);
		worth = central_defrag_rule(inuse, h->npartial[cls], h->partial_inuse[cls]) &&
		        t != NULL && t->nfree <= s->nfree;
	}
	lock_release(&h->lock);
	return worth;
}

void *heap_defrag_take(struct pa_heap *h, unsigned cls, struct pa_span *from,
                       struct pa_span_spares *sp)
{
	lock_acquire(&h->lock);
	struct pa_span *t = fullest_other(h, cls, from);
	if (from != NULL && t != NULL && t->nfree > from->nfree)
		t = NULL;
	if (t == NULL && (from != NULL || (t = grow(h, cls, sp)) == NULL)) {
		lock_release(&h->lock);
		if (from == NULL && errno != EDQUOT)
			errno = ENOMEM;
		return NULL;
	}
	return take_one(h, cls, t);
}

/* Empty small span s of h goes back to the page heap; lock held. */
static void retire_small(struct pa_heap *h, struct pa_span *s, struct pa_span_spares *sp)
{
	list_remove(s);
	h->spans--;
	h->page_bytes -= (size_t)s->npages * PA_PAGE_SIZE;
	pagemap_set(span_base(s), s->npages, NULL);
	pages_free(span_base(s), s->npages);
	span_delete(s, sp);
}

/* ---- large objects -------------------------------------------------------- */

void *heap_alloc_large(struct pa_heap *h, size_t n, size_t align, int zero,
                       struct pa_span_spares *sp)
{
	size_t npages = large_pages_of(n);
	lock_acquire(&h->lock);
	if (!limit_allows(h, npages * PA_PAGE_SIZE)) {
		lock_release(&h->lock);
		return NULL;
	}
	struct pa_span *s = large_span_new(n, align, zero, sp, h->numa_node);
	if (s == NULL) {
		lock_release(&h->lock);
		errno = ENOMEM;
		return NULL;
	}
	mark(h, s);
	list_push(&h->large, s);
	h->large_objects++;
	h->page_bytes += (size_t)s->npages * PA_PAGE_SIZE;
	h->live_objects++;
	h->live_bytes += (size_t)s->npages * PA_PAGE_SIZE;
	h->allocs++;
	lock_release(&h->lock);
	return (void *)span_base(s);
}

/* ---- free ------------------------------------------------------------------- */

int heap_free(struct pa_span *s, void *p, const char *func, struct pa_span_spares *sp)
{
	struct pa_heap *h = heap_of(s);
	lock_acquire(&h->lock);
	if (!span_heaps(s) || heap_of(s) != h) {
		lock_release(&h->lock); /* deleted meanwhile: the default heap's now */
		return 0;
	}
	int exact;
	unsigned i = span_index(s, (uintptr_t)p, &exact);
	if (!span_bit(s, i)) { /* two threads freed it at once */
		lock_release(&h->lock);
		span_report(func, p, PA_OBJ_DOUBLE_FREE);
	}
	h->live_objects--;
	h->frees++;
	if (s->cls == 0) {
		size_t bytes = (size_t)s->npages * PA_PAGE_SIZE;
		h->live_bytes -= bytes;
		h->page_bytes -= bytes;
		h->large_objects--;
		list_remove(s);
		lock_release(&h->lock);
		large_span_drop(s, sp);
		return 1;
	}
	h->live_bytes -= span_size(s);
	span_bit_set(s, i, 0);
	if (i < s->scan)
		s->scan = (uint16_t)i;
	struct pa_span **partial = &h->partial[s->cls];
	if (s->nfree++ == 0) {
		list_remove(s);
		list_push(partial, s);
		h->npartial[s->cls]++;
		h->partial_inuse[s->cls] += span_objects(s) - 1u;
	} else {
		h->partial_inuse[s->cls]--;
	}
	/* Empty: back to the page heap, unless it is the class's only span
	 * with room (a malloc/free pair would make and retire it each time). */
	if (s->nfree == span_objects(s) && !(*partial == s && s->next == NULL)) {
		h->npartial[s->cls]--;
		retire_small(h, s, sp);
	}
	lock_release(&h->lock);
	return 1;
}

int heap_fits(const struct pa_span *s, size_t n)
{
	if (s->cls == 0)
		return n > PA_SC_MAX_SMALL && large_pages_of(n) == s->npages;
	return n <= span_size(s) && (n > span_size(s) / 2 || s->cls == 1);
}

/* ---- destroy, delete --------------------------------------------------------- */

/* Under memcheck, each live object of s is freed for it (its blocks were
 * announced one by one). */
static void vg_forget_live(struct pa_span *s)
{
	if (!vg_active())
		return;
	for (unsigned i = 0; i < span_objects(s); i++)
		if (span_bit(s, i))
			VALGRIND_FREELIKE_BLOCK(
			    (void *)(span_base(s) + (uintptr_t)i * span_size(s)), 0);
}

/* Lists of h: its partial lists, its full lists, large. */
#define HEAP_LISTS (2u * PA_SC_NUM_CLASSES + 1u)

/* Take h's lists into heads[HEAP_LISTS] and h out of the live heaps: O(1)
 * per list, no span touched. Lock held. */
static void take_lists(struct pa_heap *h, struct pa_span *heads[HEAP_LISTS])
{
	for (unsigned c = 0; c < PA_SC_NUM_CLASSES; c++) {
		heads[c] = h->partial[c];
		heads[PA_SC_NUM_CLASSES + c] = h->full[c];
		h->partial[c] = h->full[c] = NULL;
		h->npartial[c] = h->partial_inuse[c] = 0;
	}
	heads[2 * PA_SC_NUM_CLASSES] = h->large;
	h->large = NULL;
	__atomic_store_n(&h->live, 0, __ATOMIC_RELAXED);
}

/* Pages [lo, hi) of spans that went: out of the page map, back to the page
 * heap. */
static void drop_run(uintptr_t lo, uintptr_t hi)
{
	pagemap_set(lo, (hi - lo) / PA_PAGE_SIZE, NULL);
	pages_free(lo, (hi - lo) / PA_PAGE_SIZE);
}

/* Sort runs[0, n) by address: a radix sort of their first pages, less the
 * lowest, SORT_BITS a pass, through tmp (n entries). */
#define SORT_BITS 11u
static void sort_runs(uintptr_t (*runs)[2], uintptr_t (*tmp)[2], size_t n)
{
	const size_t buckets = (size_t)1 << SORT_BITS;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (size_t k = 0; k < n; k++) {
		lo = runs[k][0] < lo ? runs[k][0] : lo;
		hi = runs[k][0] > hi ? runs[k][0] : hi;
	}
	uintptr_t range = (hi - lo) >> PA_PAGE_SHIFT;
	uintptr_t(*from)[2] = runs, (*to)[2] = tmp;
	for (unsigned shift = 0; shift == 0 || range >> shift != 0; shift += SORT_BITS) {
		size_t count[(size_t)1 << SORT_BITS] = {0};
		for (size_t k = 0; k < n; k++)
			count[(((from[k][0] - lo) >> PA_PAGE_SHIFT) >> shift) & (buckets - 1)]++;
		for (size_t b = 0, sum = 0; b < buckets; b++) {
			size_t c = count[b];
			count[b] = sum;
			sum += c;
		}
		for (size_t k = 0; k < n; k++) {
			size_t b = (((from[k][0] - lo) >> PA_PAGE_SHIFT) >> shift) & (buckets - 1);
			to[count[b]][0] = from[k][0];
			to[count[b]++][1] = from[k][1];
		}
		uintptr_t(*swap)[2] = from;
		from = to;
		to = swap;
	}
	if (from != runs)
		for (size_t k = 0; k < n; k++) {
			runs[k][0] = from[k][0];
			runs[k][1] = from[k][1];
		}
}

/*
 * Destroy touches each span's record once: the lists are walked side by
 * side, a span of each in turn, so the misses on their records overlap
 * (one list after another took twice as long); each record goes back to
 * its pool in batches of 64, and each page range into a table (mapped for
 * the purpose). Sorted by address, the ranges come to a few runs (spans
 * made one after another lie side by side: the page heap's first fit),
 * each given to the page map and the page heap at once, where span by
 * span through the per-CPU page caches was most of the time (a heap of
 * 10^6 objects, 34,000 spans: 25 M instructions then, 5.7 M now;
 * docs/design.md, heaps). Without memory for the table, span by span.
 */
void heap_destroy(struct pa_heap *h)
{
	struct pa_span *heads[HEAP_LISTS];
	lock_acquire(&h->lock);
	size_t n = h->spans + h->large_objects, k = 0;
	take_lists(h, heads);
	lock_release(&h->lock);
	size_t bytes = 2 * n * sizeof(uintptr_t[2]);
	uintptr_t(*runs)[2] = n != 0 ? os_alloc(bytes) : NULL;
	struct pa_span *batch[PA_SPAN_DELETE_MAX];
	unsigned nb = 0, lanes = 0;
	for (unsigned l = 0; l < HEAP_LISTS; l++)
		if (heads[l] != NULL)
			heads[lanes++] = heads[l];
	/* The lists side by side, a span of each in turn: the loads of their
	 * next records miss the cache together, not one after another. */
	while (lanes != 0) {
		for (unsigned j = 0; j < lanes;) {
			struct pa_span *s = heads[j], *next = s->next;
			if (next != NULL)
				heads[j++] = next;
			else
				heads[j] = heads[--lanes];
			vg_forget_live(s);
			uintptr_t base = span_base(s);
			uintptr_t end = base + (uintptr_t)s->npages * PA_PAGE_SIZE;
			if (runs != NULL) {
				runs[k][0] = base;
				runs[k++][1] = end;
			} else {
				drop_run(base, end);
			}
			batch[nb++] = s;
			if (nb == PA_SPAN_DELETE_MAX) {
				span_delete_n(batch, nb);
				nb = 0;
			}
		}
	}
	span_delete_n(batch, nb);
	if (runs != NULL) {
		sort_runs(runs, runs + n, n);
		uintptr_t lo = runs[0][0], hi = runs[0][1];
		for (size_t j = 1; j < n; j++) {
			if (runs[j][0] != hi) {
				drop_run(lo, hi);
				lo = runs[j][0];
			}
			hi = runs[j][1];
		}
		drop_run(lo, hi);
		os_unmap(runs, bytes);
	}
	slot_free(h);
}

void heap_delete(struct pa_heap *h, struct pa_span_spares *sp)
{
	struct pa_span *heads[HEAP_LISTS];
	lock_acquire(&h->lock);
	take_lists(h, heads);
	/* Under h's lock: a heap_free that read a mark waits here, and then
	 * finds the mark gone. */
	for (unsigned l = 0; l < HEAP_LISTS; l++) {
		for (struct pa_span *s = heads[l], *next; s != NULL; s = next) {
			next = s->next;
			if (s->cls != 0) {
				central_adopt(s, sp);
				continue;
			}
			s->next = NULL;
			s->prevnext = NULL;
			__atomic_store_n(&s->heap_id, 0, __ATOMIC_RELAXED);
			large_adopt(s);
			__atomic_store_n(&s->dirty, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&s->fbump, 1, __ATOMIC_RELAXED); /* large.c's */
		}
	}
	lock_release(&h->lock);
	slot_free(h);
}

/* ---- counts ------------------------------------------------------------------ */

void heap_stats(struct pa_heap *h, struct pa_heap_stats *st)
{
	lock_acquire(&h->lock);
	st->live_bytes = h->live_bytes;
	st->live_objects = h->live_objects;
	st->page_bytes = h->page_bytes;
	st->spans = h->spans;
	st->large_objects = h->large_objects;
	st->allocs = h->allocs;
	st->frees = h->frees;
	st->limit = h->limit;
	st->limit_failures = h->limit_failures;
	lock_release(&h->lock);
}

void heap_set_limit(struct pa_heap *h, size_t bytes)
{
	lock_acquire(&h->lock);
	h->limit = bytes;
	lock_release(&h->lock);
}

int heap_set_numa_node(struct pa_heap *h, int node)
{
	if (node < -1 || (node >= 0 && (unsigned)node >= pa_numa_nodes())) {
		errno = EINVAL;
		return -1;
	}
	lock_acquire(&h->lock);
	h->numa_node = node;
	lock_release(&h->lock);
	return 0;
}

void heap_fork(enum pa_fork_phase phase)
{
	struct pa_heap *t = table;
	switch (phase) {
	case PA_FORK_PREPARE:
		lock_acquire(&registry_lock);
		for (uint32_t k = 0; k < table_used; k++)
			lock_acquire(&t[k].lock);
		break;
	case PA_FORK_PARENT:
		for (uint32_t k = table_used; k-- > 0;)
			lock_release(&t[k].lock);
		lock_release(&registry_lock);
		break;
	case PA_FORK_CHILD:
		for (uint32_t k = 0; k < table_used; k++)
			lock_init(&t[k].lock);
		lock_init(&registry_lock);
		break;
	}
}
