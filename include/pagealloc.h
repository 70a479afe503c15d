/*
 * pagealloc.h — the public interface of libpagealloc.
 *
 * Link with -lpagealloc. Linking does not replace the program's malloc; every
 * name here carries the pa_ prefix.
 *
 * Stage 1 exposes the page heap: runs of 8 KiB pages from an address-ordered
 * first-fit allocator (the Go runtime's 2019 radix-summary design) with
 * per-CPU page caches, its configuration and its statistics.
 */
#ifndef PAGEALLOC_H
#define PAGEALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every function here is exported from libpagealloc.so; everything else in
 * the library is built with -fvisibility=hidden and stays internal. */
#if defined(__GNUC__) || defined(__clang__)
#define PA_API __attribute__((visibility("default")))
#else
#define PA_API
#endif

/* Size of one heap page. Every pa_pages_* address is a multiple of it. */
#define PA_PAGE_BYTES ((size_t)8192)

/*
 * Allocate npages contiguous heap pages (npages * PA_PAGE_BYTES bytes, page
 * aligned, lowest-address first fit). The memory is readable and writable;
 * pages that had been released to the OS read as zero, others hold whatever
 * their last owner left. Returns NULL with errno = ENOMEM when the heap
 * cannot grow, and NULL with errno = EINVAL for npages == 0.
 */
PA_API void *pa_pages_alloc(size_t npages);

/*
 * Free npages pages at p, exactly as returned by pa_pages_alloc (or any
 * sub-run of allocated pages). NULL is ignored. A pointer not from the page
 * heap, a misaligned pointer or a range that is not wholly allocated (double
 * free) prints one line naming the pointer and the fault to stderr and
 * aborts: continuing would corrupt the heap.
 */
PA_API void pa_pages_free(void *p, size_t npages);

/* What the heap looks like, in bytes unless said otherwise. A snapshot taken
 * under the page heap lock: consistent with itself at one instant. */
struct pa_stats {
	size_t heap_reserved;    /* address space reserved from the OS for heap pages */
	size_t heap_mapped;      /* part of it that is heap: committed, usable pages */
	size_t heap_inuse;       /* pages allocated (includes pages held in caches) */
	size_t heap_free;        /* heap_mapped - heap_inuse */
	size_t heap_released;    /* free pages given back to the OS (not resident) */
	size_t metadata;         /* committed bitmap and summary metadata */
	size_t summary_reserved; /* PROT_NONE address space for the summary tree */
	uintptr_t window_base;   /* the address window the heap may occupy */
	size_t window_bytes;
	int window_fallback;    /* 1: narrowed for an address-space limit (ulimit -v) */
	size_t heap_ranges;     /* discontiguous address ranges the heap spans */
	uint64_t grow_count;    /* times the heap grew */
	uint64_t grow_failures; /* growths the OS refused */
	/* Per-CPU page caches. Their pages are inside heap_inuse: cache_free
	 * is what they hold ready to hand out, cache_queued what was freed and
	 * waits to go back to the heap. Read without stopping the caches: each
	 * field is sane, their sum is approximate; pa_cache_flush() first for an
	 * exact picture. */
	int cache_mode;      /* 0 off, 1 per-CPU locks, 2 restartable sequences */
	unsigned cache_cpus; /* CPU ids that have a cache */
	size_t cache_free;
	size_t cache_queued;
	uint64_t cache_refills; /* groups of 64 pages taken from the heap */
	uint64_t cache_drains;  /* batches of queued frees given back */
	/* The scavenger: giving free pages back to the OS. */
	int scavenger_running;        /* the background thread is alive (malloc starts it once
	                               * pages first go back to the heap or the heap grows a
	                               * second time; pa_pages_alloc and pa_pages_free at once) */
	uint64_t released_total;      /* bytes released over the process's life */
	uint64_t release_calls;       /* madvise calls that did it */
	uint64_t scavenger_cpu_ns;    /* CPU time the background thread used */
	size_t memory_limit;          /* 0: none */
	uint64_t limit_overruns;      /* allocations that left resident memory over the
	                               * limit with nothing free left to release */
	size_t memory_limit_hard;     /* heap_mapped's bound, 0: none */
	uint64_t hard_limit_refusals; /* growths it refused */
	/* Huge pages (thp=): the scavenger backs dense 2 MiB regions of the
	 * heap with huge pages (MADV_COLLAPSE) and keeps them whole. The
	 * kernel's own figure for the process is AnonHugePages in
	 * /proc/self/smaps_rollup (the story and the live file show both). */
	int thp_state;              /* 0 thread not started, 1 thp=off, 2 the machine's THP
	                             * is "never", 3 collapsing, 4 MADV_HUGEPAGE hints (no
	                             * MADV_COLLAPSE), 5 none (no MADV_COLLAPSE and THP
	                             * defrag would stall faults), 6 none (the process
	                             * turned THP off: prctl PR_SET_THP_DISABLE) */
	size_t huge_bytes;          /* heap backed by huge pages the scavenger collapsed,
	                             * and not split since */
	uint64_t huge_collapses;    /* huge pages collapsed over the process's life */
	uint64_t huge_splits;       /* collapsed ones a release of part of them split */
	uint64_t huge_freed;        /* collapsed ones released whole */
	uint64_t collapse_failures; /* collapses the kernel refused */
	/* memory_limit=auto: memory_limit follows the process's cgroup (its
	 * limit less a sixteenth, less cgroup_other), read again every second
	 * by the scavenger thread. */
	int memory_limit_auto; /* 1: memory_limit is auto's */
	int cgroup_version;    /* the cgroup's: 2, 1, or 0 (none found, or not auto) */
	size_t cgroup_limit;   /* its memory limit in force, 0: none */
	size_t cgroup_other;   /* what it holds that is neither heap nor page cache */
	int memory_pressure;   /* PSI "some avg10", hundredths of a percent; -1: not read */
	/* Huge pages (above): collapse steps that waited for a busy program
	 * (faulting pages, or keeping all its CPUs busy): a collapse holds the
	 * address space for writing for milliseconds, so it waits, 4 s at most. */
	uint64_t collapse_waits;
};

