/*
 * threadstats.c — the exited threads' table (threadstats.h).
 */
#include <string.h>

#include "threadstats.h"

/* Under the caller's lock (threadstats.h). */
static struct threadstats_figures exited[THREADSTATS_EXITED];
static size_t nexited;
static struct threadstats_figures others;
static uint64_t others_threads;

void threadstats_add(struct threadstats_figures *sum, const struct threadstats_figures *a)
{
	sum->alloc_count += a->alloc_count;
	sum->alloc_bytes += a->alloc_bytes;
	sum->free_count += a->free_count;
	sum->free_bytes += a->free_bytes;
	sum->requested += a->requested;
}

void threadstats_exited(const struct threadstats_figures *f)
{
	if (nexited < THREADSTATS_EXITED) {
		exited[nexited++] = *f;
		exited[nexited - 1].live = 0;
		return;
	}
	size_t least = 0;
	for (size_t i = 1; i < nexited; i++)
		if (exited[i].alloc_bytes < exited[least].alloc_bytes)
			least = i;
	if (f->alloc_bytes > exited[least].alloc_bytes) {
		threadstats_add(&others, &exited[least]);
		exited[least] = *f;
		exited[least].live = 0;
	} else {
		threadstats_add(&others, f);
	}
	others_threads++;
}

void threadstats_exited_each(void (*fn)(const struct threadstats_figures *f, void *arg), void *arg,
                             struct threadstats_figures *o, uint64_t *o_threads)
{
	for (size_t i = 0; i < nexited; i++)
		fn(&exited[i], arg);
	*o = others;
	*o_threads = others_threads;
}
