/*
 * stats_print.c — pa_malloc_stats_print: the story of the heap, for people.
 *
 * One report tells how much memory the process holds and why: what the OS
 * sees (/proc/self/status: VmHWM, VmRSS; /proc/self/smaps_rollup: Rss,
 * Anonymous), what the heap holds in the Go runtime's MemStats terms
 * (pa_malloc_stats), seed 000's heapUsage and maxFragmentation, the per-CPU
 * page caches and the scavenger (pa_stats), the difference between RSS and
 * heapUsage, the size classes that hold the most bytes, and the threads
 * that allocated the most (live or exited: threadstats.h).
 *
 * Nothing here allocates or uses stdio: the report is printed at exit, from
 * a signal handler and in preloaded programs whose malloc is this one. Text
 * is formatted into a stack buffer (struct out) that is written to the file
 * descriptor whenever it fills, so a report is a few write(2) calls.
 *
 * With stats_print=on (PAGEALLOC_CONF) the report is printed:
 *  - at exit, by a destructor, if the heap was used (a forked child that
 *    calls exit() reports too, with its own pid; _exit() skips destructors);
 *  - when SIGTERM, SIGINT, SIGHUP or SIGQUIT kills the process, if the
 *    program left that signal's disposition at SIG_DFL: the handler prints,
 *    restores SIG_DFL and raises the signal again. The interrupted thread may
 *    hold the heap's locks, so that report has only the /proc figures.
 * It goes to stats_file ("%p" replaced by the pid, appended to) or, when
 * that is empty or cannot be opened, to standard error.
 */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup.h"
#include "config.h"
#include "msg.h"
#include "os.h"
#include "pagealloc.h"
#include "pages.h"
#include "span.h"
#include "stats_print.h"
#include "tcache.h"
#include "threadstats.h"

/* ---- formatting without stdio --------------------------------------------- */

/* Column where a row's value starts (after two spaces and its label). */
#define VALUE_COL 22
/* Size classes shown, the most bytes first. */
#define TOP_CLASSES 10
/* Threads shown, the most bytes allocated first. */
#define TOP_THREADS 10

struct out {
	int fd;    /* where the text goes, or -1: into mem */
	char *mem; /* with fd -1: mem[0, mem_cap) receives the text, cut at the end */
	size_t mem_cap;
	size_t mem_len;
	size_t len;
	size_t col; /* characters since the last newline, for alignment */
	char buf[2048];
};

static void out_flush(struct out *o)
{
	if (o->fd >= 0) {
		os_write_fd(o->fd, o->buf, o->len);
	} else {
		size_t n = o->mem_cap - o->mem_len < o->len ? o->mem_cap - o->mem_len : o->len;
		memcpy(o->mem + o->mem_len, o->buf, n);
		o->mem_len += n;
	}
	o->len = 0;
}

static void out_strn(struct out *o, const char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i] != '\0'; i++) {
		if (o->len == sizeof(o->buf))
			out_flush(o);
		o->buf[o->len++] = s[i];
		o->col = s[i] == '\n' ? 0 : o->col + 1;
	}
}

static void out_str(struct out *o, const char *s)
{
	out_strn(o, s, (size_t)-1);
}

/* Spaces up to column col (at least one when already there or past it). */
static void out_pad(struct out *o, size_t col)
{
	do
		out_str(o, " ");
	while (o->col < col);
}

/* v in decimal into buf[20] (not NUL-terminated); its length. */
/* v in decimal, right-aligned in width characters (0: no padding). */
static void out_uint_w(struct out *o, uint64_t v, size_t width)
{
	char tmp[20];
	size_t n = msg_format_uint(tmp, v);
	for (size_t i = n; i < width; i++)
		out_str(o, " ");
	out_strn(o, tmp, n);
}

static void out_uint(struct out *o, uint64_t v)
{
	out_uint_w(o, v, 0);
}

/* num / den with two decimals, rounded to nearest (den > 0). */
static void out_fixed2(struct out *o, unsigned __int128 num, uint64_t den)
{
	unsigned __int128 hundredths = (num * 100 + den / 2) / den;
	char tmp[24];
	size_t n = msg_format_uint(tmp, (uint64_t)(hundredths / 100));
	tmp[n++] = '.';
	tmp[n++] = (char)('0' + (unsigned)(hundredths % 100 / 10));
	tmp[n++] = (char)('0' + (unsigned)(hundredths % 10));
	out_strn(o, tmp, n);
}