/* Fill *out with the default heap's counters. Returns 0, or -1 (EINVAL) for NULL. */
PA_API int pa_stats(struct pa_stats *out);

/*
 * NUMA (numa=on, the default, on a machine with more than one memory node;
 * or numa_fake=N): the default heap is one page heap per node, each with
 * its per-CPU page caches, in an address window of its own. A CPU's pages
 * come from its node's heap; a free goes back to the heap that owns the
 * address. pa_stats sums the nodes; pa_numa_stats gives one node's figures.
 */
struct pa_numa_stats {
	int bound_node;        /* the machine's node its arenas prefer (mbind), -1: none */
	int fake;              /* 1: a numa_fake pretend node */
	unsigned cpus;         /* CPU ids whose allocations it serves */
	uintptr_t window_base; /* its address window */
	size_t window_bytes;
	size_t heap_reserved, heap_mapped, heap_inuse, heap_released; /* as pa_stats */
	uint64_t grow_count;
	uint64_t mpol_failures;          /* arenas whose NUMA policy the kernel refused */
	size_t cache_free, cache_queued; /* its per-CPU caches, as pa_stats */
	uint64_t cache_refills, cache_drains;
};

/* How many page heaps the default heap is split into: 1 unless per node. */
PA_API unsigned pa_numa_nodes(void);

/* Fill *out with node's figures (node < pa_numa_nodes(); with one heap,
 * node 0 is the whole heap). 0, or -1 with errno = EINVAL. */
PA_API int pa_numa_stats(unsigned node, struct pa_numa_stats *out);

/* Give every per-CPU cache's pages and queued frees back to the heap. */
PA_API void pa_cache_flush(void);

/*
 * Release free heap memory to the OS now, in the calling thread, highest
 * addresses first: up to `bytes` (rounded up to pages), or with bytes == 0
 * everything free, per-CPU caches included (what malloc_trim(0) will do).
 * Returns the bytes released. Released pages read as zero when next
 * allocated (with release=dontneed, the default).
 */
PA_API size_t pa_scavenge(size_t bytes);

