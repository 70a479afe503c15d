/*
 * test_meta.c — the record pools of meta.h: records are handed out lowest
 * block, lowest record first; meta_trim releases exactly the OS pages whose
 * records are all free (never the header's), of quiet blocks unless forced;
 * a record handed out on a released page takes the page back; the counters
 * say so exactly.
 *
 * 128-byte records (a span descriptor) after a 128-byte header: (65536 -
 * 128) / 128 = 511 per block; record i at offset 128 + 128 i, so 4 KiB page
 * j >= 1 holds records 32 j - 1 .. 32 j + 30.
 */
#include <sys/mman.h>

#include "testutil.h"

#include "meta.h"
#include "os.h"

#define REC 128u
#define PER 511u
#define PG 4096u

static int resident(uintptr_t a)
{
	unsigned char v = 0;
	assert_int_equal(mincore((void *)(a & ~(uintptr_t)(PG - 1)), PG, &v), 0);
	return v & 1;
}

static uintptr_t block_of(const void *rec)
{
	return (uintptr_t)rec & ~(uintptr_t)(PA_META_BLOCK - 1);
}

static void *recs[3 * PER];

/* Fill three blocks; b[] gets their addresses, lowest first, and recs[] is
 * reordered so that recs[k * PER + i] is record i of block b[k]. */
static void fill_three(struct pa_meta_pool *p, uintptr_t b[3])
{
	TU_EQ(meta_per_block(REC), PER);
	static void *got[3 * PER];
	for (unsigned i = 0; i < 3 * PER; i++) {
		got[i] = meta_alloc(p);
		assert_non_null(got[i]);
		TU_EQ(*(uint64_t *)got[i], 0);
		memset(got[i], 0xa5, REC);
	}
	TU_EQ(p->mapped, 3 * PA_META_BLOCK);
	TU_EQ(p->live, 3 * PER);
	TU_EQ(p->released, 0);
	uintptr_t a[3] = {block_of(got[0]), block_of(got[PER]), block_of(got[2 * PER])};
	for (unsigned i = 0; i < 3; i++)
		for (unsigned j = i + 1; j < 3; j++)
			if (a[j] < a[i]) {
				uintptr_t t = a[i];
				a[i] = a[j];
				a[j] = t;
			}
	for (unsigned k = 0; k < 3; k++) {
		b[k] = a[k];
		for (unsigned i = 0; i < PER; i++)
			recs[k * PER + i] = (void *)(b[k] + PA_META_HEADER + (uintptr_t)i * REC);
	}
	/* Every record handed out once, each block filled in index order. */
	for (unsigned i = 0; i < 3 * PER; i++) {
		unsigned k = 0;
		while (k < 3 && recs[k * PER + i % PER] != got[i])
			k++;
		TU_EQ(k < 3, 1);
	}
	TU_EQ(b[0] < b[1] && b[1] < b[2], 1);
}

static void trim_releases_exactly_the_pages_whose_records_are_all_free(void **state)
{
	(void)state;
	if (os_page_size() != PG)
		skip();
	struct pa_meta_pool p = PA_META_POOL_INIT(REC);
	uintptr_t b[3];
	fill_three(&p, b);

	/* The middle block empties; the high one frees records 31..62, page 1. */
	for (unsigned i = 0; i < PER; i++)
		meta_free(&p, recs[PER + i]);
	for (unsigned i = 31; i <= 62; i++)
		meta_free(&p, recs[2 * PER + i]);
	TU_EQ(p.live, 3 * PER - PER - 32);

	/* Blocks touched since the last trim wait one more call. */
	TU_EQ(meta_trim(&p, 0), 0);
	TU_EQ(p.released, 0);
	TU_EQ(meta_trim(&p, 0), 16 * PG); /* pages 1..15 of the middle, page 1 of the high */
	TU_EQ(p.released, 16 * PG);
	TU_EQ(resident(b[1]), 1); /* the header's page stays */
	for (unsigned j = 1; j < 16; j++)
		TU_EQ(resident(b[1] + j * PG), 0);
	TU_EQ(resident(b[2] + PG), 0);
	TU_EQ(resident(b[2] + 2 * PG), 1);
	TU_EQ(*(volatile uint64_t *)(b[1] + 5 * PG), 0); /* released: reads zero */
	/* Nothing more, forced or not. */
	TU_EQ(meta_trim(&p, 1), 0);
	TU_EQ(p.mapped, 3 * PA_META_BLOCK);

	/* New records: the middle block (lowest with room), lowest first; the
	 * 32nd (record 31) lies on page 1 and takes it back, zeroed. */
	for (unsigned i = 0; i < 31; i++)
		TU_EQ((uintptr_t)meta_alloc(&p), (uintptr_t)recs[PER + i]);
	TU_EQ(p.released, 16 * PG);
	void *r = meta_alloc(&p);
	TU_EQ((uintptr_t)r, (uintptr_t)recs[PER + 31]);
	TU_EQ(*(uint64_t *)r, 0);
	TU_EQ(p.released, 15 * PG);
	TU_EQ(p.live, 3 * PER - PER - 32 + 32);
}

