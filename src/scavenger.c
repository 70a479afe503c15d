/*
 * scavenger.c — background, limit-driven and explicit release of free pages
 * (scavenger.h has the policy; docs/design.md the reasoning).
 */
#include "scavenger.h"

#include <errno.h>
#include <string.h>

#include "os.h"

/* Largest run one release takes: a huge page, so a step stays short. */
#define SCAV_MAX_STEP_PAGES 256u
#define SCAV_COST_MIN_NS 1000u
#define SCAV_COST_MAX_NS 10000000u /* 10 ms: a step never justifies more */
#define SCAV_SLEEP_MAX_NS 1000000000u
#define SCAV_IDLE_NS 100000000u /* poll for new work every 100 ms */
/* A chunk with fewer pages allocated than this is sparse: while the heap
 * shrinks, the background releases free runs in it even where that splits
 * a huge page (Go's scavenger calls a chunk dense at 31/32 occupancy). */
#define SCAV_SPARSE_PAGES (PA_CHUNK_PAGES * 31u / 32u)
/* The hold (scav_hold_delay, scavenger.h): free resident memory within
 * scav_within_hold waits SCAV_STEADY_HOLD delays, at most SCAV_HOLD_MAX_MS.
 * rptest's threads idle 1-3 s between phases and took back all the
 * scavenger gave up at 1 s (2,200 faults a run of 10 us each on the
 * project's AMD VM); seed 003's cycle frees 1 GiB to 64 MiB, shrinks, and
 * keeps its 1 s. */
#define SCAV_HOLD_PAGES (SCAV_HOLD_BYTES / PA_PAGE_SIZE)
#define SCAV_STEADY_HOLD 4u
#define SCAV_HOLD_MAX_MS 3600000u
/* Collapsing: a huge page is dense when at most 1/SCAV_DENSE_SHARE of its
 * heap pages are free (and none released) and at most that share of its OS
 * pages is not resident; a step looks at SCAV_COLLAPSE_CHUNKS chunks at
 * most; a pass over the heap that found nothing waits SCAV_COLLAPSE_PASS_NS
 * before the next. Collapses are paced to SCAV_COLLAPSE_PERCENT of a core:
 * each is one-time work (a few ms here) that the program's page walks pay
 * back, and a 1 GiB heap is backed within seconds. */
#define SCAV_DENSE_SHARE 16u
#define SCAV_COLLAPSE_CHUNKS 64u
#define SCAV_COLLAPSE_PASS_NS 1000000000u
#define SCAV_COLLAPSE_PERCENT 50u
/* A huge page split after its collapse waits for this before it may be
 * collapsed again while dense (the heaps' split_epoch, chunk.h). */
#define SCAV_SPLIT_FORGET_NS 30000000000u
/* The longest collapses wait for a busy program (scav_program_busy): then
 * one step goes ahead, and they wait again. */
#define SCAV_COLLAPSE_WAIT_NS 4000000000u
/* The shortest window whose page faults and CPU time say the program is
 * busy (program_busy). */
#define SCAV_BUSY_WINDOW_NS 10000000u
/* memory_limit=auto (scavenger.h): the cgroup's files are read again every
 * second; the headroom is 1/SCAV_CGROUP_HEADROOM of its limit; pressure is
 * PSI's "some avg10" from SCAV_PSI_PRESSED hundredths of a percent up (5%:
 * half a second of every ten with a task waiting for memory, past the
 * noise of ordinary page-cache refaults, which stays under 1%). */
#define SCAV_CGROUP_NS 1000000000u
#define SCAV_CGROUP_HEADROOM 16u
#define SCAV_PSI_PRESSED 500

static void on_pressure(void *arg);

/* Wake the thread early (a new configuration, stop). */
static void scav_kick(struct pa_scavenger *s)
{
	uint32_t *word = __atomic_load_n(&s->wake_word, __ATOMIC_ACQUIRE);
	__atomic_fetch_add(word, 1, __ATOMIC_RELAXED);
	os_futex_wake_shared(word, 1);
}

void scav_init_heaps(struct pa_scavenger *s, struct pa_pageheap *const *heaps,
                     struct pa_pagecache_set *const *caches, unsigned n,
                     const struct pa_scav_config *conf)
{
	memset(s, 0, sizeof(*s));
	s->nheaps = n;
	for (unsigned i = 0; i < n; i++) {
		s->heaps[i] = heaps[i];
		s->caches[i] = caches != NULL ? caches[i] : NULL;
		heaps[i]->on_pressure = on_pressure;
		heaps[i]->pressure_arg = s;
	}
	/* hp_pages stays 0 until the thread, its only reader, reads it: a short
	 * program never opens the sysfs files. */
	s->wake_word = &s->wake;
	s->pressure = -1;
	lock_init(&s->release_lock);
	scav_configure(s, conf);
}

