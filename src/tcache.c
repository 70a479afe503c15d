/*
 * tcache.c — thread caches: their slow paths, their budget, thread exit and
 * the registry (tcache.h).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "central.h"
#include "config.h"
#include "guard.h"
#include "large.h"
#include "lock.h"
#include "meta.h"
#include "os.h"
#include "span.h"
#include "tcache.h"
#include "threadstats.h"
#include "vg.h"

struct pa_tcache tcache_empty = {.leaf_r = TCACHE_NO_LEAF};
/* A thread whose cache was handed back at exit: bound 0, like tcache_empty,
 * but its slow paths do not build a new cache. */
static struct pa_tcache tcache_gone = {.leaf_r = TCACHE_NO_LEAF};

__thread struct pa_tcache *tcache_self __attribute__((tls_model("initial-exec"))) = &tcache_empty;

static struct pa_meta_pool tcache_pool = PA_META_POOL_INIT(sizeof(struct pa_tcache));
static pa_lock registry_lock = PA_LOCK_INIT;
static struct pa_tcache *registry; /* under registry_lock */
static size_t registry_len;        /* written under registry_lock; read atomically */
static pthread_key_t exit_key;
/* The caches' claims (tcache.h), summed: relaxed atomic adds. */
static size_t tcaches_claimed;

static void claim_set(struct pa_tcache *tc, size_t claim);
static void claim_note(struct pa_tcache *tc, size_t held);

static void list_give_all(struct pa_tcache *tc, unsigned cls, struct pa_span_spares *sp)
{
	uint32_t count = tcache_list_count(tc, cls);
	if (count == 0)
		return;
	central_give(cls, tc->head[cls], count, sp);
	tc->head[cls] = NULL;
	tcache_list_set(tc, cls, 0, tc->max[cls]);
}

/* May tc hold one of class cls's carve slots (central_take)? */
static int tcache_carves(const struct pa_tcache *tc, unsigned cls)
{
	return (int)(tc->carving[cls / 64] >> (cls % 64) & 1);
}

static void tcache_release(struct pa_tcache *tc)
{
	/* Records of spans retired on the way: into tc's spares while tc is
	 * the calling thread's cache (a flush), else (thread exit, where
	 * tcache_self is tcache_gone already) straight to the pool; large
	 * objects given back are counted likewise. */
	struct pa_span_spares *sp = tcache_spares(tcache_real());
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++) {
		list_give_all(tc, cls, sp);
		if (tcache_carves(tc, cls))
			central_uncarve(cls, &tc->spares);
	}
	for (unsigned w = 0; w < sizeof(tc->carving) / sizeof(tc->carving[0]); w++)
		tc->carving[w] = 0;
	large_slots_release(&tc->large, tcache_large(tcache_real()), sp);
	span_spares_free(&tc->spares);
}

/* Build the calling thread's cache; NULL when out of memory or exiting. */
/* Aim the count at the nearer of the two events, the bytes requested since
 * it was last aimed counted first. */
static void sample_aim(struct pa_tcache *tc)
{
	__atomic_store_n(&tc->requested,
	                 tc->requested + (uint64_t)(tc->sample_set - tc->sample_left),
	                 __ATOMIC_RELAXED);
	int64_t next = tc->prof_left < tc->guard_left ? tc->prof_left : tc->guard_left;
	tc->sample_set = next;
	tc->sample_left = next;
}

void tcache_sample_start(struct pa_tcache *tc)
{
	tc->prof_left = prof_next_count(&tc->prof);
	tc->guard_left = guard_next_count(&tc->prof);
	sample_aim(tc);
}

unsigned tcache_sample_fire(struct pa_tcache *tc)
{
	/* The bytes counted since the count was aimed, the block that took
	 * it below zero included. */
	int64_t used = tc->sample_set - tc->sample_left;
	unsigned fired = 0;
	if ((tc->prof_left -= used) < 0) {
		fired |= TCACHE_FIRED_PROF;
		tc->prof_left = prof_next_count(&tc->prof);
	}
	if (tc->guard_left != INT64_MAX && (tc->guard_left -= used) < 0) {
		fired |= TCACHE_FIRED_GUARD;
		tc->guard_left = guard_next_count(&tc->prof);
	} else if (tc->guard_left == INT64_MAX) {
		/* Off until now: guarded sampling turned on since is noticed
		 * here, within a heap-profile count. */
		tc->guard_left = guard_next_count(&tc->prof);
	}
	sample_aim(tc);
	return fired;
}