static void out_mib(struct out *o, uint64_t bytes)
{
	out_fixed2(o, bytes, (uint64_t)1 << 20);
	out_str(o, " MiB");
}

/* "12.34 MiB (12939428 bytes)" */
static void out_mib_bytes(struct out *o, uint64_t bytes)
{
	out_mib(o, bytes);
	out_str(o, " (");
	out_uint(o, bytes);
	out_str(o, " bytes)");
}

static void out_pct(struct out *o, uint64_t part, uint64_t whole)
{
	if (whole == 0) {
		out_str(o, "n/a");
		return;
	}
	out_fixed2(o, (unsigned __int128)part * 100, whole);
	out_str(o, "%");
}

/* Start a row: two spaces, the label, padding to VALUE_COL. */
static void out_row(struct out *o, const char *label)
{
	out_str(o, "  ");
	out_str(o, label);
	out_pad(o, VALUE_COL);
}

/* ---- what /proc says --------------------------------------------------------- */

#define UNKNOWN UINT64_MAX

struct proc_figures {
	char cmd[128];       /* first argument of /proc/self/cmdline */
	uint64_t hwm;        /* VmHWM: peak resident, bytes */
	uint64_t rss;        /* VmRSS */
	uint64_t rollup_rss; /* smaps_rollup Rss */
	uint64_t rollup_anon;
	uint64_t rollup_huge; /* smaps_rollup AnonHugePages */
	uint64_t lifetime_ns; /* since the process started (UNKNOWN if not known) */
};

/* The value of "key:   123 kB" at the start of a line of text, in bytes. */
static uint64_t proc_kb(const char *text, const char *key)
{
	size_t klen = strlen(key);
	for (const char *line = text; *line != '\0';) {
		if (strncmp(line, key, klen) == 0) {
			const char *p = line + klen;
			while (*p == ' ' || *p == '\t')
				p++;
			if (*p < '0' || *p > '9')
				return UNKNOWN;
			uint64_t v = 0;
			for (; *p >= '0' && *p <= '9'; p++)
				v = v * 10 + (uint64_t)(*p - '0');
			return v * 1024;
		}
		while (*line != '\0' && *line != '\n')
			line++;
		if (*line == '\n')
			line++;
	}
	return UNKNOWN;
}

/* Process lifetime from its start time (/proc/self/stat's starttime). */
static uint64_t proc_lifetime_ns(void)
{
	uint64_t ticks = os_start_ticks();
	if (ticks == 0)
		return UNKNOWN;
	unsigned long hz = os_clock_ticks();
	uint64_t start_ns = ticks / hz * 1000000000u + ticks % hz * 1000000000u / hz;
	uint64_t now = os_boot_ns();
	return now > start_ns ? now - start_ns : UNKNOWN;
}

static void proc_read(struct proc_figures *f)
{
	char buf[4096];
	f->cmd[0] = '\0';
	if (os_read_file("/proc/self/cmdline", buf, sizeof(buf)) > 0) {
		size_t n = strnlen(buf, sizeof(f->cmd) - 1);
		memcpy(f->cmd, buf, n);
		f->cmd[n] = '\0';
	}
	f->hwm = f->rss = f->rollup_rss = f->rollup_anon = f->rollup_huge = UNKNOWN;
	if (os_read_file("/proc/self/status", buf, sizeof(buf)) > 0) {
		f->hwm = proc_kb(buf, "VmHWM:");
		f->rss = proc_kb(buf, "VmRSS:");
	}
	if (os_read_file("/proc/self/smaps_rollup", buf, sizeof(buf)) > 0) {
		f->rollup_rss = proc_kb(buf, "Rss:");
		f->rollup_anon = proc_kb(buf, "Anonymous:");
		f->rollup_huge = proc_kb(buf, "AnonHugePages:");
	}
	f->lifetime_ns = proc_lifetime_ns();
}

static void out_known_mib(struct out *o, uint64_t bytes)
{
	if (bytes == UNKNOWN)
		out_str(o, "unknown");
	else
		out_mib(o, bytes);
}

