/*
 * live.c — the live file: the heap's figures and story for `pagealloc stat`
 * (live.h has the layout and the protocol; docs/design.md the reasons).
 *
 * Everything below runs in the scavenger thread (live_publish, through
 * pages_set_publish) except live_fini, the destructor that unlinks the file.
 * Nothing allocates: the figures come from pa_malloc_stats and pa_stats,
 * the story from stats_print_render straight into the mapping, the paths
 * are built in fixed buffers.
 */
#include "live.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "heapmap.h"
#include "msg.h"
#include "os.h"
#include "pagealloc.h"
#include "pages.h"
#include "prof.h"
#include "stats_print.h"

#define LIVE_PATH_MAX 512

/* The figures, in file order; live_figures fills them in this order. */
static const char *const figure_names[] = {
    "heap_sys",
    "heap_inuse",
    "heap_alloc",
    "heap_idle",
    "heap_released",
    "span_released",
    "heap_usage",
    "max_fragmentation",
    "live_objects",
    "large_objects",
    "large_bytes",
    "thread_caches",
    "cached_bytes",
    "stashed_bytes",
    "rss",
    "scavenger_cpu_ns",
    "released_total",
    "release_calls",
    "cache_free",
    "metadata",
    "memory_limit",
    "limit_overruns",
    "updates",
    "stories",
    "partial_spans",
    "partial_free_bytes",
    "huge_bytes",
    "huge_collapses",
    "huge_splits",
    "memory_limit_auto",
    "cgroup_version",
    "cgroup_limit",
    "cgroup_other",
    "memory_pressure",
    "huge_freed",
    "collapse_failures",
    "collapse_waits",
};
#define NFIGURES (sizeof(figure_names) / sizeof(figure_names[0]))
_Static_assert(NFIGURES <= LIVE_MAX_FIGURES, "the figures fit their slots");

/*
 * The writer's state. Only the scavenger thread writes it, except `owner`,
 * which live_fini reads: the pid whose file `path` names, set (release)
 * once path is complete.
 */
static struct {
	int pid;                    /* the process this state was set up for */
	int owner;                  /* pid that made the file at path, 0: none */
	struct pa_live_header *map; /* the file, LIVE_FILE_BYTES mapped shared */
	uint64_t updates, stories;
	struct pa_malloc_stats ms; /* scratch (4.6 KiB: not on the thread's stack) */
	char path[LIVE_PATH_MAX];
} live __attribute__((aligned(4096))); /* its 5.2 KiB on two pages, not three */

/* ---- making the file ------------------------------------------------------- */

/* dst = a + b (+ c), 0; -1 when it does not fit. */
static int path_join(char *dst, const char *a, const char *b, const char *c)
{
	size_t na = strlen(a), nb = strlen(b), nc = c != NULL ? strlen(c) : 0;
	if (na + nb + nc >= LIVE_PATH_MAX)
		return -1;
	memcpy(dst, a, na);
	memcpy(dst + na, b, nb);
	memcpy(dst + na + nb, c != NULL ? c : "", nc);
	dst[na + nb + nc] = '\0';
	return 0;
}

static void format_uint(char *buf, uint64_t v)
{
	buf[msg_format_uint(buf, v)] = '\0';
}

/* dir made if need be, 0700, and the user's own with no access for others:
 * 0, else -1. */
static int private_dir(const char *dir)
{
	if (os_mkdir_private(dir) != 0 && errno != EEXIST)
		return -1;
	return os_dir_private(dir) ? 0 : -1;
}

/* The directory of the live files, into dir: 0, or -1 when none is usable. */
static int live_dir(char *dir)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg != NULL && xdg[0] == '/' && os_dir_private(xdg) &&
	    path_join(dir, xdg, "/pagealloc", NULL) == 0 && private_dir(dir) == 0)
		return 0;
	char uid[24];
	format_uint(uid, (uint64_t)os_getuid());
	if (path_join(dir, "/dev/shm/pagealloc-", uid, NULL) == 0 && private_dir(dir) == 0)
		return 0;
	return -1;
}

static void warn(const char *what, const char *path)
{
	struct pa_msg m;
	int err = errno;
	msg_begin(&m);
	msg_str(&m, "live file ");
	msg_str(&m, path);
	msg_str(&m, ": ");
	msg_str(&m, what);
	msg_str(&m, " (");
	msg_errno(&m, err);
	msg_str(&m, "); `pagealloc stat` cannot read this process (live=off silences this)");
	msg_end(&m);
}

/* Files of processes that are gone: removed by each process that makes its
 * own (as the JVM does with hsperfdata), so the directory holds about as
 * many files as there are processes. A process that exits with _exit or
 * dies of a signal cannot remove its own (2,000 forked children of a test
 * that _exit left 2,000 behind, 16 KiB of tmpfs each). */
struct sweep_arg {
	const char *dir;
	int self;
};