static struct pa_tcache *tcache_build(void)
{
	if (tcache_self == &tcache_gone ||
	    !__atomic_load_n(&pa_conf.thread_cache, __ATOMIC_RELAXED) || vg_active())
		return NULL;
	struct pa_tcache *tc = meta_alloc(&tcache_pool);
	if (tc == NULL)
		return NULL;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++) {
		tcache_list_set(tc, cls, 0, 1);
		tc->magic[cls] = pa_sizeclasses[cls].div_magic;
	}
	tc->magic[0] = 0;
	tc->leaf_r = TCACHE_NO_LEAF;
	tc->prof.rng = 0;
	tc->prof.busy = 0;
	tcache_sample_start(tc);
	tc->fresh_seen = central_fresh_count();
	tc->tid = os_gettid();
	os_thread_name(tc->name);
	claim_note(tc, 0);
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
	tcache_self = tc;
	tc->prof.busy = 1; /* glibc's calloc for the key is not the program's */
	pthread_setspecific(exit_key, tc);
	tc->prof.busy = 0;
	return tc;
}

/* tcache_get (tcache.h) of a thread with a placeholder: tcache_empty's
 * builds its cache, tcache_gone's has none. */
struct pa_tcache *tcache_get_slow(void)
{
	return tcache_self == &tcache_empty ? tcache_build() : NULL;
}

static void thread_exit(void *arg)
{
	struct pa_tcache *tc = arg;
	/* Its figures while it is still the thread's cache (exact), under
	 * the name the thread has now. */
	struct threadstats_figures f;
	os_thread_name(tc->name);
	tcache_figures(tc, &f);
	tcache_self = &tcache_gone;
	tcache_release(tc);
	lock_acquire(&registry_lock);
	threadstats_exited(&f);
	large_slots_fold(&tc->large);
	claim_set(tc, 0);
	*tc->prevnext = tc->next;
	if (tc->next != NULL)
		tc->next->prevnext = tc->prevnext;
	__atomic_store_n(&registry_len, registry_len - 1, __ATOMIC_RELAXED);
	lock_release(&registry_lock);
	meta_free(&tcache_pool, tc);
}

int tcache_global_init(void)
{
	return pthread_key_create(&exit_key, thread_exit) == 0 ? 0 : -1;
}

/* Set tc's claim (an atomic add to tcaches_claimed: no lock). */
static void claim_set(struct pa_tcache *tc, size_t claim)
{
	if (claim != tc->claim) {
		__atomic_add_fetch(&tcaches_claimed, claim - tc->claim, __ATOMIC_RELAXED);
		__atomic_store_n(&tc->claim, claim, __ATOMIC_RELAXED);
	}
}

/* tc held `held` bytes at its check. */
static void claim_note(struct pa_tcache *tc, size_t held)
{
	claim_set(tc, held > PA_TC_RESERVE ? held : PA_TC_RESERVE);
}

/* What tc may hold (tcache.h): thread_cache_total less the other caches'
 * claims, and at least the fair share (half of thread_cache_total over the
 * caches, at least PA_TC_MIN_BUDGET). */
static size_t tcache_allowance(const struct pa_tcache *tc)
{
	size_t total = __atomic_load_n(&pa_conf.thread_cache_total, __ATOMIC_RELAXED);
	size_t n = __atomic_load_n(&registry_len, __ATOMIC_RELAXED);
	size_t fair = total / 2 / (n != 0 ? n : 1);
	fair = fair > PA_TC_MIN_BUDGET ? fair : PA_TC_MIN_BUDGET;
	size_t others = __atomic_load_n(&tcaches_claimed, __ATOMIC_RELAXED) - tc->claim;
	size_t rest = total > others ? total - others : 0;
	return rest > fair ? rest : fair;
}

size_t tcache_allowance_self(void)
{
	struct pa_tcache *tc = tcache_real();
	return tc != NULL ? tcache_allowance(tc) : 0;
}

size_t tcache_claimed(void)
{
	return __atomic_load_n(&tcaches_claimed, __ATOMIC_RELAXED);
}