static void print_process(struct out *o, const struct proc_figures *f)
{
	out_str(o, "process\n");
	out_row(o, "peak resident");
	out_known_mib(o, f->hwm);
	out_str(o, "  (VmHWM)\n");
	out_row(o, "resident now");
	out_known_mib(o, f->rss);
	out_str(o, "  (VmRSS)\n");
	out_row(o, "smaps_rollup");
	out_str(o, "Rss ");
	out_known_mib(o, f->rollup_rss);
	out_str(o, ", Anonymous ");
	out_known_mib(o, f->rollup_anon);
	out_str(o, "\n");
	if (f->lifetime_ns != UNKNOWN) {
		out_row(o, "running for");
		out_fixed2(o, f->lifetime_ns, 1000000000u);
		out_str(o, " s\n");
	}
}

/* ---- the heap ------------------------------------------------------------------ */

static const char *cache_mode_name(int mode)
{
	switch (mode) {
	case 0:
		return "off";
	case 1:
		return "per-CPU locks";
	case 2:
		return "restartable sequences";
	default:
		return "unknown";
	}
}

/* One "label  N MiB (N bytes)  note" line. */
static void out_bytes_line(struct out *o, const char *label, size_t bytes, const char *note)
{
	out_row(o, label);
	out_mib_bytes(o, bytes);
	out_str(o, note);
}

static void print_heap(struct out *o, const struct pa_malloc_stats *ms)
{
	out_str(o, "heap (the Go runtime's MemStats terms)\n");
	out_bytes_line(o, "heap_sys", ms->heap_sys, "  mapped from the OS\n");
	out_bytes_line(o, "heap_inuse", ms->heap_inuse, "  pages of spans and large objects\n");
	out_bytes_line(o, "heap_alloc", ms->heap_alloc, "  in live objects\n");
	out_bytes_line(o, "heap_idle", ms->heap_idle, "  free pages, resident or not\n");
	out_bytes_line(o, "heap_released", ms->heap_released, "  free pages returned to the OS\n");
	out_bytes_line(o, "span_released", ms->span_released,
	               "  free 4 KiB pages inside spans returned to the OS\n");
	out_row(o, "live objects");
	out_uint(o, ms->live_objects);
	out_str(o, ", of which large (over 32 KiB) ");
	out_uint(o, ms->large_objects);
	out_str(o, " in ");
	out_mib(o, ms->large_bytes);
	out_str(o, "\n");
	out_row(o, "thread caches");
	out_uint(o, ms->thread_caches);
	out_str(o, ", holding ");
	out_mib_bytes(o, ms->cached_bytes);
	out_str(o, " of free objects (");
	out_mib(o, ms->stashed_bytes);
	out_str(o, " of them in the central stashes); claims ");
	out_mib(o, tcache_claimed());
	out_str(o, " of thread_cache_total ");
	out_mib(o, __atomic_load_n(&pa_conf.thread_cache_total, __ATOMIC_RELAXED));
	out_str(o, "\n");
	out_bytes_line(o, "heapUsage", ms->heap_usage,
	               "  heap_sys - heap_released - span_released\n");
	out_bytes_line(o, "maxFragmentation", ms->max_fragmentation, "  heap_inuse - heap_alloc, ");
	out_pct(o, ms->max_fragmentation, ms->heap_usage);
	out_str(o, " of heapUsage\n");
}

static void print_metadata(struct out *o, const struct pa_stats *s)
{
	out_str(o, "metadata");
	out_pad(o, VALUE_COL);
	out_mib_bytes(o, s->metadata);
	out_str(o, "  page heap bitmaps and summaries, outside heap_sys\n");
	size_t mapped, released, live;
	span_meta_stats(&mapped, &released, &live);
	out_row(o, "span records");
	out_uint(o, live);
	out_str(o, " live, ");
	out_mib(o, mapped - released);
	out_str(o, " resident of ");
	out_mib(o, mapped);
	out_str(o, " mapped\n");
}

/* The heap profiler (prof.h): what it sampled, what it estimates, and what
 * it costs in memory. */