/*
 * Configuration. The same keys are read once, at first use, from the
 * environment variable PAGEALLOC_CONF="key=value,key=value" (jemalloc's
 * MALLOC_CONF style). pa_config_set changes one key; keys that shape the heap
 * (arena_size) take effect only before the first allocation. An unknown key or
 * a bad value prints one warning line, keeps the current value and returns -1
 * with errno = EINVAL. Keys:
 *   arena_size=SIZE   address space reserved per heap growth (default 64M;
 *                     SIZE takes K, M, G suffixes; at least 4M, rounded up
 *                     to 4 MiB; under an address-space limit at most 1/16 of
 *                     it)
 *   percpu_cache=on|off|locked
 *                     per-CPU page caches for runs of 1-15 pages (default on:
 *                     restartable sequences where the kernel and glibc offer
 *                     them, else per-CPU locks; `locked` forces the latter)
 *   scavenger=on|off  background thread returning free memory (default on;
 *                     started when the heap first has work for it)
 *   scavenge_percent=N  its CPU budget in % of one core, 1..100 (default 1)
 *   release=dontneed|free  madvise used to release (default dontneed: RSS
 *                     drops at once; free: the kernel reclaims lazily)
 *   memory_limit=SIZE|auto  soft limit on resident heap memory (default 0:
 *                     none); allocations past it release free memory
 *                     synchronously. auto: the container's, from the
 *                     process's cgroup (memory.max of cgroup v2, v1's
 *                     memory.limit_in_bytes) less a sixteenth and less what
 *                     else the cgroup holds, followed as it changes; while
 *                     the kernel reports memory pressure (PSI) the
 *                     scavenger releases free memory at once
 *   memory_limit_hard=SIZE  hard limit on heap memory mapped (heap_mapped;
 *                     default 0: none): the heap never grows past it (it
 *                     grows 4 MiB at a time); an allocation that needs more
 *                     first gives back the calling thread's cached objects
 *                     and the per-CPU page caches, then fails with ENOMEM
 *   scavenge_burst_percent=N  the budget while free resident memory exceeds
 *                     an eighth of the pages in use plus 4 MiB (a heap that
 *                     shrank), when huge pages of sparse chunks may be split
 *                     too (default 10)
 *   scavenge_delay_ms=N  memory must stay free this long before the
 *                     background thread releases it (default 1000); free
 *                     memory within 32 MiB plus an eighth of the pages in
 *                     use waits four times this (an hour at most), unless
 *                     the heap went past that since it last grew by 32 MiB
 *                     (a heap that shrank gives up every page at N); the
 *                     stashed batches of free objects wait as long
 *   thread_cache=on|off  per-thread object caches in front of the central
 *                     lists (default on; off: every small malloc and free
 *                     takes its class's lock; read at each thread's first
 *                     allocation)
 *   thread_cache_total=SIZE  what all thread caches together may hold: each
 *                     keeps at most this over the number of caches, at
 *                     least 32 KiB (default 16M)
 *   stats_print=on|off  print the heap's story (pa_malloc_stats_print) when
 *                     the process exits (default off; jemalloc's key)
 *   stats_file=PATH   where stats_print writes ("%p" becomes the process id;
 *                     default: standard error)
 *   live=on|off       publish the heap's figures and story in a file that
 *                     `pagealloc stat PID` reads while the process runs
 *                     ($XDG_RUNTIME_DIR/pagealloc/PID, else
 *                     /dev/shm/pagealloc-UID/PID; mode 0600), kept current
 *                     by the scavenger thread, which creates it when it
 *                     starts (default on; scavenger=off means no file)
 *   map_prefix=PATH   write the heap map PATH.PID.map at exit (every page of
 *                     the heap and what it holds, for `pagealloc map`'s
 *                     drawing; default: none)
 *   prof=on|off       sample allocations for heap profiles (default on; see
 *                     pa_prof_dump; off under valgrind and without thread
 *                     caches)
 *   prof_sample=SIZE  mean bytes allocated between two samples (default 512K)
 *   prof_prefix=PATH  write profiles PATH.PID.SEQ.KIND.pb.gz by themselves:
 *                     at exit (KIND final), at each new peak of the sampled
 *                     live heap 10% above the last (peak), every
 *                     prof_interval bytes (interval), on prof_signal
 *                     (signal) (default: none; pa_prof_dump still works)
 *   prof_interval=SIZE  bytes allocated between interval profiles (0: none)
 *   prof_signal=off|SIGUSR1|SIGUSR2|SIGHUP  a signal that writes a profile
 *                     (installed only where the program left it at its
 *                     default; default off)
 *   guard_sample=N    guarded sampling (docs/guarded.md): about one block in
 *                     N (a mean of N * 64 bytes allocated between them) on
 *                     pages of its own against a guard page, so an overflow,
 *                     underflow or use after free faults and is reported in
 *                     one line; 1: every block up to guard_max (default 0,
 *                     off; off under valgrind and without thread caches)
 *   guard_max=SIZE    the largest block guarded (default 64K)
 *   guard_underflow=on|off  every other guarded block starts against the
 *                     guard page before it (default off)
 *   numa=off|on|interleave  on (default): on a machine with more than one
 *                     memory node, one page heap and set of per-CPU page
 *                     caches per node, a CPU's pages from its own node
 *                     (pa_numa_stats); with one node the single heap of off.
 *                     interleave: one heap, its pages spread over every node
 *   numa_fake=N       pretend N nodes (0-8; 0: the machine's), CPU c on node
 *                     c % N: the per-node split on any machine, for tests
 *   thp=off|auto|always  huge pages. auto (default): the scavenger thread
 *                     backs dense 2 MiB regions of the heap with huge pages
 *                     (MADV_COLLAPSE, no lock held; at most 1/16 of such a
 *                     region free and non-resident) and its background
 *                     releases keep them whole; always: that, and every new
 *                     arena asks for huge pages at fault (MADV_HUGEPAGE: a
 *                     fault may compact memory, a sparse region may become
 *                     2 MiB resident); off: neither. Nothing where the
 *                     machine's THP is "never" (pa_stats: thp_state)
 * Scavenger keys take effect at once, also after the first allocation.
 */
