/*
 * statm.h — the process's resident set from /proc/self/statm, in MiB, for
 * the bench programs that print it beside the heap's own figures (-1 when
 * it cannot be read).
 */
#ifndef PA_BENCH_STATM_H
#define PA_BENCH_STATM_H

#include <stdio.h>
#include <unistd.h>

static inline double statm_rss_mib(void)
{
	unsigned long size, resident;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f == NULL)
		return -1;
	int n = fscanf(f, "%lu %lu", &size, &resident);
	fclose(f);
	if (n != 2)
		return -1;
	return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

#endif
