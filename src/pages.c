/*
 * pages.c — the process-wide default page heap, its per-CPU page caches and
 * its scavenger, and the public page API (pa_pages_alloc, pa_pages_free,
 * pa_stats, pa_cache_flush, pa_scavenge).
 *
 * The default heap is built on first use, which may be the very first malloc
 * of the process (before constructors, from several threads at once): a
 * futex lock serialises the build and nothing on the way allocates. Work that
 * may allocate (registering fork handlers, starting the scavenger thread) is
 * done after the build, outside every allocator lock, by the thread that
 * built it; a forked child restarts the thread on its next heap call.
 *
 * NUMA (node.h): on a machine with several nodes the default heap is one
 * page heap and one per-CPU cache set per node, node_heaps[i] in the i-th
 * window, all served by the one scavenger. An allocation takes the calling
 * CPU's node (its cache set, its heap); a free goes to the heap whose window
 * holds the address, through that node's cache set (the freeing CPU's queue
 * in it). A thread that migrates between reading its CPU and allocating
 * takes the old node's pages: the node it asked from. With one node,
 * node_heaps[0] is the heap over the full window that it always was.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "cgroup.h"
#include "config.h"
#include "msg.h"
#include "node.h"
#include "os.h"
#include "pagealloc.h"
#include "pagecache.h"
#include "pageheap.h"
#include "pages.h"
#include "scavenger.h"
#include "vg.h"

enum { HEAP_UNINIT, HEAP_READY, HEAP_FAILED };

/* Set at the build under init_lock, read-only once default_state is READY. */
static struct pa_numa numa;
static struct pa_pageheap node_heaps[PA_NUMA_MAX_NODES];
static struct pa_pagecache_set node_caches[PA_NUMA_MAX_NODES];
static struct pa_scavenger default_scav;
/* 1 when the scavenger thread should be (re)started on the next heap call. */
static int scav_wanted;
/*
 * The malloc layer starts the thread lazily: armed when the heap is built
 * (and again in a forked child), it is wanted once the heap has work for it,
 * pages given back to the heap (its free_count moved) or a growth past the
 * ones allowed (the first, when built; none in a child). Until then no page
 * has gone back to the heap, so the thread would find nothing there to
 * release, and a short program, or a forked child that execs, does not pay
 * for it: a stack, a TLS block, the libc code it runs (~130 KiB of RSS in a
 * program that mallocs once) and ~80 us of start and join. The page API and
 * pa_config_set still start it at once.
 */
static int scav_armed;       /* 1: wanted when the heap has work */
static uint64_t armed_frees; /* the heap's free_count when armed */
static uint64_t armed_grows; /* its grow_count past which it has work */
static int default_state;    /* HEAP_*; written under init_lock, read with acquire */
static pa_lock init_lock = PA_LOCK_INIT;

static void scav_config_from_conf(struct pa_scav_config *c)
{
	c->enabled = __atomic_load_n(&pa_conf.scavenger, __ATOMIC_RELAXED) != 0;
	c->percent = (unsigned)__atomic_load_n(&pa_conf.scavenge_percent, __ATOMIC_RELAXED);
	c->lazy = __atomic_load_n(&pa_conf.release, __ATOMIC_RELAXED) != 0;
	size_t limit = __atomic_load_n(&pa_conf.memory_limit, __ATOMIC_RELAXED);
	c->memory_limit_auto = limit == PA_MEMORY_LIMIT_AUTO;
	c->memory_limit = c->memory_limit_auto ? 0 : limit;
	c->memory_limit_hard = __atomic_load_n(&pa_conf.memory_limit_hard, __ATOMIC_RELAXED);
	c->delay_ms = (unsigned)__atomic_load_n(&pa_conf.scavenge_delay_ms, __ATOMIC_RELAXED);
	c->burst_percent =
	    (unsigned)__atomic_load_n(&pa_conf.scavenge_burst_percent, __ATOMIC_RELAXED);
	c->thp = (unsigned)__atomic_load_n(&pa_conf.thp, __ATOMIC_RELAXED);
}

/* The heaps' frees and growths: pages_background reads them at every call
 * while the thread is armed, so one node's is two loads, as before NUMA. */