static void sweep_one(const char *name, void *arg)
{
	const struct sweep_arg *a = arg;
	uint64_t pid = 0;
	size_t i = 0;
	for (; name[i] >= '0' && name[i] <= '9' && i < 10; i++)
		pid = pid * 10 + (uint64_t)(name[i] - '0');
	/* PID, or a profile or map written for `pagealloc profile` or
	 * `pagealloc map` (PID.pb.gz..., PID.map). */
	if (i == 0 || (name[i] != '\0' && name[i] != '.') || pid == 0 || pid > INT32_MAX ||
	    (int)pid == a->self)
		return;
	if (os_pid_alive((int)pid))
		return; /* (a pid reused by another program: the reader tells) */
	char path[LIVE_PATH_MAX], slash[2] = "/";
	if (path_join(path, a->dir, slash, name) == 0)
		os_unlink(path);
}

/* Create and map this process's file; live.map stays NULL when it cannot. */
static void live_create(int pid)
{
	char dir[LIVE_PATH_MAX], name[24];
	if (live_dir(dir) != 0) {
		warn("no private directory for it", "directory");
		return;
	}
	name[0] = '/';
	format_uint(name + 1, (uint64_t)pid);
	if (path_join(live.path, dir, name, NULL) != 0)
		return;
	int fd = os_create_private(live.path);
	if (fd < 0 && errno == EEXIST) {
		/* Left by a dead process whose pid this one got, or by this
		 * process before it exec'd: stale. */
		os_unlink(live.path);
		fd = os_create_private(live.path);
	}
	if (fd < 0) {
		warn("cannot be created", live.path);
		return;
	}
	struct sweep_arg sweep = {dir, pid};
	os_dir_each(dir, sweep_one, &sweep);
	struct pa_live_header *h = os_map_file_shared(fd, LIVE_FILE_BYTES);
	os_close(fd);
	if (h == NULL) {
		warn("cannot be mapped", live.path);
		os_unlink(live.path);
		return;
	}
	/* A new file reads as zeros: nothing below races with a reader, who
	 * refuses a file without its magic. */
	h->version = LIVE_VERSION;
	h->header_bytes = (uint32_t)sizeof(*h);
	h->file_bytes = LIVE_FILE_BYTES;
	h->pid = (uint64_t)pid;
	h->start_ticks = os_start_ticks();
	h->nfigures = (uint32_t)NFIGURES;
	h->figures_off = (uint32_t)sizeof(*h);
	h->text_off = LIVE_TEXT_OFF;
	struct pa_live_figure *f = (struct pa_live_figure *)(h + 1);
	for (size_t i = 0; i < NFIGURES; i++)
		strncpy(f[i].name, figure_names[i], LIVE_NAME_BYTES - 1);
	/* The readers are other processes: the stores above must be made
	 * before the magic, which x86's store order gives once the compiler
	 * keeps them in order (a thread fence would be one too many, and
	 * ThreadSanitizer does not take them). */
	__atomic_signal_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, LIVE_MAGIC, sizeof(h->magic));
	live.map = h;
	__atomic_store_n(&live.owner, pid, __ATOMIC_RELEASE);
}

/* ---- refreshing it --------------------------------------------------------- */

/* Resident bytes: /proc/self/statm's second field, in pages. */
static uint64_t rss_bytes(void)
{
	char buf[128];
	if (os_read_file("/proc/self/statm", buf, sizeof(buf)) <= 0)
		return 0;
	const char *p = buf;
	while (*p != ' ' && *p != '\0')
		p++;
	uint64_t pages = 0;
	for (p++; *p >= '0' && *p <= '9'; p++)
		pages = pages * 10 + (uint64_t)(*p - '0');
	return pages * os_page_size();
}

/* The figures, in figure_names' order, into v. */
static void live_figures(uint64_t *v)
{
	struct pa_malloc_stats *ms = &live.ms;
	struct pa_stats s;
	pa_malloc_stats(ms);
	pa_stats(&s);
	uint64_t partial, partial_free;
	stats_partial_totals(ms, &partial, &partial_free);
	const uint64_t all[] = {
	    ms->heap_sys,
	    ms->heap_inuse,
	    ms->heap_alloc,
	    ms->heap_idle,
	    ms->heap_released,
	    ms->span_released,
	    ms->heap_usage,
	    ms->max_fragmentation,
	    ms->live_objects,
	    ms->large_objects,
	    ms->large_bytes,
	    ms->thread_caches,
	    ms->cached_bytes,
	    ms->stashed_bytes,
	    rss_bytes(),
	    s.scavenger_cpu_ns,
	    s.released_total,
	    s.release_calls,
	    s.cache_free,
	    s.metadata,
	    s.memory_limit,
	    s.limit_overruns,
	    live.updates,
	    live.stories,
	    partial,
	    partial_free,
	    s.huge_bytes,
	    s.huge_collapses,
	    s.huge_splits,
	    (uint64_t)s.memory_limit_auto,
	    (uint64_t)s.cgroup_version,
	    s.cgroup_limit,
	    s.cgroup_other,
	    s.memory_pressure < 0 ? UINT64_MAX : (uint64_t)s.memory_pressure,
	    s.huge_freed,
	    s.collapse_failures,
	    s.collapse_waits,
	};
	_Static_assert(sizeof(all) / sizeof(all[0]) == NFIGURES, "a value per figure");
	memcpy(v, all, sizeof(all));
}