static size_t tcache_held(const struct pa_tcache *tc)
{
	size_t bytes = (size_t)tc->large.pages * PA_PAGE_SIZE;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++)
		bytes += (size_t)tcache_list_count(tc, cls) * pa_sizeclasses[cls].size;
	return bytes;
}

/* Keep the newest `keep` objects of tc's list of cls (the ones freed last
 * and likeliest in cache), give the older ones back, and bound the list at
 * max (>= keep). */
static void list_keep(struct pa_tcache *tc, unsigned cls, uint32_t keep, uint32_t max)
{
	uint32_t count = tcache_list_count(tc, cls);
	if (keep == 0) {
		list_give_all(tc, cls, &tc->spares);
		count = 0;
	} else if (count > keep) {
		void **last = tc->head[cls];
		for (uint32_t k = 1; k < keep; k++)
			last = last[0];
		central_give(cls, last[0], count - keep, &tc->spares);
		last[0] = NULL;
		count = keep;
	}
	tcache_list_set(tc, cls, count, max);
}

/* Cut the bounds of tc's lists grown past PA_TC_LIST_BATCHES batches: to
 * that (to_least) or by half, not below it, keeping the newest objects. */
static void lists_cut(struct pa_tcache *tc, int to_least)
{
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++) {
		uint32_t max = tc->max[cls], least = PA_TC_LIST_BATCHES * central_batch(cls);
		if (max > least) {
			max = !to_least && max / 2 > least ? max / 2 : least;
			uint32_t count = tcache_list_count(tc, cls);
			list_keep(tc, cls, count < max ? count : max, max);
		}
	}
}

/* Every 8th slow path of tc: note what it holds (its claim); past its
 * allowance, halve the bounds of lists grown past PA_TC_LIST_BATCHES
 * batches (keeping the newest objects), then, still over, give back the
 * older half of each list and the oldest large slots. */
static void tcache_keep_budget(struct pa_tcache *tc)
{
	if ((++tc->slow & 7) != 0)
		return;
	size_t held = tcache_held(tc);
	claim_note(tc, held);
	size_t allowance = tcache_allowance(tc);
	if (tc->bound_bytes > allowance) {
		/* the allowance shrank since these lists grew: the other
		 * caches claim more now */
		lists_cut(tc, 0);
		held = tcache_held(tc);
	}
	if (held <= allowance)
		return;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++) {
		/* the older half goes, and the list grows again slowly */
		uint32_t max = tc->max[cls];
		list_keep(tc, cls, tcache_list_count(tc, cls) / 2, max > 2 ? max / 2 : 1);
	}
	while (tc->large.n > 0 && tcache_held(tc) > allowance)
		large_release(large_slot_remove(&tc->large, 0), &tc->large, &tc->spares);
	claim_note(tc, tcache_held(tc));
}

/* The bound of a list of cls after a refill of it, from max: slow start
 * (tcmalloc's: one more at each refill up to a batch, so a class a thread
 * seldom uses never pulls in a whole batch from the spans; a refill that
 * took a stashed batch ends it: tcache_alloc_slow), then PA_TC_LIST_BATCHES
 * batches, then a batch more at each refill up to PA_TC_LIST_MAX objects
 * (the caller checks the cache's allowance). */
static uint32_t list_bound_grown(unsigned cls, uint32_t max)
{
	uint32_t batch = central_batch(cls), least = PA_TC_LIST_BATCHES * batch;
	if (max < batch)
		return max + 1;
	if (max < least)
		return least;
	uint32_t most = PA_TC_LIST_MAX - PA_TC_LIST_MAX % batch;
	return max + batch <= most ? max + batch : (max > least ? max : least);
}