static inline uint64_t heaps_free_count(void)
{
	uint64_t n = __atomic_load_n(&node_heaps[0].free_count, __ATOMIC_RELAXED);
	for (unsigned i = 1; __builtin_expect(i < numa.nodes, 0); i++)
		n += __atomic_load_n(&node_heaps[i].free_count, __ATOMIC_RELAXED);
	return n;
}

static inline uint64_t heaps_grow_count(void)
{
	uint64_t n = __atomic_load_n(&node_heaps[0].grow_count, __ATOMIC_RELAXED);
	for (unsigned i = 1; __builtin_expect(i < numa.nodes, 0); i++)
		n += __atomic_load_n(&node_heaps[i].grow_count, __ATOMIC_RELAXED);
	return n;
}

/* Arm the lazy start; allowed_grows: growths that do not count as work.
 * Single-threaded (the build under init_lock, a forked child) or racing
 * only with pages_background's reads, which the release store orders. */
static void scav_arm(uint64_t allowed_grows)
{
	armed_frees = heaps_free_count();
	armed_grows = heaps_grow_count() + allowed_grows;
	__atomic_store_n(&scav_armed, __atomic_load_n(&default_scav.conf.enabled, __ATOMIC_RELAXED),
	                 __ATOMIC_RELEASE);
}

/* Disarm and want the thread: it starts at the next scav_ensure_started.
 * A load first: once disarmed, the page API's every call writes nothing
 * shared. */
static void scav_want(void)
{
	if (__atomic_load_n(&scav_armed, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&scav_armed, 0, __ATOMIC_ACQ_REL))
		__atomic_store_n(&scav_wanted, 1, __ATOMIC_RELAXED);
}

/* pa_config_set after the build: hand scavenger keys to the live scavenger. */
static void apply_live_config(void)
{
	if (__atomic_load_n(&default_state, __ATOMIC_ACQUIRE) != HEAP_READY)
		return;
	struct pa_scav_config c;
	scav_config_from_conf(&c);
	scav_configure(&default_scav, &c);
	if (c.enabled) {
		__atomic_store_n(&scav_armed, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&scav_wanted, 1, __ATOMIC_RELAXED);
	} else {
		scav_stop(&default_scav);
	}
}

/* fork(): no allocator lock may be held by a thread that will not exist in
 * the child, so the forking thread takes them all (scavenger, caches, heap). */
static void (*hook_prepare)(void), (*hook_parent)(void), (*hook_child)(void);

/* Called under init_lock (from pages_once), read by the handlers under it. */
void pages_set_fork_hooks(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
	hook_prepare = prepare;
	hook_parent = parent;
	hook_child = child;
}

void pages_set_sweep(size_t (*fn)(uint32_t now, uint32_t min_age, int heap_busy, uint32_t hold_ms))
{
	__atomic_store_n(&default_scav.sweep, fn, __ATOMIC_RELEASE);
}

static int (*grow_hook)(uintptr_t base, size_t bytes);

void pages_set_grow_hook(int (*fn)(uintptr_t base, size_t bytes))
{
	__atomic_store_n(&grow_hook, fn, __ATOMIC_RELEASE);
}

/* Every default heap's grow_prepare (pageheap.h): the hook, if set. */
static int grow_prepare(uintptr_t base, size_t bytes)
{
	int (*fn)(uintptr_t, size_t) = __atomic_load_n(&grow_hook, __ATOMIC_ACQUIRE);
	return fn != NULL ? fn(base, bytes) : 0;
}

/* Kept here too: scav_init clears the scavenger, and the hook may come
 * before the heap is built (a constructor of a linked program). */
static uint64_t (*publish_hook)(uint32_t **wake_word);

void pages_set_publish(uint64_t (*fn)(uint32_t **wake_word))
{
	lock_acquire(&init_lock);
	publish_hook = fn;
	if (default_state == HEAP_READY)
		__atomic_store_n(&default_scav.publish, fn, __ATOMIC_RELEASE);
	lock_release(&init_lock);
}

uint32_t pages_epoch(void)
{
	return __atomic_load_n(&node_heaps[0].epoch, __ATOMIC_RELAXED);
}

/* Every lock below is taken with init_lock held, so a fork can never catch
 * a build half done (hardened_malloc#317: a race between initialisation and
 * registering the fork handlers). */