static void print_profile(struct out *o)
{
	struct pa_prof_stats p;
	pa_prof_stats(&p);
	out_str(o, "heap profile");
	out_pad(o, VALUE_COL);
	out_str(o, pa_prof_active(-1) ? "on" : "off");
	out_str(o, ", a sample per ");
	out_mib(o, __atomic_load_n(&pa_conf.prof_sample, __ATOMIC_RELAXED));
	out_str(o, " allocated (prof_sample)\n");
	if (p.samples_total == 0)
		return;
	out_row(o, "samples");
	out_uint(o, p.samples_live);
	out_str(o, " live of ");
	out_uint(o, p.samples_total);
	out_str(o, " taken, from ");
	out_uint(o, p.sites);
	out_str(o, " sites (distinct stacks)\n");
	out_row(o, "estimated");
	out_str(o, "live ");
	out_mib(o, p.inuse_bytes);
	out_str(o, ", allocated ");
	out_mib(o, p.alloc_bytes);
	out_str(o, " since the start\n");
	out_row(o, "its memory");
	out_mib(o, p.meta_bytes);
	out_str(o, " for sites and records (outside heap_sys); ");
	out_mib(o, p.sample_overhead);
	out_str(o, " in the pages of live sampled small blocks beyond their sizes\n");
	if (p.files_written + p.write_errors != 0) {
		out_row(o, "files");
		out_uint(o, p.files_written);
		out_str(o, " written, ");
		out_uint(o, p.write_errors);
		out_str(o, " failed\n");
	}
}

/* The per-node heaps, when the default heap is split (node.h): a line each. */
static void print_numa(struct out *o)
{
	unsigned nodes = pa_numa_nodes();
	struct pa_numa_stats n;
	if (pa_numa_stats(0, &n) != 0 || (nodes == 1 && !n.fake))
		return;
	out_str(o, "NUMA (");
	out_uint(o, nodes);
	out_str(o, nodes == 1 ? " node" : " nodes");
	if (n.fake)
		out_str(o, ", pretend ones: numa_fake");
	out_str(o, ")\n");
	for (unsigned i = 0; i < nodes && pa_numa_stats(i, &n) == 0; i++) {
		char label[16] = "node ";
		size_t len = 5;
		if (i >= 10)
			label[len++] = (char)('0' + i / 10);
		label[len] = (char)('0' + i % 10);
		out_row(o, label);
		out_uint(o, n.cpus);
		out_str(o, n.cpus == 1 ? " CPU, " : " CPUs, ");
		if (n.bound_node >= 0) {
			out_str(o, "memory of node ");
			out_uint(o, (uint64_t)n.bound_node);
		} else {
			out_str(o, "no policy");
		}
		out_str(o, ": ");
		out_mib(o, n.heap_mapped);
		out_str(o, " mapped, ");
		out_mib(o, n.heap_inuse);
		out_str(o, " in use, ");
		out_mib(o, n.heap_released);
		out_str(o, " released; caches ");
		out_mib(o, n.cache_free);
		out_str(o, " free, ");
		out_uint(o, n.cache_refills);
		out_str(o, " refills");
		if (n.mpol_failures != 0) {
			out_str(o, "; ");
			out_uint(o, n.mpol_failures);
			out_str(o, " arenas the kernel refused a policy");
		}
		out_str(o, "\n");
	}
}

/* Huge pages: the configuration, the machine's mode, what the scavenger did
 * (pa_stats' thp_state) and the kernel's own count beside ours. */
static void print_huge(struct out *o, const struct pa_stats *s, uint64_t kernel_huge)
{
	static const char *const conf_names[] = {"off", "auto", "always"};
	static const char *const machine_names[] = {"never", "madvise", "always"};
	static const char *const doing[] = {
	    "not yet (the scavenger thread has not started)",
	    "nothing (thp=off)",
	    "nothing: the machine's transparent huge pages are \"never\"; the heap runs on "
	    "4 KiB pages",
	    "collapsing dense 2 MiB regions from the scavenger thread (MADV_COLLAPSE)",
	    "asking for huge pages on dense 2 MiB regions (MADV_HUGEPAGE; this kernel has no "
	    "MADV_COLLAPSE)",
	    "nothing: this kernel has no MADV_COLLAPSE and its THP defrag setting would stall "
	    "page faults",
	    "nothing: the process turned transparent huge pages off (prctl PR_SET_THP_DISABLE; "
	    "redis-server does where the machine's THP is \"always\", unless disable-thp is no)",
	};
	struct os_thp m;
	os_thp_read(&m);
	size_t conf = __atomic_load_n(&pa_conf.thp, __ATOMIC_RELAXED);
	out_str(o, "huge pages\n");
	out_row(o, "mode");
	out_str(o, "thp=");
	out_str(o, conf < 3 ? conf_names[conf] : "?");
	out_str(o, "; the machine's THP: ");
	out_str(o, machine_names[m.mode]);
	out_str(o, "\n");
	out_row(o, "doing");
	out_str(o, s->thp_state >= 0 && s->thp_state < 7 ? doing[s->thp_state] : "?");
	out_str(o, "\n");
	out_row(o, "backed");
	out_mib(o, s->huge_bytes);
	out_str(o, " of the heap (");
	out_pct(o, s->huge_bytes, s->heap_mapped - s->heap_released);
	out_str(o, " of its resident pages); the kernel's AnonHugePages ");
	out_known_mib(o, kernel_huge);
	out_str(o, " (the whole process)\n");
	out_row(o, "events");
	out_uint(o, s->huge_collapses);
	out_str(o, " collapses, ");
	out_uint(o, s->huge_splits);
	out_str(o, " split, ");
	out_uint(o, s->huge_freed);
	out_str(o, " released whole, ");
	out_uint(o, s->collapse_failures);
	out_str(o, " collapses refused, ");
	out_uint(o, s->collapse_waits);
	out_str(o, " waits for a busy program\n");
}

