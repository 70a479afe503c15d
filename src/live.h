/*
 * live.h — the heap of a running process, published for `pagealloc stat`.
 *
 * A process on libpagealloc keeps a small file of its heap's figures, as
 * the JVM keeps hsperfdata for jstat: another process of the same user
 * maps it and reads the figures without stopping it, without ptrace and
 * without a signal. The file is
 *
 *     $XDG_RUNTIME_DIR/pagealloc/PID     when that directory is the user's
 *                                        own and private (mode 0700),
 *     /dev/shm/pagealloc-EUID/PID        otherwise;
 *
 * the directory is made 0700 and must be the user's own with no access for
 * others (else no file), the file 0600: only its user and root can read it.
 *
 * Who writes: the scavenger thread, never a signal handler and never a
 * malloc path. It creates the file when it starts (so a short program that
 * never starts it has none, and says nothing to `stat`), fills in its
 * figures once (its story waits for the first reader: a process nobody
 * watches never renders one), and refreshes figures and story
 * (pa_malloc_stats_print's text) whenever a reader asked (request !=
 * served). The thread wakes at least every
 * LIVE_PERIOD_NS while the file exists, which is already its idle rhythm,
 * and a reader wakes it at once. Not refreshing on every wake is what
 * keeps an unwatched process's cost at nothing: a refresh takes every
 * class's lock with cold caches (~50 us measured, docs/design.md).
 *
 * Layout (version LIVE_VERSION; native byte order, which is the reader's):
 *
 *     [0, 192)               struct pa_live_header
 *     [192, LIVE_TEXT_OFF)   LIVE_MAX_FIGURES slots of struct pa_live_figure,
 *                            the first nfigures used: name, value (the file
 *                            names its figures; a reader needs no table)
 *     [LIVE_TEXT_OFF, end)   two text slots of LIVE_TEXT_SLOT bytes: the
 *                            story is rendered into the slot not current,
 *                            then made current under the sequence count
 *
 * Reading (a seqlock): read seq; odd means a write is under way, read
 * again; copy the header, the figures and the current text; read seq
 * again; equal means the copy is whole. A reader asks for fresh figures
 * and a fresh story by adding one to request, then to wake, wakes the
 * thread with FUTEX_WAKE on wake (the thread sleeps on that word while the
 * file exists), and waits for served to reach its request: a millisecond
 * or so; at most LIVE_PERIOD_NS, the thread's next wake, if the futex wake
 * is lost or the reader cannot make one.
 *
 * Cleanup: the file is unlinked at exit (a destructor) by the process that
 * made it; a forked child makes its own when its scavenger starts and
 * never writes the parent's. What a crashed process leaves is stale: the
 * reader knows it by pid and start_ticks (a dead pid, or a pid reused by a
 * process that started later) or because the process no longer maps the
 * file (it exec'd), and unlinks it.
 */
#ifndef PA_LIVE_H
#define PA_LIVE_H

#include <stdint.h>

#define LIVE_MAGIC "PALIVE\0\0" /* 8 bytes */
#define LIVE_VERSION 2u
#define LIVE_FILE_BYTES ((uint32_t)16 << 10)
#define LIVE_PERIOD_NS 100000000u /* 100 ms: the longest a reader waits */
#define LIVE_NAME_BYTES 24u
#define LIVE_MAX_FIGURES 58u

struct pa_live_header {
	char magic[8];         /* LIVE_MAGIC */
	uint32_t version;      /* LIVE_VERSION; a reader refuses another */
	uint32_t header_bytes; /* sizeof(struct pa_live_header) */
	uint64_t file_bytes;   /* LIVE_FILE_BYTES */
	uint64_t pid;          /* the writer's pid */
	uint64_t start_ticks;  /* its start time: /proc/PID/stat field 22 */
	uint64_t seq;          /* odd while the writer writes (below) */
	uint64_t update_ns;    /* CLOCK_REALTIME of the last refresh */
	uint64_t request;      /* readers add one to ask for a refresh */
	uint64_t served;       /* the request the last refresh answered */
	uint32_t nfigures;     /* figure slots used */
	uint32_t figures_off;  /* sizeof(struct pa_live_header) */
	uint32_t text_off;     /* the current text slot */
	uint32_t text_len;     /* its bytes (no NUL) */
	uint64_t story_ns;     /* CLOCK_REALTIME when that text was rendered */
	uint32_t wake;         /* futex word the writer sleeps on: a reader adds
	                        * one after request and wakes it (process-shared
	                        * FUTEX_WAKE), so it is served at once */
	uint32_t pad;
	/* `pagealloc profile PID`: a reader adds one to profile_request (then to
	 * wake, as above); the writer writes the heap profile to the file's
	 * path with ".pb.gz" appended (prof.h), sets profile_status (0, or the
	 * errno) and then profile_served to the request it answered. */
	uint64_t profile_request;
	uint64_t profile_served;
	uint64_t profile_status;
	/* `pagealloc map PID`: the same protocol for the heap map (heapmap.h),
	 * written to the file's path with ".map" appended. */
	uint64_t map_request;
	uint64_t map_served;
	uint64_t map_status;
	uint64_t reserved[5]; /* zero: room for requests to come */
};

struct pa_live_figure {
	char name[LIVE_NAME_BYTES]; /* NUL-padded */
	uint64_t value;
};

#define LIVE_TEXT_OFF                                                                              \
	((uint32_t)sizeof(struct pa_live_header) +                                                 \
	 LIVE_MAX_FIGURES * (uint32_t)sizeof(struct pa_live_figure))
#define LIVE_TEXT_SLOT ((LIVE_FILE_BYTES - LIVE_TEXT_OFF) / 2u)

_Static_assert(sizeof(struct pa_live_header) == 192, "the header is 192 bytes");
_Static_assert(sizeof(struct pa_live_figure) == 32, "a figure is 32 bytes");
_Static_assert(LIVE_TEXT_OFF == 2048, "figures end at 2 KiB");

/* Hand the writer to the scavenger (pages_set_publish). Called by a
 * constructor; exported for tests. */
void live_init(void);

#endif