PA_API int pa_config_set(const char *key, const char *value);

/* Apply a whole "key=value,key=value" string. Returns the number of entries
 * that were refused (each with its warning line). */
PA_API int pa_config(const char *conf);

/* ---- malloc ---------------------------------------------------------------
 *
 * The malloc family, with the exact behaviour of the glibc that the preload
 * library replaces (Debian 12: glibc 2.36) and of C23 for free_sized:
 *  - every pointer is aligned to 16 bytes (alignof(max_align_t));
 *  - pa_malloc(0) returns a unique pointer that pa_free accepts;
 *  - failure (also an overflowing calloc/reallocarray, or a size near
 *    SIZE_MAX) returns NULL with errno = ENOMEM;
 *  - pa_realloc(p, 0) with p != NULL frees p and returns NULL (glibc);
 *    pa_realloc(NULL, n) is pa_malloc(n);
 *  - pa_posix_memalign returns EINVAL (and leaves *out alone) unless the
 *    alignment is a power of two multiple of sizeof(void *); pa_aligned_alloc
 *    and pa_memalign round any other alignment up to a power of two, as
 *    glibc 2.36 does; alignments up to 1 GiB (and beyond) work;
 *  - pa_free(NULL) does nothing; pa_free preserves errno;
 *  - a pointer this heap did not return, an interior pointer or a double free
 *    prints one line naming the pointer and the fault, then aborts (see
 *    docs/design.md for which faults are always caught).
 */
PA_API void *pa_malloc(size_t size);
PA_API void pa_free(void *p);
PA_API void *pa_calloc(size_t n, size_t size);
PA_API void *pa_realloc(void *p, size_t size);
PA_API void *pa_reallocarray(void *p, size_t n, size_t size);
PA_API void *pa_aligned_alloc(size_t alignment, size_t size);
PA_API int pa_posix_memalign(void **out, size_t alignment, size_t size);
PA_API void *pa_memalign(size_t alignment, size_t size);
PA_API void *pa_valloc(size_t size);          /* aligned to the OS page (4096) */
PA_API void *pa_pvalloc(size_t size);         /* ditto, size rounded up to OS pages */
PA_API size_t pa_malloc_usable_size(void *p); /* 0 for NULL */
PA_API void pa_free_sized(void *p, size_t size);
PA_API void pa_free_aligned_sized(void *p, size_t alignment, size_t size);

/* pa_malloc_usable_size for a binding whose users call another name: a p
 * that is not a live block is reported in the one line under func (a
 * string that lives as long as the program: "Free" for the Go package's
 * Free), "pagealloc: Free(0x...): FAULT", then abort. A func with "free" or
 * "Free" in it calls a block freed already a double free. */
PA_API size_t pa_malloc_usable_size_as(void *p, const char *func);