/* Where memory_limit comes from: memory_limit=SIZE, or auto's cgroup, its
 * limit file, what the limit leaves out, and the pressure. */
static void print_limit_source(struct out *o, const struct pa_stats *s)
{
	if (!s->memory_limit_auto) {
		if (s->memory_limit != 0)
			out_str(o, " (memory_limit=SIZE)");
		return;
	}
	char file[PA_CGROUP_PATH_MAX];
	if (s->cgroup_version == 0 || pages_memory_limit_file(file) != 0) {
		out_str(o, " (auto: no memory cgroup found)");
		return;
	}
	out_str(o, s->cgroup_version == 2 ? " (auto from cgroup v2 " : " (auto from cgroup v1 ");
	out_str(o, file);
	if (s->cgroup_limit == 0) {
		out_str(o, ": no limit)");
		return;
	}
	out_str(o, " ");
	out_mib(o, s->cgroup_limit);
	out_str(o, " less a sixteenth and ");
	out_mib(o, s->cgroup_other);
	out_str(o, " not heap nor page cache; memory pressure ");
	if (s->memory_pressure < 0)
		out_str(o, "not read)");
	else {
		out_fixed2(o, (unsigned)s->memory_pressure, 100);
		out_str(o, "% (some avg10))");
	}
}

static void print_pages(struct out *o, const struct pa_stats *s, uint64_t lifetime_ns)
{
	out_str(o, "per-CPU page caches (");
	out_str(o, cache_mode_name(s->cache_mode));
	if (s->cache_mode != 0) {
		out_str(o, ", ");
		out_uint(o, s->cache_cpus);
		out_str(o, " CPUs");
	}
	out_str(o, ")\n");
	out_row(o, "free");
	out_mib(o, s->cache_free);
	out_str(o, ", queued to go back ");
	out_mib(o, s->cache_queued);
	out_str(o, "\n");
	out_row(o, "traffic");
	out_uint(o, s->cache_refills);
	out_str(o, " refills of 64 pages, ");
	out_uint(o, s->cache_drains);
	out_str(o, " drains\n");
	print_numa(o);

	out_str(o, "scavenger\n");
	out_row(o, "thread");
	if (s->scavenger_running)
		out_str(o, "running\n");
	else if (__atomic_load_n(&pa_conf.scavenger, __ATOMIC_RELAXED))
		out_str(o, "not started: no page has gone back to the heap, which has not grown\n");
	else
		out_str(o, "off\n");
	out_row(o, "released");
	out_mib(o, s->released_total);
	out_str(o, " over the process's life, in ");
	out_uint(o, s->release_calls);
	out_str(o, " madvise calls\n");
	out_row(o, "CPU");
	out_fixed2(o, s->scavenger_cpu_ns, 1000000u);
	out_str(o, " ms");
	if (lifetime_ns != UNKNOWN) {
		out_str(o, ", ");
		out_pct(o, s->scavenger_cpu_ns, lifetime_ns);
		out_str(o, " of one CPU over the process's life");
	}
	out_str(o, "\n");
	out_row(o, "memory_limit");
	if (s->memory_limit == 0)
		out_str(o, "none");
	else
		out_mib(o, s->memory_limit);
	print_limit_source(o, s);
	if (s->memory_limit != 0) {
		out_str(o, "; ");
		out_uint(o, s->limit_overruns);
		out_str(o, " allocations found nothing left to release");
	}
	out_str(o, "\n");
	if (s->memory_limit_hard != 0) {
		out_row(o, "memory_limit_hard");
		out_mib(o, s->memory_limit_hard);
		out_str(o, ", ");
		out_uint(o, s->hard_limit_refusals);
		out_str(o, " growths refused\n");
	}
}