static void fork_prepare(void)
{
	lock_acquire(&init_lock);
	if (default_state != HEAP_READY)
		return;
	if (hook_prepare != NULL)
		hook_prepare();
	lock_acquire(&default_scav.release_lock);
	for (unsigned i = 0; i < numa.nodes; i++)
		pagecache_own_all(&node_caches[i]);
	for (unsigned i = 0; i < numa.nodes; i++)
		lock_acquire(&node_heaps[i].lock);
}

static void fork_parent(void)
{
	if (default_state == HEAP_READY) {
		for (unsigned i = numa.nodes; i-- > 0;)
			lock_release(&node_heaps[i].lock);
		for (unsigned i = numa.nodes; i-- > 0;)
			pagecache_release_all(&node_caches[i]);
		lock_release(&default_scav.release_lock);
		if (hook_parent != NULL)
			hook_parent();
	}
	lock_release(&init_lock);
}

static void fork_child(void)
{
	if (default_state == HEAP_READY) {
		for (unsigned i = 0; i < numa.nodes; i++) {
			lock_init(&node_heaps[i].lock);
			pagecache_after_fork_child(&node_caches[i]);
		}
		scav_after_fork_child(&default_scav);
		__atomic_store_n(&scav_wanted, 0, __ATOMIC_RELAXED);
		scav_arm(0);
		if (hook_child != NULL)
			hook_child();
	}
	lock_init(&init_lock);
}

/*
 * The fork handlers are registered before anything is built: a fork while
 * another thread builds the heap then waits for init_lock in fork_prepare
 * instead of copying a held lock into the child. pthread_atfork may
 * allocate; preloaded, that malloc comes back here from the registering
 * thread, which goes on without waiting (registering_here). Other threads
 * wait until the handlers are in.
 */
static int atfork_state; /* 0 none, 1 being registered, 2 registered */
static __thread int registering_here __attribute__((tls_model("initial-exec")));

static void fork_handlers_register(void)
{
	if (__atomic_load_n(&atfork_state, __ATOMIC_ACQUIRE) == 2 || registering_here)
		return;
	int expected = 0;
	if (__atomic_compare_exchange_n(&atfork_state, &expected, 1, 0, __ATOMIC_ACQ_REL,
	                                __ATOMIC_ACQUIRE)) {
		registering_here = 1;
		pthread_atfork(fork_prepare, fork_parent, fork_child);
		registering_here = 0;
		__atomic_store_n(&atfork_state, 2, __ATOMIC_RELEASE);
		return;
	}
	while (__atomic_load_n(&atfork_state, __ATOMIC_ACQUIRE) != 2)
		os_yield();
}

/* Registered at load time too, while the process normally has one thread:
 * a lazy registration racing with another thread's fork would leave the
 * child waiting for a registration that only the parent finishes. */
__attribute__((constructor)) static void fork_handlers_at_load(void)
{
	fork_handlers_register();
}

/*
 * The per-node heaps: one reservation for all the windows (where the
 * kernel, or a sanitizer, places it), each heap carving its arenas from its
 * own window. 0, or -1 with nothing left mapped: the caller falls back to
 * one heap. Under an address-space limit there is no room for windows.
 */
static int node_heaps_init(const struct pa_pageheap_opts *base_opts)
{
	if (os_addr_space_limit() != SIZE_MAX)
		return -1;
	unsigned bits = PA_NUMA_WINDOW_BITS;
	size_t bytes = (size_t)numa.nodes << bits;
	void *windows;
	while ((windows = os_reserve(bytes, (size_t)1 << bits)) == NULL) {
		if (--bits < PA_NUMA_WINDOW_MIN_BITS)
			return -1;
		bytes = (size_t)numa.nodes << bits;
	}
	numa.base = (uintptr_t)windows;
	numa.window_bits = bits;
	for (unsigned i = 0; i < numa.nodes; i++) {
		struct pa_pageheap_opts opts = *base_opts;
		opts.window_bits = bits;
		opts.window_base = numa.base + ((uintptr_t)i << bits);
		opts.window_reserved = 1;
		if (numa.bind_node[i] >= 0 && numa.bind_node[i] < 64) {
			opts.mpol = OS_MPOL_PREFERRED;
			opts.mpol_nodes = 1ul << numa.bind_node[i];
		}
		if (pageheap_init(&node_heaps[i], &opts) != 0) {
			while (i-- > 0)
				pageheap_destroy(&node_heaps[i]);
			os_unmap(windows, bytes);
			numa.base = 0;
			return -1;
		}
	}
	return 0;
}

