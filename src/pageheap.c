/*
 * pageheap.c — the radix tree of summaries, the hint, growth, find, alloc
 * and free. pageheap.h describes the data structures and invariants.
 *
 * Allocation (pageheap_alloc_locked):
 *   1. Fast path: if the leaf summary of the hint's chunk says the chunk
 *      holds a run of npages, search that chunk's bitmap from the hint.
 *   2. Otherwise walk the tree from level 0 (find): at each level scan the 8
 *      children of the entry chosen above (all of level 0 at the root) in
 *      address order; descend into the first whose max fits, or stop at the
 *      first place where the end of one entry plus the starts of the next
 *      ones make a run long enough (a run that crosses a boundary at that
 *      level). Runs found at a level above the leaves never need the bitmap.
 *   3. Nothing fits: grow the heap from the OS and retry.
 * Marking the pages updates the leaf summaries of the touched chunks and then
 * each level above, stopping as soon as a level's summaries do not change.
 * A change that stays inside one chunk (every 1-page operation) is applied
 * incrementally, through the one free run it touched (update_up); only
 * wider changes rescan bitmaps and re-merge children.
 */
#include "pageheap.h"

#include <errno.h>
#include <string.h>

#include "bits.h"
#include "msg.h"
#include "os.h"

#define FULL_CHUNK_SUM sum_free(PA_CHUNK_PAGES_SHIFT)

/* ---- geometry helpers -------------------------------------------------- */

static inline uintptr_t off_of(const struct pa_pageheap *h, uintptr_t addr)
{
	return addr - h->window_base;
}

static inline size_t chunk_index(const struct pa_pageheap *h, uintptr_t addr)
{
	return off_of(h, addr) >> PA_CHUNK_SHIFT;
}

static inline uintptr_t chunk_base(const struct pa_pageheap *h, size_t ci)
{
	return h->window_base + ((uintptr_t)ci << PA_CHUNK_SHIFT);
}

static inline unsigned page_in_chunk(uintptr_t addr)
{
	return (unsigned)((addr >> PA_PAGE_SHIFT) & (PA_CHUNK_PAGES - 1));
}

static inline struct pa_chunk *chunk_at(const struct pa_pageheap *h, size_t ci)
{
	return &h->chunks[ci >> PA_CHUNK_L2_BITS][ci & (PA_CHUNK_L2_COUNT - 1)];
}

static inline size_t level_index(const struct pa_pageheap *h, unsigned l, uintptr_t addr)
{
	return off_of(h, addr) >> PA_LEVEL_SHIFT(l);
}

static _Noreturn void corrupt(const char *what, unsigned level, size_t index, size_t npages)
{
	struct pa_msg m;
	msg_begin(&m);
	msg_str(&m, "internal error: ");
	msg_str(&m, what);
	msg_str(&m, " (level ");
	msg_uint(&m, level);
	msg_str(&m, ", index ");
	msg_uint(&m, index);
	msg_str(&m, ", npages ");
	msg_uint(&m, npages);
	msg_str(&m, ")");
	msg_end(&m);
	os_abort();
}

/* ---- the hint ---------------------------------------------------------- */

static void hint_set(struct pa_pageheap *h, uintptr_t addr)
{
	h->hidden_hint = pa_addr_hide(addr);
}

/* Pages at addr became free: the hint may not stay above them. */
static void hint_lower(struct pa_pageheap *h, uintptr_t addr)
{
	if (addr < pageheap_hint(h))
		hint_set(h, addr);
}

/* Nothing below addr is free (any more). */
static void hint_raise(struct pa_pageheap *h, uintptr_t addr)
{
	if (addr > pageheap_hint(h))
		hint_set(h, addr);
}

/* ---- address ranges ---------------------------------------------------- */

static int range_list_reserve(struct pa_range_list *rl, size_t need)
{
	if (need <= rl->cap)
		return 0;
	size_t cap = rl->cap ? rl->cap * 2 : os_page_size() / sizeof(struct pa_addr_range);
	while (cap < need)
		cap *= 2;
	struct pa_addr_range *v = os_alloc(cap * sizeof(*v));
	if (v == NULL)
		return -1;
	if (rl->n)
		memcpy(v, rl->v, rl->n * sizeof(*v));
	os_unmap(rl->v, rl->cap * sizeof(*v));
	rl->v = v;
	rl->cap = cap;
	return 0;
}

