/*
 * chunk.c — find, summarize and mark runs of pages inside one 512-page chunk.
 *
 * The search mirrors the summary: a run either sits inside one 64-bit word
 * (bits_find_run on the word's free mask) or crosses word boundaries, in
 * which case it is the free top of one word, zero or more wholly free words,
 * and the free bottom of the next.
 */
#include "chunk.h"

#include "bits.h"

/*
 * The longest run of free pages strictly inside used word x (between its
 * lowest and highest used page) if it is longer than most, else most; as
 * the Go runtime does it. Rather than measuring every run, shrink all runs
 * by most (OR the word onto itself shifted down, doubling the shift as the
 * used runs grow); any free page left marks a longer run, whose remainder
 * raises most, and the shrinking goes on by that remainder.
 */
static unsigned inner_max(uint64_t x, unsigned most)
{
	x >>= bits_ctz(x) & 63; /* drop the free bottom; the free top stays as zeros */
	if ((x & (x + 1)) == 0)
		return most;      /* no free page below the highest used one */
	unsigned p = most, k = 1; /* p: shrink still owed; k: shortest used run */
	for (;;) {
		while (p > 0) {
			if (p <= k) {
				x |= x >> p;
				if ((x & (x + 1)) == 0)
					return most;
				break;
			}
			x |= x >> k;
			if ((x & (x + 1)) == 0)
				return most;
			p -= k;
			k *= 2;
		}
		/* The lowest surviving free run is longer than most by j. */
		unsigned j = bits_ctz(~x) & 63;
		x >>= j;
		j = bits_ctz(x) & 63;
		x >>= j;
		most += j;
		if ((x & (x + 1)) == 0)
			return most;
		p = j;
	}
}

pa_sum chunk_summarize(const struct pa_chunk *c)
{
	unsigned start = CHUNK_NOT_FOUND, max = 0, cur = 0;
	for (unsigned i = 0; i < PA_CHUNK_WORDS; i++) {
		uint64_t x = c->alloc[i];
		if (x == 0) {
			cur += 64;
			continue;
		}
		/* The free run crossing into this word ends at its lowest set bit. */
		cur += bits_ctz(x);
		if (start == CHUNK_NOT_FOUND)
			start = cur;
		if (cur > max)
			max = cur;
		cur = bits_clz(x);
	}
	if (start == CHUNK_NOT_FOUND)
		return sum_pack(PA_CHUNK_PAGES, PA_CHUNK_PAGES, PA_CHUNK_PAGES);
	if (cur > max)
		max = cur;
	/* Runs strictly inside a word are at most 62 long (a set bit at each end).
	 * Every word is nonzero here, or max would be at least 64. */
	if (max >= 62)
		return sum_pack(start, max, cur);
	for (unsigned i = 0; i < PA_CHUNK_WORDS; i++)
		max = inner_max(c->alloc[i], max);
	return sum_pack(start, max, cur);
}

static unsigned find1(const struct pa_chunk *c, unsigned search_idx)
{
	for (unsigned i = search_idx / 64; i < PA_CHUNK_WORDS; i++) {
		uint64_t x = c->alloc[i];
		if (x != ~(uint64_t)0)
			return i * 64 + bits_ctz(~x);
	}
	return CHUNK_NOT_FOUND;
}

/* npages <= 64: a run inside one word, or the top of one word plus the bottom of the next. */
static unsigned find_small(const struct pa_chunk *c, unsigned npages, unsigned search_idx,
                           unsigned *first_free)
{
	unsigned end = 0; /* free pages at the top of the previous word */
	for (unsigned i = search_idx / 64; i < PA_CHUNK_WORDS; i++) {
		uint64_t x = c->alloc[i];
		if (x == ~(uint64_t)0) {
			end = 0;
			continue;
		}
		if (*first_free == CHUNK_NOT_FOUND)
			*first_free = i * 64 + bits_ctz(~x);
		unsigned start = bits_ctz(x);
		if (end + start >= npages)
			return i * 64 - end;
		unsigned j = bits_find_run(~x, npages);
		if (j < 64)
			return i * 64 + j;
		end = bits_clz(x);
	}
	return CHUNK_NOT_FOUND;
}

/* npages > 64: the run must cross at least one word boundary. */
static unsigned find_large(const struct pa_chunk *c, unsigned npages, unsigned search_idx,
                           unsigned *first_free)
{
	unsigned start = 0, size = 0;
	for (unsigned i = search_idx / 64; i < PA_CHUNK_WORDS; i++) {
		uint64_t x = c->alloc[i];
		if (x == ~(uint64_t)0) {
			size = 0;
			continue;
		}
		if (*first_free == CHUNK_NOT_FOUND)
			*first_free = i * 64 + bits_ctz(~x);
		if (size == 0) {
			size = bits_clz(x);
			start = i * 64 + 64 - size;
			continue;
		}
		unsigned s = bits_ctz(x);
		if (size + s >= npages)
			return start;
		if (s < 64) {
			size = bits_clz(x);
			start = i * 64 + 64 - size;
			continue;
		}
		size += 64;
	}
	return size >= npages ? start : CHUNK_NOT_FOUND;
}

