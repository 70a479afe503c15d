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
 * With purge_mib=N it also asks what releasing would cost: every tick_ops
 * operations (2,900 is ~1 ms of wl-large on us) the written pages of free
 * runs beyond the newest N MiB of them go back to the OS, oldest freed
 * first (a jemalloc-style purge down to a limit, by the first-fit heap). It
 * prints the peak of written pages resident, the faults on released pages
 * written again, and the release calls (one per contiguous range).
 *
 * Usage: model-large [--quick] [ops=500000] [window=64] [seed=6] [purge_mib=0] [tick_ops=2900]
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

/* The purge experiment's state: pages (4 KiB) written, released, and when
 * each heap page was last freed. */
struct purge {
	size_t limit_pages, tick_ops; /* 0: no purging */
	size_t resident, peak, refaults, calls;
	uint64_t *freed_at;   /* per heap page */
	unsigned char *freed; /* per 4 KiB page: released since it was written */
	size_t *cand;
};

static int by_key(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Release the written pages of free runs beyond the newest limit_pages,
 * oldest freed first. */
static void purge_tick(struct purge *pg, const struct heap *h, unsigned char *written)
{
	size_t n = 0;
	for (size_t r = 0; r < h->nruns; r++)
		for (size_t q = h->start[r] * 2; q < (h->start[r] + h->len[r]) * 2; q++)
			if (written[q])
				pg->cand[n++] = (size_t)pg->freed_at[q / 2] << 32 | q;
	if (n <= pg->limit_pages)
		return;
	qsort(pg->cand, n, sizeof(pg->cand[0]), by_key);
	size_t prev = (size_t)-2;
	for (size_t k = 0; k < n - pg->limit_pages; k++) {
		size_t q = pg->cand[k] & 0xffffffffu;
		written[q] = 0;
		pg->freed[q] = 1;
		pg->resident--;
		pg->calls += q != prev + 1;
		prev = q;
	}
}

static void replay(int best, uint64_t ops, size_t window, uint64_t seed, struct purge *pg)
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
			if (pg != NULL)
				for (size_t q = first[i]; q < first[i] + pages[i]; q++)
					pg->freed_at[q] = op;
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
		if (pg != NULL) {
			size_t w[2] = {a, b};
			for (int k = 0; k < (b != a ? 2 : 1); k++)
				if (!written[w[k]]) {
					pg->resident++;
					pg->refaults += pg->freed[w[k]];
					pg->freed[w[k]] = 0;
				}
			if (pg->resident > pg->peak)
				pg->peak = pg->resident;
		}
		written[a] = written[b] = 1;
		if (pg != NULL && op % pg->tick_ops == 0)
			purge_tick(pg, &h, written);
	}
	if (pg == NULL)
		printf("model-large %s ops=%llu window=%zu live_peak_mib=%.1f heap_mib=%.1f "
		       "written_mib=%.1f\n",
		       best ? "best_fit" : "first_fit", (unsigned long long)ops, window,
		       (double)peak / WL_MIB, (double)h.end * PAGE / WL_MIB,
		       (double)touched * OS_PAGE / WL_MIB);
	else
		printf("model-large first_fit_purge ops=%llu window=%zu purge_mib=%zu tick_ops=%zu "
		       "resident_peak_mib=%.1f refaults=%zu release_calls=%zu\n",
		       (unsigned long long)ops, window, pg->limit_pages / ((1u << 20) / OS_PAGE),
		       pg->tick_ops, (double)pg->peak * OS_PAGE / WL_MIB, pg->refaults, pg->calls);
	free(first);
	free(pages);
	free(bytes);
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {{"ops", 500000, 20000},
	                            {"window", 64, 64},
	                            {"seed", 6, 6},
	                            {"purge_mib", 0, 0},
	                            {"tick_ops", 2900, 2900}};
	wl_parse(argc, argv, "model-large", params, 5);
	if (params[1].value < 1 || params[4].value < 1)
		wl_die("window and tick_ops must be >= 1");
	uint64_t ops = (uint64_t)params[0].value, seed = (uint64_t)params[2].value;
	size_t window = (size_t)params[1].value;
	replay(0, ops, window, seed, NULL);
	replay(1, ops, window, seed, NULL);
	if (params[3].value > 0) {
		struct purge pg = {.limit_pages = (size_t)params[3].value * ((1u << 20) / OS_PAGE),
		                   .tick_ops = (size_t)params[4].value};
		pg.freed_at = (uint64_t *)calloc(MAX_HEAP_PAGES, sizeof(uint64_t));
		pg.freed = (unsigned char *)calloc(2 * MAX_HEAP_PAGES, 1);
		pg.cand = (size_t *)malloc(2 * MAX_HEAP_PAGES * sizeof(size_t));
		if (pg.freed_at == NULL || pg.freed == NULL || pg.cand == NULL)
			wl_die("out of memory");
		replay(0, ops, window, seed, &pg);
		free(pg.freed_at);
		free(pg.freed);
		free(pg.cand);
	}
	return 0;
}
