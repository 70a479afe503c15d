/*
 * cycle.c — a free/allocate cycle whose peak, on an allocator that keeps
 * what it freed resident, passes a container's memory limit (limit.sh).
 *
 *   cycle PAIRS ROUNDS [wait]
 *
 * Each round: PAIRS pairs of blocks, one of 40 KiB kept and one of 48 KiB
 * (a hole), every page written; the holes freed; PAIRS blocks of 56 KiB,
 * written; everything freed. A 56 KiB block fits in no 48 KiB hole, so an
 * allocator that keeps the holes resident (glibc's heap keeps free chunks
 * between live ones; libpagealloc keeps free pages for scavenge_delay_ms)
 * peaks at PAIRS * 144 KiB, one that gives them back at PAIRS * 96 KiB.
 *
 * wait: after the first round's holes are freed, print "freed" and read a
 * line from stdin (the test changes the cgroup's limit meanwhile, and waits
 * for the heap to follow it).
 *
 * Prints "peak_rss_kib N" (VmHWM) at the end; exits 0, or 1 when malloc
 * fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEEP_BYTES (40u << 10)
#define HOLE_BYTES (48u << 10)
#define NEW_BYTES (56u << 10)

static void *touched(size_t n)
{
	char *p = malloc(n);
	if (p == NULL) {
		fprintf(stderr, "cycle: malloc(%zu) failed\n", n);
		exit(1);
	}
	for (size_t i = 0; i < n; i += 4096)
		p[i] = (char)i;
	return p;
}

static long peak_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "VmHWM:", 6) == 0)
			kib = strtol(line + 6, NULL, 10);
	if (f != NULL)
		fclose(f);
	return kib;
}

int main(int argc, char **argv)
{
	if (argc < 3 || (argc == 4 && strcmp(argv[3], "wait") != 0) || argc > 4) {
		fprintf(stderr, "usage: cycle PAIRS ROUNDS [wait]\n");
		return 2;
	}
	size_t pairs = strtoul(argv[1], NULL, 10);
	int rounds = atoi(argv[2]), wait = argc == 4;
	void **keep = calloc(pairs, sizeof(void *)), **other = calloc(pairs, sizeof(void *));
	if (keep == NULL || other == NULL)
		return 1;
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < pairs; i++) {
			keep[i] = touched(KEEP_BYTES);
			other[i] = touched(HOLE_BYTES);
		}
		for (size_t i = 0; i < pairs; i++)
			free(other[i]);
		if (wait && r == 0) {
			char line[32];
			printf("freed\n");
			fflush(stdout);
			if (fgets(line, sizeof(line), stdin) == NULL)
				return 1;
		}
		for (size_t i = 0; i < pairs; i++)
			other[i] = touched(NEW_BYTES);
		for (size_t i = 0; i < pairs; i++) {
			free(keep[i]);
			free(other[i]);
		}
	}
	printf("peak_rss_kib %ld\n", peak_rss_kib());
	return 0;
}
