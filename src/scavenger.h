/*
 * scavenger.h — giving free pages back to the OS.
 *
 * The chunks' scavenged bitmaps are the truth about what is released
 * (chunk.h). The scavenger finds free, unreleased runs from the highest
 * address down, takes each out of circulation under the heap lock, releases
 * it with one madvise with the lock dropped, and frees it back as released
 * pages (pageheap_scav_*). Three callers:
 *
 *  - a background thread, self-paced to a CPU share (scavenge_percent, 1% by
 *    default), releasing only memory that stayed free scavenge_delay_ms and,
 *    where transparent huge pages back the heap, only whole free huge pages;
 *  - the memory limit: an allocation that pushes resident heap memory past
 *    memory_limit releases the excess synchronously in the allocating
 *    thread (any free run, huge pages split if need be), then per-CPU caches
 *    are flushed; still over means the limit is soft and a counter says so;
 *  - pa_scavenge(): release N bytes, or everything free, now.
 *
 * memory_limit=auto: the limit follows the container's (cgroup.h). It is
 * the cgroup's limit in force less a sixteenth of it (headroom: what the
 * kernel charges that nobody maps, page tables and socket buffers, and what
 * grows between two reads) less what the cgroup holds that is neither the
 * heaps' resident pages nor reclaimable page cache (the program's other
 * memory, its stacks, the heap's metadata, other processes of the
 * container). It is computed when configured and again by the thread every
 * second, so it follows a limit that changes and the rest of the cgroup as
 * it grows and shrinks. While the kernel reports memory pressure (PSI "some
 * avg10" at 5% or more, of the cgroup where v2 has it, else of the machine)
 * the thread releases memory free for any time, at burst_percent's pace.
 *
 * Pacing (docs/design.md has the reasoning): each step's cost is the
 * thread's own CPU time since the previous step (so suspend, preemption and
 * scheduling delay are never counted as work), bounded to 10 ms, smoothed by
 * an EWMA; the thread then sleeps cost * (100 - p) / p, at most 1 s.
 */
#ifndef PA_SCAVENGER_H
#define PA_SCAVENGER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup.h"
#include "lock.h"
#include "pagecache.h"
#include "pageheap.h"

struct pa_scav_config {
	int enabled;              /* background thread */
	unsigned percent;         /* CPU share of one core, 1..100 */
	int lazy;                 /* MADV_FREE instead of MADV_DONTNEED */
	size_t memory_limit;      /* bytes, 0: none */
	size_t memory_limit_hard; /* bytes the heap may map, 0: none (pageheap.h) */
	unsigned delay_ms;        /* free this long before the background releases it */
	unsigned burst_percent;   /* CPU share while the heap shrinks (see scav_pace), >= percent */
	unsigned thp;             /* enum pa_thp_conf: what the scavenger does for huge pages */
	int memory_limit_auto;    /* memory_limit follows the cgroup's (memory_limit ignored) */
};

/* The thp= key: off (nothing), auto (collapse dense huge pages from the
 * thread), always (auto, and every new arena asks for huge pages at fault). */
enum pa_thp_conf { PA_THP_OFF, PA_THP_AUTO, PA_THP_ALWAYS };

/* What the scavenger does about huge pages, as found when its thread
 * started (pa_stats' thp_state; the story says it in words). */
enum pa_thp_state {
	PA_THP_STATE_UNKNOWN,     /* the thread has not started */
	PA_THP_STATE_OFF,         /* thp=off (pa_stats says so; the thread keeps what
	                           * the machine allows, for the key may change) */
	PA_THP_STATE_NEVER,       /* the machine's THP is "never": 4 KiB pages only */
	PA_THP_STATE_COLLAPSE,    /* MADV_COLLAPSE of dense huge pages, from the thread */
	PA_THP_STATE_HINT,        /* no MADV_COLLAPSE: MADV_HUGEPAGE on dense huge pages
	                           * (defrag cannot stall a fault), khugepaged backs them */
	PA_THP_STATE_UNUSABLE,    /* no MADV_COLLAPSE, and defrag would stall faults */
	PA_THP_STATE_PROCESS_OFF, /* the process turned THP off (prctl
	                           * PR_SET_THP_DISABLE): pa_stats reports it over
	                           * COLLAPSE or HINT, the thread collapses nothing */
};