void scav_init(struct pa_scavenger *s, struct pa_pageheap *heap, struct pa_pagecache_set *caches,
               const struct pa_scav_config *conf)
{
	scav_init_heaps(s, &heap, caches != NULL ? &caches : NULL, 1, conf);
}

/* A heap's pages in use and its resident pages, read under its lock. */
static void heap_pages(struct pa_pageheap *h, size_t *inuse, size_t *resident)
{
	lock_acquire(&h->lock);
	*inuse = h->inuse_pages;
	*resident = pageheap_resident_pages_locked(h);
	lock_release(&h->lock);
}

/* The same summed over all the heaps (each read under its lock). */
static void heaps_pages(struct pa_scavenger *s, size_t *inuse, size_t *resident)
{
	*inuse = *resident = 0;
	for (unsigned i = 0; i < s->nheaps; i++) {
		size_t u, r;
		heap_pages(s->heaps[i], &u, &r);
		*inuse += u;
		*resident += r;
	}
}

/* Resident pages of all the heaps. */
static size_t resident_pages(struct pa_scavenger *s)
{
	size_t inuse, res;
	heaps_pages(s, &inuse, &res);
	return res;
}

/* The soft limit in force (bytes, 0: none) and the hard one from the
 * configuration, into every heap. Each heap is flagged past its even share
 * of the soft limit, and on_pressure sums them. The hard limit is a
 * promise that the process maps no more: each heap gets its even share. */
static void set_limits(struct pa_scavenger *s, size_t memory_limit)
{
	__atomic_store_n(&s->conf.memory_limit, memory_limit, __ATOMIC_RELAXED);
	size_t pages = PA_ALIGN_UP(memory_limit, PA_PAGE_SIZE) / PA_PAGE_SIZE;
	size_t share = pages == 0 ? 0 : (pages + s->nheaps - 1) / s->nheaps;
	size_t hard_bytes = __atomic_load_n(&s->conf.memory_limit_hard, __ATOMIC_RELAXED);
	size_t hard = hard_bytes / PA_PAGE_SIZE / s->nheaps;
	if (hard_bytes != 0 && hard == 0)
		hard = 1;
	for (unsigned i = 0; i < s->nheaps; i++) {
		lock_acquire(&s->heaps[i]->lock);
		s->heaps[i]->hugepage_arenas =
		    __atomic_load_n(&s->conf.thp, __ATOMIC_RELAXED) == PA_THP_ALWAYS;
		s->heaps[i]->limit_pages = share;
		s->heaps[i]->hard_limit_pages = hard;
		lock_release(&s->heaps[i]->lock);
	}
}

/* memory_limit=auto's read (scavenger.h); release_lock held. */
static void follow_cgroup_locked(struct pa_scavenger *s)
{
	if (!s->cgroup_found) {
		cgroup_find(&s->cgroup, s->cgroup_root != NULL ? s->cgroup_root : "");
		__atomic_store_n(&s->cgroup_found, 1, __ATOMIC_RELEASE);
	}
	size_t from = 0, other = 0, limit = 0;
	size_t max = cgroup_limit(&s->cgroup, &from);
	if (max != 0) {
		size_t charged, heap = resident_pages(s) * PA_PAGE_SIZE;
		if (cgroup_unreclaimable(&s->cgroup, &charged) == 0 && charged > heap)
			other = charged - heap;
		size_t keep = max / SCAV_CGROUP_HEADROOM + other;
		/* A cgroup full of other things leaves the heaps a page: every
		 * growth releases what is free (0 would mean no limit). */
		limit = max > keep + PA_PAGE_SIZE ? PA_ALIGN_DOWN(max - keep, PA_PAGE_SIZE)
		                                  : PA_PAGE_SIZE;
	}
	unsigned psi;
	int pressure = cgroup_pressure(&s->cgroup, &psi) == 0 ? (int)psi : -1;
	__atomic_store_n(&s->cgroup_max, max, __ATOMIC_RELAXED);
	__atomic_store_n(&s->cgroup_from, from, __ATOMIC_RELAXED);
	__atomic_store_n(&s->cgroup_other, other, __ATOMIC_RELAXED);
	__atomic_store_n(&s->pressure, pressure, __ATOMIC_RELAXED);
	if (limit != __atomic_load_n(&s->conf.memory_limit, __ATOMIC_RELAXED))
		set_limits(s, limit);
}