/* What RSS is made of, as far as the heap can tell. */
static void print_rss_vs_heap(struct out *o, uint64_t rss, uint64_t heap_usage)
{
	if (rss == UNKNOWN)
		return;
	out_str(o, "OS sees RSS ");
	out_mib(o, rss);
	out_str(o, "; heap resident (heapUsage) ");
	out_mib(o, heap_usage);
	if (rss >= heap_usage) {
		out_str(o, "; the rest ");
		out_mib(o, rss - heap_usage);
		out_str(o, " is code, stacks, libc, allocator metadata and other mappings\n");
	} else {
		out_str(o, "; heapUsage exceeds RSS by ");
		out_mib(o, heap_usage - rss);
		out_str(o, ": heap pages mapped but never touched are not resident yet\n");
	}
}

/* Ranks class a before class b: more live bytes, then more pages. */
static int class_before(const struct pa_class_stats *a, const struct pa_class_stats *b)
{
	return a->bytes != b->bytes ? a->bytes > b->bytes : a->pages > b->pages;
}

static void print_top_classes(struct out *o, const struct pa_malloc_stats *ms)
{
	size_t top[TOP_CLASSES], n = 0;
	for (size_t cls = 1; cls < ms->nclasses; cls++) {
		const struct pa_class_stats *c = &ms->classes[cls];
		if (c->spans == 0 && c->objects == 0)
			continue;
		size_t i = n < TOP_CLASSES ? n++ : TOP_CLASSES;
		while (i > 0 && class_before(c, &ms->classes[top[i - 1]])) {
			if (i < TOP_CLASSES)
				top[i] = top[i - 1];
			i--;
		}
		if (i < TOP_CLASSES)
			top[i] = cls;
	}
	if (n == 0) {
		out_str(o, "size classes: no small objects\n");
		return;
	}
	out_str(o, "top size classes by bytes (live / span = how full their spans are; partial: "
	           "spans with a free slot,\n  free in partial: the bytes of those slots, what "
	           "moving objects could win back)\n");
	out_str(o, "     size   spans  objects   cached         bytes  live / span  partial  free "
	           "in partial\n");
	for (size_t i = 0; i < n; i++) {
		const struct pa_class_stats *c = &ms->classes[top[i]];
		out_uint_w(o, c->size, 9);
		out_uint_w(o, c->spans, 8);
		out_uint_w(o, c->objects, 9);
		out_uint_w(o, c->cached, 9);
		out_uint_w(o, c->bytes, 14);
		out_str(o, "       ");
		out_pct(o, c->bytes, (uint64_t)c->pages * PA_PAGE_BYTES);
		out_uint_w(o, c->partial_spans, 9);
		out_uint_w(o, (uint64_t)c->partial_free * c->size, 17);
		out_str(o, "\n");
	}
	uint64_t spans = 0, partial, bytes;
	for (size_t cls = 1; cls < ms->nclasses; cls++)
		spans += ms->classes[cls].spans;
	stats_partial_totals(ms, &partial, &bytes);
	out_str(o, "  small spans: ");
	out_uint(o, spans);
	out_str(o, ", ");
	out_uint(o, partial);
	out_str(o, " of them partial, holding ");
	out_mib(o, bytes);
	out_str(o, " of free slots (pa_defrag_frag_bytes: what pa_defrag_move could win back)\n");
}

void stats_partial_totals(const struct pa_malloc_stats *ms, uint64_t *spans, uint64_t *free_bytes)
{
	uint64_t n = 0, bytes = 0;
	for (size_t cls = 1; cls < ms->nclasses; cls++) {
		n += ms->classes[cls].partial_spans;
		bytes += (uint64_t)ms->classes[cls].partial_free * ms->classes[cls].size;
	}
	*spans = n;
	*free_bytes = bytes;
}