/* Page heaps one scavenger paces over at most: a NUMA machine's nodes'. */
#define PA_SCAV_MAX_HEAPS 8u

/*
 * One scavenger serves one or several page heaps (pages.c: one per NUMA
 * node), with one thread and one CPU budget: the process's, not a node's.
 * Each background step tries the heaps in turn, starting after the one that
 * released last; explicit releases go over every heap, the highest first;
 * the memory limit counts the resident pages of all of them (each heap is
 * flagged past its even share of the limit, and the check sums them).
 */
struct pa_scavenger {
	struct pa_pageheap *heaps[PA_SCAV_MAX_HEAPS];
	struct pa_pagecache_set *caches[PA_SCAV_MAX_HEAPS]; /* may be NULL */
	unsigned nheaps;
	unsigned next_heap; /* where the next background step starts (the thread's) */
	/* Set by the thread when it starts (its only writer): hp_pages, the
	 * huge page in heap pages (0: THP "never"); thp_kernel_always: the
	 * kernel backs every region with huge pages unasked, so no free huge
	 * page is split by the background; thp_state (atomic: the stats read
	 * it). The collapse cursors (one per heap, pageheap_collapse_find),
	 * the time the next collapse pass may start and the time the heaps'
	 * split_epoch moves on next are the thread's own. */
	unsigned hp_pages;
	int thp_kernel_always;
	int thp_state;
	size_t collapse_cursor[PA_SCAV_MAX_HEAPS];
	uint64_t collapse_pass_ns, split_forget_ns;
	/* Whether the program is busy (scav_program_busy), the thread's own:
	 * the process's figures at its last look (time, CPU time of the
	 * other threads, page faults; time 0: no look yet, or none while no
	 * collapse could run, scav_collapse_possible), that window's verdict, and since
	 * when collapses wait for it (0: they do not). */
	uint64_t busy_at_ns, busy_cpu_ns, busy_faults;
	int busy;
	uint64_t collapse_wait_ns;
	/* The heaps' epoch counts milliseconds from here: set by the thread
	 * when it first starts, and kept by a restart and by a forked child
	 * (CLOCK_MONOTONIC is the machine's), so that the ages of free pages
	 * and stashed batches (the free stamps, the sweep's) go on from where
	 * they were instead of wrapping to "long ago". */
	uint64_t epoch0_ns;
	/* The hold (scav_hold_delay), the thread's own: whether the
	 * heaps' free memory went past it since the pages in use last grew by
	 * it, and the fewest pages in use since. */
	int shrank;
	size_t shrank_inuse;
	pa_lock release_lock; /* one releaser at a time (thread, limit, explicit) */

	/* Configuration: read with atomics each step, so it may change live. */
	struct pa_scav_config conf;

	/* The background thread. state: 0 stopped, 1 starting/running. */
	int state;
	int stop;
	uint32_t wake; /* futex word: bumped to wake the thread early */
	/* The word the thread sleeps on: &wake, or the live file's (publish
	 * below), which the file's readers bump and wake from their own
	 * process. Waits and wakes on it are process-shared. Written by the
	 * thread (and scav_init, a forked child), read by wakers (atomic). */
	uint32_t *wake_word;
	pthread_t thread;
	uint64_t ewma_cost_ns;     /* a release step's cost (the thread's) */
	uint64_t ewma_collapse_ns; /* a collapse step's cost (the thread's) */
	/* The layer above's own release (the malloc layer's span sweep and
	 * stash decay): called by the thread at every wake while enabled, with
	 * the epoch, scavenge_delay_ms, whether the heap released pages in
	 * this step (heap_busy: then only the layer's periodic work, no
	 * sweep) and the page heap's wait in this step (scav_hold_delay: more
	 * than scavenge_delay_ms while the hold is in force); returns bytes
	 * released. Set once, before start. */
	size_t (*sweep)(uint32_t now, uint32_t min_age, int heap_busy, uint32_t hold_ms);
	/* The API layer's live file (live.h): called by the thread at every
	 * wake, after the step, with the word it sleeps on, which publish may
	 * point at a word of its own (process-shared); returns the longest the
	 * thread may sleep now (ns; 0: no bound). Its CPU time counts in cpu_ns
	 * but not in the pacing. May be set at any time (atomic). */
	uint64_t (*publish)(uint32_t **wake_word);

