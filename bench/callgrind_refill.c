/*
 * callgrind_refill.c — instruction counts of the batch moves between the
 * thread caches and the spans (central_take, give_locked).
 *
 * A standalone program: ROUNDS rounds (default 100) of 4096 64-byte
 * pa_mallocs, all freed, then pa_thread_cache_flush, so every batch comes
 * from the spans (central_take's walk of the span's free objects) and goes
 * back to them (give_locked's walk of the batch), 32 objects a batch:
 *
 *   PAGEALLOC_CONF=prof=off,scavenger=off valgrind --tool=callgrind \
 *       build/callgrind-refill [ROUNDS]
 *   callgrind_annotate --inclusive=yes callgrind.out.PID | grep -E 'central_take|give_locked'
 *
 * docs/design.md (Write after free) quotes what the free-key checks cost
 * there.
 */
#include <stdlib.h>

#include "pagealloc.h"

#define BLOCKS 4096

static void *p[BLOCKS];

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 100;
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < BLOCKS; k++)
			p[k] = pa_malloc(64);
		for (int k = 0; k < BLOCKS; k++)
			pa_free(p[k]);
		pa_thread_cache_flush();
	}
	return 0;
}
