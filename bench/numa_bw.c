/*
 * numa_bw.c — where reused heap memory lands on a machine with two or more
 * NUMA nodes, and what that costs in memory bandwidth (docs/benchmarks.md
 * §11 has the experiment). Built statically (CMakeLists.txt), so the one
 * file can be carried to a machine that has the nodes.
 *
 *   numa-bw [--alloc pa|libc] [--mib M] [--block SIZE] [--passes P] [--shift S]
 *
 * One thread per CPU the process may run on, each pinned to its CPU.
 * Round 1: every thread allocates M MiB (default 256) in blocks of SIZE
 * bytes (default 262144), writes every byte, and frees it all: the heap now
 * holds resident pages first touched on every node. Round 2: thread i moves
 * to the CPU S places further on (default: half the CPUs, so on a two-node
 * machine numbered by socket it changes node), allocates M MiB again,
 * writes it, and reads and writes it P times (default 5), timed. Each
 * thread reports the node it runs on (getcpu), the share of its round-2
 * pages that lie on that node (move_pages(2) on one page in every 64 KiB),
 * and its read and write bandwidth. With numa=off the page heap hands out
 * pages that the other node's threads touched in round 1: remote ones.
 * With numa=on each node's heap hands out its own.
 *
 * Run it under numactl for the machine's own local and remote bandwidth
 * (--alloc libc, --cpunodebind=0 with --membind=0, then --membind=1). The
 * scavenger is off, so round 1's pages stay resident in the heap for
 * round 2.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pagealloc.h"
#include "pin.h"

#define MAX_THREADS 1024
#define SAMPLE 65536u /* bytes between two pages asked about */

static size_t opt_mib = 256, opt_block = 262144;
static unsigned opt_passes = 5, opt_shift;
static int opt_libc;

static int ncpus, cpus[MAX_THREADS];
static pthread_barrier_t barrier;

struct worker {
	int index;
	int node;
	size_t pages, local_pages;
	double read_gbs, write_gbs;
};

static void *alloc_block(size_t n)
{
	return opt_libc ? malloc(n) : pa_malloc(n);
}

static void free_block(void *p)
{
	if (opt_libc)
		free(p);
	else
		pa_free(p);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* M MiB in blocks, every byte written. */
static void **alloc_all(size_t *nblocks)
{
	size_t n = (opt_mib << 20) / opt_block;
	void **b = calloc(n, sizeof(*b));
	for (size_t i = 0; b != NULL && i < n; i++) {
		b[i] = alloc_block(opt_block);
		if (b[i] == NULL) {
			fprintf(stderr, "numa-bw: out of memory\n");
			exit(1);
		}
		memset(b[i], (int)i, opt_block);
	}
	*nblocks = n;
	return b;
}

/* How many of the sampled pages of the blocks lie on node. */
static void count_local(void **b, size_t n, int node, struct worker *w)
{
	size_t per = opt_block / SAMPLE ? opt_block / SAMPLE : 1;
	void **pages = calloc(n * per, sizeof(*pages));
	int *status = calloc(n * per, sizeof(*status));
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < per; j++)
			pages[k++] = (char *)b[i] + j * SAMPLE;
	if (syscall(SYS_move_pages, 0, (unsigned long)k, pages, NULL, status, 0) != 0)
		perror("numa-bw: move_pages");
	for (size_t i = 0; i < k; i++)
		w->local_pages += status[i] == node;
	w->pages = k;
	free(pages);
	free(status);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	bench_pin("numa-bw", cpus[w->index]);
	size_t n;
	void **b = alloc_all(&n);
	for (size_t i = 0; i < n; i++)
		free_block(b[i]);
	free(b);
	pthread_barrier_wait(&barrier);

	bench_pin("numa-bw", cpus[(w->index + (int)opt_shift) % ncpus]);
	unsigned cpu = 0, node = 0;
	syscall(SYS_getcpu, &cpu, &node, NULL);
	w->node = (int)node;
	b = alloc_all(&n);
	count_local(b, n, w->node, w);
	pthread_barrier_wait(&barrier);
	uint64_t sum = 0;
	double t0 = now();
	for (unsigned p = 0; p < opt_passes; p++)
		for (size_t i = 0; i < n; i++) {
			const uint64_t *q = b[i];
			for (size_t k = 0; k < opt_block / 8; k++)
				sum += q[k];
		}
	double t1 = now();
	for (unsigned p = 0; p < opt_passes; p++)
		for (size_t i = 0; i < n; i++)
			memset(b[i], (int)(p + sum), opt_block);
	double t2 = now();
	double bytes = (double)n * (double)opt_block * opt_passes;
	w->read_gbs = bytes / (t1 - t0) / 1e9;
	w->write_gbs = bytes / (t2 - t1) / 1e9;
	for (size_t i = 0; i < n; i++)
		free_block(b[i]);
	free(b);
	return NULL;
}