void *tcache_alloc_slow(unsigned cls)
{
	struct pa_tcache *tc = tcache_self;
	if (tc == &tcache_empty)
		tc = tcache_build();
	void *head;
	if (tc == NULL || tc == &tcache_gone) {
		/* No cache: one object straight from the central list. */
		if (central_take(cls, 1, &head, NULL, NULL) == 0)
			return NULL;
		((void **)head)[1] = NULL;
		return head;
	}
	tcache_keep_budget(tc);
	/* The heap took released pages since this thread last looked: its
	 * large blocks that fit none of its large mallocs since their free go
	 * back (large_give_back_idle). */
	uint64_t fresh = central_fresh_count();
	if (__builtin_expect(fresh != tc->fresh_seen, 0)) {
		tc->fresh_seen = fresh;
		large_give_back_idle(&tc->large, &tc->spares);
	}
	/* The requested bytes so far, for the stats (tcache_figures). */
	__atomic_store_n(&tc->requested_seen,
	                 tc->requested + (uint64_t)(tc->sample_set - tc->sample_left),
	                 __ATOMIC_RELAXED);
	uint32_t max = tc->max[cls];
	unsigned batch = central_batch(cls);
	int carving = 0,
	    few = __atomic_load_n(&registry_len, __ATOMIC_RELAXED) <= CENTRAL_CARVE_SLOTS;
	unsigned n =
	    central_take(cls, max < batch ? max : batch, &head, &tc->spares, few ? &carving : NULL);
	if (carving)
		tc->carving[cls / 64] |= (uint64_t)1 << (cls % 64);
	if (n == 0)
		return NULL;
	void **o = head;
	tc->head[cls] = o[0];
	tc->drain = 0;
	uint32_t grown = list_bound_grown(cls, max);
	if (n > grown)
		grown = batch; /* a stashed batch came whole: slow start is over */
	tc->swing[cls] += tc->swing[cls] < INT8_MAX;
	if (grown > max && max >= PA_TC_LIST_BATCHES * batch) {
		/* Past PA_TC_LIST_BATCHES batches a list grows by a batch once
		 * its refills outnumber its overflows by PA_TC_LIST_SWING since
		 * the bound last moved (a thread allocating far more than it
		 * frees, not the random walk of one that frees as much), while
		 * the bounds of all the cache's lists fit its allowance. */
		size_t need = tc->bound_bytes + (size_t)(grown - max) * pa_sizeclasses[cls].size;
		if (tc->swing[cls] < (int)PA_TC_LIST_SWING || need > tcache_allowance(tc))
			grown = max;
		else
			tc->swing[cls] = 0;
	}
	tcache_list_set(tc, cls, n - 1, grown);
	o[1] = NULL;
	return o;
}

void tcache_free_slow(unsigned cls, void *p)
{
	struct pa_tcache *tc = tcache_self;
	if (tc == &tcache_empty)
		tc = tcache_build();
	void **o = p;
	if (tc == NULL || tc == &tcache_gone) {
		o[0] = NULL;
		central_give(cls, o, 1, NULL);
		return;
	}
	o[0] = tc->head[cls];
	tc->head[cls] = o;
	uint32_t count = tcache_list_count(tc, cls) + 1, max = tc->max[cls];
	unsigned batch = central_batch(cls);
	if (count > max && max < batch)
		max++; /* slow start, for a thread that frees more than it takes */
	if (count > max) {
		/* Give the first batch back (one walk of `batch` links); the
		 * bound is at least a batch here. A grown list whose overflows
		 * outnumber its refills by PA_TC_LIST_SWING since the bound
		 * last moved takes a batch off it and gives that back too. */
		unsigned n = batch;
		tc->swing[cls] -= tc->swing[cls] > INT8_MIN;
		tc->drain += tc->drain < UINT32_MAX;
		if (max > PA_TC_LIST_BATCHES * batch && tc->swing[cls] <= -(int)PA_TC_LIST_SWING) {
			tc->swing[cls] = 0;
			max -= batch;
			n += batch;
		}
		void **last = tc->head[cls];
		for (unsigned k = 1; k < n; k++)
			last = last[0];
		void *rest = last[0];
		last[0] = NULL;
		central_give_or_stash(cls, tc->head[cls], n, &tc->spares);
		tc->head[cls] = rest;
		count -= n;
	}
	tcache_list_set(tc, cls, count, max);
	/* The thread's last PA_TC_DRAIN overflows came with no refill of any
	 * class: it frees far more than it allocates (the end of a phase,
	 * after which it may idle with whatever its lists hold). Its grown
	 * lists go back to PA_TC_LIST_BATCHES batches. */
	if (tc->drain == PA_TC_DRAIN)
		lists_cut(tc, 1);
	tcache_keep_budget(tc);
}

void tcache_flush_self(void)
{
	struct pa_tcache *tc = tcache_self;
	if (tc != &tcache_empty && tc != &tcache_gone) {
		tcache_release(tc);
		claim_note(tc, 0);
	}
}