/* Index of the first range whose limit is above addr (n if none). */
static size_t range_list_search(const struct pa_range_list *rl, uintptr_t addr)
{
	size_t lo = 0, hi = rl->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (range_limit(&rl->v[mid]) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Insert [base, limit), which overlaps no range, merging with neighbours. */
static int range_list_add(struct pa_range_list *rl, uintptr_t base, uintptr_t limit)
{
	size_t i = range_list_search(rl, base);
	int join_lo = i > 0 && range_limit(&rl->v[i - 1]) == base;
	int join_hi = i < rl->n && range_base(&rl->v[i]) == limit;
	if (join_lo && join_hi) {
		range_set_limit(&rl->v[i - 1], range_limit(&rl->v[i]));
		memmove(&rl->v[i], &rl->v[i + 1], (rl->n - i - 1) * sizeof(rl->v[0]));
		rl->n--;
	} else if (join_lo) {
		range_set_limit(&rl->v[i - 1], limit);
	} else if (join_hi) {
		range_set_base(&rl->v[i], base);
	} else {
		if (range_list_reserve(rl, rl->n + 1) != 0)
			return -1;
		memmove(&rl->v[i + 1], &rl->v[i], (rl->n - i) * sizeof(rl->v[0]));
		range_set_base(&rl->v[i], base);
		range_set_limit(&rl->v[i], limit);
		rl->n++;
	}
	return 0;
}

int pageheap_contains_locked(const struct pa_pageheap *h, uintptr_t addr)
{
	size_t i = range_list_search(&h->ranges, addr);
	return i < h->ranges.n && range_base(&h->ranges.v[i]) <= addr;
}

/* The lowest heap address >= addr, or limit_hint if there is none. */
static uintptr_t heap_addr_at_or_above(const struct pa_pageheap *h, uintptr_t addr)
{
	size_t i = range_list_search(&h->ranges, addr);
	if (i == h->ranges.n)
		return h->limit_hint;
	return addr > range_base(&h->ranges.v[i]) ? addr : range_base(&h->ranges.v[i]);
}

/* ---- init and destroy -------------------------------------------------- */

static size_t level_bytes(unsigned window_bits, unsigned l)
{
	size_t entries = (size_t)1 << (window_bits - PA_LEVEL_SHIFT(l));
	return PA_ALIGN_UP(entries * sizeof(pa_sum), os_page_size());
}

static size_t tree_bytes(unsigned window_bits)
{
	size_t total = 0;
	for (unsigned l = 0; l < PA_SUM_LEVELS; l++)
		total += level_bytes(window_bits, l);
	return total;
}

/* Reserve the summary levels for a window; 0 or -1 (nothing left mapped). */
static int tree_reserve(struct pa_pageheap *h, unsigned window_bits, uintptr_t window_base)
{
	size_t total = tree_bytes(window_bits);
	char *p = os_reserve(total, os_page_size());
	if (p == NULL)
		return -1;
	size_t nchunks = (size_t)1 << (window_bits - PA_CHUNK_SHIFT);
	size_t l1_len = nchunks >> PA_CHUNK_L2_BITS ? nchunks >> PA_CHUNK_L2_BITS : 1;
	size_t l1_bytes = PA_ALIGN_UP(l1_len * sizeof(struct pa_chunk *), os_page_size());
	struct pa_chunk **l1 = os_alloc(l1_bytes);
	if (l1 == NULL || os_commit(p, level_bytes(window_bits, 0)) != 0) {
		os_unmap(l1, l1_bytes);
		os_unmap(p, total);
		return -1;
	}
	h->sum_reservation = p;
	h->sum_reservation_bytes = total;
	for (unsigned l = 0; l < PA_SUM_LEVELS; l++) {
		h->sum[l] = (pa_sum *)p;
		h->sum_len[l] = (size_t)1 << (window_bits - PA_LEVEL_SHIFT(l));
		p += level_bytes(window_bits, l);
	}
	h->chunks = l1;
	h->chunks_l1_len = l1_len;
	h->window_bits = window_bits;
	h->window_base = window_base;
	h->limit_hint = window_base + ((uintptr_t)1 << window_bits);
	return 0;
}

/*
 * The window for an address-space limit of `limit` bytes (SIZE_MAX: none).
 * Reserved space counts against the limit, and the full tree's ~585 MiB
 * would leave little or nothing of it for the heap. A process under the
 * limit can never map more than `limit` bytes, so a window 16 times that
 * (at least 64 GiB) holds every heap it can have with room for where the
 * kernel places them; its tree costs under 1/10000 of the limit.
 */
static unsigned window_bits_for(size_t limit)
{
	if (limit == SIZE_MAX)
		return PA_ADDR_BITS;
	unsigned bits = 36;
	while (bits < PA_ADDR_BITS && ((uintptr_t)1 << (bits - 4)) < limit)
		bits++;
	return bits;
}

/*
 * Reserve a tree for a window of at most `bits` centred on where the kernel
 * places mappings now, so our arenas can land inside; narrower windows (to
 * 64 GiB) are tried if the reservation is refused. 0 or -1.
 */
static int tree_reserve_narrow(struct pa_pageheap *h, unsigned bits, size_t limit)
{
	void *probe = os_reserve(PA_CHUNK_SIZE, os_page_size());
	if (probe == NULL)
		return -1;
	os_unmap(probe, PA_CHUNK_SIZE);
	if (limit <= PA_PLACE_LIMIT_MAX) {
		/* A small limit: arenas go in the GiB around the probe, so the
		 * heap needs one pagemap leaf, not two when it straddles. */
		h->place_region = ((uintptr_t)probe >> PA_PLACE_REGION_SHIFT) + 1;
	}
	for (;;) {
		uintptr_t size = (uintptr_t)1 << bits;
		if (tree_reserve(h, bits, PA_ALIGN_DOWN((uintptr_t)probe, size)) == 0)
			return 0;
		if (bits == 36)
			return -1;
		bits = bits - 4 > 36 ? bits - 4 : 36;
	}
}

int pageheap_init(struct pa_pageheap *h, const struct pa_pageheap_opts *opts)
{
	static const struct pa_pageheap_opts defaults;
	if (opts == NULL)
		opts = &defaults;
	memset(h, 0, sizeof(*h));
	lock_init(&h->lock);
	h->metadata_only = opts->metadata_only;
	h->window_reserved = opts->window_reserved && opts->window_bits != 0;
	h->mpol = opts->mpol;
	h->mpol_nodes = opts->mpol_nodes;
	h->grow_prepare = opts->grow_prepare;
	h->arena_bytes =
	    opts->arena_bytes ? PA_ALIGN_UP(opts->arena_bytes, PA_CHUNK_SIZE) : PA_ARENA_DEFAULT;
	if (opts->window_bits != 0) {
		if (opts->window_bits < PA_WINDOW_MIN_BITS || opts->window_bits > PA_ADDR_BITS) {
			errno = EINVAL;
			return -1;
		}
		uintptr_t base =
		    PA_ALIGN_DOWN(opts->window_base, (uintptr_t)1 << opts->window_bits);
		if (tree_reserve(h, opts->window_bits, base) != 0) {
			errno = ENOMEM;
			return -1;
		}
	} else {
		size_t limit = os_addr_space_limit();
		unsigned bits = window_bits_for(limit);
		if (limit != SIZE_MAX) {
			/* Reserve no more than 1/16 of the limit per growth: an
			 * arena's unused tail counts against it too. */
			size_t most = PA_ALIGN_DOWN(limit / 16, PA_CHUNK_SIZE);
			if (most < PA_CHUNK_SIZE)
				most = PA_CHUNK_SIZE;
			if (h->arena_bytes > most)
				h->arena_bytes = most;
		}
		if (bits < PA_ADDR_BITS || tree_reserve(h, PA_ADDR_BITS, 0) != 0) {
			/* A limit, or a refusal (a limit set since we read it). */
			if (tree_reserve_narrow(h, bits < PA_ADDR_BITS ? bits : 44, limit) != 0) {
				errno = ENOMEM;
				return -1;
			}
			h->window_fallback = 1;
		}
	}
	hint_set(h, h->limit_hint);
	return 0;
}

void pageheap_destroy(struct pa_pageheap *h)
{
	for (size_t i = 0; i < h->arenas.n; i++)
		os_unmap((void *)range_base(&h->arenas.v[i]),
		         range_limit(&h->arenas.v[i]) - range_base(&h->arenas.v[i]));
	for (size_t i = 0; i < h->chunks_l1_len; i++)
		os_unmap(h->chunks[i], PA_CHUNK_L2_COUNT * sizeof(struct pa_chunk));
	os_unmap(h->chunks,
	         PA_ALIGN_UP(h->chunks_l1_len * sizeof(struct pa_chunk *), os_page_size()));
	os_unmap(h->ranges.v, h->ranges.cap * sizeof(struct pa_addr_range));
	os_unmap(h->arenas.v, h->arenas.cap * sizeof(struct pa_addr_range));
	os_unmap(h->sum_reservation, h->sum_reservation_bytes);
	memset(h, 0, sizeof(*h));
}

/* ---- summaries ------------------------------------------------------------ */

/* Entries [lo, hi) of level l that cover [base, limit). */
static void level_span(const struct pa_pageheap *h, unsigned l, uintptr_t base, uintptr_t limit,
                       size_t *lo, size_t *hi)
{
	*lo = level_index(h, l, base);
	*hi = level_index(h, l, limit - 1) + 1;
}

/* Committed byte range of level l's array for heap range [base, limit). */
static void level_commit_span(const struct pa_pageheap *h, unsigned l, uintptr_t base,
                              uintptr_t limit, uintptr_t *from, uintptr_t *to)
{
	if (l == 0) {
		/* Committed whole at init: the root scan may read any of it. */
		*from = (uintptr_t)h->sum[0];
		*to = *from + level_bytes(h->window_bits, 0);
		return;
	}
	size_t lo, hi;
	level_span(h, l, base, limit, &lo, &hi);
	lo = PA_ALIGN_DOWN(lo, PA_SUM_FANOUT);
	hi = PA_ALIGN_UP(hi, PA_SUM_FANOUT);
	if (hi > h->sum_len[l])
		hi = h->sum_len[l];
	*from = PA_ALIGN_DOWN((uintptr_t)&h->sum[l][lo], os_page_size());
	*to = PA_ALIGN_UP((uintptr_t)&h->sum[l][hi], os_page_size());
}

/*
 * Incremental update of the levels above one changed chunk.
 *
 * An exact change (a wholly free range marked in use, or a wholly used one
 * marked free) changes exactly one free run of the heap: alloc splits the
 * run that held the range, free joins the range with its free neighbours.
 * Every entry above the chunk sees that run clipped to its region, and
 * moves only through it:
 *
 *   free:  max = larger of the old max and the clipped run; start (end) =
 *          the clipped run if it reaches the region's first (last) page.
 *   alloc: start (end) changes only if it reached the changed child, to
 *          the child's offset plus the child's new start (end); max stays
 *          unless the clipped run was a longest one: if it was the whole
 *          region, the larger of start and end is left, otherwise (only
 *          then) the 8 children are merged afresh.
 *
 * The clipped run grows level by level through the siblings' ends (below)
 * and starts (above) while it touches a child's edge. Siblings share the
 * changed child's block of 8, which is always committed; those that are
 * not heap read as 0 and stop the run. So a level costs a few loads and
 * compares instead of a merge of 8 children.
 */
static inline __attribute__((always_inline)) int
update_level(struct pa_pageheap *h, unsigned l, size_t *ip, int alloc, struct chunk_run *run)
{
	const unsigned log_pages = PA_LEVEL_LOG_PAGES(l + 1), size = 1u << log_pages;
	const size_t i = *ip >> PA_SUM_LEVEL_BITS;
	const unsigned k = (unsigned)(*ip & (PA_SUM_FANOUT - 1));
	const pa_sum *kids = &h->sum[l + 1][i << PA_SUM_LEVEL_BITS];
	for (unsigned j = k; run->lo && j-- > 0;) {
		unsigned e = sum_sub_end(kids[j]);
		run->len += e;
		run->lo = e == size;
	}
	for (unsigned j = k + 1; run->hi && j < PA_SUM_FANOUT; j++) {
		unsigned st = sum_sub_start(kids[j]);
		run->len += st;
		run->hi = st == size;
	}
	/* Below the root no summary has the all-free bit: skip its branches. */
	pa_sum old = h->sum[l][i], s;
	unsigned start = l ? sum_sub_start(old) : sum_start(old);
	unsigned max = l ? sum_sub_max(old) : sum_max(old);
	unsigned end = l ? sum_sub_end(old) : sum_end(old);
	if (!alloc) {
		start = run->lo ? run->len : start;
		max = run->len > max ? run->len : max;
		end = run->hi ? run->len : end;
	} else if (run->len == max && !(run->lo && run->hi)) {
		s = sum_merge(kids, PA_SUM_FANOUT, log_pages);
		goto store;
	} else {
		const unsigned below = k * size, above = (PA_SUM_FANOUT - 1 - k) * size;
		if (start >= below)
			start = below + sum_sub_start(kids[k]);
		if (end >= above)
			end = above + sum_sub_end(kids[k]);
		/* A region that was all free keeps only its start and end. */
		if (run->lo && run->hi)
			max = start > end ? start : end;
	}
	s = l ? sum_sub_pack(start, max, end) : sum_pack(start, max, end);
store:
	if (s == old)
		return 0;
	h->sum[l][i] = s;
	*ip = i;
	return 1;
}

static void update_up(struct pa_pageheap *h, size_t ci, int alloc, struct chunk_run run)
{
	size_t i = ci; /* the changed entry of level l + 1 */
#pragma GCC unroll 8
	for (int l = (int)PA_SUM_LEVELS - 2; l >= 0; l--)
		if (!update_level(h, (unsigned)l, &i, alloc, &run))
			return;
}

/* The new leaf summary of chunk ci after an exact change of pages
 * [from, from + n) of it; *run: the free run it touched. */
static inline pa_sum leaf_after(const struct pa_pageheap *h, size_t ci, unsigned from, unsigned n,
                                int alloc, struct chunk_run *run)
{
	const struct pa_chunk *c = chunk_at(h, ci);
	pa_sum old = h->sum[PA_SUM_LEVELS - 1][ci];
	return alloc ? chunk_sum_after_alloc(c, old, from, n, run)
	             : chunk_sum_after_free(c, old, from, n, run);
}

/*
 * Recompute the summaries covering [base, base + npages pages) after a
 * change of the bitmaps there. Interior chunks of a multi-chunk range are
 * set wholesale: alloc means fully allocated, otherwise fully free. With
 * `exact` (every page of the range changed state, none was already there)
 * a change inside one chunk is applied incrementally (update_up); other
 * changes rescan the edge chunks and re-merge every level, stopping at the
 * first level whose summaries do not change.
 */
static void update(struct pa_pageheap *h, uintptr_t base, size_t npages, int alloc, int exact)
{
	uintptr_t limit = base + npages * PA_PAGE_SIZE;
	size_t sc = chunk_index(h, base), ec = chunk_index(h, limit - 1);
	pa_sum *leaf = h->sum[PA_SUM_LEVELS - 1];
	if (sc == ec && exact) {
		struct chunk_run run;
		pa_sum s = leaf_after(h, sc, page_in_chunk(base), (unsigned)npages, alloc, &run);
		if (s == leaf[sc])
			return;
		leaf[sc] = s;
		update_up(h, sc, alloc, run);
		return;
	}
	leaf[sc] = chunk_summarize(chunk_at(h, sc));
	pa_sum whole = alloc ? 0 : FULL_CHUNK_SUM;
	for (size_t c = sc + 1; c < ec; c++)
		leaf[c] = whole;
	leaf[ec] = chunk_summarize(chunk_at(h, ec));
	for (int l = (int)PA_SUM_LEVELS - 2; l >= 0; l--) {
		unsigned child_log_pages = PA_LEVEL_LOG_PAGES((unsigned)l + 1);
		size_t lo, hi;
		int changed = 0;
		level_span(h, (unsigned)l, base, limit, &lo, &hi);
		for (size_t i = lo; i < hi; i++) {
			const pa_sum *kids = &h->sum[l + 1][i << PA_SUM_LEVEL_BITS];
			pa_sum s = sum_merge(kids, PA_SUM_FANOUT, child_log_pages);
			if (s != h->sum[l][i]) {
				h->sum[l][i] = s;
				changed = 1;
			}
		}
		if (!changed)
			return;
	}
}

/* Resident memory passed the limit: flag it for pageheap_after_alloc. */
static inline void check_limit(struct pa_pageheap *h)
{
	if (h->limit_pages != 0 && pageheap_resident_pages_locked(h) > h->limit_pages)
		__atomic_store_n(&h->pressure, 1, __ATOMIC_RELAXED);
}

/* Chunks [sc, ec] received free pages: tell the scavenger. */
static void stamp_free(struct pa_pageheap *h, size_t sc, size_t ec)
{
	uint32_t stamp = __atomic_load_n(&h->epoch, __ATOMIC_RELAXED) + 1;
	if (stamp == 0) /* 0 means "nothing pending": at the wrap, one epoch late */
		stamp = 1;
	for (size_t c = sc; c <= ec; c++)
		__atomic_store_n(&chunk_at(h, c)->free_stamp, stamp, __ATOMIC_RELAXED);
	if (ec + 1 > h->scav_ci)
		__atomic_store_n(&h->scav_ci, ec + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->free_count, h->free_count + 1, __ATOMIC_RELAXED);
}

/* ---- growth ------------------------------------------------------------- */

int pageheap_grow_range_locked(struct pa_pageheap *h, uintptr_t base, size_t npages)
{
	uintptr_t size = (uintptr_t)npages * PA_PAGE_SIZE, limit = base + size;
	uintptr_t window_limit = h->window_base + ((uintptr_t)1 << h->window_bits);
	if (npages == 0 || base == 0 || (base | size) & (PA_CHUNK_SIZE - 1) ||
	    base < h->window_base || limit > window_limit || limit <= base) {
		errno = EINVAL;
		return -1;
	}
	size_t i = range_list_search(&h->ranges, base);
	if (i < h->ranges.n && range_base(&h->ranges.v[i]) < limit) {
		errno = EINVAL; /* overlaps the heap */
		return -1;
	}
	if (range_list_reserve(&h->ranges, h->ranges.n + 1) != 0 ||
	    (h->grow_prepare != NULL && h->grow_prepare(base, size) != 0))
		goto nomem;
	for (unsigned l = 1; l < PA_SUM_LEVELS; l++) {
		uintptr_t from, to;
		level_commit_span(h, l, base, limit, &from, &to);
		if (os_commit((void *)from, to - from) != 0)
			goto nomem;
	}
	size_t sc = chunk_index(h, base), ec = chunk_index(h, limit - 1);
	for (size_t l1 = sc >> PA_CHUNK_L2_BITS; l1 <= ec >> PA_CHUNK_L2_BITS; l1++) {
		if (h->chunks[l1] != NULL)
			continue;
		struct pa_chunk *block = os_alloc(PA_CHUNK_L2_COUNT * sizeof(struct pa_chunk));
		if (block == NULL)
			goto nomem;
		__atomic_store_n(&h->chunks[l1], block, __ATOMIC_RELEASE);
		h->chunks_l2_blocks++;
	}
	/* Fresh memory from the OS is not resident: it starts scavenged. */
	for (size_t c = sc; c <= ec; c++)
		memset(chunk_at(h, c)->scav, 0xff, sizeof(chunk_at(h, c)->scav));
	range_list_add(&h->ranges, base, limit);
	if (h->end_ci == 0 || sc < h->start_ci)
		__atomic_store_n(&h->start_ci, sc, __ATOMIC_RELAXED);
	if (ec + 1 > h->end_ci)
		__atomic_store_n(&h->end_ci, ec + 1, __ATOMIC_RELEASE);
	h->mapped_pages += npages;
	h->scav_pages += npages;
	hint_lower(h, base);
	update(h, base, npages, 0, 0);
	return 0;
nomem:
	errno = ENOMEM;
	return -1;
}

int pageheap_grow_range(struct pa_pageheap *h, uintptr_t base, size_t npages)
{
	lock_acquire(&h->lock);
	int r = pageheap_grow_range_locked(h, base, npages);
	lock_release(&h->lock);
	return r;
}

/* Where arenas may go: the window, or the placement region inside it. */
static void arena_bounds(const struct pa_pageheap *h, uintptr_t *lo, uintptr_t *hi)
{
	*lo = h->window_base;
	*hi = *lo + ((uintptr_t)1 << h->window_bits);
	if (h->place_region != 0) {
		*lo = (h->place_region - 1) << PA_PLACE_REGION_SHIFT;
		*hi = *lo + PA_PLACE_REGION;
	}
}

/* Is [p, p + size) where arenas may go? */
static int in_window(const struct pa_pageheap *h, uintptr_t p, uintptr_t size)
{
	uintptr_t lo, hi;
	arena_bounds(h, &lo, &hi);
	return p >= lo && p + size <= hi && p + size > p;
}

/* The chunk-aligned base of the arena range that ends at the current
 * arena's end (0 if none). */
static uintptr_t arena_range_base(const struct pa_pageheap *h)
{
	size_t i = range_list_search(&h->arenas, h->arena_end - 1);
	if (i == h->arenas.n || range_base(&h->arenas.v[i]) >= h->arena_end)
		return 0;
	return PA_ALIGN_DOWN(range_base(&h->arenas.v[i]), PA_CHUNK_SIZE);
}

/*
 * Reserve size bytes of chunk-aligned address space inside the window.
 * First try right after the current arena, so the heap stays contiguous.
 * In a narrowed window (an address-space limit), then right below it: the
 * kernel places mappings top down, so that is where room usually is, and an
 * exact placement needs no alignment slack, which a nearly full address
 * space may not have. (Without a limit the heap does not grow downwards:
 * a new arena right below a freed run would let first fit join the two,
 * which changes where a growing heap's runs land.) Then wherever the kernel
 * likes; in a narrowed window, scan it downwards.
 */
static uintptr_t reserve_arena(struct pa_pageheap *h, uintptr_t size)
{
	if (h->window_reserved) {
		uintptr_t p = h->arena_end != 0 ? h->arena_end : h->window_base;
		uintptr_t top = h->window_base + ((uintptr_t)1 << h->window_bits);
		return size <= top - p ? p : 0;
	}
	if (h->arena_end != 0) {
		int narrowed = h->window_bits < PA_ADDR_BITS;
		uintptr_t at[2] = {h->arena_end, arena_range_base(h) - size};
		for (int k = 0; k < 1 + narrowed; k++) {
			if (!in_window(h, at[k], size))
				continue;
			uintptr_t p = (uintptr_t)os_reserve_at(at[k], size);
			if (p != 0)
				return p;
		}
	}
	uintptr_t p = (uintptr_t)os_reserve(size, PA_CHUNK_SIZE);
	if (p != 0 && in_window(h, p, size))
		return p;
	os_unmap((void *)p, size);
	if (h->window_bits >= PA_ADDR_BITS)
		return 0;
	uintptr_t bottom, top;
	arena_bounds(h, &bottom, &top);
	for (unsigned k = 1; k <= 512 && (uintptr_t)k * size <= top - bottom; k++) {
		p = (uintptr_t)os_reserve_at(top - k * size, size);
		if (p != 0)
			return p;
	}
	return 0;
}

/*
 * Reserve the most pages (at least npages) that the OS still gives at the
 * end of chunk `c` (from_top: the pages just below c + PA_CHUNK_SIZE) or at
 * its start; 0 if not even npages. *at receives their address.
 */
static size_t reserve_part(uintptr_t c, int from_top, size_t npages, uintptr_t *at)
{
	size_t lo = npages, hi = PA_CHUNK_PAGES - 1, got = 0;
	while (lo <= hi) { /* the largest n in [lo, hi] that can be reserved */
		size_t n = lo + (hi - lo) / 2;
		uintptr_t a = from_top ? c + PA_CHUNK_SIZE - n * PA_PAGE_SIZE : c;
		void *p = os_reserve_at(a, n * PA_PAGE_SIZE);
		if (p == NULL) {
			hi = n - 1;
			continue;
		}
		os_unmap(p, n * PA_PAGE_SIZE);
		got = n;
		*at = a;
		lo = n + 1;
	}
	return got != 0 && os_reserve_at(*at, got * PA_PAGE_SIZE) != NULL ? got : 0;
}

/*
 * Where the kernel still has room: the most pages (at least npages, at most
 * a chunk's less one) it places anywhere, cut to the part inside one chunk
 * that is not heap yet. Their count, their address in *at and the chunk's in
 * *c; 0 if none.
 */
static size_t reserve_part_anywhere(struct pa_pageheap *h, size_t npages, uintptr_t *c,
                                    uintptr_t *at)
{
	for (size_t n = PA_CHUNK_PAGES - 1;; n = n / 2 > npages ? n / 2 : npages) {
		/* One OS page more, so that n heap pages fit whatever its alignment. */
		size_t bytes = n * PA_PAGE_SIZE + os_page_size();
		uintptr_t p = (uintptr_t)os_reserve(bytes, os_page_size());
		if (p != 0) {
			uintptr_t lo = PA_ALIGN_UP(p, PA_PAGE_SIZE);
			uintptr_t hi = PA_ALIGN_DOWN(p + bytes, PA_PAGE_SIZE);
			uintptr_t mid = PA_ALIGN_DOWN(hi - 1, PA_CHUNK_SIZE); /* a chunk's start */
			if (mid > lo && mid - lo < hi - mid)
				lo = mid; /* the larger part is in the upper chunk */
			else if (mid > lo)
				hi = mid;
			os_unmap((void *)p, lo - p);
			os_unmap((void *)hi, p + bytes - hi);
			*c = PA_ALIGN_DOWN(lo, PA_CHUNK_SIZE);
			size_t got = (hi - lo) / PA_PAGE_SIZE;
			if (got >= npages && in_window(h, *c, PA_CHUNK_SIZE) &&
			    !pageheap_contains_locked(h, *c)) {
				*at = lo;
				return got;
			}
			os_unmap((void *)lo, hi - lo);
		}
		if (n == npages)
			return 0;
	}
}

/*
 * The address space is nearly all used (a limit, ulimit -v) and not one more
 * chunk can be reserved: grow by the part of a chunk that can, next to the
 * heap (the chunk above the current arena, or the one below it), else
 * wherever the kernel still has room. The chunk joins the heap whole; its
 * pages outside the part are not ours, so they are allocated at once and
 * never freed (they count in inuse_pages). Without this, up to a chunk
 * (4 MiB) of a process's last address space goes unused.
 */
static int grow_partial(struct pa_pageheap *h, size_t npages)
{
	if (range_list_reserve(&h->arenas, h->arenas.n + 1) != 0)
		return -1;
	uintptr_t below = arena_range_base(h);
	uintptr_t chunk[3] = {h->arena_end, below != 0 ? below - PA_CHUNK_SIZE : 0, 0};
	for (int k = 0; k < 3; k++) {
		uintptr_t c = chunk[k], at = 0;
		size_t n;
		if (k == 2)
			n = reserve_part_anywhere(h, npages, &c, &at);
		else if (c == 0 || !in_window(h, c, PA_CHUNK_SIZE) ||
		         pageheap_contains_locked(h, c))
			continue;
		else
			n = reserve_part(c, k == 1, npages, &at);
		if (n == 0)
			continue;
		if (os_commit((void *)at, n * PA_PAGE_SIZE) != 0 ||
		    pageheap_grow_range_locked(h, c, PA_CHUNK_PAGES) != 0) {
			os_unmap((void *)at, n * PA_PAGE_SIZE);
			continue;
		}
		range_list_add(&h->arenas, at, at + n * PA_PAGE_SIZE);
		h->reserved_bytes += n * PA_PAGE_SIZE;
		if (at > c)
			pageheap_alloc_range_locked(h, c, (at - c) / PA_PAGE_SIZE);
		uintptr_t end = at + n * PA_PAGE_SIZE;
		if (end < c + PA_CHUNK_SIZE)
			pageheap_alloc_range_locked(h, end,
			                            (c + PA_CHUNK_SIZE - end) / PA_PAGE_SIZE);
		if (k == 0) /* the arena now ends with this chunk */
			h->arena_next = h->arena_end = c + PA_CHUNK_SIZE;
		__atomic_store_n(&h->grow_count, h->grow_count + 1, __ATOMIC_RELAXED);
		return 0;
	}
	return -1;
}

/* May the heap map npages more pages under memory_limit_hard? Lock held. */
static int hard_limit_allows(const struct pa_pageheap *h, size_t npages)
{
	return h->hard_limit_pages == 0 || (h->mapped_pages <= h->hard_limit_pages &&
	                                    npages <= h->hard_limit_pages - h->mapped_pages);
}

/* Get at least npages of new heap from the OS: reserve, commit, grow. */
static int grow_from_os(struct pa_pageheap *h, size_t npages)
{
	if (npages > ((uintptr_t)1 << h->window_bits) / PA_PAGE_SIZE)
		goto fail;
	uintptr_t need = PA_ALIGN_UP((uintptr_t)npages * PA_PAGE_SIZE, PA_CHUNK_SIZE);
	if (!hard_limit_allows(h, need / PA_PAGE_SIZE)) {
		h->hard_limit_refusals++;
		errno = ENOMEM;
		return -1;
	}
	if (h->arena_end - h->arena_next < need) {
		uintptr_t size = need > h->arena_bytes ? need : h->arena_bytes;
		uintptr_t p = reserve_arena(h, size);
		if (p == 0 && size > need)
			p = reserve_arena(h, size = need);
		if (p == 0 && need == PA_CHUNK_SIZE && h->arena_next == h->arena_end &&
		    !h->window_reserved && grow_partial(h, npages) == 0)
			return 0;
		if (p == 0 || range_list_reserve(&h->arenas, h->arenas.n + 1) != 0) {
			if (!h->window_reserved)
				os_unmap((void *)p, size);
			goto fail;
		}
		range_list_add(&h->arenas, p, p + size);
		/* Before the first touch: the kernel places a page by the policy
		 * in force when it faults it in. */
		if (h->mpol != 0 &&
		    os_mbind((void *)p, size, (enum os_mpol)h->mpol, h->mpol_nodes) != 0)
			h->mpol_failures++;
		if (h->hugepage_arenas)
			os_hugepage((void *)p, size);
		h->reserved_bytes += size;
		if (p != h->arena_end) {
			/* Not contiguous: the old arena's tail joins the heap as
			 * free, released pages (as Go does with curArena) rather
			 * than being stranded. */
			uintptr_t tail = h->arena_end - h->arena_next;
			if (tail != 0 && hard_limit_allows(h, (tail + need) / PA_PAGE_SIZE) &&
			    os_commit((void *)h->arena_next, tail) == 0 &&
			    pageheap_grow_range_locked(h, h->arena_next, tail / PA_PAGE_SIZE) == 0)
				__atomic_store_n(&h->grow_count, h->grow_count + 1,
				                 __ATOMIC_RELAXED);
			h->arena_next = p;
		}
		h->arena_end = p + size;
	}
	uintptr_t base = h->arena_next;
	if (os_commit((void *)base, need) != 0 ||
	    pageheap_grow_range_locked(h, base, need / PA_PAGE_SIZE) != 0)
		goto fail;
	h->arena_next += need;
	__atomic_store_n(&h->grow_count, h->grow_count + 1, __ATOMIC_RELAXED);
	return 0;
fail:
	h->grow_failures++;
	errno = ENOMEM;
	return -1;
}

/* ---- find and alloc ----------------------------------------------------- */

/* The address window proven to hold the first free page; narrowed while
 * descending, fixed once the search has to look past the first free entry. */
struct first_free {
	uintptr_t base, bound; /* inclusive, offsets from window_base */
};

static void found_free(struct first_free *ff, uintptr_t off, uintptr_t size)
{
	if (ff->base <= off && off + (size - 1) <= ff->bound) {
		ff->base = off;
		ff->bound = off + (size - 1);
	}
}

/*
 * Search the tree for the first run of npages free pages. Returns its
 * address, or 0 if there is none; *new_hint receives the lowest address
 * that may still be free.
 */
static uintptr_t find(struct pa_pageheap *h, size_t npages, uintptr_t *new_hint)
{
	struct first_free ff = {0, ~(uintptr_t)0};
	uintptr_t hint_off = off_of(h, pageheap_hint(h));
	/* The root scan stops at the heap's last level-0 entry. */
	size_t root_len = ((h->end_ci - 1) >> ((PA_SUM_LEVELS - 1) * PA_SUM_LEVEL_BITS)) + 1;
	size_t parent = 0;

	for (unsigned l = 0; l < PA_SUM_LEVELS; l++) {
		const unsigned log_pages = PA_LEVEL_LOG_PAGES(l), shift = PA_LEVEL_SHIFT(l);
		const size_t entry_pages = (size_t)1 << log_pages;
		size_t first = l == 0 ? 0 : parent << PA_SUM_LEVEL_BITS;
		size_t len = l == 0 ? root_len : PA_SUM_FANOUT;
		/* Skip entries below the hint when the hint lies in this block. */
		size_t j0 = 0, hint_idx = hint_off >> shift;
		if (hint_idx >= first && hint_idx < first + len)
			j0 = hint_idx - first;

		/* [run_base, run_base + run) is the free run being extended, in
		 * pages from the block's first page. */
		size_t run_base = 0, run = 0;
		for (size_t j = j0; j < len; j++) {
			pa_sum s = h->sum[l][first + j];
			if (s == 0) {
				run = 0;
				continue;
			}
			found_free(&ff, (uintptr_t)(first + j) << shift, (uintptr_t)1 << shift);
			size_t start = sum_start(s);
			if (run + start >= npages) {
				if (run == 0)
					run_base = j << log_pages;
				run += start;
				break;
			}
			if (sum_max(s) >= npages) {
				parent = first + j;
				goto descend;
			}
			if (run == 0 || start < entry_pages) {
				run = sum_end(s);
				run_base = ((j + 1) << log_pages) - run;
				continue;
			}
			run += entry_pages;
		}
		if (run >= npages) {
			*new_hint = h->window_base + ff.base;
			return h->window_base + ((uintptr_t)first << shift) +
			       (uintptr_t)run_base * PA_PAGE_SIZE;
		}
		if (l == 0) {
			*new_hint = h->limit_hint;
			return 0;
		}
		corrupt("summary promised a run its children lack", l, parent, npages);
	descend:;
	}

	/* The leaf at `parent` is a chunk whose max fits: search its bitmap. */
	unsigned first_free;
	unsigned j = chunk_find(chunk_at(h, parent), (unsigned)npages, 0, &first_free);
	if (j == CHUNK_NOT_FOUND)
		corrupt("chunk summary promised a run its bitmap lacks", PA_SUM_LEVELS - 1, parent,
		        npages);
	uintptr_t cbase = (uintptr_t)parent << PA_CHUNK_SHIFT;
	uintptr_t ffoff = cbase + (uintptr_t)first_free * PA_PAGE_SIZE;
	found_free(&ff, ffoff, cbase + PA_CHUNK_SIZE - ffoff);
	*new_hint = h->window_base + ff.base;
	return chunk_base(h, parent) + (uintptr_t)j * PA_PAGE_SIZE;
}

size_t pageheap_alloc_range_locked(struct pa_pageheap *h, uintptr_t addr, size_t npages)
{
	uintptr_t limit = addr + npages * PA_PAGE_SIZE;
	size_t sc = chunk_index(h, addr), ec = chunk_index(h, limit - 1);
	unsigned si = page_in_chunk(addr), ei = page_in_chunk(limit - 1);
	unsigned edge_scav = 0; /* of the first and last chunk */
	size_t scav = 0;
	uint64_t clash;
	if (sc == ec) {
		clash = chunk_mark_used(chunk_at(h, sc), si, ei + 1 - si, &edge_scav);
	} else {
		clash = chunk_mark_used(chunk_at(h, sc), si, PA_CHUNK_PAGES - si, &edge_scav);
		for (size_t c = sc + 1; c < ec; c++)
			scav += chunk_alloc_range(chunk_at(h, c), 0, PA_CHUNK_PAGES);
		clash |= chunk_mark_used(chunk_at(h, ec), 0, ei + 1, &edge_scav);
	}
	scav += edge_scav;
	update(h, addr, npages, 1, clash == 0);
	h->inuse_pages += npages;
	h->scav_pages -= scav;
	check_limit(h);
	return scav;
}

uintptr_t pageheap_alloc_locked(struct pa_pageheap *h, size_t npages, size_t *scav)
{
	if (npages == 0 || npages > ((uintptr_t)1 << h->window_bits) / PA_PAGE_SIZE) {
		errno = npages == 0 ? EINVAL : ENOMEM;
		return 0;
	}
	for (;;) {
		uintptr_t addr = 0, new_hint = 0;
		if (chunk_index(h, pageheap_hint(h)) < h->end_ci) {
			/* Fast path: the run may be in the hint's own chunk. */
			size_t ci = chunk_index(h, pageheap_hint(h));
			unsigned pi = page_in_chunk(pageheap_hint(h));
			if (PA_CHUNK_PAGES - pi >= npages &&
			    sum_max(h->sum[PA_SUM_LEVELS - 1][ci]) >= npages) {
				unsigned first_free;
				unsigned j =
				    chunk_find(chunk_at(h, ci), (unsigned)npages, pi, &first_free);
				if (j == CHUNK_NOT_FOUND)
					corrupt("leaf summary promised a run its bitmap lacks",
					        PA_SUM_LEVELS - 1, ci, npages);
				addr = chunk_base(h, ci) + (uintptr_t)j * PA_PAGE_SIZE;
				new_hint = chunk_base(h, ci) + (uintptr_t)first_free * PA_PAGE_SIZE;
			} else {
				addr = find(h, npages, &new_hint);
				/* A hint deduced at a coarse level may fall in a gap
				 * between ranges: move it up to real heap. */
				new_hint = heap_addr_at_or_above(h, new_hint);
			}
		}
		if (addr != 0) {
			size_t s = pageheap_alloc_range_locked(h, addr, npages);
			if (scav != NULL)
				*scav = s;
			hint_raise(h, new_hint);
			return addr;
		}
		/* Nothing free anywhere for one page means nothing free at all. */
		if (npages == 1)
			hint_set(h, h->limit_hint);
		if (h->metadata_only || grow_from_os(h, npages) != 0) {
			errno = ENOMEM;
			return 0;
		}
	}
}

uintptr_t pageheap_alloc(struct pa_pageheap *h, size_t npages, size_t *scav)
{
	lock_acquire(&h->lock);
	uintptr_t addr = pageheap_alloc_locked(h, npages, scav);
	lock_release(&h->lock);
	pageheap_after_alloc(h);
	return addr;
}

/* ---- free --------------------------------------------------------------- */

void pageheap_free_locked(struct pa_pageheap *h, uintptr_t addr, size_t npages)
{
	uintptr_t limit = addr + npages * PA_PAGE_SIZE;
	size_t sc = chunk_index(h, addr), ec = chunk_index(h, limit - 1);
	unsigned si = page_in_chunk(addr), ei = page_in_chunk(limit - 1);
	hint_lower(h, addr);
	uint64_t clash;
	if (sc == ec) {
		clash = chunk_mark_free(chunk_at(h, sc), si, ei + 1 - si);
	} else {
		clash = chunk_mark_free(chunk_at(h, sc), si, PA_CHUNK_PAGES - si);
		for (size_t c = sc + 1; c < ec; c++)
			chunk_mark_free(chunk_at(h, c), 0, PA_CHUNK_PAGES);
		clash |= chunk_mark_free(chunk_at(h, ec), 0, ei + 1);
	}
	update(h, addr, npages, 0, clash == 0);
	h->inuse_pages -= npages;
	stamp_free(h, sc, ec);
}

static void huge_released(struct pa_pageheap *h, struct pa_chunk *c, unsigned start, unsigned n);

void pageheap_mark_released_locked(struct pa_pageheap *h, uintptr_t addr, size_t npages,
                                   uint64_t released)
{
	for (size_t i = 0; i < npages && i < 64; i++) {
		if (!(released >> i & 1))
			continue;
		uintptr_t a = addr + i * PA_PAGE_SIZE;
		struct pa_chunk *c = pageheap_chunk(h, a);
		unsigned k = page_in_chunk(a);
		uint64_t bit = (uint64_t)1 << (k % 64u);
		if ((c->alloc[k / 64u] & bit) || (c->scav[k / 64u] & bit))
			continue;
		c->scav[k / 64u] |= bit;
		h->scav_pages++;
		huge_released(h, c, k, 1);
	}
}

void pageheap_free(struct pa_pageheap *h, uintptr_t addr, size_t npages)
{
	lock_acquire(&h->lock);
	pageheap_free_locked(h, addr, npages);
	lock_release(&h->lock);
}

enum pa_page_fault pageheap_check_locked(const struct pa_pageheap *h, uintptr_t addr, size_t npages)
{
	if (npages == 0 || npages > ((uintptr_t)1 << h->window_bits) / PA_PAGE_SIZE)
		return PA_PAGE_BAD_SIZE;
	if (addr & (PA_PAGE_SIZE - 1))
		return PA_PAGE_UNALIGNED;
	uintptr_t limit = addr + npages * PA_PAGE_SIZE;
	size_t i = range_list_search(&h->ranges, addr);
	if (limit < addr || i == h->ranges.n || range_base(&h->ranges.v[i]) > addr ||
	    range_limit(&h->ranges.v[i]) < limit)
		return PA_PAGE_NOT_HEAP;
	for (uintptr_t a = addr; a < limit;) {
		uintptr_t next = PA_ALIGN_DOWN(a, PA_CHUNK_SIZE) + PA_CHUNK_SIZE;
		if (next > limit)
			next = limit;
		unsigned n = (unsigned)((next - a) / PA_PAGE_SIZE);
		if (chunk_count_alloc(pageheap_chunk(h, a), page_in_chunk(a), n) != n)
			return PA_PAGE_NOT_ALLOCATED;
		a = next;
	}
	return PA_PAGE_OK;
}

int pageheap_alloc_at(struct pa_pageheap *h, uintptr_t addr, size_t npages, size_t *scav)
{
	lock_acquire(&h->lock);
	uintptr_t limit = addr + npages * PA_PAGE_SIZE;
	size_t i = range_list_search(&h->ranges, addr);
	int ok = npages != 0 && npages <= ((uintptr_t)1 << h->window_bits) / PA_PAGE_SIZE &&
	         (addr & (PA_PAGE_SIZE - 1)) == 0 && limit > addr && i < h->ranges.n &&
	         range_base(&h->ranges.v[i]) <= addr && range_limit(&h->ranges.v[i]) >= limit;
	for (uintptr_t a = addr; ok && a < limit;) {
		uintptr_t next = PA_ALIGN_DOWN(a, PA_CHUNK_SIZE) + PA_CHUNK_SIZE;
		if (next > limit)
			next = limit;
		unsigned n = (unsigned)((next - a) / PA_PAGE_SIZE);
		ok = chunk_count_alloc(pageheap_chunk(h, a), page_in_chunk(a), n) == 0;
		a = next;
	}
	if (ok) {
		size_t sc = pageheap_alloc_range_locked(h, addr, npages);
		if (scav != NULL)
			*scav = sc;
	}
	lock_release(&h->lock);
	if (ok)
		pageheap_after_alloc(h);
	return ok;
}

enum pa_page_fault pageheap_check(struct pa_pageheap *h, uintptr_t addr, size_t npages)
{
	lock_acquire(&h->lock);
	enum pa_page_fault f = pageheap_check_locked(h, addr, npages);
	lock_release(&h->lock);
	return f;
}

/* ---- verification and accounting --------------------------------------- */

static size_t complain(size_t errors, const char *what, unsigned level, size_t index)
{
	if (errors < 5) {
		struct pa_msg m;
		msg_begin(&m);
		msg_str(&m, "verify: ");
		msg_str(&m, what);
		msg_str(&m, " at level ");
		msg_uint(&m, level);
		msg_str(&m, " index ");
		msg_uint(&m, index);
		msg_end(&m);
	}
	return errors + 1;
}

size_t pageheap_verify(struct pa_pageheap *h)
{
	size_t errors = 0, inuse = 0, scav = 0, mapped = 0;
	lock_acquire(&h->lock);
	for (size_t r = 0; r < h->ranges.n; r++) {
		uintptr_t base = range_base(&h->ranges.v[r]), limit = range_limit(&h->ranges.v[r]);
		mapped += (limit - base) / PA_PAGE_SIZE;
		for (size_t c = chunk_index(h, base); c <= chunk_index(h, limit - 1); c++) {
			const struct pa_chunk *ch = chunk_at(h, c);
			if (h->sum[PA_SUM_LEVELS - 1][c] != chunk_summarize(ch))
				errors = complain(errors, "leaf summary != bitmap",
				                  PA_SUM_LEVELS - 1, c);
			for (unsigned w = 0; w < PA_CHUNK_WORDS; w++) {
				if (ch->alloc[w] & ch->scav[w])
					errors =
					    complain(errors, "page both allocated and scavenged",
					             PA_SUM_LEVELS - 1, c);
				inuse += bits_popcount(ch->alloc[w]);
				scav += bits_popcount(ch->scav[w]);
			}
			/* Invariant 3: nothing free below the hint. */
			uintptr_t cb = chunk_base(h, c);
			if (cb < pageheap_hint(h)) {
				uintptr_t below = pageheap_hint(h) - cb;
				unsigned n = below >= PA_CHUNK_SIZE
				                 ? PA_CHUNK_PAGES
				                 : (unsigned)(below / PA_PAGE_SIZE);
				if (chunk_count_alloc(ch, 0, n) != n)
					errors = complain(errors, "free page below the hint",
					                  PA_SUM_LEVELS - 1, c);
			}
		}
		for (int l = (int)PA_SUM_LEVELS - 2; l >= 0; l--) {
			size_t lo, hi;
			level_span(h, (unsigned)l, base, limit, &lo, &hi);
			for (size_t i = lo; i < hi; i++) {
				pa_sum s =
				    sum_merge(&h->sum[l + 1][i << PA_SUM_LEVEL_BITS], PA_SUM_FANOUT,
				              PA_LEVEL_LOG_PAGES((unsigned)l + 1));
				if (s != h->sum[l][i])
					errors = complain(errors, "summary != merge of children",
					                  (unsigned)l, i);
			}
		}
	}
	if (pageheap_hint(h) != h->limit_hint && !pageheap_contains_locked(h, pageheap_hint(h)))
		errors = complain(errors, "hint outside the heap", 0, 0);
	if (inuse != h->inuse_pages + h->releasing_pages || scav != h->scav_pages ||
	    mapped != h->mapped_pages)
		errors = complain(errors, "page counters disagree with the bitmaps", 0, 0);
	lock_release(&h->lock);
	return errors;
}

size_t pageheap_metadata_bytes_locked(const struct pa_pageheap *h)
{
	size_t total = level_bytes(h->window_bits, 0);
	for (unsigned l = 1; l < PA_SUM_LEVELS; l++) {
		/* Ranges are sorted, so their commit spans are too: merge overlaps. */
		uintptr_t cur_from = 0, cur_to = 0;
		for (size_t r = 0; r < h->ranges.n; r++) {
			uintptr_t from, to;
			level_commit_span(h, l, range_base(&h->ranges.v[r]),
			                  range_limit(&h->ranges.v[r]), &from, &to);
			if (from > cur_to) {
				total += cur_to - cur_from;
				cur_from = from;
			}
			if (to > cur_to)
				cur_to = to;
		}
		total += cur_to - cur_from;
	}
	total += h->chunks_l2_blocks * PA_CHUNK_L2_COUNT * sizeof(struct pa_chunk);
	total += PA_ALIGN_UP(h->chunks_l1_len * sizeof(struct pa_chunk *), os_page_size());
	return total;
}

/* ---- 64-page groups for the per-CPU page caches ------------------------- */

int pageheap_take_group_locked(struct pa_pageheap *h, uintptr_t *base, uint64_t *free,
                               uint64_t *scav)
{
	for (;;) {
		uintptr_t first = 0, new_hint = 0;
		if (chunk_index(h, pageheap_hint(h)) < h->end_ci) {
			size_t ci = chunk_index(h, pageheap_hint(h));
			if (sum_max(h->sum[PA_SUM_LEVELS - 1][ci]) != 0) {
				unsigned ff;
				unsigned j = chunk_find(chunk_at(h, ci), 1,
				                        page_in_chunk(pageheap_hint(h)), &ff);
				if (j == CHUNK_NOT_FOUND)
					corrupt("leaf summary promised a page its bitmap lacks",
					        PA_SUM_LEVELS - 1, ci, 1);
				first = chunk_base(h, ci) + (uintptr_t)j * PA_PAGE_SIZE;
			} else {
				first = find(h, 1, &new_hint);
			}
		}
		if (first == 0) {
			hint_set(h, h->limit_hint);
			if (h->metadata_only || grow_from_os(h, 1) != 0) {
				errno = ENOMEM;
				return -1;
			}
			continue;
		}
		struct pa_chunk *c = pageheap_chunk(h, first);
		unsigned w = page_in_chunk(first) / 64;
		uint64_t f = ~c->alloc[w], s = c->scav[w] & f;
		uintptr_t gbase = PA_ALIGN_DOWN(first, 64 * PA_PAGE_SIZE);
		bits_store(&c->alloc[w], ~(uint64_t)0);
		c->scav[w] &= ~f;
		update(h, gbase, 64, 1, 0);
		h->inuse_pages += bits_popcount(f);
		h->scav_pages -= bits_popcount(s);
		check_limit(h);
		/* Every page up to the group's end is now allocated (as Go does,
		 * point the hint at the group's last page: still heap). */
		uintptr_t last = gbase + 63 * PA_PAGE_SIZE;
		hint_raise(h, last);
		*base = gbase;
		*free = f;
		*scav = s;
		return 0;
	}
}

void pageheap_return_group_locked(struct pa_pageheap *h, uintptr_t base, uint64_t free,
                                  uint64_t scav)
{
	if (free == 0)
		return;
	struct pa_chunk *c = pageheap_chunk(h, base);
	unsigned w = page_in_chunk(base) / 64;
	bits_store(&c->alloc[w], c->alloc[w] & ~free);
	c->scav[w] |= scav & free;
	update(h, base, 64, 0, 0);
	h->inuse_pages -= bits_popcount(free);
	h->scav_pages += bits_popcount(scav & free);
	stamp_free(h, chunk_index(h, base), chunk_index(h, base));
	uintptr_t lowest = base + (uintptr_t)bits_ctz(free) * PA_PAGE_SIZE;
	hint_lower(h, lowest);
}

/* ---- reporting bad frees ------------------------------------------------ */

static const char *fault_text(enum pa_page_fault f)
{
	switch (f) {
	case PA_PAGE_UNALIGNED:
		return "misaligned pointer (not a multiple of 8192)";
	case PA_PAGE_NOT_HEAP:
		return "pointer not from the page heap";
	case PA_PAGE_NOT_ALLOCATED:
		return "double free (pages already free)";
	case PA_PAGE_BAD_SIZE:
		return "bad page count";
	case PA_PAGE_OK:
		break;
	}
	return "ok";
}

_Noreturn void pageheap_report_fault(uintptr_t addr, size_t npages, enum pa_page_fault f,
                                     const char *when)
{
	struct pa_msg m;
	msg_begin(&m);
	msg_str(&m, "pa_pages_free(");
	msg_hex(&m, addr);
	msg_str(&m, ", ");
	msg_uint(&m, npages);
	msg_str(&m, " pages): ");
	msg_str(&m, fault_text(f));
	if (when != NULL) {
		msg_str(&m, " ");
		msg_str(&m, when);
	}
	msg_end(&m);
	os_abort();
}

/* ---- scavenger support ----------------------------------------------------- */

size_t pageheap_scav_next(struct pa_pageheap *h, size_t below, uint32_t min_age, size_t *recent)
{
	uint32_t now = __atomic_load_n(&h->epoch, __ATOMIC_RELAXED);
	size_t start = __atomic_load_n(&h->start_ci, __ATOMIC_RELAXED);
	size_t end = __atomic_load_n(&h->end_ci, __ATOMIC_ACQUIRE);
	size_t top = __atomic_load_n(&h->scav_ci, __ATOMIC_RELAXED);
	if (below > end)
		below = end;
	if (below > top)
		below = top;
	*recent = 0;
	for (size_t ci = below; ci-- > start;) {
		struct pa_chunk *block =
		    __atomic_load_n(&h->chunks[ci >> PA_CHUNK_L2_BITS], __ATOMIC_ACQUIRE);
		if (block == NULL) {
			/* A whole L2 block of address space that never was heap. */
			ci &= ~(size_t)(PA_CHUNK_L2_COUNT - 1);
			continue;
		}
		uint32_t stamp = __atomic_load_n(&block[ci & (PA_CHUNK_L2_COUNT - 1)].free_stamp,
		                                 __ATOMIC_RELAXED);
		if (stamp == 0)
			continue;
		if ((uint32_t)(now - (stamp - 1)) >= min_age)
			return ci;
		if (*recent == 0)
			*recent = ci + 1;
	}
	return SIZE_MAX;
}

size_t pageheap_prev_chunk_locked(const struct pa_pageheap *h, size_t below)
{
	if (below == 0 || h->ranges.n == 0)
		return SIZE_MAX;
	uintptr_t addr = chunk_base(h, below - 1);
	size_t i = range_list_search(&h->ranges, addr);
	if (i < h->ranges.n && range_base(&h->ranges.v[i]) <= addr)
		return below - 1;
	/* addr lies in a gap (or above the heap): the range below it ends first. */
	if (i == 0)
		return SIZE_MAX;
	return chunk_index(h, range_limit(&h->ranges.v[i - 1]) - 1);
}

/* The chunk's split_seen bits, those of another epoch forgotten. */
static unsigned split_seen(const struct pa_pageheap *h, struct pa_chunk *c)
{
	if (c->split_epoch != h->split_epoch) {
		c->split_seen = 0;
		c->split_epoch = h->split_epoch;
	}
	return c->split_seen;
}

/* The chunk's huge page hp, collapsed, was split: counted, and noted. */
static void huge_split(struct pa_pageheap *h, struct pa_chunk *c, unsigned hp)
{
	h->huge_splits++;
	c->split_seen = (uint8_t)(split_seen(h, c) | 1u << hp);
}

unsigned pageheap_scav_reserve_locked(struct pa_pageheap *h, size_t ci, int force,
                                      unsigned hp_pages, int keep_all, unsigned split_below,
                                      unsigned max_pages, uintptr_t *addr, unsigned *fresh)
{
	struct pa_chunk *c = chunk_at(h, ci);
	/* A collapsed huge page is kept whole while at least half of it is in
	 * use; below that its free memory is worth more than its TLB entry. */
	unsigned keep = keep_all ? ~0u : c->huge & chunk_used_huge(c, hp_pages, hp_pages / 2);
	if (keep != 0 && split_below != 0 &&
	    bits_count_range(c->alloc, 0, PA_CHUNK_PAGES) < split_below)
		keep = 0;
	unsigned start, n = chunk_scav_candidate(c, force, hp_pages, keep, max_pages, &start);
	if (n == 0) {
		if (!force)
			__atomic_store_n(&c->free_stamp, 0, __ATOMIC_RELAXED);
		return 0;
	}
	*addr = chunk_base(h, ci) + (uintptr_t)start * PA_PAGE_SIZE;
	/* Out of circulation while the lock is dropped for the madvise. */
	unsigned scav = 0;
	uint64_t clash = chunk_mark_used(c, start, n, &scav);
	update(h, *addr, n, 1, clash == 0);
	h->scav_pages -= scav;
	h->releasing_pages += n;
	*fresh = n - scav;
	return n;
}

void pageheap_scav_commit_locked(struct pa_pageheap *h, uintptr_t addr, unsigned npages,
                                 int released)
{
	struct pa_chunk *c = pageheap_chunk(h, addr);
	unsigned start = page_in_chunk(addr);
	uint64_t clash = chunk_mark_free(c, start, npages);
	if (released) {
		bits_set_range(c->scav, start, npages);
		h->scav_pages += npages;
		huge_released(h, c, start, npages);
	}
	update(h, addr, npages, 0, clash == 0);
	h->releasing_pages -= npages;
	hint_lower(h, addr);
}

/* ---- huge pages --------------------------------------------------------------- */

/* Released pages [start, start + n) of c: a huge page they fall in is no
 * longer one; given back whole it is counted as released, else as split. */
static void huge_released(struct pa_pageheap *h, struct pa_chunk *c, unsigned start, unsigned n)
{
	if (c->huge == 0 || h->hp_pages == 0)
		return;
	for (unsigned hp = start / h->hp_pages; hp * h->hp_pages < start + n; hp++) {
		if (!(c->huge >> hp & 1))
			continue;
		c->huge &= (uint8_t) ~(1u << hp);
		h->huge_pages--;
		if (start <= hp * h->hp_pages && start + n >= (hp + 1) * h->hp_pages)
			h->huge_freed++;
		else
			huge_split(h, c, hp);
	}
}

int pageheap_huge_at_locked(struct pa_pageheap *h, uintptr_t addr, int split)
{
	if (h->hp_pages == 0)
		return 0;
	struct pa_chunk *c = pageheap_chunk(h, addr);
	unsigned hp = page_in_chunk(addr) / h->hp_pages;
	if (!(c->huge >> hp & 1))
		return 0;
	if (split) {
		c->huge &= (uint8_t) ~(1u << hp);
		h->huge_pages--;
		huge_split(h, c, hp);
	}
	return 1;
}

unsigned pageheap_collapse_find_locked(struct pa_pageheap *h, size_t *cursor, size_t max_chunks,
                                       unsigned min_alloc, uintptr_t *base)
{
	if (h->hp_pages == 0)
		return 0;
	size_t ci = *cursor > h->end_ci ? h->end_ci : *cursor;
	for (size_t k = 0; k < max_chunks; k++) {
		ci = pageheap_prev_chunk_locked(h, ci);
		if (ci == SIZE_MAX)
			break; /* a pass is over; the next starts at the top */
		struct pa_chunk *c = chunk_at(h, ci);
		unsigned dense = chunk_dense_huge(c, h->hp_pages, min_alloc);
		c->split_seen = (uint8_t)(split_seen(h, c) & dense);
		unsigned ready = dense & c->dense_seen & ~(unsigned)c->split_seen;
		c->dense_seen = (uint8_t)dense;
		if (ready != 0) {
			*cursor = ci;
			*base = chunk_base(h, ci);
			return ready;
		}
	}
	*cursor = ci;
	return 0;
}

int pageheap_collapse_done_locked(struct pa_pageheap *h, uintptr_t addr)
{
	struct pa_chunk *c = pageheap_chunk(h, addr);
	unsigned start = page_in_chunk(addr), hp = start / h->hp_pages;
	/* A page released while the kernel collapsed it may read as resident
	 * or not: the huge page is not counted as one. */
	if ((c->huge >> hp & 1) || bits_count_range(c->scav, start, h->hp_pages) != 0)
		return 0;
	c->huge |= (uint8_t)(1u << hp);
	h->huge_pages++;
	h->huge_collapses++;
	return 1;
}