unsigned chunk_find(const struct pa_chunk *c, unsigned npages, unsigned search_idx,
                    unsigned *first_free)
{
	*first_free = CHUNK_NOT_FOUND;
	if (npages == 1) {
		unsigned i = find1(c, search_idx);
		*first_free = i;
		return i;
	}
	if (npages <= 64)
		return find_small(c, npages, search_idx, first_free);
	return find_large(c, npages, search_idx, first_free);
}

unsigned chunk_alloc_range(struct pa_chunk *c, unsigned start, unsigned n)
{
	unsigned scav = 0;
	chunk_mark_used(c, start, n, &scav);
	return scav;
}

unsigned chunk_count_alloc(const struct pa_chunk *c, unsigned start, unsigned n)
{
	return bits_count_range(c->alloc, start, n);
}

unsigned chunk_count_scav(const struct pa_chunk *c, unsigned start, unsigned n)
{
	return bits_count_range(c->scav, start, n);
}

/* The highest free-and-unreleased page in [lo, lim), then the run down from
 * it, at most max_pages long and not below lo. */
static unsigned top_run(const struct pa_chunk *c, unsigned lo, unsigned lim, unsigned max_pages,
                        unsigned *start)
{
	for (int w = (int)(lim / 64) - 1; w >= (int)(lo / 64); w--) {
		uint64_t x = ~c->alloc[w] & ~c->scav[w];
		if (x == 0)
			continue;
		unsigned top = (unsigned)w * 64 + 63 - bits_clz(x);
		unsigned p = top;
		while (p > lo && top - p + 1 < max_pages) {
			unsigned q = p - 1;
			if ((c->alloc[q / 64] | c->scav[q / 64]) >> (q % 64) & 1)
				break;
			p = q;
		}
		*start = p;
		return top - p + 1;
	}
	return 0;
}

/* Huge pages must tile the chunk in whole words; otherwise plain runs. */
static int hp_tiles(unsigned hp_pages)
{
	return hp_pages >= 64 && hp_pages <= PA_CHUNK_PAGES && PA_CHUNK_PAGES % hp_pages == 0;
}

unsigned chunk_scav_candidate(const struct pa_chunk *c, int force, unsigned hp_pages, unsigned keep,
                              unsigned max_pages, unsigned *start)
{
	if (force || !hp_tiles(hp_pages))
		return top_run(c, 0, PA_CHUNK_PAGES, max_pages, start);
	const unsigned words = hp_pages / 64, nhp = PA_CHUNK_PAGES / hp_pages;
	/* Whole free huge pages first: releasing one splits nothing. */
	for (unsigned hp = nhp; hp-- > 0;) {
		uint64_t used = 0, todo = 0;
		for (unsigned w = hp * words; w < (hp + 1) * words; w++) {
			used |= c->alloc[w];
			todo |= ~c->alloc[w] & ~c->scav[w];
		}
		if (used == 0 && todo != 0) {
			*start = hp * hp_pages;
			return hp_pages;
		}
	}
	for (unsigned hp = nhp; hp-- > 0;) {
		if (keep >> hp & 1)
			continue;
		unsigned n = top_run(c, hp * hp_pages, (hp + 1) * hp_pages, max_pages, start);
		if (n != 0)
			return n;
	}
	return 0;
}

unsigned chunk_used_huge(const struct pa_chunk *c, unsigned hp_pages, unsigned min_alloc)
{
	if (!hp_tiles(hp_pages))
		return 0;
	unsigned mask = 0;
	for (unsigned hp = 0; hp < PA_CHUNK_PAGES / hp_pages; hp++)
		if (bits_count_range(c->alloc, hp * hp_pages, hp_pages) >= min_alloc)
			mask |= 1u << hp;
	return mask;
}

unsigned chunk_dense_huge(const struct pa_chunk *c, unsigned hp_pages, unsigned min_alloc)
{
	unsigned mask = chunk_used_huge(c, hp_pages, min_alloc) & ~(unsigned)c->huge;
	for (unsigned hp = 0; mask >> hp != 0; hp++)
		if (bits_count_range(c->scav, hp * hp_pages, hp_pages) != 0)
			mask &= ~(1u << hp);
	return mask;
}