void tcache_totals(size_t held[PA_SC_NUM_CLASSES], size_t *large_spans, size_t *large_pages,
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
		    (size_t)__atomic_load_n(&tc->large.objects_delta, __ATOMIC_RELAXED);
		*made_pages += (size_t)__atomic_load_n(&tc->large.pages_delta, __ATOMIC_RELAXED);
		for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++)
			held[cls] += tcache_list_count(tc, cls);
		*large_spans += __atomic_load_n(&tc->large.n, __ATOMIC_RELAXED);
		*large_pages += __atomic_load_n(&tc->large.pages, __ATOMIC_RELAXED);
	}
	*ncaches = registry_len;
	lock_release(&registry_lock);
}

void tcache_figures(const struct pa_tcache *tc, struct threadstats_figures *f)
{
	f->alloc_count = __atomic_load_n(&tc->popped.count, __ATOMIC_RELAXED) +
	                 __atomic_load_n(&tc->slow_alloc.count, __ATOMIC_RELAXED);
	f->alloc_bytes = __atomic_load_n(&tc->popped.bytes, __ATOMIC_RELAXED) +
	                 __atomic_load_n(&tc->slow_alloc.bytes, __ATOMIC_RELAXED);
	f->free_count = __atomic_load_n(&tc->slow_free.count, __ATOMIC_RELAXED);
	f->free_bytes = __atomic_load_n(&tc->slow_free.bytes, __ATOMIC_RELAXED);
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++) {
		uint64_t size = pa_sizeclasses[cls].size;
		uint64_t pops = __atomic_load_n(&tc->limit[cls], __ATOMIC_RELAXED) -
		                __atomic_load_n(&tc->limit_set[cls], __ATOMIC_RELAXED);
		uint64_t pushes = __atomic_load_n(&tc->freed[cls], __ATOMIC_RELAXED);
		f->alloc_count += pops;
		f->alloc_bytes += pops * size;
		f->free_count += pushes;
		f->free_bytes += pushes * size;
	}
	if (tc == tcache_self) {
		/* The calling thread's own: its count read as it is now. */
		f->requested = tc->requested + (uint64_t)(tc->sample_set - tc->sample_left);
		__atomic_store_n(&((struct pa_tcache *)tc)->requested_seen, f->requested,
		                 __ATOMIC_RELAXED);
	} else {
		/* as the thread last published it (a refill, a sample) */
		uint64_t seen = __atomic_load_n(&tc->requested_seen, __ATOMIC_RELAXED);
		uint64_t folded = __atomic_load_n(&tc->requested, __ATOMIC_RELAXED);
		f->requested = seen > folded ? seen : folded;
	}
	f->tid = tc->tid;
	f->live = 1;
	memcpy(f->name, tc->name, sizeof(f->name));
}

void tcache_each_figures(void (*fn)(const struct threadstats_figures *f, void *arg), void *arg,
                         struct threadstats_figures *others, uint64_t *others_threads)
{
	lock_acquire(&registry_lock);
	for (struct pa_tcache *tc = registry; tc != NULL; tc = tc->next) {
		struct threadstats_figures f;
		tcache_figures(tc, &f);
		fn(&f, arg);
	}
	threadstats_exited_each(fn, arg, others, others_threads);
	lock_release(&registry_lock);
}

void tcache_fork_prepare(void)
{
	lock_acquire(&registry_lock);
	lock_acquire(&tcache_pool.lock);
}

void tcache_fork_parent(void)
{
	lock_release(&tcache_pool.lock);
	lock_release(&registry_lock);
}

void tcache_fork_child(void)
{
	lock_init(&tcache_pool.lock);
	lock_init(&registry_lock);
	/* Only the forking thread exists: keep its cache, forget the others
	 * (their large objects stay counted, the spans they carved are no
	 * one's: the central locks are still held from fork_prepare). */
	struct pa_tcache *self = tcache_self;
	for (struct pa_tcache *tc = registry; tc != NULL; tc = tc->next) {
		if (tc == self)
			continue;
		large_slots_fold(&tc->large);
		for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++)
			if (tcache_carves(tc, cls))
				central_uncarve_held(cls, &tc->spares);
	}
	registry = NULL;
	registry_len = 0;
	tcaches_claimed = 0;
	if (self != &tcache_empty && self != &tcache_gone) {
		self->next = NULL;
		self->prevnext = &registry;
		registry = self;
		registry_len = 1;
		tcaches_claimed = self->claim;
	}
}