/* glibc's malloc_trim: give the calling thread's object cache back, release
 * the free 4 KiB pages inside partly used spans (as glibc releases free pages
 * inside its chunks), then free heap memory (keeping `pad` bytes of free
 * pages resident). Returns 1 if memory was released, else 0. */
PA_API int pa_malloc_trim(size_t pad);

/* Hand the calling thread's object cache back to the spans, and the batches
 * that thread caches gave back and the central lists keep for the next
 * refill (the stashes: tcmalloc's transfer caches) too. Other threads'
 * caches are flushed when those threads exit. */
PA_API void pa_thread_cache_flush(void);

/* Size classes: objects up to PA_MALLOC_MAX_SMALL bytes share spans of
 * objects of one class; larger ones are whole runs of pages. */
#define PA_MALLOC_MAX_SMALL ((size_t)32768)
#define PA_MALLOC_MAX_CLASSES 96

struct pa_class_stats {
	size_t size;    /* bytes per object */
	size_t spans;   /* spans of this class */
	size_t pages;   /* their pages */
	size_t objects; /* live objects: returned by malloc and not freed */
	size_t cached;  /* free objects held in thread caches and stashes */
	size_t bytes;   /* objects * size */
	/* Occupancy (pa_defrag_*): spans with a free object, and those free
	 * slots: what a defrag could win back (partial_free * size bytes). */
	size_t partial_spans;
	size_t partial_free;
};

/*
 * The heap as the Go runtime's MemStats describes it (seed 000 uses these),
 * in bytes. Counters are cheap and maintained on slow paths; a figure that
 * depends on thread caches is exact when no other thread is allocating (take
 * it after pa_thread_cache_flush in every thread, or after they exit).
 */
struct pa_malloc_stats {
	size_t heap_sys;          /* heap memory obtained from the OS (mapped) */
	size_t heap_inuse;        /* pages of spans and large objects */
	size_t heap_alloc;        /* bytes in live objects (class size; large: pages) */
	size_t heap_idle;         /* heap_sys - heap_inuse: free pages, resident or not */
	size_t heap_released;     /* free pages returned to the OS */
	size_t live_objects;      /* small and large objects returned and not freed */
	size_t cached_bytes;      /* free objects held in thread caches and stashes */
	size_t heap_usage;        /* heap_sys - heap_released - span_released (seed 000's
	                             heapUsage: the heap's resident memory) */
	size_t max_fragmentation; /* heap_inuse - heap_alloc (seed 000's maxFragmentation) */
	size_t large_objects;     /* live objects larger than PA_MALLOC_MAX_SMALL */
	size_t large_bytes;       /* their pages, in bytes */
	size_t thread_caches;     /* threads that have an object cache */
	size_t span_released;     /* free 4 KiB pages inside spans returned to the OS (part of
	                             heap_inuse; the scavenger's sweep, pa_malloc_trim) */
	size_t stashed_bytes;     /* the part of cached_bytes in the central stashes,
	                             small batches and large blocks of up to 128 KiB
	                             (pa_thread_cache_flush empties them) */
	size_t nclasses;          /* entries of classes[] used (class 0 is unused) */
	struct pa_class_stats classes[PA_MALLOC_MAX_CLASSES];
};

/* Fill *out. Returns 0, or -1 (EINVAL) for NULL. */
PA_API int pa_malloc_stats(struct pa_malloc_stats *out);

/* Write the heap's story, human-readable, to file descriptor fd: the figures
 * of pa_malloc_stats and pa_stats, peak and current resident memory and what
 * /proc/self/smaps_rollup says. Allocates nothing. */
PA_API void pa_malloc_stats_print(int fd);

/*
 * What the calling thread allocated and freed since it started (jemalloc's
 * thread.allocated and thread.deallocated). Bytes are usable sizes (the
 * size class; a large block's pages), for frees as for allocations, so
 * allocated - freed is what the thread's blocks hold now (negative for a
 * thread that frees what others allocate). Counted without a fast-path
 * instruction of their own (docs/design.md). The heap's story ranks the
 * threads, exited ones included, by bytes allocated.
 */
struct pa_thread_stats {
	uint64_t allocated; /* bytes of the blocks it allocated */
	uint64_t freed;     /* bytes of the blocks it freed, whoever allocated them */
	uint64_t requested; /* bytes its allocations asked for */
	uint64_t mallocs;   /* blocks it allocated (a realloc that moves: one) */
	uint64_t frees;     /* blocks it freed (a realloc that moves: one) */
};