/* The heaps (one, or one per node) and their caches; 0 or -1. */
static int heaps_init(void)
{
	node_topology(&numa, (enum pa_numa_mode)pa_conf.numa, (unsigned)pa_conf.numa_fake);
	struct pa_pageheap_opts opts = {.arena_bytes = pa_conf.arena_size,
	                                .grow_prepare = grow_prepare};
	/* numa_fake=1 makes one per-node heap: a node's layout on one node. */
	if ((numa.nodes > 1 || numa.fake) && node_heaps_init(&opts) != 0)
		node_topology(&numa, PA_NUMA_OFF, 0);
	if (numa.base == 0) {
		if (pa_conf.numa == PA_NUMA_INTERLEAVE && numa.online_mask != 0) {
			opts.mpol = OS_MPOL_INTERLEAVE;
			opts.mpol_nodes = numa.online_mask;
		}
		if (pageheap_init(&node_heaps[0], &opts) != 0)
			return -1;
	}
	for (unsigned i = 0; i < numa.nodes; i++)
		if (pagecache_init(&node_caches[i], &node_heaps[i],
		                   (enum pa_cache_mode)pa_conf.percpu_cache) != 0)
			return -1;
	return 0;
}

static struct pa_pageheap *default_heap_build(void)
{
	int built_here = 0;
	fork_handlers_register();
	lock_acquire(&init_lock);
	if (__atomic_load_n(&default_state, __ATOMIC_RELAXED) == HEAP_UNINIT) {
		config_load_env();
		int state = HEAP_FAILED;
		if (heaps_init() == 0) {
			struct pa_scav_config c;
			scav_config_from_conf(&c);
			struct pa_pageheap *heaps[PA_NUMA_MAX_NODES];
			struct pa_pagecache_set *caches[PA_NUMA_MAX_NODES];
			for (unsigned i = 0; i < numa.nodes; i++) {
				heaps[i] = &node_heaps[i];
				caches[i] = &node_caches[i];
			}
			scav_init_heaps(&default_scav, heaps, caches, numa.nodes, &c);
			default_scav.publish = publish_hook;
			state = HEAP_READY;
			built_here = 1;
		}
		__atomic_store_n(&default_state, state, __ATOMIC_RELEASE);
	}
	lock_release(&init_lock);
	if (built_here) {
		config_on_change = apply_live_config;
		scav_arm(1);
	}
	return default_state == HEAP_READY ? &node_heaps[0] : NULL;
}

/* Start (or, in a forked child, restart) the scavenger thread. A thread
 * that cannot be made (EAGAIN) is no failure of the call that happened to
 * start it (a free): errno stays as it was. */
static void scav_ensure_started(void)
{
	if (__builtin_expect(__atomic_load_n(&scav_wanted, __ATOMIC_RELAXED), 0) &&
	    __atomic_exchange_n(&scav_wanted, 0, __ATOMIC_ACQ_REL)) {
		int saved = errno;
		scav_start(&default_scav);
		errno = saved;
	}
}

/* At exit the thread stops: no release races with the process's teardown. */
__attribute__((destructor)) static void pages_fini(void)
{
	if (__atomic_load_n(&default_state, __ATOMIC_ACQUIRE) == HEAP_READY)
		scav_stop(&default_scav);
}

/* The default heap (node 0's), or NULL if it could not be built (no
 * address space). */
static inline struct pa_pageheap *default_heap_get(void)
{
	if (__atomic_load_n(&default_state, __ATOMIC_ACQUIRE) == HEAP_READY)
		return &node_heaps[0];
	return default_heap_build();
}

/* The node whose heap serves the calling CPU (built heaps only). */
static inline unsigned node_here(void)
{
	if (__builtin_expect(numa.nodes == 1, 1))
		return 0;
	return node_of_cpu(&numa, pagecache_current_cpu(&node_caches[0]));
}

