/*
 * config.h — the one place configuration lives.
 *
 * Keys come from the environment variable PAGEALLOC_CONF
 * ("key=value,key=value"), read once when the default heap is first used, and
 * from pa_config_set / pa_config. Each key is one row of the table in
 * config.c: name, type, field, help. Bad input warns in one line and keeps
 * the current value. Parsing never allocates.
 */
#ifndef PA_CONFIG_H
#define PA_CONFIG_H

#include <stddef.h>

#include "hidden.h"

#define PA_CONF_PATH_MAX 256
/* memory_limit=auto: no size means it. */
#define PA_MEMORY_LIMIT_AUTO ((size_t)-1)

struct pa_config {
	size_t arena_size;                  /* address space reserved per heap growth */
	size_t percpu_cache;                /* enum pa_cache_mode wanted: off, locked, on (rseq) */
	size_t scavenger;                   /* 0 off, 1 on: the background scavenger thread */
	size_t scavenge_percent;            /* its CPU share, 1..100 (% of one core) */
	size_t release;                     /* 0 MADV_DONTNEED, 1 MADV_FREE */
	size_t memory_limit;                /* bytes, 0: none, PA_MEMORY_LIMIT_AUTO: the
	                                     * container's (scavenger.h) */
	size_t memory_limit_hard;           /* bytes the page heap may map, 0: none */
	size_t scavenge_delay_ms;           /* free this long before background release */
	size_t thread_cache;                /* 1: per-thread object caches; 0: every malloc/free
	                                     * goes to the central lists (read by each thread's
	                                     * first slow path) */
	size_t scavenge_burst_percent;      /* the scavenger's share while the heap shrinks */
	size_t thread_cache_total;          /* bytes all thread caches may hold together: each
	                                     * cache's allowance is this less the others' claims,
	                                     * at least half this over the number of caches
	                                     * (tcache.h) */
	size_t stats_print;                 /* 1: print the heap's story at exit (stats_print.c) */
	char stats_file[PA_CONF_PATH_MAX];  /* where: a path ("%p" becomes the pid); "": stderr */
	size_t prof;                        /* 1: sample allocations for heap profiles (prof.h) */
	size_t prof_sample;                 /* mean bytes between samples */
	size_t prof_interval;               /* bytes allocated between interval profiles; 0: none */
	size_t prof_signal;                 /* 0 none, 1 SIGUSR1, 2 SIGUSR2, 3 SIGHUP: write one */
	char prof_prefix[PA_CONF_PATH_MAX]; /* files PREFIX.PID.SEQ.KIND.pb.gz; "": none written
	                                     * but pa_prof_dump's */
	size_t guard_sample;                /* guarded sampling (guard.h): about one allocation
	                                     * in this many is guarded; 0 off, 1 every one */
	size_t guard_max;                   /* the largest block guarded */
	size_t guard_underflow;             /* 1: every other guarded block starts against the
	                                     * guard page before it, not its end after */
	size_t numa;                        /* enum pa_numa_mode: off, on (per-node heaps where
	                                     * the machine has several nodes), interleave */
	size_t numa_fake;                   /* 0, or pretend nodes (node.h): tests */
	size_t live;                        /* 1: publish the heap's figures in a live file
	                                     * that `pagealloc stat` reads (live.h) */
	char map_prefix[PA_CONF_PATH_MAX];  /* the heap map at exit, PREFIX.PID.map
	                                     * (heapmap.h); "": none */
	size_t thp;                         /* enum pa_thp_conf (scavenger.h): off, auto, always */
};

/* Called after pa_config_set / pa_config changed a key (set by pages.c so a
 * live scavenger sees new values). */
extern void (*config_on_change)(void);

/* The process-wide configuration (the default heap's). Written during
 * initialisation and by pa_config_set; read when the default heap is built. */
extern struct pa_config pa_conf PA_HIDDEN;

/* Apply PAGEALLOC_CONF from the environment (once per call; the default
 * heap calls it once). */
void config_load_env(void);

/* Apply one "key=value,..." string; `source` names it in warnings.
 * Returns the number of refused entries. */
int config_apply(const char *conf, const char *source);

/* Parse a size such as "4096", "64K", "64M", "2G", "1T" (optional "B"/"iB").
 * 0 on success, -1 on a malformed or overflowing value. */
int config_parse_size(const char *s, size_t len, size_t *out);

#endif
