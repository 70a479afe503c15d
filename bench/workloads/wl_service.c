/*
 * wl_service.c — seed 000's service: request bursts beside a slow task.
 *
 * The article's service ran out of memory after a long-running task was added
 * beside it: requests allocated ~10 MiB in bursts and freed them all, while
 * the task kept a few objects of every burst alive for hours. Objects that
 * outlive their burst pin the pages of their size class, and fragmentation
 * grows. Here, one thread:
 *
 *   each burst allocates ~burst_mib of mixed small objects (16 B .. 4 KiB,
 *   log-uniform), writes them, then frees them all except keep_pct percent,
 *   picked at random, which the slow task holds for hold bursts before
 *   freeing them.
 *
 * RSS is sampled every 50 ms (--trace); the figures are the mean RSS over the
 * second half of the run (steady_mib), the largest sample (peak_mib), the
 * live bytes at the end of the last burst (live_mib) and the RSS once
 * everything is freed (final_mib, no trim). Self-check: each object holds its
 * burst and index at the front and a byte at the end, checked when freed.
 *
 * Usage: wl-service [--quick] [--trace FILE] [bursts=600] [burst_mib=10] [keep_pct=1] [hold=200]
 */
#include "wl_common.h"

#define MIN_OBJ 16
#define MAX_OBJ 4096

struct obj {
	uint64_t *p;
	size_t size;
	uint64_t tag;
};

static volatile size_t live_bytes;

static void fill(struct obj *o, uint64_t tag)
{
	o->tag = tag;
	o->p[0] = tag;
	((unsigned char *)o->p)[o->size - 1] = (unsigned char)tag;
}

static uint64_t release(struct obj *o)
{
	if (o->p[0] != o->tag || ((unsigned char *)o->p)[o->size - 1] != (unsigned char)o->tag)
		wl_die("object %llx corrupted", (unsigned long long)o->tag);
	free(o->p);
	return o->tag;
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {{"bursts", 600, 40},
	                            {"burst_mib", 10, 4},
	                            {"keep_pct", 1, 1},
	                            {"hold", 200, 10},
	                            {"seed", 0, 0}};
	struct wl_args args = wl_parse(argc, argv, "wl-service", params, 5);
	size_t bursts = (size_t)params[0].value, hold = (size_t)params[3].value;
	size_t burst_bytes = (size_t)(params[1].value * WL_MIB);
	double keep = params[2].value / 100;
	wl_rng rng = wl_rng_seed((uint64_t)params[4].value);
	if (bursts < 2 || hold < 1 || burst_bytes < MAX_OBJ)
		wl_die("need bursts >= 2, hold >= 1, burst_mib > 0");

	/* The request's objects, reused every burst; the slow task's ring of
	 * hold bursts' worth of kept objects. */
	size_t cap = burst_bytes / MIN_OBJ + 1;
	struct obj *req = (struct obj *)wl_xmalloc(cap * sizeof(*req));
	size_t kcap = (size_t)((double)cap * keep * 2) + 16;
	struct obj **held = (struct obj **)wl_xmalloc(hold * sizeof(*held));
	size_t *nheld = (size_t *)wl_xmalloc(hold * sizeof(*nheld));
	for (size_t h = 0; h < hold; h++) {
		held[h] = (struct obj *)wl_xmalloc(kcap * sizeof(**held));
		nheld[h] = 0;
	}
	uint64_t checksum = 0;
	size_t live = 0;
	double steady_sum = 0;
	size_t steady_n = 0;
	uint64_t keep_below = (uint64_t)(keep * 18446744073709551615.0);

	struct wl_tracer tr;
	wl_tracer_start(&tr, args.trace, &live_bytes);
	for (size_t b = 0; b < bursts; b++) {
		size_t slot = b % hold, n = 0, bytes = 0;
		/* The slow task lets go of what it kept hold bursts ago. */
		for (size_t k = 0; k < nheld[slot]; k++) {
			live -= held[slot][k].size;
			checksum += release(&held[slot][k]);
		}
		nheld[slot] = 0;
		while (bytes < burst_bytes && n < cap) {
			struct obj *o = &req[n];
			o->size = wl_logsize(&rng, MIN_OBJ, MAX_OBJ);
			o->p = (uint64_t *)wl_xmalloc(o->size);
			memset(o->p, 0, o->size);
			fill(o, (uint64_t)b << 32 | n);
			bytes += o->size;
			n++;
		}
		live += bytes;
		live_bytes = live;
		for (size_t i = 0; i < n; i++) {
			if (wl_rand(&rng) < keep_below && nheld[slot] < kcap) {
				held[slot][nheld[slot]++] = req[i];
				continue;
			}
			live -= req[i].size;
			checksum += release(&req[i]);
		}
		live_bytes = live;
		if (b >= bursts / 2) {
			steady_sum += (double)wl_rss_bytes();
			steady_n++;
		}
	}
	double live_mib = (double)live / WL_MIB;
	for (size_t h = 0; h < hold; h++) {
		for (size_t k = 0; k < nheld[h]; k++) {
			live -= held[h][k].size;
			checksum += release(&held[h][k]);
		}
		free(held[h]);
	}
	if (live != 0)
		wl_die("%zu bytes unaccounted for", live);
	live_bytes = 0;
	double final_mib = wl_rss_mib();
	wl_tracer_stop(&tr);
	free(held);
	free(nheld);
	free(req);

	printf("wl-service ok steady_mib=%.1f peak_mib=%.1f live_mib=%.1f final_mib=%.1f "
	       "checksum=%llx\n",
	       steady_sum / (double)steady_n / WL_MIB, (double)tr.peak_rss / WL_MIB, live_mib,
	       final_mib, (unsigned long long)checksum);
	return 0;
}
