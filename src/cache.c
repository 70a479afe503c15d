/*
 * cache.c — per-thread object caches, their slow paths, thread exit and
 * the registry (cache.h).
 */
#include <errno.h>
#include <pthread.h>

#include "cache.h"
#include "central.h"
#include "config.h"
#include "lock.h"
#include "malloc_internal.h"
#include "meta.h"
#include "span.h"
#include "vg.h"

struct pa_tcache cache_empty;
/* A thread whose cache was handed back at exit: bound 0, like cache_empty,
 * but its slow paths do not build a new cache. */
static struct pa_tcache cache_gone;

__thread struct pa_tcache *cache_self __attribute__((tls_model("initial-exec"))) = &cache_empty;

static struct pa_meta_pool cache_pool = PA_META_POOL_INIT(sizeof(struct pa_tcache));
static pa_lock registry_lock = PA_LOCK_INIT;
static struct pa_tcache *registry; /* under registry_lock */
static size_t registry_len;        /* written under registry_lock; read atomically */
static pthread_key_t exit_key;
/* Bytes one cache can hold at most (every list at its bound, the large
 * slots full): a share at least this needs no check. Set by
 * cache_global_init. */
static size_t cache_capacity;

static void list_give_all(struct pa_tcache *tc, unsigned cls)
{
	uint32_t count = cache_list_count(tc, cls);
	if (count == 0)
		return;
	central_give(cls, tc->head[cls], count, 0);
	tc->head[cls] = NULL;
	cache_list_set(tc, cls, 0, tc->max[cls]);
}

/* May tc hold one of class cls's carve slots (central_take)? */
static int cache_carves(const struct pa_tcache *tc, unsigned cls)
{
	return (int)(tc->carving[cls / 64] >> (cls % 64) & 1);
}

static void cache_release(struct pa_tcache *tc)
{
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++) {
		list_give_all(tc, cls);
		if (cache_carves(tc, cls))
			central_uncarve(cls, tc);
	}
	for (unsigned w = 0; w < sizeof(tc->carving) / sizeof(tc->carving[0]); w++)
		tc->carving[w] = 0;
	for (unsigned k = 0; k < tc->nlarge; k++)
		large_release(tc->large[k]);
	__atomic_store_n(&tc->nlarge, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&tc->large_pages, 0, __ATOMIC_RELAXED);
	span_spares_free(tc->spare, tc->nspare);
	tc->nspare = 0;
}

/* Build the calling thread's cache; NULL when out of memory or exiting. */
static struct pa_tcache *cache_build(void)
{
	if (cache_self == &cache_gone ||
	    !__atomic_load_n(&pa_conf.thread_cache, __ATOMIC_RELAXED) || vg_active())
		return NULL;
	struct pa_tcache *tc = meta_alloc(&cache_pool);
	if (tc == NULL)
		return NULL;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++)
		cache_list_set(tc, cls, 0, 1);
	lock_acquire(&registry_lock);
	tc->next = registry;
	if (tc->next != NULL)
		tc->next->prevnext = &tc->next;
	tc->prevnext = &registry;
	registry = tc;
	__atomic_store_n(&registry_len, registry_len + 1, __ATOMIC_RELAXED);
	lock_release(&registry_lock);
	/* The cache is ready before pthread_setspecific: for key numbers from
	 * PTHREAD_KEY_2NDLEVEL_SIZE (32) up, glibc calloc's a block, and that
	 * calloc (preloaded: ours) must find this cache, not build another. */
	cache_self = tc;
	pthread_setspecific(exit_key, tc);
	return tc;
}

struct pa_span *cache_large_take(size_t npages)
{
	struct pa_tcache *tc = cache_self;
	for (unsigned k = tc->nlarge; k-- > 0;) {
		struct pa_span *s = tc->large[k];
		if (s->npages < npages || s->npages > npages + npages / 8)
			continue;
		cache_slot_remove(tc, k);
		span_bit_set(s, 0, 1);
		return s;
	}
	return NULL;
}

int cache_large_put(struct pa_span *s)
{
	struct pa_tcache *tc = cache_self;
	if (s->npages > PA_LARGE_SLOT_MAX_PAGES || vg_active())
		return 0;
	if (tc == &cache_empty)
		tc = cache_build();
	if (tc == NULL || tc == &cache_gone)
		return 0;
	while (tc->nlarge > 0 && (tc->nlarge == PA_LARGE_SLOTS ||
	                          tc->large_pages + s->npages > PA_LARGE_SLOTS_MAX_PAGES)) {
		/* Make room: the oldest goes to the large stash, for any
		 * thread, or back to the page heap. */
		struct pa_span *old = cache_slot_remove(tc, 0);
		if (!central_large_put(old))
			large_release(old);
	}
	cache_slot_append(tc, s);
	return 1;
}

