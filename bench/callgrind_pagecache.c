/*
 * callgrind_pagecache.c — instruction counts of the page-cache fast paths.
 *
 * A standalone program (it has its own main: build it as its own executable,
 * do not link it into the bench_* programs). It does N cached 1-page
 * alloc+free pairs through a cache set in the mode asked for, over a real
 * page heap, single-threaded:
 *
 *   callgrind_pagecache rseq|locked|off N [--emulate-rseq]
 *
 * Count with
 *
 *   valgrind --tool=callgrind --toggle-collect=pagecache_alloc \
 *            --toggle-collect=pagecache_free ./callgrind_pagecache rseq 1000000
 *
 * and take two N to cancel the one-off costs (the first refill, heap growth):
 * instructions/op = (Ir(N2) - Ir(N1)) / (N2 - N1).
 *
 * Valgrind 3.19 does not implement the rseq system call (it answers ENOSYS),
 * so under it glibc leaves rseq unregistered (__rseq_size == 0) and
 * pagecache_init falls back from rseq to locked mode; the program prints the
 * mode it got. --emulate-rseq (refused when rseq is really registered) then
 * writes cpu id 0 into this thread's unregistered glibc rseq area and forces
 * the set's mode to rseq: the rseq fast paths execute instruction for
 * instruction as on the real machine, except that nothing can abort them
 * (no kernel involvement), which a single thread at these rates almost never
 * sees anyway. Good for counting instructions only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>

#include "pagecache.h"
#include "pageheap.h"
#include "rseq.h"

static const char *mode_name(enum pa_cache_mode m)
{
	return m == PA_CACHE_RSEQ ? "rseq" : m == PA_CACHE_LOCKED ? "locked" : "off";
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s rseq|locked|off N [--emulate-rseq]\n", argv[0]);
		return 2;
	}
	enum pa_cache_mode want = strcmp(argv[1], "rseq") == 0     ? PA_CACHE_RSEQ
	                          : strcmp(argv[1], "locked") == 0 ? PA_CACHE_LOCKED
	                          : strcmp(argv[1], "off") == 0    ? PA_CACHE_OFF
	                                                           : (enum pa_cache_mode) - 1;
	if ((int)want < 0) {
		fprintf(stderr, "unknown mode %s\n", argv[1]);
		return 2;
	}
	unsigned long n = strtoul(argv[2], NULL, 10);
	int emulate = argc > 3 && strcmp(argv[3], "--emulate-rseq") == 0;

	static struct pa_pageheap h;
	static struct pa_pagecache_set pc;
	if (pageheap_init(&h, NULL) != 0 || pagecache_init(&pc, &h, want) != 0) {
		perror("init");
		return 1;
	}
	const char *how = "";
	if (emulate) {
		if (want != PA_CACHE_RSEQ || pc.mode == PA_CACHE_RSEQ || __rseq_size != 0) {
			fprintf(stderr,
			        "--emulate-rseq: only for rseq mode where rseq is "
			        "unregistered (__rseq_size %u, mode %s)\n",
			        __rseq_size, mode_name(pc.mode));
			return 2;
		}
#if PA_HAVE_RSEQ_COMMIT
		struct rseq *rs = rseq_area();
		rs->cpu_id_start = 0;
		rs->cpu_id = 0;
		pc.mode = PA_CACHE_RSEQ;
		how = " (emulated: unregistered rseq area, cpu_id forced to 0)";
#else
		fprintf(stderr, "--emulate-rseq: no rseq commit in this build\n");
		return 2;
#endif
	}
	fprintf(stderr,
	        "callgrind_pagecache: wanted %s, selected %s%s; __rseq_size %u; %lu pairs\n",
	        mode_name(want), mode_name(pc.mode), how, __rseq_size, n);

	for (unsigned long i = 0; i < n; i++) {
		uintptr_t a = pagecache_alloc(&pc, 1, NULL);
		if (a == 0 || pagecache_free(&pc, a, 1) != PA_PAGE_OK) {
			fprintf(stderr, "alloc/free failed at %lu\n", i);
			return 1;
		}
	}
	struct pa_pagecache_stats s;
	pagecache_stats(&pc, &s);
	fprintf(stderr, "callgrind_pagecache: refills %llu drains %llu\n",
	        (unsigned long long)s.refills, (unsigned long long)s.drains);
	pagecache_destroy(&pc);
	if (pageheap_verify(&h) != 0)
		return 1;
	pageheap_destroy(&h);
	return 0;
}