/* One refresh: the figures, and with story a new text. */
static void live_refresh(struct pa_live_header *h, int story)
{
	uint64_t v[NFIGURES];
	live.updates++;
	live.stories += (uint64_t)story;
	live_figures(v);
	uint32_t off = h->text_off, len = 0;
	if (story) {
		/* Into the slot that is not current: readers copy the other. */
		off = off == LIVE_TEXT_OFF ? LIVE_TEXT_OFF + LIVE_TEXT_SLOT : LIVE_TEXT_OFF;
		len = (uint32_t)stats_print_render((char *)h + off, LIVE_TEXT_SLOT);
	}
	uint64_t seq = h->seq;
	/* Each store after the odd count is a release store (on x86 a plain
	 * one): a reader that sees one of them sees the count odd too. */
	__atomic_store_n(&h->seq, seq + 1, __ATOMIC_RELAXED);
	struct pa_live_figure *f = (struct pa_live_figure *)(h + 1);
	for (size_t i = 0; i < NFIGURES; i++)
		__atomic_store_n(&f[i].value, v[i], __ATOMIC_RELEASE);
	uint64_t now = os_realtime_ns();
	__atomic_store_n(&h->update_ns, now, __ATOMIC_RELEASE);
	if (story) {
		__atomic_store_n(&h->text_off, off, __ATOMIC_RELEASE);
		__atomic_store_n(&h->text_len, len, __ATOMIC_RELEASE);
		__atomic_store_n(&h->story_ns, now, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&h->seq, seq + 2, __ATOMIC_RELEASE);
}

/* A reader's request for a file beside this process's (its directory is
 * the user's, 0700), from which the reader moves it where it was asked:
 * when *request moved past *served, writer(PATH SUFFIX), then *status (0,
 * or the errno) and *served. This thread holds no lock of the allocator
 * here; writing a profile allocates nothing (prof.h), and the heap map's
 * walk takes the central and heap locks chunk by chunk (heapmap.h). */
static void live_answer(uint64_t *request, uint64_t *served, uint64_t *status, const char *suffix,
                        int (*writer)(const char *path))
{
	uint64_t req = __atomic_load_n(request, __ATOMIC_ACQUIRE);
	if (req == *served)
		return;
	char path[LIVE_PATH_MAX];
	uint64_t st = EINVAL;
	if (path_join(path, live.path, suffix, NULL) == 0)
		st = writer(path) == 0 ? 0 : (uint64_t)errno;
	__atomic_store_n(status, st, __ATOMIC_RELAXED);
	__atomic_store_n(served, req, __ATOMIC_RELEASE);
}

/*
 * The scavenger's hook: at its first wake in this process make the file
 * (its figures; the story waits for the first reader, so a process
 * nobody watches never runs stats_print.c nor touches the text slots'
 * pages), then refresh both whenever a reader asked. From
 * then on the thread sleeps on the file's wake word, which readers wake,
 * and at most LIVE_PERIOD_NS. A wake nobody asked for costs a load.
 * Returns the longest the thread may sleep (0: no file, no bound).
 */
static uint64_t live_publish(uint32_t **wake_word)
{
	int pid = os_getpid();
	if (live.pid != pid) {
		/* First wake here; in a forked child the parent's mapping came
		 * along: let it go (the parent's file is the parent's). */
		if (live.map != NULL)
			os_unmap(live.map, LIVE_FILE_BYTES);
		live.map = NULL;
		__atomic_store_n(&live.owner, 0, __ATOMIC_RELEASE);
		live.pid = pid;
		live.updates = live.stories = 0;
		if (__atomic_load_n(&pa_conf.live, __ATOMIC_RELAXED))
			live_create(pid);
		if (live.map != NULL) {
			live_refresh(live.map, 0);
			*wake_word = &live.map->wake;
		}
		return live.map != NULL ? LIVE_PERIOD_NS : 0;
	}
	struct pa_live_header *h = live.map;
	if (h == NULL)
		return 0;
	uint64_t req = __atomic_load_n(&h->request, __ATOMIC_ACQUIRE);
	if (req != h->served) {
		live_refresh(h, 1);
		__atomic_store_n(&h->served, req, __ATOMIC_RELEASE);
	}
	/* `pagealloc profile PID` and `pagealloc map PID` */
	live_answer(&h->profile_request, &h->profile_served, &h->profile_status, ".pb.gz",
	            prof_dump);
	live_answer(&h->map_request, &h->map_served, &h->map_status, ".map", heapmap_write);
	return LIVE_PERIOD_NS;
}

void live_init(void)
{
	pages_set_publish(live_publish);
}

__attribute__((constructor)) static void live_at_load(void)
{
	live_init();
}

/* At exit the file goes, if this process made it (a forked child that
 * never made its own leaves its parent's alone). */
__attribute__((destructor)) static void live_fini(void)
{
	int owner = __atomic_load_n(&live.owner, __ATOMIC_ACQUIRE);
	if (owner != 0 && owner == os_getpid())
		os_unlink(live.path);
}