/* Move tc's large-object deltas into the shared counters (registry lock
 * held, so the stats see them in one place or the other). */
static void fold_large_counts(struct pa_tcache *tc)
{
	__atomic_add_fetch(&large_held_objects, (size_t)tc->large_objects_delta, __ATOMIC_RELAXED);
	__atomic_add_fetch(&large_held_pages, (size_t)tc->large_pages_delta, __ATOMIC_RELAXED);
	__atomic_store_n(&tc->large_objects_delta, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&tc->large_pages_delta, 0, __ATOMIC_RELAXED);
}

static void thread_exit(void *arg)
{
	struct pa_tcache *tc = arg;
	cache_self = &cache_gone;
	cache_release(tc);
	lock_acquire(&registry_lock);
	fold_large_counts(tc);
	*tc->prevnext = tc->next;
	if (tc->next != NULL)
		tc->next->prevnext = tc->prevnext;
	__atomic_store_n(&registry_len, registry_len - 1, __ATOMIC_RELAXED);
	lock_release(&registry_lock);
	meta_free(&cache_pool, tc);
}

int cache_global_init(void)
{
	size_t cap = (size_t)PA_LARGE_SLOTS_MAX_PAGES * PA_PAGE_SIZE;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++)
		cap += PA_TC_LIST_BATCHES * (size_t)central_batch(cls) * pa_sizeclasses[cls].size;
	cache_capacity = cap;
	return pthread_key_create(&exit_key, thread_exit) == 0 ? 0 : -1;
}

size_t cache_share(void)
{
	size_t n = __atomic_load_n(&registry_len, __ATOMIC_RELAXED);
	size_t share = __atomic_load_n(&pa_conf.thread_cache_total, __ATOMIC_RELAXED) / (n ? n : 1);
	share = share < PA_TC_MIN_BUDGET ? PA_TC_MIN_BUDGET : share;
	return share < cache_capacity ? share : cache_capacity;
}

static size_t cache_held(const struct pa_tcache *tc)
{
	size_t bytes = (size_t)tc->large_pages * PA_PAGE_SIZE;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++)
		bytes += (size_t)cache_list_count(tc, cls) * pa_sizeclasses[cls].size;
	return bytes;
}

/* Give back the older half of tc's list of cls (rounded up): the newest
 * count / 2 objects, the ones freed last and likeliest in cache, stay. */
static void list_give_older_half(struct pa_tcache *tc, unsigned cls)
{
	uint32_t count = cache_list_count(tc, cls), keep = count / 2;
	if (keep == 0) {
		list_give_all(tc, cls);
		return;
	}
	void **last = tc->head[cls];
	for (uint32_t k = 1; k < keep; k++)
		last = last[0];
	central_give(cls, last[0], count - keep, 0);
	last[0] = NULL;
	cache_list_set(tc, cls, keep, tc->max[cls]);
}

/* Every 8th slow path of tc: over its share of thread_cache_total, give
 * back the older half of each list, then the oldest large slots. */
static void cache_keep_share(struct pa_tcache *tc)
{
	if ((++tc->slow & 7) != 0)
		return;
	size_t share = cache_share();
	if (share >= cache_capacity || cache_held(tc) <= share)
		return;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++) {
		list_give_older_half(tc, cls);
		uint32_t max = tc->max[cls];
		/* and grow again slowly (count <= max / 2 now) */
		cache_list_set(tc, cls, cache_list_count(tc, cls), max > 2 ? max / 2 : 1);
	}
	while (tc->nlarge > 0 && cache_held(tc) > share)
		large_release(cache_slot_remove(tc, 0));
}