	/* memory_limit=auto. The cgroup is looked for at the first configure
	 * that asks for auto (under release_lock; cgroup_found set after it,
	 * release) and kept; the figures of the last read are atomics, written
	 * under release_lock by configure and the thread. cgroup_root is the
	 * prefix of the cgroup files (NULL: the machine's; a test's fake tree),
	 * set before that configure. */
	const char *cgroup_root;
	int cgroup_found;
	struct pa_cgroup cgroup;
	size_t cgroup_max;       /* its limit in force at the last read, 0: none */
	size_t cgroup_from;      /* cgroup.dir[0, cgroup_from): the directory whose limit binds */
	size_t cgroup_other;     /* its unreclaimable charge outside the heaps then */
	int pressure;            /* PSI some avg10 in hundredths of %, -1: not read */
	uint64_t cgroup_read_ns; /* the thread's last read (the thread's) */

	/* Statistics (atomics). */
	uint64_t released_bytes;    /* released over the process's life */
	uint64_t releases;          /* madvise calls */
	uint64_t cpu_ns;            /* CPU time of the background thread */
	uint64_t limit_overruns;    /* over the limit with nothing left to release */
	uint64_t failed_releases;   /* madvise refused */
	uint64_t collapse_failures; /* MADV_COLLAPSE refused (the heap counts successes) */
	uint64_t collapse_sparse;   /* dense huge pages left alone: too few pages resident */
	uint64_t collapse_waits;    /* collapse steps that waited for a busy program */
};

void scav_init(struct pa_scavenger *s, struct pa_pageheap *heap, struct pa_pagecache_set *caches,
               const struct pa_scav_config *conf);
/* The same over n heaps (1..PA_SCAV_MAX_HEAPS), caches[i] serving heaps[i]
 * (caches may be NULL). */
void scav_init_heaps(struct pa_scavenger *s, struct pa_pageheap *const *heaps,
                     struct pa_pagecache_set *const *caches, unsigned n,
                     const struct pa_scav_config *conf);

/* Start the background thread if enabled and not running. 0 or -1. */
int scav_start(struct pa_scavenger *s);
/* Stop it and wait for it. */
void scav_stop(struct pa_scavenger *s);
/* Apply a new configuration (limit, pacing, enable) to a live scavenger. */
void scav_configure(struct pa_scavenger *s, const struct pa_scav_config *conf);

/*
 * Release up to `bytes` (0: everything) of free memory, highest addresses
 * first, now, in the calling thread. force: any free run, even one that
 * splits a huge page, regardless of scavenge_delay_ms. Returns bytes released.
 */
size_t scav_release(struct pa_scavenger *s, size_t bytes, int force);

/* memory_limit=auto: read the cgroup's files now and set the limit from
 * them (what the thread does every second); nothing once auto is off. */
void scav_follow_cgroup(struct pa_scavenger *s);

/*
 * Whether the program was busy over a window of wall_ns: its threads other
 * than the scavenger's took more than SCAV_BUSY_FAULTS_PER_S page faults a
 * second (faults of them), or ran on all the ncpus CPUs it may use but
 * half of one (cpu_ns of CPU time). A collapse then waits: MADV_COLLAPSE
 * holds the address space for writing while it copies a huge page (1-5
 * ms), so every fault of every thread waits for it, and its copy takes a
 * CPU the program was using.
 */
