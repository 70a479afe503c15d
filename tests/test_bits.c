/*
 * test_bits.c — the 64-bit bitmap primitives of bits.h against naive
 * bit-at-a-time references: bits_find_run for every run length at every
 * position, and the multi-word set/clear/count range helpers
 * at every word edge.
 */
#include "testutil.h"

#include "bits.h"

/* ---- naive references ------------------------------------------------------ */

static unsigned naive_find_run(uint64_t c, unsigned n)
{
	unsigned run = 0;
	for (unsigned i = 0; i < 64; i++) {
		run = (c >> i) & 1 ? run + 1 : 0;
		if (run == n)
			return i + 1 - n;
	}
	return 64;
}

static uint64_t naive_mask(unsigned start, unsigned n)
{
	uint64_t m = 0;
	for (unsigned i = start; i < start + n; i++)
		m |= (uint64_t)1 << i;
	return m;
}

/* Random words with every kind of run structure: dense, sparse, and words
 * made of a few long runs. */
static uint64_t random_word(uint64_t *seed)
{
	uint64_t a = tu_xorshift(seed), b = tu_xorshift(seed), c = tu_xorshift(seed);
	switch (a % 6) {
	case 0:
		return b;
	case 1:
		return b | c;
	case 2:
		return b & c;
	case 3:
		return ~(b & c & tu_xorshift(seed));
	case 4:
		return b & c & tu_xorshift(seed);
	default: {
		/* A few runs at random places with random lengths. */
		uint64_t w = 0;
		for (unsigned k = 0; k < 1 + (b & 3); k++) {
			unsigned s = (unsigned)(tu_xorshift(seed) % 64);
			unsigned n = 1 + (unsigned)(tu_xorshift(seed) % (64 - s));
			w |= naive_mask(s, n);
		}
		return w;
	}
	}
}

/* ---- bits_ctz, bits_clz, bits_popcount, bits_mask ------------------------------- */

static void test_ctz_clz_of_zero_are_64(void **state)
{
	(void)state;
	TU_EQ(bits_ctz(0), 64);
	TU_EQ(bits_clz(0), 64);
	TU_EQ(bits_popcount(0), 0);
	TU_EQ(bits_popcount(~(uint64_t)0), 64);
	for (unsigned i = 0; i < 64; i++) {
		TU_EQ(bits_ctz((uint64_t)1 << i), i);
		TU_EQ(bits_clz((uint64_t)1 << i), 63 - i);
		TU_EQ(bits_ctz(~(uint64_t)0 << i), i);
	}
}

static void test_mask_every_start_and_length_including_64(void **state)
{
	(void)state;
	TU_EQ(bits_mask(0, 64), ~(uint64_t)0);
	TU_EQ(bits_mask(63, 1), (uint64_t)1 << 63);
	TU_EQ(bits_mask(5, 0), 0);
	for (unsigned s = 0; s < 64; s++)
		for (unsigned n = 0; s + n <= 64; n++)
			TU_EQ(bits_mask(s, n), naive_mask(s, n));
}

/* ---- bits_find_run ---------------------------------------------------------- */

/* Exactly one free run of n at position p: found there; n+1 is not found. */
static void test_find_run_single_run_every_length_every_position(void **state)
{
	(void)state;
	for (unsigned n = 1; n <= 64; n++) {
		for (unsigned p = 0; p + n <= 64; p++) {
			uint64_t c = naive_mask(p, n);
			TU_EQ(bits_find_run(c, n), p);
			for (unsigned k = 1; k < n; k++)
				TU_EQ(bits_find_run(c, k), p);
			if (n < 64)
				TU_EQ(bits_find_run(c, n + 1), 64);
		}
	}
}

/* A run one short of n just before the real run (separated by one used bit)
 * must be skipped; a run one short placed after must not matter. */
static void test_find_run_skips_run_one_short(void **state)
{
	(void)state;
	for (unsigned n = 2; n <= 32; n++) {
		for (unsigned p = 0; p + (n - 1) + 1 + n <= 64; p++) {
			unsigned real = p + n; /* p .. p+n-2 short run, p+n-1 used */
			uint64_t c = naive_mask(p, n - 1) | naive_mask(real, n);
			TU_EQ(bits_find_run(c, n), real);
			TU_EQ(bits_find_run(c, n - 1), p);
		}
	}
}

/* Runs touching bit 0 and bit 63 with gaps of every width between them: the
 * shifting strategy is only exact if gaps are handled at every width. */
static void test_find_run_two_runs_with_every_gap_width(void **state)
{
	(void)state;
	for (unsigned a = 1; a < 63; a++) {
		for (unsigned gap = 1; a + gap < 64; gap++) {
			unsigned b = 64 - a - gap; /* the second run ends at bit 63 */
			uint64_t c = naive_mask(0, a) | naive_mask(a + gap, b);
			for (unsigned n = 1; n <= 64; n++)
				TU_EQ(bits_find_run(c, n), naive_find_run(c, n));
		}
	}
}