static int limit_auto(struct pa_scavenger *s)
{
	return __atomic_load_n(&s->conf.memory_limit_auto, __ATOMIC_RELAXED);
}

void scav_follow_cgroup(struct pa_scavenger *s)
{
	lock_acquire(&s->release_lock);
	/* A configure that turned auto off since the thread looked has set
	 * its own limit, under this lock: a read now would overwrite it. */
	if (limit_auto(s))
		follow_cgroup_locked(s);
	lock_release(&s->release_lock);
}

/* The kernel reports memory pressure (memory_limit=auto only). */
static int scav_pressed(struct pa_scavenger *s)
{
	return limit_auto(s) && __atomic_load_n(&s->pressure, __ATOMIC_RELAXED) >= SCAV_PSI_PRESSED;
}

void scav_configure(struct pa_scavenger *s, const struct pa_scav_config *conf)
{
	__atomic_store_n(&s->conf.enabled, conf->enabled, __ATOMIC_RELAXED);
	unsigned pct = conf->percent < 1 ? 1 : conf->percent > 100 ? 100 : conf->percent;
	__atomic_store_n(&s->conf.percent, pct, __ATOMIC_RELAXED);
	__atomic_store_n(&s->conf.lazy, conf->lazy, __ATOMIC_RELAXED);
	__atomic_store_n(&s->conf.delay_ms, conf->delay_ms, __ATOMIC_RELAXED);
	unsigned burst = conf->burst_percent > 100 ? 100 : conf->burst_percent;
	__atomic_store_n(&s->conf.burst_percent, burst, __ATOMIC_RELAXED);
	__atomic_store_n(&s->conf.thp, conf->thp, __ATOMIC_RELAXED);
	__atomic_store_n(&s->conf.memory_limit_hard, conf->memory_limit_hard, __ATOMIC_RELAXED);
	__atomic_store_n(&s->conf.memory_limit_auto, conf->memory_limit_auto, __ATOMIC_RELAXED);
	if (conf->memory_limit_auto) {
		scav_follow_cgroup(s);
		set_limits(s, __atomic_load_n(&s->conf.memory_limit, __ATOMIC_RELAXED));
	} else {
		/* Under the lock of the thread's cgroup reads (scav_follow_cgroup). */
		lock_acquire(&s->release_lock);
		set_limits(s, conf->memory_limit);
		lock_release(&s->release_lock);
	}
	/* Let a sleeping thread see the change now. */
	scav_kick(s);
}

/* ---- releasing one run ---------------------------------------------------- */

/*
 * Release the candidate run of chunk ci, if any: reserve under the lock,
 * madvise without it, commit under it. Returns pages released (0: none).
 */