/* Fill *out with the calling thread's figures (all 0 for a thread that has
 * no thread cache: thread_cache=off, valgrind). 0, or -1 (EINVAL) for NULL. */
PA_API int pa_thread_stats(struct pa_thread_stats *out);

/* ---- heaps of the program's own --------------------------------------------
 *
 * A heap (mimalloc's mi_heap_t, jemalloc's arenas) holds objects apart from
 * the default heap: counted on their own, under a limit of their own, and
 * freed all at once by pa_heap_destroy in time proportional to the heap's
 * spans and large objects, not its objects. Any thread may allocate from
 * any heap, and pa_free (pa_realloc, pa_malloc_usable_size, free_sized)
 * takes an object of any heap, from any thread. Allocation failure is NULL
 * with errno = ENOMEM, as for pa_malloc; a handle that is not a live heap
 * (destroyed or deleted already) prints one line naming it and aborts.
 * Heap objects are neither sampled for heap profiles nor guarded. At most
 * 4096 heaps exist at once.
 */
typedef struct pa_heap pa_heap_t;

struct pa_heap_stats {
	size_t live_bytes;       /* bytes of live objects (class size; large: pages) */
	size_t live_objects;     /* objects allocated and not freed */
	size_t page_bytes;       /* pages the heap holds (its spans and large
	                          * objects), in bytes: what the limit counts */
	size_t spans;            /* small-object spans */
	size_t large_objects;    /* live objects larger than PA_MALLOC_MAX_SMALL */
	uint64_t allocs;         /* objects allocated over the heap's life */
	uint64_t frees;          /* objects freed one by one */
	size_t limit;            /* pa_heap_set_limit's bytes, 0: none */
	uint64_t limit_failures; /* allocations the limit refused */
};

/* A new, empty heap, or NULL with errno = ENOMEM. */
PA_API pa_heap_t *pa_heap_new(void);
/* pa_malloc, pa_calloc and pa_aligned_alloc (the same alignment rules) in
 * heap h. */
PA_API void *pa_heap_malloc(pa_heap_t *h, size_t size);
PA_API void *pa_heap_calloc(pa_heap_t *h, size_t n, size_t size);
PA_API void *pa_heap_aligned_alloc(pa_heap_t *h, size_t alignment, size_t size);
/* pa_realloc into heap h: p (of any heap, or NULL) stays where it is when it
 * is h's and the new size fits, else its contents move to a new block of h
 * and p is freed. pa_realloc of a heap's object keeps it in its heap. */
PA_API void *pa_heap_realloc(pa_heap_t *h, void *p, size_t size);
/* Free every object of h at once and h with them; their pages go back to
 * the page heap (the scavenger returns them to the OS). A later pa_free of
 * one of them is a foreign pointer (one line, abort). NULL is ignored. */
PA_API void pa_heap_destroy(pa_heap_t *h);
/* h goes; its live objects stay valid and belong to the default heap from
 * now on (mimalloc's mi_heap_delete). NULL is ignored. */
PA_API void pa_heap_delete(pa_heap_t *h);
/* h's counts into *st. 0, or -1 (EINVAL) for st NULL. */
PA_API int pa_heap_stats(pa_heap_t *h, struct pa_heap_stats *st);
/* A hard limit on the pages h holds (page_bytes): an allocation that would
 * pass it returns NULL with errno = ENOMEM and changes nothing else. 0:
 * none (the default). Lowering it below what h holds frees nothing. */
PA_API void pa_heap_set_limit(pa_heap_t *h, size_t bytes);
/* Pin h to a NUMA node: its new spans and large objects take their pages
 * from node's page heap (node < pa_numa_nodes(): numa=on on a machine with
 * several nodes, or numa_fake), whatever CPU allocates; -1 (the default):
 * from the allocating CPU's node. Pages h already holds stay where they
 * are. 0, or -1 with errno = EINVAL for a node that does not exist. */
PA_API int pa_heap_set_numa_node(pa_heap_t *h, int node);