/* The threads that allocated the most bytes, and how many were seen. */
struct top_threads {
	struct threadstats_figures top[TOP_THREADS];
	size_t n, live, exited;
};

/* tcache_each_figures's fn: under the registry lock, no lock, no allocation. */
static void top_threads_note(const struct threadstats_figures *f, void *arg)
{
	struct top_threads *t = arg;
	if (f->live)
		t->live++;
	else
		t->exited++;
	size_t i = t->n < TOP_THREADS ? t->n++ : TOP_THREADS;
	while (i > 0 && f->alloc_bytes > t->top[i - 1].alloc_bytes) {
		if (i < TOP_THREADS)
			t->top[i] = t->top[i - 1];
		i--;
	}
	if (i < TOP_THREADS)
		t->top[i] = *f;
}

/* a - b, signed, right-aligned in width characters. */
static void out_diff_w(struct out *o, uint64_t a, uint64_t b, size_t width)
{
	if (a >= b) {
		out_uint_w(o, a - b, width);
		return;
	}
	char tmp[21];
	size_t n = msg_format_uint(tmp + 1, b - a) + 1;
	tmp[0] = '-';
	for (size_t i = n; i < width; i++)
		out_str(o, " ");
	out_strn(o, tmp, n);
}

static void print_threads(struct out *o)
{
	struct top_threads t = {.n = 0};
	struct threadstats_figures others;
	uint64_t others_threads;
	tcache_each_figures(top_threads_note, &t, &others, &others_threads);
	if (t.n == 0 && others_threads == 0) {
		out_str(o, "threads: none with a thread cache\n");
		return;
	}
	out_str(o, "top threads by bytes allocated (usable sizes; held = allocated - freed)\n");
	out_str(o, "       tid  name                 allocated           freed            held  "
	           "state\n");
	for (size_t i = 0; i < t.n; i++) {
		struct threadstats_figures *f = &t.top[i];
		/* a live thread's name as it is now (set after its first malloc) */
		if (f->live)
			os_thread_name_of(f->tid, f->name);
		out_uint_w(o, (uint64_t)f->tid, 10);
		out_str(o, "  ");
		out_str(o, f->name[0] != '\0' ? f->name : "?");
		out_pad(o, 33);
		out_uint_w(o, f->alloc_bytes, 15);
		out_uint_w(o, f->free_bytes, 16);
		out_diff_w(o, f->alloc_bytes, f->free_bytes, 16);
		out_str(o, f->live ? "  live\n" : "  exited\n");
	}
	out_str(o, "  threads: ");
	out_uint(o, t.live);
	out_str(o, " live, ");
	out_uint(o, t.exited + others_threads);
	out_str(o, " exited");
	if (others_threads != 0) {
		out_str(o, " (");
		out_uint(o, others_threads);
		out_str(o, " of them together: allocated ");
		out_uint(o, others.alloc_bytes);
		out_str(o, ", freed ");
		out_uint(o, others.free_bytes);
		out_str(o, ")");
	}
	out_str(o, "\n");
}

/* ---- the report ------------------------------------------------------------- */

enum when { WHEN_CALLED, WHEN_EXIT, WHEN_SIGNAL };

static const char *signal_name(int sig)
{
	switch (sig) {
	case SIGTERM:
		return "SIGTERM";
	case SIGINT:
		return "SIGINT";
	case SIGHUP:
		return "SIGHUP";
	case SIGQUIT:
		return "SIGQUIT";
	default:
		return "a signal";
	}
}