void *pa_pages_alloc(size_t npages)
{
	if (npages == 0) {
		errno = EINVAL;
		return NULL;
	}
	struct pa_pageheap *h = default_heap_get();
	if (h == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	scav_want(); /* a page API user gets the thread at once */
	scav_ensure_started();
	unsigned n = node_here();
	void *p = npages < PA_CACHE_MAX_PAGES
	              ? (void *)pagecache_alloc(&node_caches[n], npages, NULL)
	              : (void *)pageheap_alloc(&node_heaps[n], npages, NULL);
	/* malloc leaves the pages it freed NOACCESS for memcheck (vg.h). */
	if (p != NULL && vg_active())
		VALGRIND_MAKE_MEM_DEFINED(p, npages * PA_PAGE_SIZE);
	return p;
}

/* Free pages to the heap that owns them (h NULL: none could be built)
 * without starting the scavenger (pages_free, pa_pages_free). Runs with
 * released pages (pagecache_heap_free) go to the heap, not a CPU's cache,
 * which holds its pages as resident ones. */
static void pages_free_quiet(struct pa_pageheap *h, void *p, size_t npages, uint64_t released)
{
	enum pa_page_fault f = PA_PAGE_NOT_HEAP;
	int n = h != NULL ? node_of_addr(&numa, (uintptr_t)p) : -1;
	if (n >= 0 && npages != 0 && npages < PA_CACHE_MAX_PAGES && released == 0)
		f = pagecache_free(&node_caches[n], (uintptr_t)p, npages);
	else if (n >= 0)
		f = pagecache_heap_free(&node_caches[n], (uintptr_t)p, npages, released);
	if (f != PA_PAGE_OK)
		pageheap_report_fault((uintptr_t)p, npages, f, NULL);
}

void pa_pages_free(void *p, size_t npages)
{
	if (p == NULL)
		return;
	struct pa_pageheap *h = default_heap_get();
	if (h != NULL) {
		scav_want();
		scav_ensure_started();
	}
	pages_free_quiet(h, p, npages, 0);
}

int pa_stats(struct pa_stats *out)
{
	if (out == NULL) {
		errno = EINVAL;
		return -1;
	}
	memset(out, 0, sizeof(*out));
	if (default_heap_get() == NULL)
		return 0;
	/* Each heap under its own lock: with several nodes the sums are of
	 * figures read one heap after another. */
	for (unsigned i = 0; i < numa.nodes; i++) {
		struct pa_pageheap *h = &node_heaps[i];
		lock_acquire(&h->lock);
		out->heap_reserved += h->reserved_bytes;
		out->heap_mapped += h->mapped_pages * PA_PAGE_SIZE;
		out->heap_inuse += h->inuse_pages * PA_PAGE_SIZE;
		out->heap_released += h->scav_pages * PA_PAGE_SIZE;
		out->metadata += pageheap_metadata_bytes_locked(h);
		out->summary_reserved += h->sum_reservation_bytes;
		out->window_fallback |= h->window_fallback;
		out->heap_ranges += h->ranges.n;
		out->grow_count += h->grow_count;
		out->grow_failures += h->grow_failures;
		out->memory_limit_hard += h->hard_limit_pages * PA_PAGE_SIZE;
		out->hard_limit_refusals += h->hard_limit_refusals;
		out->huge_bytes += h->huge_pages * h->hp_pages * PA_PAGE_SIZE;
		out->huge_collapses += h->huge_collapses;
		out->huge_splits += h->huge_splits;
		out->huge_freed += h->huge_freed;
		lock_release(&h->lock);
		struct pa_pagecache_stats cs;
		pagecache_stats(&node_caches[i], &cs);
		out->cache_free += cs.cached_pages * PA_PAGE_SIZE;
		out->cache_queued += cs.queued_pages * PA_PAGE_SIZE;
		out->cache_refills += cs.refills;
		out->cache_drains += cs.drains;
	}
	out->heap_free = out->heap_mapped - out->heap_inuse;
	/* The nodes' windows are adjacent: together one window. */
	out->window_base = node_heaps[0].window_base;
	out->window_bytes = (size_t)numa.nodes << node_heaps[0].window_bits;
	out->cache_mode = (int)node_caches[0].mode;
	out->cache_cpus = node_caches[0].ncpus;
	out->scavenger_running = __atomic_load_n(&default_scav.state, __ATOMIC_RELAXED);
	out->released_total = __atomic_load_n(&default_scav.released_bytes, __ATOMIC_RELAXED);
	out->release_calls = __atomic_load_n(&default_scav.releases, __ATOMIC_RELAXED);
	out->scavenger_cpu_ns = __atomic_load_n(&default_scav.cpu_ns, __ATOMIC_RELAXED);
	out->memory_limit = __atomic_load_n(&default_scav.conf.memory_limit, __ATOMIC_RELAXED);
	out->limit_overruns = __atomic_load_n(&default_scav.limit_overruns, __ATOMIC_RELAXED);
	out->thp_state = __atomic_load_n(&default_scav.thp_state, __ATOMIC_RELAXED);
	if (out->thp_state != PA_THP_STATE_UNKNOWN &&
	    __atomic_load_n(&pa_conf.thp, __ATOMIC_RELAXED) == PA_THP_OFF)
		out->thp_state = PA_THP_STATE_OFF;
	else if ((out->thp_state == PA_THP_STATE_COLLAPSE || out->thp_state == PA_THP_STATE_HINT) &&
	         os_thp_disabled())
		out->thp_state = PA_THP_STATE_PROCESS_OFF;
	out->collapse_failures = __atomic_load_n(&default_scav.collapse_failures, __ATOMIC_RELAXED);
	out->collapse_waits = __atomic_load_n(&default_scav.collapse_waits, __ATOMIC_RELAXED);
	out->memory_limit_auto =
	    __atomic_load_n(&default_scav.conf.memory_limit_auto, __ATOMIC_RELAXED);
	if (out->memory_limit_auto &&
	    __atomic_load_n(&default_scav.cgroup_found, __ATOMIC_ACQUIRE)) {
		out->cgroup_version = default_scav.cgroup.version;
		out->cgroup_limit = __atomic_load_n(&default_scav.cgroup_max, __ATOMIC_RELAXED);
		out->cgroup_other = __atomic_load_n(&default_scav.cgroup_other, __ATOMIC_RELAXED);
	}
	out->memory_pressure =
	    out->memory_limit_auto ? __atomic_load_n(&default_scav.pressure, __ATOMIC_RELAXED) : -1;
	return 0;
}

int pages_memory_limit_file(char *path)
{
	path[0] = '\0';
	if (default_heap_get() == NULL ||
	    !__atomic_load_n(&default_scav.cgroup_found, __ATOMIC_ACQUIRE) ||
	    default_scav.cgroup.version == 0)
		return -1;
	size_t from = __atomic_load_n(&default_scav.cgroup_from, __ATOMIC_RELAXED);
	if (from == 0)
		from = strlen(default_scav.cgroup.dir); /* no limit: the cgroup's own file */
	return cgroup_limit_file(&default_scav.cgroup, from, path);
}

unsigned pa_numa_nodes(void)
{
	return default_heap_get() != NULL ? numa.nodes : 1;
}

int pa_numa_stats(unsigned node, struct pa_numa_stats *out)
{
	if (out == NULL || default_heap_get() == NULL || node >= numa.nodes) {
		errno = EINVAL;
		return -1;
	}
	memset(out, 0, sizeof(*out));
	struct pa_pageheap *h = &node_heaps[node];
	out->bound_node = numa.base != 0 ? numa.bind_node[node] : -1;
	out->fake = numa.fake;
	out->cpus = numa.base != 0 ? numa.cpus_of[node] : node_caches[0].ncpus;
	lock_acquire(&h->lock);
	out->window_base = h->window_base;
	out->window_bytes = (size_t)1 << h->window_bits;
	out->heap_reserved = h->reserved_bytes;
	out->heap_mapped = h->mapped_pages * PA_PAGE_SIZE;
	out->heap_inuse = h->inuse_pages * PA_PAGE_SIZE;
	out->heap_released = h->scav_pages * PA_PAGE_SIZE;
	out->grow_count = h->grow_count;
	out->mpol_failures = h->mpol_failures;
	lock_release(&h->lock);
	struct pa_pagecache_stats cs;
	pagecache_stats(&node_caches[node], &cs);
	out->cache_free = cs.cached_pages * PA_PAGE_SIZE;
	out->cache_queued = cs.queued_pages * PA_PAGE_SIZE;
	out->cache_refills = cs.refills;
	out->cache_drains = cs.drains;
	return 0;
}

size_t pa_scavenge(size_t bytes)
{
	if (default_heap_get() == NULL)
		return 0;
	/* Everything means the caches' pages too. */
	if (bytes == 0)
		for (unsigned i = 0; i < numa.nodes; i++)
			pagecache_flush_all(&node_caches[i]);
	return scav_release(&default_scav, bytes, 1);
}

void pa_cache_flush(void)
{
	if (__atomic_load_n(&default_state, __ATOMIC_ACQUIRE) == HEAP_READY)
		for (unsigned i = 0; i < numa.nodes; i++)
			pagecache_flush_all(&node_caches[i]);
}

/* ---- the malloc layer's view (pages.h) ------------------------------------ */

int pages_once(int *done, int (*fn)(void))
{
	if (default_heap_get() == NULL)
		return -1;
	int r = 0;
	lock_acquire(&init_lock);
	if (!__atomic_load_n(done, __ATOMIC_RELAXED)) {
		r = fn();
		if (r == 0)
			__atomic_store_n(done, 1, __ATOMIC_RELEASE);
	}
	lock_release(&init_lock);
	return r;
}

uintptr_t pages_alloc(size_t npages, size_t *scav)
{
	return pages_alloc_on(-1, npages, scav);
}

uintptr_t pages_alloc_on(int node, size_t npages, size_t *scav)
{
	struct pa_pageheap *h = default_heap_get();
	if (h == NULL) {
		errno = ENOMEM;
		return 0;
	}
	/* No scav_ensure_started here: the malloc layer calls pages_alloc with
	 * a central lock held, and starting the thread allocates (a forked
	 * child's, or the first one's TLS): it calls pages_background itself. */
	/* Under memcheck the per-CPU caches' group bases would be pointers to
	 * the first block of a group: its leak check would count a leaked
	 * block there as still reachable. */
	unsigned n = node < 0 || (unsigned)node >= numa.nodes ? node_here() : (unsigned)node;
	if (npages < PA_CACHE_MAX_PAGES && !vg_active())
		return pagecache_alloc(&node_caches[n], npages, scav);
	return pageheap_alloc(&node_heaps[n], npages, scav);
}

int pages_alloc_at(uintptr_t addr, size_t npages)
{
	if (default_heap_get() == NULL)
		return 0;
	int n = node_of_addr(&numa, addr);
	return n >= 0 && pageheap_alloc_at(&node_heaps[n], addr, npages, NULL);
}

void pages_background(void)
{
	if (__atomic_load_n(&default_state, __ATOMIC_ACQUIRE) != HEAP_READY)
		return;
	if (__builtin_expect(__atomic_load_n(&scav_armed, __ATOMIC_ACQUIRE), 0) &&
	    (heaps_free_count() != armed_frees || heaps_grow_count() > armed_grows))
		scav_want();
	scav_ensure_started();
}

/* Not pa_pages_free: the malloc layer frees pages with a central lock held
 * (a span's last object back, central.c), and a forked child's first call
 * would start its scavenger there, whose pthread_create may allocate (a
 * DTV, which the preload library serves) from the class of that lock. The
 * thread starts at the next pages_background instead. */
void pages_free(uintptr_t addr, size_t npages)
{
	if (addr != 0)
		pages_free_quiet(default_heap_get(), (void *)addr, npages, 0);
}

void pages_free_released(uintptr_t addr, size_t npages, uint64_t released)
{
	if (addr != 0)
		pages_free_quiet(default_heap_get(), (void *)addr, npages, released);
}

int pages_release_zeroes(void)
{
	return __atomic_load_n(&default_scav.conf.lazy, __ATOMIC_RELAXED) == 0;
}

/* The node heap whose ranges hold addr, its lock held; NULL (no lock) when
 * none does or the heap is not built. */
static struct pa_pageheap *heap_holding_locked(uintptr_t addr)
{
	if (__atomic_load_n(&default_state, __ATOMIC_ACQUIRE) != HEAP_READY)
		return NULL;
	for (unsigned n = 0; n < numa.nodes; n++) {
		struct pa_pageheap *h = &node_heaps[n];
		lock_acquire(&h->lock);
		if (pageheap_contains_locked(h, addr))
			return h;
		lock_release(&h->lock);
	}
	return NULL;
}

int pages_huge_in(uintptr_t addr, size_t bytes, int split)
{
	struct pa_pageheap *h = heap_holding_locked(addr);
	if (h == NULL)
		return 0;
	int huge = pageheap_huge_at_locked(h, addr, split);
	if (h->hp_pages != 0 &&
	    (addr ^ (addr + bytes - 1)) >= (uintptr_t)h->hp_pages * PA_PAGE_SIZE)
		huge |= pageheap_huge_at_locked(h, addr + bytes - 1, split);
	lock_release(&h->lock);
	return huge;
}

int pages_count_collapsed(uintptr_t addr, unsigned hp_pages)
{
	struct pa_pageheap *h = heap_holding_locked(addr);
	if (h == NULL)
		return 0;
	if (h->hp_pages == 0)
		h->hp_pages = hp_pages;
	int r = pageheap_collapse_done_locked(
	    h, PA_ALIGN_DOWN(addr, (uintptr_t)h->hp_pages * PA_PAGE_SIZE));
	lock_release(&h->lock);
	return r;
}

size_t pages_huge_count(void)
{
	if (__atomic_load_n(&default_state, __ATOMIC_ACQUIRE) != HEAP_READY)
		return 0;
	size_t n = 0;
	for (unsigned i = 0; i < numa.nodes; i++) {
		lock_acquire(&node_heaps[i].lock);
		n += node_heaps[i].huge_pages;
		lock_release(&node_heaps[i].lock);
	}
	return n;
}

int pages_chunk_view(uintptr_t from, struct pages_chunk_view *v)
{
	if (__atomic_load_n(&default_state, __ATOMIC_ACQUIRE) != HEAP_READY)
		return 0; /* not built: no heap to show, and none made for that */
	from = PA_ALIGN_DOWN(from, PA_CHUNK_SIZE);
	int found = 0;
	/* The nodes' windows go up with their index: the first heap with a
	 * range above from has the lowest such chunk. */
	for (unsigned n = 0; n < numa.nodes && !found; n++) {
		struct pa_pageheap *h = &node_heaps[n];
		lock_acquire(&h->lock);
		for (size_t i = 0; i < h->ranges.n && !found; i++) {
			const struct pa_addr_range *r = &h->ranges.v[i];
			if (range_limit(r) <= from)
				continue;
			v->base = range_base(r) > from ? range_base(r) : from;
			const struct pa_chunk *c = pageheap_chunk(h, v->base);
			memcpy(v->alloc, c->alloc, sizeof(v->alloc));
			memcpy(v->scav, c->scav, sizeof(v->scav));
			memset(v->cached, 0, sizeof(v->cached));
			memset(v->huge, 0, sizeof(v->huge));
			for (unsigned k = 0; h->hp_pages != 0 && c->huge >> k != 0; k++)
				if (c->huge >> k & 1)
					bits_set_range(v->huge, k * h->hp_pages, h->hp_pages);
			pagecache_held_locked(&node_caches[n], v->base, v->cached);
			found = 1;
		}
		lock_release(&h->lock);
	}
	return found;
}

void pages_totals(size_t *mapped, size_t *released, size_t *inuse_outside_caches)
{
	*mapped = *released = *inuse_outside_caches = 0;
	if (default_heap_get() == NULL)
		return;
	size_t inuse = 0, cached = 0;
	for (unsigned i = 0; i < numa.nodes; i++) {
		struct pa_pageheap *h = &node_heaps[i];
		lock_acquire(&h->lock);
		inuse += h->inuse_pages;
		*mapped += h->mapped_pages * PA_PAGE_SIZE;
		*released += h->scav_pages * PA_PAGE_SIZE;
		lock_release(&h->lock);
		struct pa_pagecache_stats cs;
		pagecache_stats(&node_caches[i], &cs);
		cached += cs.cached_pages + cs.queued_pages;
	}
	*inuse_outside_caches = (inuse > cached ? inuse - cached : 0) * PA_PAGE_SIZE;
}
