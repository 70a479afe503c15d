/*
 * model_large.c — wl-large's block sequence replayed on a model page heap.
 *
 * Not an allocator benchmark: it asks what placement policy could do for
 * wl-large's RSS. The same generator (seed, window, ops) draws the same
 * blocks as wl-large; each takes whole 8 KiB pages from a model heap (a
 * sorted list of free runs, coalesced on free) by address-ordered first fit
 * or by best fit (the smallest run that fits, lowest address on ties), and
 * like wl-large it writes the first and last 4 KiB page of each block. It
 * prints the live bytes' peak, the heap's size (the highest page used) and
 * the distinct 4 KiB pages ever written: the RSS a heap that never releases
 * memory would have. docs/design.md quotes it (known limits, wl-large).
 *
 * Usage: model-large [--quick] [ops=500000] [window=64] [seed=6]
 */
#include "wl_common.h"

#define MIN_BLOCK (16 * 1024)
#define MAX_BLOCK (4 * 1024 * 1024)
#define PAGE 8192u
#define OS_PAGE 4096u
#define MAX_RUNS 65536
#define MAX_HEAP_PAGES (1u << 22) /* 32 GiB of model heap */

struct heap {
	size_t start[MAX_RUNS], len[MAX_RUNS]; /* free runs by address, coalesced */
	size_t nruns, end;                     /* end: pages ever used */
};

static void run_remove(struct heap *h, size_t k)
{
	memmove(&h->start[k], &h->start[k + 1], (h->nruns - k - 1) * sizeof(size_t));
	memmove(&h->len[k], &h->len[k + 1], (h->nruns - k - 1) * sizeof(size_t));
	h->nruns--;
}

/* First page of n pages, by first fit (best = 0) or best fit. */
static size_t take(struct heap *h, size_t n, int best)
{
	size_t k = h->nruns;
	for (size_t i = 0; i < h->nruns; i++) {
		if (h->len[i] < n)
			continue;
		if (!best) {
			k = i;
			break;
		}
		if (k == h->nruns || h->len[i] < h->len[k])
			k = i;
	}
	if (k == h->nruns) {
		/* Grow the heap, starting inside a free run that ends at its top. */
		size_t s = h->end;
		if (h->nruns > 0 && h->start[h->nruns - 1] + h->len[h->nruns - 1] == h->end) {
			s = h->start[h->nruns - 1];
			run_remove(h, h->nruns - 1);
		}
		h->end = s + n;
		if (h->end > MAX_HEAP_PAGES)
			wl_die("model heap over %u pages", MAX_HEAP_PAGES);
		return s;
	}
	size_t s = h->start[k];
	h->start[k] += n;
	h->len[k] -= n;
	if (h->len[k] == 0)
		run_remove(h, k);
	return s;
}

static void give(struct heap *h, size_t s, size_t n)
{
	size_t i = 0;
	while (i < h->nruns && h->start[i] < s)
		i++;
	if (h->nruns == MAX_RUNS)
		wl_die("more than %d free runs", MAX_RUNS);
	memmove(&h->start[i + 1], &h->start[i], (h->nruns - i) * sizeof(size_t));
	memmove(&h->len[i + 1], &h->len[i], (h->nruns - i) * sizeof(size_t));
	h->start[i] = s;
	h->len[i] = n;
	h->nruns++;
	if (i + 1 < h->nruns && h->start[i] + h->len[i] == h->start[i + 1]) {
		h->len[i] += h->len[i + 1];
		run_remove(h, i + 1);
	}
	if (i > 0 && h->start[i - 1] + h->len[i - 1] == h->start[i]) {
		h->len[i - 1] += h->len[i];
		run_remove(h, i);
	}
}

static void replay(int best, uint64_t ops, size_t window, uint64_t seed)
{
	static struct heap h;
	static unsigned char written[2 * MAX_HEAP_PAGES];
	memset(&h, 0, sizeof(h));
	memset(written, 0, sizeof(written));
	size_t *first = (size_t *)wl_xmalloc(window * sizeof(size_t));
	size_t *pages = (size_t *)wl_xmalloc(window * sizeof(size_t));
	size_t *bytes = (size_t *)wl_xmalloc(window * sizeof(size_t));
	wl_rng rng = wl_rng_seed(seed);
	size_t live = 0, peak = 0, touched = 0;
	for (uint64_t op = 0; op < ops + window; op++) {
		/* wl-large: fill the window, then free a random block and put a
		 * new one in its place (the same draws, in the same order). */
		size_t i = (size_t)op;
		if (op >= window) {
			i = (size_t)wl_below(&rng, window);
			give(&h, first[i], pages[i]);
			live -= bytes[i];
		}
		bytes[i] = wl_logsize(&rng, MIN_BLOCK, MAX_BLOCK);
		pages[i] = (bytes[i] + PAGE - 1) / PAGE;
		first[i] = take(&h, pages[i], best);
		live += bytes[i];
		if (live > peak)
			peak = live;
		size_t a = first[i] * (PAGE / OS_PAGE),
		       b = (first[i] * PAGE + bytes[i] - 1) / OS_PAGE;
		touched += !written[a] + (b != a && !written[b]);
		written[a] = written[b] = 1;
	}
	printf("model-large %s ops=%llu window=%zu live_peak_mib=%.1f heap_mib=%.1f "
	       "written_mib=%.1f\n",
	       best ? "best_fit" : "first_fit", (unsigned long long)ops, window,
	       (double)peak / WL_MIB, (double)h.end * PAGE / WL_MIB,
	       (double)touched * OS_PAGE / WL_MIB);
	free(first);
	free(pages);
	free(bytes);
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {{"ops", 500000, 20000}, {"window", 64, 64}, {"seed", 6, 6}};
	wl_parse(argc, argv, "model-large", params, 3);
	if (params[1].value < 1)
		wl_die("window must be >= 1");
	replay(0, (uint64_t)params[0].value, (size_t)params[1].value, (uint64_t)params[2].value);
	replay(1, (uint64_t)params[0].value, (size_t)params[1].value, (uint64_t)params[2].value);
	return 0;
}