#define SCAV_BUSY_FAULTS_PER_S 1000u
static inline int scav_program_busy(uint64_t wall_ns, uint64_t cpu_ns, uint64_t faults,
                                    unsigned ncpus)
{
	if (wall_ns == 0)
		return 0;
	if (faults * 1000000000u > (uint64_t)SCAV_BUSY_FAULTS_PER_S * wall_ns)
		return 1;
	return ncpus != 0 && cpu_ns * 2 >= (2 * (uint64_t)ncpus - 1) * wall_ns;
}

/* Whether a collapse can run at all: thp= is not off and the machine has
 * huge pages the kernel backs on request (MADV_COLLAPSE or a hint). Where
 * not, the thread takes no look at whether the program is busy. */
int scav_collapse_possible(const struct pa_scavenger *s);

/* Whether the thread's collapse step, due, may run at now (ns): the
 * program was not busy over the last window, or collapses have waited
 * SCAV_COLLAPSE_WAIT_NS (4 s) for it; then one step runs and they wait
 * again. A step that waits counts in collapse_waits. */
int scav_collapse_may_run(struct pa_scavenger *s, int busy, uint64_t now);

/* The retained goal: free resident memory up to 1/SCAV_RETAIN_SHARE of the
 * pages in use, plus a chunk, is what a steady heap keeps (scav_shrinking). */
#define SCAV_RETAIN_SHARE 8u
/* The hold's band past that goal (scav_hold_delay). */
#define SCAV_HOLD_BYTES ((size_t)32 << 20)

/* Is free_bytes of free memory, against inuse_bytes in use, within what a
 * steady heap frees and soon takes back (the hold: an eighth of what is in
 * use plus 32 MiB)? The page heap's free resident pages (scav_hold_delay)
 * and the free objects inside spans (sweep.h) are held to it alike. */
static inline int scav_within_hold(size_t free_bytes, size_t inuse_bytes)
{
	return free_bytes <= inuse_bytes / SCAV_RETAIN_SHARE + SCAV_HOLD_BYTES;
}

/*
 * The age free memory must reach before the background's page heap step
 * releases it, for a configured delay of delay_ms: delay_ms, or four times
 * it (an hour at most) while the heaps' free resident memory is within the
 * hold (an eighth of the pages in use plus 32 MiB) and has not been past it
 * since the pages in use last grew by 32 MiB. A heap that idles a few
 * seconds between bursts keeps what it will take back (a release taken back
 * costs a fault a page); one that shrank gives its memory up at delay_ms,
 * to the last page. The thread's (it keeps the state), and tests'.
 */
uint32_t scav_hold_delay(struct pa_scavenger *s, uint32_t delay_ms);

/* One background step, for tests: release at most one candidate that has
 * been free for min_age epochs. Returns pages released. */
size_t scav_step(struct pa_scavenger *s, uint32_t min_age);

/*
 * One collapse step, for tests and the thread: back with a huge page each
 * dense huge page (pageheap_collapse_find_locked, at least 15/16 of its
 * heap pages allocated and none released) of the next chunk that has any,
 * if at least 15/16 of its OS pages are resident already (mincore: a huge
 * page never costs more than 1/16 of it in new resident memory), with the
 * heap lock dropped for the madvise. Returns huge pages collapsed (or
 * hinted, PA_THP_STATE_HINT). Needs hp_pages and thp_state set.
 */
size_t scav_collapse_step(struct pa_scavenger *s);

/* Apply what the thread found of the machine (os_thp_read) and of the
 * configuration to s and its heaps; the thread calls it when it starts,
 * tests with a made-up machine. */
struct os_thp;
void scav_thp_setup(struct pa_scavenger *s, const struct os_thp *machine);

/* After fork, in the child: the thread is gone; locks are reset. */
void scav_after_fork_child(struct pa_scavenger *s);

#endif
