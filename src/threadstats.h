/*
 * threadstats.h — what each thread allocated and freed, and the table that
 * keeps the figures of threads that exited.
 *
 * A thread's figures are counted by its thread cache (tcache.h) without a
 * fast-path instruction of their own: the fast paths' per-class counts give
 * the small objects popped and pushed, the slow paths count the rest (a
 * refill's object, a full list's free, large blocks). Sizes are usable
 * sizes (the class size; a large block's pages), for allocations and frees
 * alike, so held = allocated - freed is what the thread's blocks hold;
 * `requested` is what its mallocs asked for (from the heap profile's count,
 * tcache.h), which frees cannot know.
 *
 * When a thread exits, its figures join the exited table: the
 * THREADSTATS_EXITED threads that allocated the most bytes, each on its own,
 * and the others' sums in one row, so the heap's story (stats_print.c) can
 * rank threads that are gone with those that live, in bounded memory.
 *
 * Locking: the table is under the caller's lock (tcache.c's registry lock,
 * which fork handling takes), so this file has none.
 */
#ifndef PA_THREADSTATS_H
#define PA_THREADSTATS_H

#include <stddef.h>
#include <stdint.h>

#define THREADSTATS_EXITED 64
#define THREADSTATS_NAME 16 /* a thread name's bytes with its NUL (prctl) */

struct threadstats_figures {
	uint64_t alloc_count, alloc_bytes; /* blocks handed out, their usable bytes */
	uint64_t free_count, free_bytes;   /* blocks freed by the thread (whoever
	                                    * allocated them), their usable bytes */
	uint64_t requested;                /* bytes its mallocs asked for */
	int tid;                           /* 0: the row of other exited threads */
	int live;                          /* 1: the thread runs */
	char name[THREADSTATS_NAME];
};

/* a's figures added to *sum. */
void threadstats_add(struct threadstats_figures *sum, const struct threadstats_figures *a);

/* Keep f, of a thread that exited: into the table while it has room or f
 * allocated more than the table's least (which then goes to the others'
 * row), else into the others' row. Caller's lock held. */
void threadstats_exited(const struct threadstats_figures *f);

/* fn(figures, arg) for each thread of the table, and its others' row into
 * *others (tid 0; *others_threads: how many threads it sums). Caller's
 * lock held. */
void threadstats_exited_each(void (*fn)(const struct threadstats_figures *f, void *arg), void *arg,
                             struct threadstats_figures *others, uint64_t *others_threads);

#endif