void *cache_alloc_slow(unsigned cls)
{
	struct pa_tcache *tc = cache_self;
	if (tc == &cache_empty)
		tc = cache_build();
	void *head;
	if (tc == NULL || tc == &cache_gone) {
		/* No cache: one object straight from the central list. */
		if (central_take(cls, 1, &head, NULL, NULL) == 0)
			return NULL;
		((void **)head)[1] = NULL;
		return head;
	}
	cache_keep_share(tc);
	uint32_t max = tc->max[cls];
	unsigned batch = central_batch(cls);
	int carving = 0,
	    few = __atomic_load_n(&registry_len, __ATOMIC_RELAXED) <= CENTRAL_CARVE_SLOTS;
	unsigned n = central_take(cls, max < batch ? max : batch, &head, tc, few ? &carving : NULL);
	if (carving)
		tc->carving[cls / 64] |= (uint64_t)1 << (cls % 64);
	if (n == 0)
		return NULL;
	/* Slow start (tcmalloc's): a list's bound grows by one at each refill
	 * up to a batch, then to PA_TC_LIST_BATCHES; a class a thread seldom uses
	 * never pulls in a whole batch. */
	void **o = head;
	tc->head[cls] = o[0];
	cache_list_set(tc, cls, n - 1, max < batch ? max + 1 : PA_TC_LIST_BATCHES * batch);
	o[1] = NULL;
	return o;
}

void cache_free_slow(unsigned cls, void *p)
{
	struct pa_tcache *tc = cache_self;
	if (tc == &cache_empty)
		tc = cache_build();
	void **o = p;
	if (tc == NULL || tc == &cache_gone) {
		o[0] = NULL;
		central_give(cls, o, 1, 0);
		return;
	}
	o[0] = tc->head[cls];
	tc->head[cls] = o;
	uint32_t count = cache_list_count(tc, cls) + 1, max = tc->max[cls];
	unsigned batch = central_batch(cls);
	if (count > max && max < batch)
		max++; /* slow start, for a thread that frees more than it takes */
	if (count > max) {
		/* Give the first batch back (one walk of `batch` links); the
		 * bound is at least a batch here. */
		unsigned n = batch;
		void **last = tc->head[cls];
		for (unsigned k = 1; k < n; k++)
			last = last[0];
		void *rest = last[0];
		last[0] = NULL;
		central_give(cls, tc->head[cls], n, 1);
		tc->head[cls] = rest;
		count -= n;
	}
	cache_list_set(tc, cls, count, max);
	cache_keep_share(tc);
}

void cache_flush_self(void)
{
	struct pa_tcache *tc = cache_self;
	if (tc != &cache_empty && tc != &cache_gone)
		cache_release(tc);
}

void cache_totals(size_t held[PA_SC_NUM_CLASSES], size_t *large_spans, size_t *large_pages,
                  size_t *ncaches, size_t *made_objects, size_t *made_pages)
{
	for (unsigned cls = 0; cls < PA_SC_NUM_CLASSES; cls++)
		held[cls] = 0;
	*large_spans = *large_pages = 0;
	lock_acquire(&registry_lock);
	*made_objects = __atomic_load_n(&large_held_objects, __ATOMIC_RELAXED);
	*made_pages = __atomic_load_n(&large_held_pages, __ATOMIC_RELAXED);
	for (struct pa_tcache *tc = registry; tc != NULL; tc = tc->next) {
		*made_objects +=
		    (size_t)__atomic_load_n(&tc->large_objects_delta, __ATOMIC_RELAXED);
		*made_pages += (size_t)__atomic_load_n(&tc->large_pages_delta, __ATOMIC_RELAXED);
		for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++)
			held[cls] += cache_list_count(tc, cls);
		*large_spans += __atomic_load_n(&tc->nlarge, __ATOMIC_RELAXED);
		*large_pages += __atomic_load_n(&tc->large_pages, __ATOMIC_RELAXED);
	}
	*ncaches = registry_len;
	lock_release(&registry_lock);
}

void cache_fork_prepare(void)
{
	lock_acquire(&registry_lock);
	lock_acquire(&cache_pool.lock);
}

void cache_fork_parent(void)
{
	lock_release(&cache_pool.lock);
	lock_release(&registry_lock);
}

void cache_fork_child(void)
{
	lock_init(&cache_pool.lock);
	lock_init(&registry_lock);
	/* Only the forking thread exists: keep its cache, forget the others
	 * (their large objects stay counted, the spans they carved are no
	 * one's: the central locks are still held from fork_prepare). */
	struct pa_tcache *self = cache_self;
	for (struct pa_tcache *tc = registry; tc != NULL; tc = tc->next) {
		if (tc == self)
			continue;
		fold_large_counts(tc);
		for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++)
			if (cache_carves(tc, cls))
				central_uncarve_held(cls, tc);
	}
	registry = NULL;
	registry_len = 0;
	if (self != &cache_empty && self != &cache_gone) {
		self->next = NULL;
		self->prevnext = &registry;
		registry = self;
		registry_len = 1;
	}
}