static void test_find_run_full_and_empty_words(void **state)
{
	(void)state;
	for (unsigned n = 1; n <= 64; n++) {
		TU_EQ(bits_find_run(~(uint64_t)0, n), 0);
		TU_EQ(bits_find_run(0, n), 64);
	}
	TU_EQ(bits_find_run((uint64_t)1 << 63, 1), 63);
	TU_EQ(bits_find_run((uint64_t)1 << 63, 2), 64);
	/* Runs of 2 at 16 and 62: first fit is 16; of 3 at 16 (0x7 << 16) and 61. */
	TU_EQ(bits_find_run(0xc000000000030000ull, 2), 16);
	TU_EQ(bits_find_run(0xe000000000070000ull, 3), 16);
	TU_EQ(bits_find_run(0xe000000000030000ull, 3), 61);
	/* 16 at the top only. */
	TU_EQ(bits_find_run(0xffff03ff01070000ull, 16), 48);
	TU_EQ(bits_find_run(0x0fff03ff01079fffull, 16), 64);
	TU_EQ(bits_find_run(0x7fffffffffffffffull, 64), 64);
	TU_EQ(bits_find_run(0x7fffffffffffffffull, 63), 0);
	TU_EQ(bits_find_run(0xfffffffffffffffeull, 63), 1);
}

static void test_find_run_matches_reference_on_random_words(void **state)
{
	(void)state;
	uint64_t seed = 0x243f6a8885a308d3ull;
	for (unsigned iter = 0; iter < 20000; iter++) {
		uint64_t c = random_word(&seed);
		for (unsigned n = 1; n <= 64; n++) {
			unsigned got = bits_find_run(c, n), want = naive_find_run(c, n);
			if (got != want)
				fail_msg("bits_find_run(%#" PRIx64 ", %u) = %u, want %u", c, n, got,
				         want);
		}
	}
}

/* ---- multi-word ranges ---------------------------------------------------------- */

#define RW 4 /* words in the test bitmaps: 256 bits, three inner word edges */

static int naive_bit(const uint64_t *w, unsigned i)
{
	return (int)((w[i / 64] >> (i % 64)) & 1);
}

static void test_set_range_every_start_and_length(void **state)
{
	(void)state;
	for (unsigned s = 0; s <= RW * 64; s++) {
		for (unsigned n = 0; s + n <= RW * 64; n++) {
			uint64_t w[RW] = {0};
			bits_set_range(w, s, n);
			for (unsigned i = 0; i < RW * 64; i++)
				if (naive_bit(w, i) != (i >= s && i < s + n))
					fail_msg("bits_set_range(%u, %u): bit %u is %d", s, n, i,
					         naive_bit(w, i));
		}
	}
}

static void test_clear_range_every_start_and_length(void **state)
{
	(void)state;
	for (unsigned s = 0; s <= RW * 64; s++) {
		for (unsigned n = 0; s + n <= RW * 64; n++) {
			uint64_t w[RW];
			memset(w, 0xff, sizeof(w));
			bits_clear_range(w, s, n);
			for (unsigned i = 0; i < RW * 64; i++)
				if (naive_bit(w, i) != !(i >= s && i < s + n))
					fail_msg("bits_clear_range(%u, %u): bit %u is %d", s, n, i,
					         naive_bit(w, i));
		}
	}
}

static void test_count_range_every_start_and_length(void **state)
{
	(void)state;
	uint64_t seed = 0xa4093822299f31d0ull;
	uint64_t w[RW];
	for (unsigned k = 0; k < RW; k++)
		w[k] = random_word(&seed);
	for (unsigned s = 0; s <= RW * 64; s++) {
		unsigned want = 0;
		for (unsigned n = 0; s + n <= RW * 64; n++) {
			TU_EQ(bits_count_range(w, s, n), want);
			if (s + n < RW * 64)
				want += (unsigned)naive_bit(w, s + n);
		}
	}
}

static void test_range_helpers_at_chunk_edges(void **state)
{
	(void)state;
	struct {
		const char *name;
		unsigned start, n;
	} cases[] = {
	    {"first page", 0, 1},
	    {"last page of word 0", 63, 1},
	    {"pages 63-64 across the first word edge", 63, 2},
	    {"exactly word 1", 64, 64},
	    {"word 1 plus one page each side", 63, 66},
	    {"last page of the chunk", 511, 1},
	    {"all but the first and last page", 1, 510},
	    {"the whole chunk", 0, 512},
	    {"nothing", 200, 0},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		tu_case = cases[k].name;
		uint64_t w[PA_CHUNK_WORDS] = {0};
		bits_set_range(w, cases[k].start, cases[k].n);
		TU_EQ(bits_count_range(w, 0, PA_CHUNK_PAGES), cases[k].n);
		TU_EQ(bits_count_range(w, cases[k].start, cases[k].n), cases[k].n);
		for (unsigned i = 0; i < PA_CHUNK_PAGES; i++)
			TU_EQ(naive_bit(w, i),
			      i >= cases[k].start && i < cases[k].start + cases[k].n);
		bits_clear_range(w, cases[k].start, cases[k].n);
		for (unsigned i = 0; i < PA_CHUNK_WORDS; i++)
			TU_EQ(w[i], 0);
	}
	tu_case = "";
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(test_ctz_clz_of_zero_are_64),
	    TU_TEST(test_mask_every_start_and_length_including_64),
	    TU_TEST(test_find_run_single_run_every_length_every_position),
	    TU_TEST(test_find_run_skips_run_one_short),
	    TU_TEST(test_find_run_two_runs_with_every_gap_width),
	    TU_TEST(test_find_run_full_and_empty_words),
	    TU_TEST(test_find_run_matches_reference_on_random_words),
	    TU_TEST(test_set_range_every_start_and_length),
	    TU_TEST(test_clear_range_every_start_and_length),
	    TU_TEST(test_count_range_every_start_and_length),
	    TU_TEST(test_range_helpers_at_chunk_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
