/*
 * scav_bench.c — how fast free memory goes back to the OS, and what the
 * background scavenger costs.
 *
 * Four configurations, each measured in a fresh process (this program
 * re-executes itself with --child) so every run starts from an empty heap:
 *
 *   bg1    the background scavenger at its steady-heap pacing
 *          (scavenge_percent=1, scavenge_burst_percent=1: no burst)
 *   bgdef  the defaults: 1%, rising to scavenge_burst_percent (10) while free
 *          resident memory exceeds the pages in use, as here (all freed)
 *   bg100  the background scavenger at scavenge_percent=100
 *   sync   pa_scavenge(0) in the calling thread (scavenger=off)
 *
 * A run touches N MiB (one pa_pages_alloc, every 4 KiB page written), frees
 * it, and measures until heap_released has grown by N MiB: polled with
 * pa_stats every millisecond for the background configurations, one call for
 * sync. Reported: the time and how much of it passed before the first page
 * went (the background thread polls for work every 100 ms when idle; a free
 * does not wake it), throughput (MiB/s), the releasing thread's CPU time
 * (pa_stats scavenger_cpu_ns; for sync the caller's CLOCK_THREAD_CPUTIME_ID)
 * as a share of one CPU over the run, and RSS
 * before and after from /proc/self/smaps_rollup (the OS's view). The
 * background runs use scavenge_delay_ms=0, so the figure is the pacing's and
 * not the default 1 s delay's.
 *
 * The driver alternates the configurations (bg1, bgdef, bg100, sync, ...),
 * --reps times each (default 5), and prints the medians as a Markdown table.
 *
 *   scav-bench [--mib N] [--reps R]
 *   scav-bench --child bg1|bgdef|bg100|sync N  (one run; one line on stdout)
 *
 * Build (CMake does not build it yet), from the repository root:
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc bench/scav_bench.c src/[star].c
 *       -pthread -o scav-bench
 * ([star] being *: a comment cannot hold the glob.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pagealloc.h"

#define MiB ((size_t)1 << 20)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

static size_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	if (f == NULL)
		return 0;
	char line[256];
	size_t kb = 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Rss: %zu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

static struct pa_stats stats(void)
{
	struct pa_stats s;
	pa_stats(&s);
	return s;
}

/* ---- one run (child process) ---------------------------------------------- */

struct result {
	double secs, mibps, cpu_pct;
	double first_s; /* until the first page was released (background: its idle poll) */
	double rss_before_mib, rss_after_mib;
	unsigned long long calls;
};

static int child(const char *mode, size_t mib)
{
	int sync = strcmp(mode, "sync") == 0;
	if (sync)
		setenv("PAGEALLOC_CONF", "scavenger=off", 1);
	else if (strcmp(mode, "bg1") == 0)
		setenv("PAGEALLOC_CONF",
		       "scavenge_percent=1,scavenge_burst_percent=1,scavenge_delay_ms=0", 1);
	else if (strcmp(mode, "bgdef") == 0)
		setenv("PAGEALLOC_CONF", "scavenge_delay_ms=0", 1);
	else if (strcmp(mode, "bg100") == 0)
		setenv("PAGEALLOC_CONF", "scavenge_percent=100,scavenge_delay_ms=0", 1);
	else
		return 2;

	size_t bytes = mib * MiB, npages = bytes / PA_PAGE_BYTES;
	char *p = pa_pages_alloc(npages);
	if (p == NULL)
		return 3;
	for (size_t off = 0; off < bytes; off += 4096)
		p[off] = 1;
	if (!sync) /* the thread starts on the first heap call: let it settle */
		while (!stats().scavenger_running)
			sleep_us(1000);
	struct pa_stats s0 = stats();
	struct result r = {0};
	r.rss_before_mib = (double)rss_bytes() / MiB;

	double t0 = now_s(), t1;
	pa_pages_free(p, npages);
	if (sync) {
		double c0 = thread_cpu_s();
		size_t released = pa_scavenge(0);
		t1 = now_s();
		r.cpu_pct = (thread_cpu_s() - c0) / (t1 - t0) * 100.0;
		if (released < bytes)
			return 4;
	} else {
		struct pa_stats s;
		do {
			sleep_us(1000);
			s = stats();
			if (r.first_s == 0 && s.heap_released != s0.heap_released)
				r.first_s = now_s() - t0;
		} while (s.heap_released - s0.heap_released < bytes);
		t1 = now_s();
		/* The thread adds a step's CPU time just after the step. */
		sleep_us(5000);
		s = stats();
		r.cpu_pct =
		    (double)(s.scavenger_cpu_ns - s0.scavenger_cpu_ns) * 1e-9 / (t1 - t0) * 100.0;
	}
	struct pa_stats s1 = stats();
	r.secs = t1 - t0;
	r.mibps = (double)mib / r.secs;
	r.rss_after_mib = (double)rss_bytes() / MiB;
	r.calls = (unsigned long long)(s1.release_calls - s0.release_calls);
	printf("%.6f %.3f %.4f %.1f %.1f %llu %.6f\n", r.secs, r.mibps, r.cpu_pct, r.rss_before_mib,
	       r.rss_after_mib, r.calls, r.first_s);
	fflush(stdout);
	return 0;
}

