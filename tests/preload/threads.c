/*
 * threads.c — eight threads allocate, fill, pass on and free blocks through
 * the C library's malloc family; run with and without the preloaded
 * libpagealloc, the output must be the same (tests/preload/matrix.sh).
 *
 * Thread t makes ROUNDS blocks whose sizes and contents follow from (t, i)
 * alone (a xorshift stream per thread): sizes from 1 byte to 64 KiB, some of
 * them from calloc, posix_memalign, aligned_alloc or realloc. Every fourth
 * block it frees itself; the others go through a ring to thread (t + 1) % 8,
 * which checks the contents and frees them, so most frees are cross-thread
 * (a thread whose next ring is full drains its own meanwhile, and a thread
 * that has finished drains until all have).
 * Each block adds its checksum to the thread's total, whoever frees it, and
 * the sum over threads does not depend on the schedule: the program prints
 * it with the number of blocks and exits 1 if any block came back damaged.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload_check.h"

enum { NTHREADS = 8, ROUNDS = 100000, RING = 64 };

struct block {
	unsigned char *p;
	size_t size;
	unsigned char fill;
};

struct ring {
	pthread_mutex_t lock;
	struct block slot[RING];
	unsigned head, tail; /* head - tail blocks wait */
};

static struct ring rings[NTHREADS];
static uint64_t sums[NTHREADS];
static uint64_t counts[NTHREADS];
static int producing = NTHREADS; /* threads still making blocks */
static int damaged;

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t block_sum(const struct block *b)
{
	uint64_t sum = b->size;
	for (size_t i = 0; i < b->size; i += 61)
		sum += (uint64_t)b->p[i] * (i + 1);
	return sum;
}

/* Frees b after checking the fill; returns its checksum. */
static uint64_t block_retire(const struct block *b)
{
	for (size_t i = 0; i < b->size; i += 61) {
		if (b->p[i] != (unsigned char)(b->fill + i)) {
			__atomic_store_n(&damaged, 1, __ATOMIC_RELAXED);
			break;
		}
	}
	uint64_t sum = block_sum(b);
	free(b->p);
	return sum;
}

/* Takes one block if any waits; returns 0 when none does. */
static int ring_take(struct ring *r, struct block *out)
{
	int got = 0;
	pthread_mutex_lock(&r->lock);
	if (r->head != r->tail) {
		*out = r->slot[r->tail++ % RING];
		got = 1;
	}
	pthread_mutex_unlock(&r->lock);
	return got;
}

/* Retires every block waiting in r; returns the sum of their checksums. */
static uint64_t ring_drain(struct ring *r)
{
	uint64_t sum = 0;
	struct block b;
	while (ring_take(r, &b))
		sum += block_retire(&b);
	return sum;
}

/* Puts b into r; while r is full, drains `mine` so that a ring of threads
 * each waiting on the next cannot deadlock. */
static void ring_put(struct ring *r, struct block b, struct ring *mine, uint64_t *sum)
{
	for (;;) {
		pthread_mutex_lock(&r->lock);
		if (r->head - r->tail < RING) {
			r->slot[r->head++ % RING] = b;
			pthread_mutex_unlock(&r->lock);
			return;
		}
		pthread_mutex_unlock(&r->lock);
		*sum += ring_drain(mine);
		sched_yield();
	}
}

static unsigned char *block_alloc(uint64_t *rng, size_t size)
{
	void *p = NULL;
	switch (xorshift(rng) % 8) {
	case 0:
		p = calloc(1, size);
		break;
	case 1:
		if (posix_memalign(&p, 64, size) != 0)
			p = NULL;
		break;
	case 2:
		p = aligned_alloc(256, (size + 255) & ~(size_t)255);
		break;
	case 3:
		p = malloc(size / 2 + 1);
		p = p ? realloc(p, size) : NULL;
		break;
	default:
		p = malloc(size);
		break;
	}
	if (p == NULL) {
		fprintf(stderr, "threads: allocation of %zu bytes failed\n", size);
		exit(1);
	}
	return p;
}

static void *worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	struct ring *mine = &rings[t], *next = &rings[(t + 1) % NTHREADS];
	uint64_t rng = 0x9e3779b97f4a7c15ull * (t + 1);
	uint64_t sum = 0, count = 0;
	struct block b;

	for (unsigned i = 0; i < ROUNDS; i++) {
		uint64_t r = xorshift(&rng);
		size_t size = (r & 7) == 0 ? 1 + (r >> 8) % 65536 : 1 + (r >> 8) % 512;
		b.size = size;
		b.fill = (unsigned char)(r >> 40);
		b.p = block_alloc(&rng, size);
		for (size_t j = 0; j < size; j += 61)
			b.p[j] = (unsigned char)(b.fill + j);
		count++;
		if (i % 4 == 0)
			sum += block_retire(&b);
		else
			ring_put(next, b, mine, &sum);
		sum += ring_drain(mine);
	}
	/* Keep draining until no thread can still be waiting to put here. */
	__atomic_sub_fetch(&producing, 1, __ATOMIC_ACQ_REL);
	while (__atomic_load_n(&producing, __ATOMIC_ACQUIRE) > 0) {
		sum += ring_drain(mine);
		sched_yield();
	}
	sums[t] = sum;
	counts[t] = count;
	return NULL;
}

int main(void)
{
	PRELOAD_CHECK_MALLOC();
	pthread_t th[NTHREADS];
	for (unsigned t = 0; t < NTHREADS; t++)
		pthread_mutex_init(&rings[t].lock, NULL);
	for (unsigned t = 0; t < NTHREADS; t++)
		if (pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t) != 0) {
			fprintf(stderr, "threads: pthread_create failed\n");
			return 1;
		}
	for (unsigned t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);

	/* Blocks left in the rings once every producer stopped. */
	uint64_t total = 0, blocks = 0;
	for (unsigned t = 0; t < NTHREADS; t++) {
		total += ring_drain(&rings[t]) + sums[t];
		blocks += counts[t];
	}
	printf("threads=%d blocks=%llu checksum=%016llx\n", NTHREADS, (unsigned long long)blocks,
	       (unsigned long long)total);
	if (damaged) {
		fprintf(stderr, "threads: a block came back with different contents\n");
		return 1;
	}
	return 0;
}