static void a_full_block_and_page_zero_are_never_released(void **state)
{
	(void)state;
	if (os_page_size() != PG)
		skip();
	struct pa_meta_pool p = PA_META_POOL_INIT(REC);
	void *first = meta_alloc(&p);
	uintptr_t b = block_of(first);
	TU_EQ((uintptr_t)first, b + PA_META_HEADER);
	/* Records 0..30 are page 0's: free them all, nothing is released. */
	static void *r[31];
	r[0] = first;
	for (unsigned i = 1; i < 31; i++)
		r[i] = meta_alloc(&p);
	for (unsigned i = 0; i < 31; i++)
		meta_free(&p, r[i]);
	TU_EQ(meta_trim(&p, 1), 0);
	TU_EQ(p.released, 0);
	TU_EQ(p.live, 0);
	/* Reused lowest first. */
	TU_EQ((uintptr_t)meta_alloc(&p), b + PA_META_HEADER);
}

/*
 * 64-byte records (a short span descriptor) come in 32 KiB blocks, so a
 * block's bitmap still covers them: (32768 - 128) / 64 = 510 per block,
 * record i at offset 128 + 64 i, so 4 KiB page j >= 1 holds records
 * 64 j - 2 .. 64 j + 61.
 */
static void short_records_fill_32_kib_blocks(void **state)
{
	(void)state;
	if (os_page_size() != PG)
		skip();
	struct pa_meta_pool p = PA_META_POOL_INIT(64);
	TU_EQ(p.size, 64);
	TU_EQ(meta_block_bytes(64), PA_META_BLOCK / 2);
	TU_EQ(meta_per_block(64), 510);
	static void *r[511];
	for (unsigned i = 0; i < 511; i++)
		r[i] = meta_alloc(&p);
	uintptr_t b = (uintptr_t)r[0] - PA_META_HEADER;
	TU_EQ(b % (PA_META_BLOCK / 2), 0);
	for (unsigned i = 0; i < 510; i++)
		TU_EQ((uintptr_t)r[i], b + PA_META_HEADER + 64 * (uintptr_t)i);
	/* The 511th opens a second block. */
	TU_EQ(((uintptr_t)r[510] - PA_META_HEADER) % (PA_META_BLOCK / 2), 0);
	TU_EQ(p.mapped, PA_META_BLOCK);
	TU_EQ(p.live, 511);

	/* Page 3 of the first block: records 190..253; all but 190 free
	 * release nothing, all free release that page alone. */
	for (unsigned i = 191; i <= 253; i++)
		meta_free(&p, r[i]);
	TU_EQ(meta_trim(&p, 1), 0);
	meta_free(&p, r[190]);
	TU_EQ(meta_trim(&p, 1), PG);
	TU_EQ(resident(b + 3 * PG), 0);
	TU_EQ(resident(b + 2 * PG), 1);
	TU_EQ(resident(b + 4 * PG), 1);
	TU_EQ(p.released, PG);

	/* The second block's record goes back to its own block (32 KiB
	 * aligned): the lowest block with room hands out its lowest record. */
	meta_free(&p, r[510]);
	TU_EQ(p.live, 511 - 64 - 1);
	uintptr_t b2 = (uintptr_t)r[510] - PA_META_HEADER;
	int second_lower = b2 < b;
	TU_EQ((uintptr_t)meta_alloc(&p), second_lower ? (uintptr_t)r[510] : (uintptr_t)r[190]);
	TU_EQ(p.released, second_lower ? PG : 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(short_records_fill_32_kib_blocks),
	    TU_TEST(trim_releases_exactly_the_pages_whose_records_are_all_free),
	    TU_TEST(a_full_block_and_page_zero_are_never_released),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
