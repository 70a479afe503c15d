/*
 * fault_cost.c — what this machine charges for a page of memory that comes
 * back from the OS, the price behind every release the scavenger makes.
 *
 * A released page is faulted in again, zeroed, at the next write. Where a
 * fault is cheap (a microsecond or less on bare metal) a release that the
 * program soon undoes costs little; where it is dear (a virtual machine with
 * shadow page tables: every page-table write traps) the refaults of memory
 * released during a short idle can be most of a threaded benchmark's timed
 * work (docs/benchmarks.md §22, rptest). This program prices them, on an
 * anonymous mapping of N MiB, medians of R rounds, each measure from pages
 * just released with MADV_DONTNEED:
 *
 *   touch      the first write to each 4 KiB page: one fault a page
 *   populate   MADV_POPULATE_WRITE of 64 KiB runs, then the writes: the same
 *              kernel work without a fault's entry and exit
 *   release    MADV_DONTNEED of the whole mapping, and of 16 KiB runs (a
 *              call each: what a release of one small free run costs)
 *   huge       the first write to each 4 KiB page of a 2 MiB-aligned
 *              MADV_HUGEPAGE mapping, and the share of it the kernel backed
 *              with huge pages (AnonHugePages): one fault per 2 MiB where it
 *              did, with the fault's compaction where the defrag mode stalls
 *
 *   fault-cost [--mib N] [--reps R]
 *
 * Prints one line per measure, microseconds per 4 KiB page (per call for the
 * 16 KiB releases), and the machine's THP modes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define OS_PAGE ((size_t)4096)
#define HUGE_PAGE ((size_t)2 << 20)
#define POPULATE_RUN ((size_t)64 << 10)
#define SMALL_RELEASE ((size_t)16 << 10)
#define MAX_REPS 99

enum measure { TOUCH, POPULATE, RELEASE, RELEASE_SMALL, HUGE_TOUCH, NMEASURES };

static const char *const names[NMEASURES] = {"touch (a fault a page)", "populate (64 KiB runs)",
                                             "release (whole mapping)", "release (16 KiB runs)",
                                             "huge (MADV_HUGEPAGE)"};
static const char *const units[NMEASURES] = {"us a page", "us a page", "us a page", "us a call",
                                             "us a page"};

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void touch(char *p, size_t n)
{
	for (size_t off = 0; off < n; off += OS_PAGE)
		((volatile char *)p)[off] = 1;
}

/* The mapping's AnonHugePages from /proc/self/smaps, in bytes. */
static size_t anon_huge_bytes(const char *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	if (f == NULL)
		return 0;
	char line[256];
	size_t kb = 0;
	int in = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		else if (in && sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb << 10;
}

static void print_file(const char *label, const char *path)
{
	char buf[128] = "unreadable";
	FILE *f = fopen(path, "r");
	if (f != NULL) {
		if (fgets(buf, sizeof(buf), f) == NULL)
			strcpy(buf, "unreadable");
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
	printf("%-24s %s\n", label, buf);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	size_t mib = 64;
	int reps = 5;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc)
			mib = strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
			reps = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: fault-cost [--mib N] [--reps R]\n");
			return 2;
		}
	}
	if (mib < 2 || reps < 1 || reps > MAX_REPS) {
		fprintf(stderr, "fault-cost: --mib at least 2, --reps 1..%d\n", MAX_REPS);
		return 2;
	}
	size_t n = mib << 20, pages = n / OS_PAGE;
	char *raw =
	    mmap(NULL, n + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *hraw =
	    mmap(NULL, n + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED || hraw == MAP_FAILED) {
		perror("fault-cost: mmap");
		return 1;
	}
	/* Both 2 MiB-aligned, so the two differ only in MADV_HUGEPAGE. */
	char *p = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	char *hp = (char *)(((uintptr_t)hraw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	madvise(p, n, MADV_NOHUGEPAGE);
	madvise(hp, n, MADV_HUGEPAGE);
	int populate_ok = 1;
	double t[NMEASURES][MAX_REPS];
	size_t huge_backed = 0;
	/* Written once first: a first round would pay the host's first touch too. */
	touch(p, n);
	touch(hp, n);
	for (int r = 0; r < reps; r++) {
		madvise(p, n, MADV_DONTNEED);
		double t0 = now_us();
		touch(p, n);
		t[TOUCH][r] = (now_us() - t0) / (double)pages;

		t0 = now_us();
		madvise(p, n, MADV_DONTNEED);
		t[RELEASE][r] = (now_us() - t0) / (double)pages;

		t0 = now_us();
		for (size_t off = 0; off < n && populate_ok; off += POPULATE_RUN)
			populate_ok = madvise(p + off, POPULATE_RUN, MADV_POPULATE_WRITE) == 0;
		touch(p, n);
		t[POPULATE][r] = (now_us() - t0) / (double)pages;

		t0 = now_us();
		for (size_t off = 0; off < n; off += SMALL_RELEASE)
			madvise(p + off, SMALL_RELEASE, MADV_DONTNEED);
		t[RELEASE_SMALL][r] = (now_us() - t0) / (double)(n / SMALL_RELEASE);

		madvise(hp, n, MADV_DONTNEED);
		t0 = now_us();
		touch(hp, n);
		t[HUGE_TOUCH][r] = (now_us() - t0) / (double)pages;
		huge_backed = anon_huge_bytes(hp);
	}
	print_file("THP enabled", "/sys/kernel/mm/transparent_hugepage/enabled");
	print_file("THP defrag", "/sys/kernel/mm/transparent_hugepage/defrag");
	printf("%zu MiB, median of %d rounds\n", mib, reps);
	for (int m = 0; m < NMEASURES; m++) {
		if (m == POPULATE && !populate_ok) {
			printf("%-24s not supported (MADV_POPULATE_WRITE: Linux 5.14)\n", names[m]);
			continue;
		}
		qsort(t[m], (size_t)reps, sizeof(double), cmp_double);
		printf("%-24s %8.3f %s\n", names[m], t[m][reps / 2], units[m]);
	}
	printf("%-24s %zu of %zu MiB in huge pages (the last round)\n", "huge backed",
	       huge_backed >> 20, mib);
	return 0;
}