/* The whole report into o. With when == WHEN_SIGNAL only what needs no lock. */
static void report_to(struct out *o, enum when when, int sig)
{
	struct proc_figures f;
	proc_read(&f);
	out_str(o, "==== pagealloc: the story of the heap of pid ");
	out_uint(o, (uint64_t)os_getpid());
	out_str(o, " (");
	out_str(o, f.cmd[0] != '\0' ? f.cmd : "?");
	out_str(o, ")");
	if (when == WHEN_EXIT) {
		out_str(o, " at exit");
	} else if (when == WHEN_SIGNAL) {
		out_str(o, ", killed by signal ");
		out_uint(o, (uint64_t)sig);
		out_str(o, " (");
		out_str(o, signal_name(sig));
		out_str(o, ")");
	}
	out_str(o, " ====\n");
	print_process(o, &f);
	if (when == WHEN_SIGNAL) {
		out_str(o, "partial: the heap's figures are skipped because a signal interrupted "
		           "the program, which may hold the heap's locks\n");
	} else {
		struct pa_malloc_stats ms;
		struct pa_stats s;
		pa_malloc_stats(&ms);
		pa_stats(&s);
		print_heap(o, &ms);
		print_pages(o, &s, f.lifetime_ns);
		print_huge(o, &s, f.rollup_huge);
		print_metadata(o, &s);
		print_profile(o);
		print_rss_vs_heap(o, f.rss, ms.heap_usage);
		print_top_classes(o, &ms);
		print_threads(o);
	}
	out_str(o, "==== end of the story of pid ");
	out_uint(o, (uint64_t)os_getpid());
	out_str(o, " ====\n");
	out_flush(o);
}

static void report(int fd, enum when when, int sig)
{
	struct out o = {.fd = fd};
	report_to(&o, when, sig);
}

size_t stats_print_render(char *buf, size_t cap)
{
	struct out o = {.fd = -1, .mem = buf, .mem_cap = cap};
	report_to(&o, WHEN_CALLED, 0);
	return o.mem_len;
}

void pa_malloc_stats_print(int fd)
{
	report(fd, WHEN_CALLED, 0);
}

/* ---- stats_print=on: at exit and on fatal signals ---------------------------- */

/* stats_file with every "%p" replaced by the pid, into path[cap]; 0, or -1
 * when it does not fit. */
static int stats_path(char *path, size_t cap)
{
	char pid[20];
	size_t np = msg_format_uint(pid, (uint64_t)os_getpid());
	size_t n = 0;
	for (const char *s = pa_conf.stats_file; *s != '\0'; s++) {
		const char *piece = s;
		size_t len = 1;
		if (s[0] == '%' && s[1] == 'p') {
			piece = pid;
			len = np;
			s++;
		}
		if (n + len >= cap)
			return -1;
		memcpy(path + n, piece, len);
		n += len;
	}
	path[n] = '\0';
	return 0;
}

static void report_to_conf_file(enum when when, int sig)
{
	if (pa_conf.stats_file[0] == '\0') {
		report(2, when, sig);
		return;
	}
	char path[2 * PA_CONF_PATH_MAX];
	int fd = stats_path(path, sizeof(path)) == 0 ? os_open_append(path) : -1;
	if (fd < 0) {
		struct pa_msg m;
		msg_begin(&m);
		msg_str(&m, "stats_file '");
		msg_str(&m, pa_conf.stats_file);
		msg_str(&m, "' cannot be opened; the report goes to standard error");
		msg_end(&m);
		report(2, when, sig);
		return;
	}
	report(fd, when, sig);
	os_close(fd);
}

/* Set by the first report of a fatal signal: a second one (another thread,
 * another signal) only goes on to die. */
static int signal_reported;

static void on_fatal_signal(int sig)
{
	if (!__atomic_exchange_n(&signal_reported, 1, __ATOMIC_ACQ_REL))
		report_to_conf_file(WHEN_SIGNAL, sig);
	os_signal_default_and_raise(sig);
}

/*
 * Install the fatal-signal handlers when stats_print is on. A program linked
 * with libpagealloc that never mentions stats_print in PAGEALLOC_CONF does
 * not get its heap built here; otherwise pa_stats builds it, which loads the
 * configuration. Preloaded, the heap already exists: the first mallocs come
 * before constructors.
 */
__attribute__((constructor)) static void stats_print_init(void)
{
	const char *env = getenv("PAGEALLOC_CONF");
	if (env == NULL || strstr(env, "stats_print") == NULL)
		return;
	struct pa_stats s;
	pa_stats(&s);
	if (!__atomic_load_n(&pa_conf.stats_print, __ATOMIC_RELAXED))
		return;
	static const int fatal[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		os_signal_catch_if_default(fatal[i], on_fatal_signal);
}

__attribute__((destructor)) static void stats_print_fini(void)
{
	if (!__atomic_load_n(&pa_conf.stats_print, __ATOMIC_RELAXED))
		return;
	struct pa_stats s;
	if (pa_stats(&s) != 0 || s.heap_mapped == 0)
		return;
	report_to_conf_file(WHEN_EXIT, 0);
}
