/*
 * wl_cycle.c — seed 003's allocate/free cycle (Dgraph's memory test).
 *
 * Dgraph's test allocated randomly sized chunks until 16 GiB were live, freed
 * until 1 GiB was left, and repeated; glibc's RSS crept up every cycle while
 * jemalloc's went back to ~1 GiB. Scaled to this machine:
 *
 *   allocate blocks of 16 B .. 256 KiB (log-uniform) until L bytes are live,
 *   writing one byte in every 4 KiB of each (so the pages are resident);
 *   free blocks picked at random until L/16 are live;
 *   pause P seconds, sampling RSS every 50 ms; repeat C cycles.
 *
 * The figure is RSS / live bytes at the end of each pause (target for
 * libpagealloc: <= 1.25 within 5 s of each free phase), and how long after
 * the free phase RSS first came within 1.25x of live (settle; the pause's
 * length if never). A helper thread writes the whole RSS curve to --trace.
 * Self-check: every block carries its index and size at both ends, checked
 * when it is freed.
 *
 * Usage: wl-cycle [--quick] [--trace FILE] [live_mib=1024] [pause_s=5] [cycles=3] [seed=3]
 * Prints: wl-cycle ok pause1_ratio=... settle1_s=... ... blocks=N checksum=X
 */
#include "wl_common.h"

#define MIN_BLOCK 16
#define MAX_BLOCK (256 * 1024)
#define TOUCH_STRIDE 4096
#define TARGET_RATIO 1.25
#define MAX_CYCLES 64

struct block {
	unsigned char *p;
	size_t size;
};

static volatile size_t live_bytes; /* read by the tracer */

/* One word at the front: (id << 20) | size (sizes fit in 20 bits); the last
 * byte and one byte in every 4 KiB from the id. MIN_BLOCK >= 9 keeps them apart. */
static uint64_t tag_of(const struct block *b, uint64_t id)
{
	return id << 20 | b->size;
}

static void stamp(struct block *b, uint64_t id)
{
	uint64_t tag = tag_of(b, id);
	memcpy(b->p, &tag, sizeof(tag));
	for (size_t off = TOUCH_STRIDE; off < b->size; off += TOUCH_STRIDE)
		b->p[off] = (unsigned char)id;
	b->p[b->size - 1] = (unsigned char)(id ^ 0x5a);
}

static uint64_t check(const struct block *b, uint64_t id)
{
	uint64_t tag;
	memcpy(&tag, b->p, sizeof(tag));
	if (tag != tag_of(b, id) || b->p[b->size - 1] != (unsigned char)(id ^ 0x5a))
		wl_die("block %llu (%zu bytes) corrupted", (unsigned long long)id, b->size);
	return tag;
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {
	    {"live_mib", 1024, 64}, {"pause_s", 5, 0.3}, {"cycles", 3, 2}, {"seed", 3, 3}};
	struct wl_args args = wl_parse(argc, argv, "wl-cycle", params, 4);
	size_t target = (size_t)(params[0].value * WL_MIB);
	unsigned pause_ms = (unsigned)(params[1].value * 1000);
	int cycles = (int)params[2].value;
	wl_rng rng = wl_rng_seed((uint64_t)params[3].value);
	if (cycles < 1 || cycles > MAX_CYCLES || target < MAX_BLOCK)
		wl_die("need 1 <= cycles <= %d and live_mib >= 1", MAX_CYCLES);

	/* Every block of one cycle: at most target/MIN_BLOCK, far fewer in practice;
	 * grown on demand. ids[] gives each slot's block id for the check. */
	size_t cap = 1 << 16, n = 0;
	struct block *blocks = (struct block *)wl_xmalloc(cap * sizeof(*blocks));
	uint64_t *ids = (uint64_t *)wl_xmalloc(cap * sizeof(*ids));
	uint64_t next_id = 1, checksum = 0;
	double ratio[MAX_CYCLES], settle[MAX_CYCLES];

	struct wl_tracer tr;
	wl_tracer_start(&tr, args.trace, &live_bytes);
	for (int c = 0; c < cycles; c++) {
		size_t live = live_bytes;
		while (live < target) {
			if (n == cap) {
				cap *= 2;
				blocks = (struct block *)realloc(blocks, cap * sizeof(*blocks));
				ids = (uint64_t *)realloc(ids, cap * sizeof(*ids));
				if (blocks == NULL || ids == NULL)
					wl_die("realloc of the block table failed");
			}
			struct block *b = &blocks[n];
			b->size = wl_logsize(&rng, MIN_BLOCK, MAX_BLOCK);
			b->p = (unsigned char *)wl_xmalloc(b->size);
			ids[n] = next_id++;
			stamp(b, ids[n]);
			n++;
			live += b->size;
			live_bytes = live;
		}
		while (live > target / 16) {
			size_t i = (size_t)wl_below(&rng, n);
			checksum += check(&blocks[i], ids[i]);
			free(blocks[i].p);
			live -= blocks[i].size;
			blocks[i] = blocks[--n];
			ids[i] = ids[n];
			live_bytes = live;
		}
		/* The pause: watch RSS come down. */
		uint64_t t0 = wl_now_ns();
		settle[c] = -1;
		for (;;) {
			double r = (double)wl_rss_bytes() / (double)live;
			double t = (double)(wl_now_ns() - t0) / 1e9;
			if (settle[c] < 0 && r <= TARGET_RATIO)
				settle[c] = t;
			if (t * 1000 >= pause_ms) {
				ratio[c] = r;
				break;
			}
			wl_sleep_ms(WL_TRACE_PERIOD_MS);
		}
		if (settle[c] < 0)
			settle[c] = (double)pause_ms / 1000;
	}
	for (size_t i = 0; i < n; i++) {
		checksum += check(&blocks[i], ids[i]);
		free(blocks[i].p);
	}
	live_bytes = 0;
	wl_tracer_stop(&tr);
	free(blocks);
	free(ids);

	printf("wl-cycle ok");
	for (int c = 0; c < cycles; c++)
		printf(" pause%d_ratio=%.3f settle%d_s=%.2f", c + 1, ratio[c], c + 1, settle[c]);
	printf(" live_end_mib=%.1f blocks=%llu checksum=%llx\n", (double)(target / 16) / WL_MIB,
	       (unsigned long long)(next_id - 1), (unsigned long long)checksum);
	return 0;
}