static size_t parse_size(const char *s)
{
	char *end;
	size_t v = strtoull(s, &end, 10);
	if (*end == 'K' || *end == 'k')
		v <<= 10;
	else if (*end == 'M' || *end == 'm')
		v <<= 20;
	return v;
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--alloc") == 0)
			opt_libc = strcmp(argv[i + 1], "libc") == 0;
		else if (strcmp(argv[i], "--mib") == 0)
			opt_mib = parse_size(argv[i + 1]);
		else if (strcmp(argv[i], "--block") == 0)
			opt_block = parse_size(argv[i + 1]);
		else if (strcmp(argv[i], "--passes") == 0)
			opt_passes = (unsigned)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--shift") == 0)
			opt_shift = (unsigned)atoi(argv[i + 1]);
		else {
			fprintf(stderr, "numa-bw: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (opt_block < 64 || opt_mib == 0) {
		fprintf(stderr, "numa-bw: --block at least 64, --mib at least 1\n");
		return 2;
	}
	cpu_set_t set;
	sched_getaffinity(0, sizeof(set), &set);
	for (int c = 0; c < CPU_SETSIZE && ncpus < MAX_THREADS; c++)
		if (CPU_ISSET(c, &set))
			cpus[ncpus++] = c;
	if (opt_shift == 0)
		opt_shift = (unsigned)ncpus / 2;
	if (!opt_libc)
		pa_config("scavenger=off");
	pthread_barrier_init(&barrier, NULL, (unsigned)ncpus);
	static struct worker w[MAX_THREADS];
	pthread_t t[MAX_THREADS];
	for (int i = 0; i < ncpus; i++) {
		w[i].index = i;
		pthread_create(&t[i], NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < ncpus; i++)
		pthread_join(t[i], NULL);

	printf("alloc=%s threads=%d mib=%zu block=%zu passes=%u shift=%u numa_heaps=%u\n",
	       opt_libc ? "libc" : "pa", ncpus, opt_mib, opt_block, opt_passes, opt_shift,
	       opt_libc ? 0 : pa_numa_nodes());
	printf(
	    "node  threads  local pages  read GB/s  write GB/s  (sums over the node's threads)\n");
	for (int node = 0; node < 64; node++) {
		size_t threads = 0, pages = 0, local = 0;
		double rd = 0, wr = 0;
		for (int i = 0; i < ncpus; i++) {
			if (w[i].node != node)
				continue;
			threads++;
			pages += w[i].pages;
			local += w[i].local_pages;
			rd += w[i].read_gbs;
			wr += w[i].write_gbs;
		}
		if (threads != 0)
			printf("%4d  %7zu  %10.1f%%  %9.2f  %10.2f\n", node, threads,
			       pages ? 100.0 * (double)local / (double)pages : 0.0, rd, wr);
	}
	if (!opt_libc) {
		for (unsigned i = 0; i < pa_numa_nodes(); i++) {
			struct pa_numa_stats s;
			if (pa_numa_stats(i, &s) == 0)
				printf(
				    "heap %u: node %d, %u CPUs, %zu MiB mapped, %zu MiB released\n",
				    i, s.bound_node, s.cpus, s.heap_mapped >> 20,
				    s.heap_released >> 20);
		}
	}
	return 0;
}
