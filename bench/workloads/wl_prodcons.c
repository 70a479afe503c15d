/*
 * wl_prodcons.c — producer/consumer: every object is freed by another thread.
 *
 * pairs producer threads each malloc objects of 16 B .. 64 KiB (log-uniform),
 * write their first and last byte and pass them in batches (wl_queue.h) to
 * their consumer thread, which checks and frees them: the remote-free path,
 * with sizes from the smallest class into large objects. The figure is wall
 * time (tools/compare.sh) for a fixed number of objects.
 *
 * Self-check: each object holds (producer, index) at the front and a byte at
 * the end; consumers verify every object arrives once, in order, intact.
 * Usage: wl-prodcons [--quick] [pairs=2] [objects=2000000] (objects per producer)
 */
#include "wl_queue.h"

#define MIN_OBJ 16
#define MAX_OBJ (64 * 1024)
#define QUEUE_BATCHES 64

struct pair {
	_Alignas(WL_LINE) struct wl_queue q; /* lines of its own: wl_xmalloc_lines */
	uint64_t id, objects, checksum;
	pthread_t producer, consumer;
};

static uint64_t tag_of(uint64_t id, uint64_t i)
{
	return id << 40 | i;
}

static void *produce(void *arg)
{
	struct pair *pr = (struct pair *)arg;
	wl_rng rng = wl_rng_seed(pr->id + 1);
	struct wl_batch b = {0, {0}};
	for (uint64_t i = 0; i < pr->objects; i++) {
		size_t size = wl_logsize(&rng, MIN_OBJ, MAX_OBJ);
		unsigned char *p = (unsigned char *)wl_xmalloc(size);
		uint64_t tag = tag_of(pr->id, i);
		memcpy(p, &tag, sizeof(tag));
		uint32_t size32 = (uint32_t)size; /* bytes 8..11; the last byte is >= 15 */
		memcpy(p + 8, &size32, sizeof(size32));
		p[size - 1] = (unsigned char)(size >> 4);
		b.p[b.n++] = p;
		if (b.n == WL_BATCH) {
			wl_queue_push(&pr->q, &b);
			b.n = 0;
		}
	}
	if (b.n > 0)
		wl_queue_push(&pr->q, &b);
	wl_queue_close(&pr->q);
	return NULL;
}

static void *consume(void *arg)
{
	struct pair *pr = (struct pair *)arg;
	struct wl_batch b;
	/* Summed here, stored once: pr->checksum shares cache lines with the
	 * queue the producer writes (the harness's false sharing). */
	uint64_t next = 0, checksum = 0;
	while (wl_queue_pop(&pr->q, &b)) {
		for (size_t k = 0; k < b.n; k++) {
			unsigned char *p = (unsigned char *)b.p[k];
			uint64_t tag;
			uint32_t size;
			memcpy(&tag, p, sizeof(tag));
			memcpy(&size, p + 8, sizeof(size));
			if (tag != tag_of(pr->id, next) || size < MIN_OBJ || size > MAX_OBJ ||
			    p[size - 1] != (unsigned char)(size >> 4))
				wl_die("pair %llu: object %llu corrupted or out of order",
				       (unsigned long long)pr->id, (unsigned long long)next);
			checksum += tag ^ size;
			next++;
			free(p);
		}
	}
	pr->checksum = checksum;
	if (next != pr->objects)
		wl_die("pair %llu: %llu of %llu objects arrived", (unsigned long long)pr->id,
		       (unsigned long long)next, (unsigned long long)pr->objects);
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {{"pairs", 2, 2}, {"objects", 2000000, 200000}};
	wl_parse(argc, argv, "wl-prodcons", params, 2);
	size_t npairs = (size_t)params[0].value;
	uint64_t objects = (uint64_t)params[1].value;
	if (npairs < 1 || npairs > 256)
		wl_die("pairs must be 1..256");

	struct pair *pairs = (struct pair *)wl_xmalloc_lines(npairs * sizeof(*pairs));
	uint64_t t0 = wl_now_ns();
	for (size_t i = 0; i < npairs; i++) {
		wl_queue_init(&pairs[i].q, QUEUE_BATCHES);
		pairs[i].id = i;
		pairs[i].objects = objects;
		pairs[i].checksum = 0;
		wl_thread_create(&pairs[i].consumer, consume, &pairs[i]);
		wl_thread_create(&pairs[i].producer, produce, &pairs[i]);
	}
	uint64_t checksum = 0;
	for (size_t i = 0; i < npairs; i++) {
		pthread_join(pairs[i].producer, NULL);
		pthread_join(pairs[i].consumer, NULL);
		checksum += pairs[i].checksum;
		wl_queue_destroy(&pairs[i].q);
	}
	double secs = (double)(wl_now_ns() - t0) / 1e9;
	free(pairs);
	printf("wl-prodcons ok pairs=%zu objects=%llu mops_per_s=%.2f checksum=%llx\n", npairs,
	       (unsigned long long)(objects * npairs), (double)(objects * npairs) / secs / 1e6,
	       (unsigned long long)checksum);
	return 0;
}