/* ---- defragmentation: giving back memory that survivors pin -----------------
 *
 * After a program frees most of its objects, the few that live on pin their
 * spans: every page that holds one stays resident. The allocator already
 * fills the fullest span of a class first, so new objects go where objects
 * live and sparse spans drain as their objects die. A program that can move
 * its objects (it knows every reference to them: a key-value store, a
 * compacting container) can empty sparse spans at once, moving only the
 * objects that pin one. Redis and Valkey's active defrag asks this of
 * jemalloc pointer by pointer; these are the same calls, safe from any
 * thread. See docs/defrag.md.
 *
 * The rule (pa_defrag_hint): a small block (at most PA_MALLOC_MAX_SMALL
 * bytes) is worth moving when its span has a free slot, no thread cache is
 * carving it, it is at most 12.5% fuller than its class's partial spans on
 * average, and another partial span at least as full exists to move into.
 */

/* 1 when moving p now would help its span drain, else 0; 0 also for what it
 * does not judge: NULL, a large block, a block of a pa_heap_t, a guarded or
 * heap-profile-sampled block. A pointer that is not a live block gets the
 * same one-line report as pa_free (and abort). */
PA_API int pa_defrag_hint(const void *p);
/* When pa_defrag_hint(p) holds: a block of p's size class from the fullest
 * partial span (never a cache's object, never a sparser span), p's bytes
 * copied to it, p freed straight to its span; returns the new block, and the
 * caller updates its references. Otherwise returns p itself. */
PA_API void *pa_defrag_move(void *p);
/* The two halves, for a caller that copies itself (Redis's
 * zmalloc_no_tcache and zfree_no_tcache): a block of n bytes from its
 * class's fullest partial span, bypassing every cache (larger than
 * PA_MALLOC_MAX_SMALL: as pa_malloc); and a free straight to the block's
 * span, bypassing every cache (a large block: as pa_free). */
PA_API void *pa_defrag_malloc(size_t n);
PA_API void pa_defrag_free(void *p);
/* Bytes of the free slots inside partial small spans of the default heap:
 * what moving every worthwhile block could win back at most (Valkey's
 * small-bin fragmentation). Sums pa_malloc_stats's partial_free * size. */
PA_API size_t pa_defrag_frag_bytes(void);
/* The same within heap h: p must be h's (another heap's or the default
 * heap's block: hint 0, move returns p). */
PA_API int pa_heap_defrag_hint(pa_heap_t *h, const void *p);
PA_API void *pa_heap_defrag_move(pa_heap_t *h, void *p);
PA_API void *pa_heap_defrag_malloc(pa_heap_t *h, size_t n);
PA_API void pa_heap_defrag_free(pa_heap_t *h, void *p);

/* ---- heap profiles ---------------------------------------------------------
 *
 * One allocation in about prof_sample bytes (an exponential draw per thread)
 * is sampled with its stack; the samples, weighted back to what they stand
 * for, make a heap profile in pprof's format (gzip-compressed profile.proto,
 * sample types alloc_objects, alloc_space, inuse_objects, inuse_space as Go
 * writes them). Read it with `go tool pprof BINARY FILE`. See
 * docs/heap-profiles.md.
 */

/* Write the heap profile now: to `path`, or with path NULL to
 * PREFIX.PID.SEQ.dump.pb.gz (prof_prefix; "pagealloc" in the working
 * directory when it is unset). Written to a temporary name and renamed, so
 * a file under `path` is whole. 0, or -1 with errno set (and one warning
 * line). */
PA_API int pa_prof_dump(const char *path);

/* Turn sampling on (1) or off (0), or just ask (-1): returns whether it was
 * on. A thread notices within 64 * prof_sample bytes of its allocations. */
PA_API int pa_prof_active(int on);

struct pa_prof_stats {
	size_t samples_live;    /* sampled blocks live now */
	size_t samples_total;   /* sampled since the start */
	size_t sites;           /* distinct stacks seen */
	size_t meta_bytes;      /* memory the profiler mapped for sites and records */
	size_t sample_bytes;    /* pages held by live sampled blocks (each has its own) */
	size_t sample_overhead; /* of them, beyond the blocks' usable sizes: what
	                         * sampling costs in memory (a small block's page) */
	size_t inuse_bytes;     /* estimated live bytes (the profile's inuse_space) */
	size_t alloc_bytes;     /* estimated bytes allocated since the start */
	size_t files_written, write_errors;
};
PA_API void pa_prof_stats(struct pa_prof_stats *st);

#ifdef __cplusplus
}
#endif

#endif
