/*
 * leaf_switch.c — what pa_free pays when a thread's frees move between the
 * page map's leaves (one per GiB of address space, src/pagemap.h), against
 * frees that stay in one.
 *
 *   leaf-switch MODE N      (MODE: one | alternate | random)
 *
 * Plain malloc and free (run it with the allocator preloaded). It first
 * takes 1 MiB blocks, one 16-byte object after each, until it holds 256
 * 16-byte objects in each of two GiB (the blocks move the heap's frontier
 * across a GiB boundary; they are never written, so they cost address
 * space, not memory), then frees the blocks and times N rounds of
 * free(o[j]); o[j] = malloc(16), where j picks among 256 objects of one GiB
 * (one), among 512 objects of both GiB in turn (alternate: even rounds one,
 * odd rounds the other) or at random among those 512 (random). The 16-byte
 * list hands back the block just freed, so each round frees and reuses
 * o[j]. Prints CPU nanoseconds per round (CLOCK_PROCESS_CPUTIME_ID: time
 * the machine's other work takes is not counted).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PER_LEAF 256
#define GIB_SHIFT 30
#define MAX_BLOCKS 4096 /* 4 GiB of 1 MiB blocks at most */

static void *blocks[MAX_BLOCKS];
static void *found[2][PER_LEAF];

static double cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The 16-byte objects in the two GiB: 0 when found. */
static int find_two_leaves(void)
{
	unsigned nb = 0, have[2] = {0, 0};
	uintptr_t leaf[2] = {UINTPTR_MAX, UINTPTR_MAX};
	while (nb < MAX_BLOCKS && (have[0] < PER_LEAF || have[1] < PER_LEAF)) {
		blocks[nb++] = malloc((size_t)1 << 20);
		for (int k = 0; k < 64; k++) {
			void *p = malloc(16);
			uintptr_t r = (uintptr_t)p >> GIB_SHIFT;
			int i = r == leaf[0]             ? 0
			        : r == leaf[1]           ? 1
			        : leaf[0] == UINTPTR_MAX ? 0
			        : leaf[1] == UINTPTR_MAX ? 1
			                                 : -1;
			if (i < 0 || have[i] == PER_LEAF) {
				continue; /* kept: freeing it would hand it out again */
			}
			leaf[i] = r;
			found[i][have[i]++] = p;
		}
	}
	for (unsigned k = 0; k < nb; k++)
		free(blocks[k]);
	return have[0] == PER_LEAF && have[1] == PER_LEAF ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s one|alternate|random N\n", argv[0]);
		return 2;
	}
	const char *mode = argv[1];
	unsigned long n = strtoul(argv[2], NULL, 10);
	if (find_two_leaves() != 0) {
		fprintf(stderr, "%s: no two GiB found\n", argv[0]);
		return 1;
	}
	void *o[2 * PER_LEAF];
	memcpy(o, found[0], sizeof(found[0]));
	memcpy(o + PER_LEAF, found[1], sizeof(found[1]));
	int m = strcmp(mode, "one") == 0 ? 0 : strcmp(mode, "alternate") == 0 ? 1 : 2;
	uint64_t x = 88172645463325252ull; /* xorshift64 */
	double t0 = cpu_ns();
	for (unsigned long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		unsigned j = (unsigned)(x >> 40);
		j = m == 0   ? j % PER_LEAF
		    : m == 1 ? (j % PER_LEAF) + (unsigned)(i & 1) * PER_LEAF
		             : j % (2 * PER_LEAF);
		free(o[j]);
		o[j] = malloc(16);
		*(volatile char *)o[j] = 1;
	}
	double t1 = cpu_ns();
	printf("leaf-switch mode=%s n=%lu ns_per_round=%.2f leaves=%#lx,%#lx\n", mode, n,
	       (t1 - t0) / (double)n, (unsigned long)((uintptr_t)found[0][0] >> GIB_SHIFT),
	       (unsigned long)((uintptr_t)found[1][0] >> GIB_SHIFT));
	return 0;
}
