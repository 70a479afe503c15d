/*
 * test_meta.c — the record pools of meta.h: records pack into the lowest
 * blocks, one emptied block stays resident, every further one gives its
 * pages back and starts over, and the counters say so exactly.
 *
 * 192-byte records (a span descriptor's size class): (65536 - 64) / 192 =
 * 341 per block.
 */
#include <sys/mman.h>

#include "testutil.h"

#include "meta.h"
#include "os.h"

#define REC 192u
#define PER 341u

static int resident(const void *p)
{
	unsigned char v = 0;
	uintptr_t page = (uintptr_t)p & ~(uintptr_t)(os_page_size() - 1);
	assert_int_equal(mincore((void *)page, os_page_size(), &v), 0);
	return v & 1;
}

static uintptr_t block_of(const void *rec)
{
	return (uintptr_t)rec & ~(uintptr_t)(PA_META_BLOCK - 1);
}

static void *recs[3 * PER];

/* Fill three blocks; return their addresses, lowest first, in b[]. */
static void fill_three(struct pa_meta_pool *p, uintptr_t b[3])
{
	TU_EQ(meta_per_block(REC), PER);
	for (unsigned i = 0; i < 3 * PER; i++) {
		recs[i] = meta_alloc(p);
		assert_non_null(recs[i]);
		TU_EQ(*(uint64_t *)recs[i], 0);
		memset(recs[i], 0xa5, REC);
	}
	TU_EQ(p->mapped, 3 * PA_META_BLOCK);
	TU_EQ(p->live, 3 * PER);
	TU_EQ(p->empty, 0);
	TU_EQ(p->released, 0);
	/* Each block's records in order after its header. */
	for (unsigned k = 0; k < 3; k++) {
		b[k] = block_of(recs[k * PER]);
		for (unsigned i = 0; i < PER; i++)
			TU_EQ((uintptr_t)recs[k * PER + i],
			      b[k] + PA_META_HEADER + (uintptr_t)i * REC);
	}
	TU_EQ(b[0] != b[1] && b[1] != b[2] && b[0] != b[2], 1);
}

static unsigned index_of_block(const uintptr_t b[3], uintptr_t x)
{
	for (unsigned k = 0; k < 3; k++)
		if (b[k] == x)
			return k;
	fail_msg("%#jx is none of the three blocks", (uintmax_t)x);
	return 3;
}

static void emptied_blocks_one_kept_the_next_released_and_reused_lowest_first(void **state)
{
	(void)state;
	struct pa_meta_pool p = PA_META_POOL_INIT(REC);
	uintptr_t b[3];
	fill_three(&p, b);
	/* Sort the blocks by address: lo, mid, hi. */
	uintptr_t s[3] = {b[0], b[1], b[2]};
	for (unsigned i = 0; i < 3; i++)
		for (unsigned j = i + 1; j < 3; j++)
			if (s[j] < s[i]) {
				uintptr_t t = s[i];
				s[i] = s[j];
				s[j] = t;
			}
	unsigned mid = index_of_block(b, s[1]), hi = index_of_block(b, s[2]);

	/* The middle block empties: kept resident. */
	for (unsigned i = 0; i < PER; i++)
		meta_free(&p, recs[mid * PER + i]);
	TU_EQ(p.live, 2 * PER);
	TU_EQ(p.empty, 1);
	TU_EQ(p.released, 0);
	TU_EQ(resident((void *)(s[1] + PA_META_BLOCK - 1)), 1);

	/* The high one empties too: released but for its header's page. */
	for (unsigned i = 0; i < PER; i++)
		meta_free(&p, recs[hi * PER + i]);
	TU_EQ(p.live, PER);
	TU_EQ(p.empty, 1);
	TU_EQ(p.released, PA_META_BLOCK - os_page_size());
	TU_EQ(resident((void *)s[2]), 1);
	for (uintptr_t a = s[2] + os_page_size(); a < s[2] + PA_META_BLOCK; a += os_page_size())
		TU_EQ(resident((void *)a), 0);
	TU_EQ(p.mapped, 3 * PA_META_BLOCK);

	/* New records come from the middle block (lowest with room), its
	 * free list last-freed first, zeroed. */
	void *r = meta_alloc(&p);
	TU_EQ((uintptr_t)r, s[1] + PA_META_HEADER + (uintptr_t)(PER - 1) * REC);
	TU_EQ(*(uint64_t *)r, 0);
	TU_EQ(p.empty, 0);
	for (unsigned i = 1; i < PER; i++)
		TU_EQ(block_of(meta_alloc(&p)), s[1]);
	/* Then the released block, from its start again. */
	void *q = meta_alloc(&p);
	TU_EQ((uintptr_t)q, s[2] + PA_META_HEADER);
	TU_EQ(p.released, 0);
	TU_EQ(p.live, 2 * PER + 1);
	TU_EQ(p.mapped, 3 * PA_META_BLOCK);
}

/* A single block that empties is the kept one: nothing is released. */
static void the_only_empty_block_stays_resident(void **state)
{
	(void)state;
	struct pa_meta_pool p = PA_META_POOL_INIT(REC);
	void *a = meta_alloc(&p), *c = meta_alloc(&p);
	TU_EQ((uintptr_t)c - (uintptr_t)a, REC);
	meta_free(&p, a);
	meta_free(&p, c);
	TU_EQ(p.live, 0);
	TU_EQ(p.empty, 1);
	TU_EQ(p.released, 0);
	TU_EQ(p.mapped, PA_META_BLOCK);
	/* Reused: the last freed first. */
	TU_EQ((uintptr_t)meta_alloc(&p), (uintptr_t)c);
	TU_EQ(p.empty, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(emptied_blocks_one_kept_the_next_released_and_reused_lowest_first),
	    TU_TEST(the_only_empty_block_stays_resident),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