static unsigned release_in_chunk(struct pa_scavenger *s, struct pa_pageheap *h, size_t ci,
                                 int force, unsigned split_below, unsigned max_pages)
{
	uintptr_t addr = 0;
	unsigned fresh = 0;
	lock_acquire(&h->lock);
	unsigned n = pageheap_scav_reserve_locked(h, ci, force, s->hp_pages, s->thp_kernel_always,
	                                          split_below, max_pages, &addr, &fresh);
	lock_release(&h->lock);
	if (n == 0)
		return 0;
	int lazy = __atomic_load_n(&s->conf.lazy, __ATOMIC_RELAXED);
	int ok = h->metadata_only || os_release((void *)addr, n * PA_PAGE_SIZE, lazy) == 0;
	lock_acquire(&h->lock);
	/* If the kernel refused, the pages go back as they were: resident. */
	pageheap_scav_commit_locked(h, addr, n, ok);
	lock_release(&h->lock);
	if (!ok) {
		__atomic_fetch_add(&s->failed_releases, 1, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_fetch_add(&s->released_bytes, (uint64_t)fresh * PA_PAGE_SIZE, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->releases, 1, __ATOMIC_RELAXED);
	return n;
}

/*
 * Whether the heap has shrunk: free resident memory exceeds the retained
 * goal, an eighth of the pages in use plus a chunk (Go retains 10% over its
 * heap goal; the chunk keeps a small heap from ever counting as shrinking).
 */
static int heap_shrinking(struct pa_pageheap *h)
{
	size_t inuse, resident;
	heap_pages(h, &inuse, &resident);
	size_t free_res = resident > inuse ? resident - inuse : 0;
	return free_res > inuse / SCAV_RETAIN_SHARE + PA_CHUNK_PAGES;
}

/* Any of the heaps shrinking: the pace of the one thread follows it. */
static int scav_shrinking(struct pa_scavenger *s)
{
	for (unsigned i = 0; i < s->nheaps; i++)
		if (heap_shrinking(s->heaps[i]))
			return 1;
	return 0;
}

static int burst_enabled(struct pa_scavenger *s)
{
	return __atomic_load_n(&s->conf.burst_percent, __ATOMIC_RELAXED) >
	       __atomic_load_n(&s->conf.percent, __ATOMIC_RELAXED);
}

/* One heap's part of a step: at most one candidate released. */
static size_t heap_step(struct pa_scavenger *s, struct pa_pageheap *h, uint32_t min_age)
{
	/* A shrinking heap (with burst pacing on) gives up huge pages of sparse
	 * chunks: that free memory is not what the heap recently needed. */
	unsigned split_below =
	    burst_enabled(s) && (scav_pressed(s) || heap_shrinking(h)) ? SCAV_SPARSE_PAGES : 0;
	lock_acquire(&h->lock);
	uint64_t frees_before = h->free_count;
	lock_release(&h->lock);
	size_t below = SIZE_MAX, recent = 0, released = 0;
	for (;;) {
		size_t young;
		size_t ci = pageheap_scav_next(h, below, min_age, &young);
		if (young > recent)
			recent = young;
		if (ci == SIZE_MAX)
			break;
		released = release_in_chunk(s, h, ci, 0, split_below, SCAV_MAX_STEP_PAGES);
		if (released != 0)
			break;
		below = ci; /* that chunk had nothing after all; keep looking lower */
	}
	if (released == 0) {
		/* A full pass found nothing: lower the scan's top to the youngest
		 * skipped chunk, unless a free raced with the pass. */
		lock_acquire(&h->lock);
		if (h->free_count == frees_before)
			__atomic_store_n(&h->scav_ci, recent, __ATOMIC_RELAXED);
		lock_release(&h->lock);
	}
	return released;
}

size_t scav_step(struct pa_scavenger *s, uint32_t min_age)
{
	lock_acquire(&s->release_lock);
	size_t released = 0;
	for (unsigned k = 0; k < s->nheaps && released == 0; k++) {
		unsigned i = (s->next_heap + k) % s->nheaps;
		released = heap_step(s, s->heaps[i], min_age);
		if (released != 0)
			s->next_heap = (i + 1) % s->nheaps;
	}
	lock_release(&s->release_lock);
	return released;
}

/* Release up to want pages of heap h, highest first; release lock held. */
static size_t heap_release(struct pa_scavenger *s, struct pa_pageheap *h, size_t want, int force)
{
	size_t done = 0;
	lock_acquire(&h->lock);
	size_t ci = pageheap_prev_chunk_locked(h, h->end_ci);
	lock_release(&h->lock);
	while (ci != SIZE_MAX && done < want) {
		size_t left = want - done;
		unsigned max = left < PA_CHUNK_PAGES ? (unsigned)left : PA_CHUNK_PAGES;
		unsigned n = release_in_chunk(s, h, ci, force, 0, max);
		done += n;
		if (n != 0)
			continue; /* the same chunk may hold more, lower down */
		lock_acquire(&h->lock);
		ci = pageheap_prev_chunk_locked(h, ci);
		lock_release(&h->lock);
	}
	return done;
}

size_t scav_release(struct pa_scavenger *s, size_t bytes, int force)
{
	size_t want = bytes == 0 ? SIZE_MAX : PA_ALIGN_UP(bytes, PA_PAGE_SIZE) / PA_PAGE_SIZE;
	size_t done = 0;
	lock_acquire(&s->release_lock);
	for (unsigned i = s->nheaps; i-- > 0 && done < want;)
		done += heap_release(s, s->heaps[i], want - done, force);
	lock_release(&s->release_lock);
	return done * PA_PAGE_SIZE;
}

/* ---- huge pages ------------------------------------------------------------ */

/* What the scavenger may do about huge pages on the machine (thp=off is
 * checked at each step: the key may change live). */
static int thp_state_of(const struct os_thp *m, int has_collapse)
{
	if (m->mode == OS_THP_NEVER || m->bytes < PA_PAGE_SIZE)
		return PA_THP_STATE_NEVER;
	if (has_collapse)
		return PA_THP_STATE_COLLAPSE;
	return m->fault_stalls ? PA_THP_STATE_UNUSABLE : PA_THP_STATE_HINT;
}

void scav_thp_setup(struct pa_scavenger *s, const struct os_thp *machine)
{
	s->hp_pages = machine->mode == OS_THP_NEVER ? 0 : (unsigned)(machine->bytes / PA_PAGE_SIZE);
	s->thp_kernel_always = machine->mode == OS_THP_ALWAYS;
	/* Whether the kernel knows MADV_COLLAPSE: EINVAL on an empty range
	 * means not (a kernel that has it accepts a zero length). */
	int has_collapse = os_collapse(NULL, 0) == 0;
	__atomic_store_n(&s->thp_state, thp_state_of(machine, has_collapse), __ATOMIC_RELAXED);
	for (unsigned i = 0; i < s->nheaps; i++) {
		lock_acquire(&s->heaps[i]->lock);
		s->heaps[i]->hp_pages = s->hp_pages;
		lock_release(&s->heaps[i]->lock);
		s->collapse_cursor[i] = SIZE_MAX;
	}
}

/* Back the huge page at addr (heap h) whole, lock not held: 1 if done. */
static int collapse_one(struct pa_scavenger *s, struct pa_pageheap *h, uintptr_t addr, int state)
{
	size_t bytes = (size_t)s->hp_pages * PA_PAGE_SIZE;
	if (!h->metadata_only) {
		long os_pages = (long)(bytes / os_page_size());
		long res = os_resident_pages((void *)addr, bytes);
		if (res < os_pages - os_pages / SCAV_DENSE_SHARE) {
			__atomic_fetch_add(&s->collapse_sparse, 1, __ATOMIC_RELAXED);
			return 0;
		}
		int r = state == PA_THP_STATE_COLLAPSE ? os_collapse((void *)addr, bytes)
		                                       : os_hugepage((void *)addr, bytes);
		if (r != 0) {
			__atomic_fetch_add(&s->collapse_failures, 1, __ATOMIC_RELAXED);
			return 0;
		}
	}
	lock_acquire(&h->lock);
	int done = pageheap_collapse_done_locked(h, addr);
	lock_release(&h->lock);
	return done;
}

int scav_collapse_possible(const struct pa_scavenger *s)
{
	int state = __atomic_load_n(&s->thp_state, __ATOMIC_RELAXED);
	unsigned thp = __atomic_load_n(&s->conf.thp, __ATOMIC_RELAXED);
	return thp != PA_THP_OFF && (state == PA_THP_STATE_COLLAPSE || state == PA_THP_STATE_HINT);
}

size_t scav_collapse_step(struct pa_scavenger *s)
{
	if (!scav_collapse_possible(s))
		return 0;
	int state = __atomic_load_n(&s->thp_state, __ATOMIC_RELAXED);
	/* A process that asked the kernel for no huge pages (redis-server does
	 * where THP is "always", for its forks' copy-on-write) gets none from
	 * us either. */
	if (os_thp_disabled())
		return 0;
	const unsigned min_alloc = s->hp_pages - s->hp_pages / SCAV_DENSE_SHARE;
	size_t done = 0;
	for (unsigned i = 0; i < s->nheaps && done == 0; i++) {
		struct pa_pageheap *h = s->heaps[i];
		uintptr_t base = 0;
		lock_acquire(&h->lock);
		unsigned dense = pageheap_collapse_find_locked(
		    h, &s->collapse_cursor[i], SCAV_COLLAPSE_CHUNKS, min_alloc, &base);
		lock_release(&h->lock);
		for (unsigned hp = 0; dense >> hp != 0; hp++)
			if (dense >> hp & 1)
				done += (size_t)collapse_one(
				    s, h, base + (uintptr_t)hp * s->hp_pages * PA_PAGE_SIZE, state);
	}
	return done;
}

/* Whether a pass over the heaps for huge pages to collapse is under way. */
static int collapse_passing(const struct pa_scavenger *s)
{
	for (unsigned i = 0; i < s->nheaps; i++)
		if (s->collapse_cursor[i] != SIZE_MAX)
			return 1;
	return 0;
}

/* Whether the thread may look for huge pages to collapse now: a pass that
 * reached the bottom of every heap waits SCAV_COLLAPSE_PASS_NS. */
static int collapse_due(const struct pa_scavenger *s, uint64_t now)
{
	return collapse_passing(s) || now >= s->collapse_pass_ns;
}

/* A collapse step runs now: the start of a pass sets when the next may
 * start, and every SCAV_SPLIT_FORGET_NS the heaps forget their splits. */
static void collapse_begin(struct pa_scavenger *s, uint64_t now)
{
	if (collapse_passing(s))
		return;
	s->collapse_pass_ns = now + SCAV_COLLAPSE_PASS_NS;
	if (now >= s->split_forget_ns) {
		s->split_forget_ns = now + SCAV_SPLIT_FORGET_NS;
		for (unsigned i = 0; i < s->nheaps; i++) {
			lock_acquire(&s->heaps[i]->lock);
			s->heaps[i]->split_epoch++;
			lock_release(&s->heaps[i]->lock);
		}
	}
}

/* The program over the window since the thread's last look: whether it
 * was busy (scav_program_busy), the thread's own CPU time (own_ns, now)
 * left out. A wake less than SCAV_BUSY_WINDOW_NS after the last look keeps
 * its verdict: the thread wakes every millisecond while it releases at its
 * pace, and getrusage walks every thread of the process. */
static int program_busy(struct pa_scavenger *s, uint64_t now, uint64_t own_ns)
{
	if (s->busy_at_ns != 0 && now - s->busy_at_ns < SCAV_BUSY_WINDOW_NS)
		return s->busy;
	uint64_t cpu, faults;
	if (os_process_usage(&cpu, &faults) != 0)
		return 0;
	cpu -= own_ns < cpu ? own_ns : cpu;
	int busy = s->busy_at_ns != 0 && now > s->busy_at_ns &&
	           scav_program_busy(
	               now - s->busy_at_ns, cpu > s->busy_cpu_ns ? cpu - s->busy_cpu_ns : 0,
	               faults > s->busy_faults ? faults - s->busy_faults : 0, os_usable_cpus());
	__atomic_store_n(&s->busy_at_ns, now, __ATOMIC_RELAXED);
	s->busy_cpu_ns = cpu;
	s->busy_faults = faults;
	s->busy = busy;
	return busy;
}

int scav_collapse_may_run(struct pa_scavenger *s, int busy, uint64_t now)
{
	if (!busy) {
		s->collapse_wait_ns = 0;
		return 1;
	}
	__atomic_fetch_add(&s->collapse_waits, 1, __ATOMIC_RELAXED);
	if (s->collapse_wait_ns == 0) {
		s->collapse_wait_ns = now;
		return 0;
	}
	if (now - s->collapse_wait_ns < SCAV_COLLAPSE_WAIT_NS)
		return 0;
	s->collapse_wait_ns = now;
	return 1;
}

/* ---- the memory limit ----------------------------------------------------- */

/* Resident bytes of all the heaps past the limit (0: none, or under it,
 * which clears every heap's flag). */
static size_t excess_bytes(struct pa_scavenger *s)
{
	size_t lim =
	    PA_ALIGN_UP(__atomic_load_n(&s->conf.memory_limit, __ATOMIC_RELAXED), PA_PAGE_SIZE) /
	    PA_PAGE_SIZE;
	size_t res = resident_pages(s);
	if (lim == 0 || res <= lim)
		for (unsigned i = 0; i < s->nheaps; i++)
			__atomic_store_n(&s->heaps[i]->pressure, 0, __ATOMIC_RELAXED);
	return lim != 0 && res > lim ? (res - lim) * PA_PAGE_SIZE : 0;
}

static void on_pressure(void *arg)
{
	struct pa_scavenger *s = arg;
	size_t excess = excess_bytes(s);
	if (excess == 0)
		return;
	excess -= scav_release(s, excess, 1);
	if (excess != 0) {
		/* Pages parked in per-CPU caches are the last free memory. */
		for (unsigned i = 0; i < s->nheaps; i++)
			if (s->caches[i] != NULL)
				pagecache_flush_all(s->caches[i]);
		scav_release(s, excess, 1);
	}
	if (excess_bytes(s) != 0) {
		/* Soft limit: the allocation stands; say so in the stats. */
		__atomic_fetch_add(&s->limit_overruns, 1, __ATOMIC_RELAXED);
		for (unsigned i = 0; i < s->nheaps; i++)
			__atomic_store_n(&s->heaps[i]->pressure, 0, __ATOMIC_RELAXED);
	}
}

/* ---- the background thread ----------------------------------------------- */

/*
 * The CPU share for the next step: `percent`, or `burst_percent` while the
 * heap is shrinking (free resident memory above the retained goal). That
 * memory is not what the heap recently needed, and holding it costs RSS
 * every second it waits; a heap whose size is steady keeps its free memory
 * under the goal (what it frees it soon needs again) and stays at percent.
 * The step itself only takes memory free for scavenge_delay_ms. Under
 * memory pressure (scav_pressed) the pace is burst_percent and the delay 0.
 */
static unsigned scav_pace(struct pa_scavenger *s)
{
	unsigned pct = __atomic_load_n(&s->conf.percent, __ATOMIC_RELAXED);
	if (!burst_enabled(s) || (!scav_pressed(s) && !scav_shrinking(s)))
		return pct;
	return __atomic_load_n(&s->conf.burst_percent, __ATOMIC_RELAXED);
}

uint32_t scav_hold_delay(struct pa_scavenger *s, uint32_t delay_ms)
{
	size_t inuse, resident;
	heaps_pages(s, &inuse, &resident);
	size_t free_res = resident > inuse ? resident - inuse : 0;
	if (!scav_within_hold(free_res * PA_PAGE_SIZE, inuse * PA_PAGE_SIZE)) {
		if (!s->shrank || inuse < s->shrank_inuse)
			s->shrank_inuse = inuse;
		s->shrank = 1;
	} else if (s->shrank && inuse > s->shrank_inuse + SCAV_HOLD_PAGES)
		s->shrank = 0;
	else if (s->shrank && inuse < s->shrank_inuse)
		s->shrank_inuse = inuse;
	if (s->shrank || delay_ms == 0)
		return delay_ms;
	uint64_t hold = (uint64_t)delay_ms * SCAV_STEADY_HOLD;
	return hold > SCAV_HOLD_MAX_MS ? SCAV_HOLD_MAX_MS : (uint32_t)hold;
}

static void *scav_main(void *arg)
{
	struct pa_scavenger *s = arg;
	struct pa_pageheap *h = s->heaps[0]; /* keeps the clock that all share */
	os_block_signals();
	struct os_thp machine;
	os_thp_read(&machine);
	scav_thp_setup(s, &machine);
	uint64_t t0 = os_now_ns(), cpu_prev = os_thread_cpu_ns();
	if (s->epoch0_ns == 0)
		s->epoch0_ns = t0;
	/* The first look for huge pages to collapse a pass after the thread
	 * starts: a program that lives less than that (wl-churn: 0.2 s, 1.44x
	 * its CPU when its heap's regions were collapsed and freed at once)
	 * spends nothing on collapses it cannot use. */
	s->collapse_pass_ns = t0 + SCAV_COLLAPSE_PASS_NS;
	s->split_forget_ns = t0 + SCAV_SPLIT_FORGET_NS;
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		uint32_t *word = __atomic_load_n(&s->wake_word, __ATOMIC_RELAXED);
		uint32_t wake = __atomic_load_n(word, __ATOMIC_RELAXED);
		uint64_t now_ns = os_now_ns();
		uint32_t now = (uint32_t)((now_ns - s->epoch0_ns) / 1000000u);
		for (unsigned i = 0; i < s->nheaps; i++)
			__atomic_store_n(&s->heaps[i]->epoch, now, __ATOMIC_RELAXED);
		/* Where no collapse can run (thp=off, THP "never"), no look:
		 * getrusage walks every thread. The next look starts a new
		 * window. */
		int busy = 0;
		if (scav_collapse_possible(s))
			busy = program_busy(s, now_ns, os_thread_cpu_ns());
		else
			__atomic_store_n(&s->busy_at_ns, 0, __ATOMIC_RELAXED);
		size_t released = 0, collapsed = 0;
		if (excess_bytes(s) != 0)
			on_pressure(s); /* over the limit: no delay, no pacing */
		else if (__atomic_load_n(&s->conf.enabled, __ATOMIC_RELAXED)) {
			/* The hold is the page heap's: the sweep's pages are
			 * inside spans that survivors keep. */
			uint32_t delay = scav_pressed(s)
			                     ? 0
			                     : __atomic_load_n(&s->conf.delay_ms, __ATOMIC_RELAXED);
			uint32_t hold = scav_hold_delay(s, delay);
			released = scav_step(s, hold);
			size_t (*sweep)(uint32_t, uint32_t, int, uint32_t) =
			    __atomic_load_n(&s->sweep, __ATOMIC_ACQUIRE);
			if (sweep != NULL && sweep(__atomic_load_n(&h->epoch, __ATOMIC_RELAXED),
			                           delay, released != 0, hold) != 0)
				released = 1;
			/* Backing comes after giving back: a step does one. */
			if (released == 0 && collapse_due(s, now_ns) &&
			    scav_collapse_may_run(s, busy, now_ns)) {
				collapse_begin(s, now_ns);
				collapsed = scav_collapse_step(s);
			}
		}
		uint64_t cpu = os_thread_cpu_ns(), cost = cpu - cpu_prev;
		cpu_prev = cpu;
		uint64_t sleep_max = 0;
		if (limit_auto(s) && os_now_ns() - s->cgroup_read_ns >= SCAV_CGROUP_NS) {
			/* Outside the pacing, as publish below. */
			scav_follow_cgroup(s);
			s->cgroup_read_ns = os_now_ns();
			uint64_t after = os_thread_cpu_ns();
			__atomic_fetch_add(&s->cpu_ns, after - cpu, __ATOMIC_RELAXED);
			cpu_prev = cpu = after;
		}
		uint64_t (*publish)(uint32_t **) = __atomic_load_n(&s->publish, __ATOMIC_ACQUIRE);
		if (publish != NULL) {
			/* A new word takes effect from the next sleep; a wake that
			 * went to the old one meanwhile waits at most sleep_max. */
			uint32_t *next = word;
			sleep_max = publish(&next);
			if (next != word)
				__atomic_store_n(&s->wake_word, next, __ATOMIC_RELEASE);
			cpu_prev = os_thread_cpu_ns();
			__atomic_fetch_add(&s->cpu_ns, cpu_prev - cpu, __ATOMIC_RELAXED);
		}
		__atomic_fetch_add(&s->cpu_ns, cost, __ATOMIC_RELAXED);
		uint64_t sleep_ns = SCAV_IDLE_NS;
		if (released != 0 || collapsed != 0) {
			if (cost < SCAV_COST_MIN_NS)
				cost = SCAV_COST_MIN_NS;
			if (cost > SCAV_COST_MAX_NS)
				cost = SCAV_COST_MAX_NS;
			/* Releases and collapses keep an EWMA each: a collapse
			 * costs milliseconds, a release microseconds, and one
			 * must not stretch the other's sleeps. */
			uint64_t *ewma = released != 0 ? &s->ewma_cost_ns : &s->ewma_collapse_ns;
			*ewma = *ewma ? (*ewma + cost) / 2 : cost;
			unsigned pct = released != 0 ? scav_pace(s) : SCAV_COLLAPSE_PERCENT;
			sleep_ns = *ewma * (100u - pct) / pct;
			if (sleep_ns > SCAV_SLEEP_MAX_NS)
				sleep_ns = SCAV_SLEEP_MAX_NS;
		}
		if (sleep_max != 0 && sleep_ns > sleep_max)
			sleep_ns = sleep_max;
		if (sleep_ns != 0)
			os_futex_wait_shared_ns(word, wake, sleep_ns);
	}
	return NULL;
}

int scav_start(struct pa_scavenger *s)
{
	int expected = 0;
	if (!__atomic_load_n(&s->conf.enabled, __ATOMIC_RELAXED) ||
	    !__atomic_compare_exchange_n(&s->state, &expected, 1, 0, __ATOMIC_ACQ_REL,
	                                 __ATOMIC_RELAXED))
		return 0;
	__atomic_store_n(&s->stop, 0, __ATOMIC_RELAXED);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	int r = pthread_create(&s->thread, &attr, scav_main, s);
	pthread_attr_destroy(&attr);
	if (r != 0) {
		__atomic_store_n(&s->state, 0, __ATOMIC_RELEASE);
		errno = r;
		return -1;
	}
	return 0;
}

void scav_stop(struct pa_scavenger *s)
{
	if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != 1)
		return;
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
	scav_kick(s);
	pthread_join(s->thread, NULL);
	__atomic_store_n(&s->state, 0, __ATOMIC_RELEASE);
}

void scav_after_fork_child(struct pa_scavenger *s)
{
	/* The live file's word is the parent's: the child's thread makes its
	 * own. */
	s->wake_word = &s->wake;
	lock_init(&s->release_lock);
	__atomic_store_n(&s->state, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->stop, 0, __ATOMIC_RELAXED);
}
