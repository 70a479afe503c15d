/*
 * meta.c — fixed-size record pools (meta.h).
 */
#include <errno.h>
#include <string.h>

#include "bits.h"
#include "meta.h"
#include "os.h"

/* A block's header, in its first PA_META_HEADER bytes. */
struct pa_meta_block {
	struct pa_meta_block *next, **prevnext;  /* the pool's avail list (NULL: full) */
	uint64_t used[PA_META_MAX_RECORDS / 64]; /* bit i: record i handed out */
	uint32_t nlive;                          /* records handed out */
	uint32_t hwm;                            /* records below it were handed out once */
	uint32_t relmask;                        /* OS pages released (bit j: page j) */
	uint32_t quiet;                          /* 1: no alloc or free since the last trim */
};

_Static_assert(sizeof(struct pa_meta_block) <= PA_META_HEADER, "the header fits");
_Static_assert(PA_META_BLOCK / 2048 <= 32, "relmask covers the pages of OS pages >= 2 KiB");

static struct pa_meta_block *block_of(const struct pa_meta_pool *p, const void *rec)
{
	return (struct pa_meta_block *)((uintptr_t)rec &
	                                ~(uintptr_t)(meta_block_bytes(p->size) - 1));
}

/* List b among the blocks with room, lowest address first. */
static void avail_insert(struct pa_meta_pool *p, struct pa_meta_block *b)
{
	struct pa_meta_block **at = &p->avail;
	while (*at != NULL && *at < b)
		at = &(*at)->next;
	b->next = *at;
	if (b->next != NULL)
		b->next->prevnext = &b->next;
	b->prevnext = at;
	*at = b;
}

static void avail_remove(struct pa_meta_block *b)
{
	*b->prevnext = b->next;
	if (b->next != NULL)
		b->next->prevnext = b->prevnext;
	b->next = NULL;
	b->prevnext = NULL;
}

/* A block's mapping, aligned to its size: reserved, committed, zero. */
static void *block_map(size_t bytes)
{
	void *m = os_reserve(bytes, bytes);
	if (m != NULL && os_commit(m, bytes) != 0) {
		os_unmap(m, bytes);
		m = NULL;
	}
	return m;
}

/*
 * A new, empty block, listed; lock held. NULL when the OS refuses. Under an
 * address-space limit a pool made with `ahead` (span records) maps its next
 * block ahead: the alignment of a new mapping needs twice its size for a
 * moment, which a nearly full address space does not have, and the heap's
 * last pages are no use to a program that cannot get a span record for them.
 */
static struct pa_meta_block *block_new(struct pa_meta_pool *p)
{
	const size_t bytes = meta_block_bytes(p->size);
	void *m = p->spare;
	p->spare = NULL;
	if (m == NULL && (m = block_map(bytes)) == NULL)
		return NULL;
	if (p->ahead && os_addr_space_limit() != SIZE_MAX)
		p->spare = block_map(bytes);
	struct pa_meta_block *b = m;
	p->mapped += bytes;
	avail_insert(p, b);
	return b;
}

/* The OS pages record i of a block spans, as a mask. */
static uint32_t pages_of_record(const struct pa_meta_pool *p, unsigned i)
{
	size_t pg = os_page_size(), off = PA_META_HEADER + (size_t)i * p->size;
	unsigned first = (unsigned)(off / pg), last = (unsigned)((off + p->size - 1) / pg);
	return (uint32_t)bits_mask(first, last - first + 1u);
}

/* One record from the pool's lowest block with room; lock held. NULL when
 * the OS refuses a new block. The record is not zeroed. */
static void *alloc_locked(struct pa_meta_pool *p)
{
	struct pa_meta_block *b = p->avail;
	if (b == NULL && (b = block_new(p)) == NULL)
		return NULL;
	/* The block has room: a zero bit below meta_per_block. */
	unsigned w = 0;
	while (b->used[w] == ~(uint64_t)0)
		w++;
	unsigned i = w * 64u + bits_ctz(~b->used[w]);
	b->used[w] |= (uint64_t)1 << (i % 64u);
	if (i >= b->hwm)
		b->hwm = i + 1;
	uint32_t back = pages_of_record(p, i) & b->relmask;
	if (back != 0) {
		b->relmask &= ~back;
		p->released -= bits_popcount(back) * os_page_size();
	}
	b->quiet = 0;
	b->nlive++;
	p->live++;
	if (b->nlive == meta_per_block(p->size))
		avail_remove(b);
	return (char *)b + PA_META_HEADER + (size_t)i * p->size;
}

unsigned meta_alloc_n(struct pa_meta_pool *p, void **recs, unsigned n)
{
	unsigned got = 0;
	lock_acquire(&p->lock);
	while (got < n && (recs[got] = alloc_locked(p)) != NULL)
		got++;
	lock_release(&p->lock);
	return got;
}

void *meta_alloc(struct pa_meta_pool *p)
{
	void *rec;
	if (meta_alloc_n(p, &rec, 1) == 0) {
		errno = ENOMEM;
		return NULL;
	}
	memset(rec, 0, p->size);
	return rec;
}

void meta_free_n(struct pa_meta_pool *p, void *const *recs, unsigned n)
{
	lock_acquire(&p->lock);
	for (unsigned k = 0; k < n; k++) {
		struct pa_meta_block *b = block_of(p, recs[k]);
		unsigned i =
		    (unsigned)(((uintptr_t)recs[k] - (uintptr_t)b - PA_META_HEADER) / p->size);
		b->used[i / 64u] &= ~((uint64_t)1 << (i % 64u));
		b->quiet = 0;
		b->nlive--;
		p->live--;
		if (b->prevnext == NULL)
			avail_insert(p, b);
	}
	lock_release(&p->lock);
}

void meta_free(struct pa_meta_pool *p, void *rec)
{
	meta_free_n(p, &rec, 1);
}

/* The pages of b (page 0, the header's, excepted) whose records are all
 * free and were handed out before (others were never touched); lock held. */
static uint32_t releasable(const struct pa_meta_pool *p, const struct pa_meta_block *b)
{
	size_t pg = os_page_size();
	unsigned npages = (unsigned)(meta_block_bytes(p->size) / pg),
	         n = (unsigned)meta_per_block(p->size);
	uint32_t m = 0;
	for (unsigned j = 1; j < npages; j++) {
		size_t lo = j * pg - PA_META_HEADER, hi = (j + 1) * pg - 1 - PA_META_HEADER;
		unsigned r0 = (unsigned)(lo / p->size), r1 = (unsigned)(hi / p->size);
		if (r1 >= n)
			r1 = n - 1;
		if (r0 > r1 || r0 >= b->hwm)
			continue; /* past the last record, or never touched */
		if (bits_count_range(b->used, r0, r1 - r0 + 1) == 0)
			m |= (uint32_t)1 << j;
	}
	return m & ~b->relmask;
}

size_t meta_trim(struct pa_meta_pool *p, int force)
{
	size_t pg = os_page_size(), done = 0;
	lock_acquire(&p->lock);
	for (struct pa_meta_block *b = p->avail; b != NULL; b = b->next) {
		if (!force && !b->quiet) {
			b->quiet = 1; /* next time, if nothing happened meanwhile */
			continue;
		}
		uint32_t rel = os_release_mask(b, releasable(p, b), pg, 0);
		b->relmask |= rel;
		p->released += bits_popcount(rel) * pg;
		done += bits_popcount(rel) * pg;
	}
	lock_release(&p->lock);
	return done;
}
