/*
 * wl_large.c — large blocks with random lifetimes.
 *
 * A window of `window` live blocks of 16 KiB .. 4 MiB (log-uniform); each op
 * frees a block picked at random and allocates a new one in its place,
 * writing its first and last page (one byte each: the cost measured is the
 * allocator's and the page faults it causes, not a memset). Around glibc's
 * mmap threshold and jemalloc's extent sizes, and across libpagealloc's
 * 32 KiB small/large boundary and its per-thread large slots (<= 1 MiB).
 *
 * Self-check: each block's first and last 8 bytes hold its sequence number
 * and size, checked when freed. Figure: wall time (tools/compare.sh).
 * Usage: wl-large [--quick] [ops=500000] [window=64]
 */
#include "wl_common.h"

#define MIN_BLOCK (16 * 1024)
#define MAX_BLOCK (4 * 1024 * 1024)

struct block {
	unsigned char *p;
	size_t size;
	uint64_t seq;
};

static void put(struct block *b, wl_rng *rng, uint64_t seq)
{
	b->size = wl_logsize(rng, MIN_BLOCK, MAX_BLOCK);
	b->seq = seq;
	b->p = (unsigned char *)wl_xmalloc(b->size);
	uint64_t words[2] = {seq, b->size};
	memcpy(b->p, words, sizeof(words));
	memcpy(b->p + b->size - sizeof(words), words, sizeof(words));
}

static uint64_t drop(struct block *b)
{
	uint64_t head[2], tail[2];
	memcpy(head, b->p, sizeof(head));
	memcpy(tail, b->p + b->size - sizeof(tail), sizeof(tail));
	if (head[0] != b->seq || head[1] != b->size || memcmp(head, tail, sizeof(head)) != 0)
		wl_die("block %llu (%zu bytes) corrupted", (unsigned long long)b->seq, b->size);
	free(b->p);
	return b->seq ^ b->size;
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {{"ops", 500000, 20000}, {"window", 64, 64}, {"seed", 6, 6}};
	wl_parse(argc, argv, "wl-large", params, 3);
	uint64_t ops = (uint64_t)params[0].value;
	size_t window = (size_t)params[1].value;
	wl_rng rng = wl_rng_seed((uint64_t)params[2].value);
	if (window < 1)
		wl_die("window must be >= 1");

	struct block *w = (struct block *)wl_xmalloc(window * sizeof(*w));
	uint64_t seq = 0, checksum = 0;
	uint64_t t0 = wl_now_ns();
	for (size_t i = 0; i < window; i++)
		put(&w[i], &rng, seq++);
	for (uint64_t op = 0; op < ops; op++) {
		size_t i = (size_t)wl_below(&rng, window);
		checksum += drop(&w[i]);
		put(&w[i], &rng, seq++);
	}
	for (size_t i = 0; i < window; i++)
		checksum += drop(&w[i]);
	double secs = (double)(wl_now_ns() - t0) / 1e9;
	free(w);
	printf("wl-large ok ops=%llu kops_per_s=%.1f checksum=%llx\n", (unsigned long long)ops,
	       (double)ops / secs / 1e3, (unsigned long long)checksum);
	return 0;
}