/* ---- the driver ------------------------------------------------------------- */

static int run_child(const char *self, const char *mode, size_t mib, struct result *r)
{
	int fd[2];
	if (pipe(fd) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		char arg[32];
		snprintf(arg, sizeof(arg), "%zu", mib);
		execl(self, self, "--child", mode, arg, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	char buf[256] = {0};
	size_t got = 0;
	ssize_t n;
	while (got < sizeof(buf) - 1 && (n = read(fd[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	close(fd[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "child %s exited with status %d\n", mode, status);
		return -1;
	}
	if (sscanf(buf, "%lf %lf %lf %lf %lf %llu %lf", &r->secs, &r->mibps, &r->cpu_pct,
	           &r->rss_before_mib, &r->rss_after_mib, &r->calls, &r->first_s) != 7)
		return -1;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define MAX_REPS 32

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--child") == 0)
		return child(argv[2], (size_t)strtoull(argv[3], NULL, 10));

	size_t mib = 1024;
	int reps = 5;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--mib") == 0)
			mib = (size_t)strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--reps") == 0)
			reps = atoi(argv[i + 1]);
	}
	if (mib == 0 || reps < 1 || reps > MAX_REPS) {
		fprintf(stderr, "usage: %s [--mib N] [--reps 1..%d]\n", argv[0], MAX_REPS);
		return 2;
	}
	static const char *const modes[] = {"bg1", "bgdef", "bg100", "sync"};
	enum { NMODES = 4 };
	static struct result res[NMODES][MAX_REPS];
	const char *self = "/proc/self/exe";
	for (int rep = 0; rep < reps; rep++) {
		for (int m = 0; m < NMODES; m++) {
			if (run_child(self, modes[m], mib, &res[m][rep]) != 0) {
				fprintf(stderr, "run %s #%d failed\n", modes[m], rep + 1);
				return 1;
			}
			struct result *r = &res[m][rep];
			fprintf(stderr,
			        "%-5s #%d: %8.3f s (first page %.3f s) %9.1f MiB/s cpu %7.3f%% "
			        "rss %.1f -> %.1f MiB, %llu madvise\n",
			        modes[m], rep + 1, r->secs, r->first_s, r->mibps, r->cpu_pct,
			        r->rss_before_mib, r->rss_after_mib, r->calls);
		}
	}
	printf("| config | runs | release time (s) | of which until the first release (s) | "
	       "throughput (MiB/s) | from the first release on (MiB/s) | "
	       "releasing thread's CPU (%% of one core) | RSS before -> after (MiB) | "
	       "madvise calls |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for (int m = 0; m < NMODES; m++) {
		double secs[MAX_REPS], mibps[MAX_REPS], cpu[MAX_REPS], rb[MAX_REPS], ra[MAX_REPS],
		    calls[MAX_REPS], first[MAX_REPS], active[MAX_REPS];
		for (int i = 0; i < reps; i++) {
			secs[i] = res[m][i].secs;
			mibps[i] = res[m][i].mibps;
			cpu[i] = res[m][i].cpu_pct;
			rb[i] = res[m][i].rss_before_mib;
			ra[i] = res[m][i].rss_after_mib;
			calls[i] = (double)res[m][i].calls;
			first[i] = res[m][i].first_s;
			active[i] = (double)mib / (res[m][i].secs - res[m][i].first_s);
		}
		char first_txt[32] = "-"; /* sync: released in the call itself */
		if (strcmp(modes[m], "sync") != 0)
			snprintf(first_txt, sizeof(first_txt), "%.3f", median(first, reps));
		printf("| %s | %d | %.3f | %s | %.1f | %.1f | %.3f | %.1f -> %.1f | %.0f |\n",
		       modes[m], reps, median(secs, reps), first_txt, median(mibps, reps),
		       median(active, reps), median(cpu, reps), median(rb, reps), median(ra, reps),
		       median(calls, reps));
	}
	return 0;
}
