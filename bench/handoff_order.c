/*
 * handoff_order.c — xmalloc-test's shape, with and without its address
 * order: what a producer/consumer benchmark measures of the hardware's
 * prefetchers rather than of the allocator.
 *
 * W producers malloc batches of 4,096 blocks of 64 bytes, write each block
 * whole and queue the batch (at most 100 queued, one lock, as xmalloc-test
 * does); W consumers take batches and free their blocks in the batch's
 * order. With --shuffle each producer puts its batch in random order first
 * (a Fisher-Yates shuffle, outside the allocator's work but inside the
 * timed run), so the consumers free in no order of address. A consumer's
 * free reads or writes a line the producer's core just wrote: where the
 * blocks come in address order the core's stream prefetcher brings the next
 * lines before the frees ask for them, and where they do not each free waits
 * for its line (docs/benchmarks.md §22: mimalloc, whose blocks come out of a
 * 64 KiB page in address order, gains most from the order).
 *
 * --place pins each thread to a CPU: "pairs" puts consumer i and producer
 * i on CPU i % ncpu, so a consumer shares its CPU with a producer; "split"
 * puts every consumer on CPU 0 and every producer on CPU 1, so every
 * hand-off crosses between two CPUs. Left to the
 * scheduler the threads settle in either placement, and an allocator that
 * hands a producer the lines another CPU just wrote pays for it only in the
 * first (docs/benchmarks.md §22).
 *
 *   LD_PRELOAD=<lib> handoff-order [--threads W] [--seconds S] [--shuffle]
 *                                  [--place pairs|split]
 *
 * Prints the frees per second (millions) over the run.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pin.h"

#define BLOCKS 4096
#define QUEUE_MAX 100
#define BLOCK_SIZE 64
#define THREADS_MAX 16

struct batch {
	struct batch *next;
	void *block[BLOCKS];
};

static struct batch *queue;
static int queued, done, shuffle;
static long total;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER, not_full = PTHREAD_COND_INITIALIZER;

/* --place: none, pairs, split */
enum { PLACE_NONE, PLACE_PAIRS, PLACE_SPLIT };
static int place;

/* Pin producer or consumer i where --place says (nothing without it). */
static void place_thread(int i, int is_producer)
{
	if (place == PLACE_PAIRS)
		bench_pin("handoff-order", i % (int)sysconf(_SC_NPROCESSORS_ONLN));
	else if (place == PLACE_SPLIT)
		bench_pin("handoff-order", is_producer);
}

static void *producer(void *arg)
{
	place_thread((int)(uintptr_t)arg - 1, 1);
	uint32_t r = (uint32_t)(uintptr_t)arg * 2654435761u + 1u;
	for (;;) {
		struct batch *b = malloc(sizeof(*b));
		if (b == NULL)
			abort();
		for (int i = 0; i < BLOCKS; i++) {
			if ((b->block[i] = malloc(BLOCK_SIZE)) == NULL)
				abort();
			memset(b->block[i], i, BLOCK_SIZE);
		}
		for (int i = BLOCKS - 1; shuffle && i > 0; i--) {
			r = r * 1103515245u + 12345u;
			int j = (int)((r >> 8) % (uint32_t)(i + 1));
			void *t = b->block[i];
			b->block[i] = b->block[j];
			b->block[j] = t;
		}
		pthread_mutex_lock(&lock);
		while (queued >= QUEUE_MAX && !done)
			pthread_cond_wait(&not_full, &lock);
		b->next = queue;
		queue = b;
		queued++;
		int stop = done;
		pthread_cond_signal(&not_empty);
		pthread_mutex_unlock(&lock);
		if (stop)
			return NULL;
	}
}

static void *consumer(void *arg)
{
	long n = 0;
	place_thread((int)(uintptr_t)arg, 0);
	for (;;) {
		pthread_mutex_lock(&lock);
		while (queue == NULL && !done)
			pthread_cond_wait(&not_empty, &lock);
		struct batch *b = done ? NULL : queue;
		if (b != NULL) {
			queue = b->next;
			queued--;
			pthread_cond_signal(&not_full);
		}
		pthread_mutex_unlock(&lock);
		if (b == NULL)
			break;
		for (int i = 0; i < BLOCKS; i++)
			free(b->block[i]);
		free(b);
		n += BLOCKS;
	}
	__atomic_add_fetch(&total, n, __ATOMIC_RELAXED);
	return NULL;
}

static int usage(void)
{
	fprintf(stderr, "usage: handoff-order [--threads W] [--seconds S] [--shuffle] "
	                "[--place pairs|split]\n");
	return 2;
}

int main(int argc, char **argv)
{
	int w = 2;
	double seconds = 5;
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--threads") == 0)
			w = atoi(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--seconds") == 0)
			seconds = atof(argv[++i]);
		else if (strcmp(argv[i], "--shuffle") == 0)
			shuffle = 1;
		else if (i + 1 < argc && strcmp(argv[i], "--place") == 0 &&
		         (strcmp(argv[i + 1], "pairs") == 0 || strcmp(argv[i + 1], "split") == 0))
			place = strcmp(argv[++i], "pairs") == 0 ? PLACE_PAIRS : PLACE_SPLIT;
		else
			return usage();
	}
	if (w < 1 || w > THREADS_MAX || seconds <= 0)
		return usage();
	if (place != PLACE_NONE && sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		fprintf(stderr, "handoff-order: --place needs 2 CPUs\n");
		return 2;
	}
	pthread_t t[2 * THREADS_MAX];
	for (int i = 0; i < w; i++) {
		pthread_create(&t[2 * i], NULL, consumer, (void *)(uintptr_t)i);
		pthread_create(&t[2 * i + 1], NULL, producer, (void *)(uintptr_t)(i + 1));
	}
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	nanosleep(&ts, NULL);
	pthread_mutex_lock(&lock);
	done = 1;
	pthread_cond_broadcast(&not_empty);
	pthread_cond_broadcast(&not_full);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < 2 * w; i++)
		pthread_join(t[i], NULL);
	while (queue != NULL) {
		struct batch *b = queue;
		queue = b->next;
		for (int i = 0; i < BLOCKS; i++)
			free(b->block[i]);
		free(b);
	}
	static const char *const places[] = {"", ", pinned in pairs", ", pinned apart"};
	printf("%s, %d producers and %d consumers%s: %.1f M frees a second\n",
	       shuffle ? "shuffled" : "in order", w, w, places[place],
	       (double)total / seconds / 1e6);
	return 0;
}
