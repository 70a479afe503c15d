/*
 * fuzz_malloc.c — libFuzzer target: the input is a program of pa_ malloc-
 * family calls on a table of slots, run against a reference model.
 *
 * The input is read as a sequence of operations, each an opcode byte and its
 * arguments (a slot, a size, an alignment; bytes past the end read as 0).
 * Sixteen slots each hold at most one live block, and the model knows each
 * block's pointer, requested size, usable size, alignment and contents: a
 * pattern derived from a seed, or zeros after calloc, over [0, valid).
 * The operations (enum op) cover every call of the family, valid and
 * invalid-but-defined: malloc, calloc (including n * size overflowing),
 * realloc (grow, shrink, to 0, from NULL, to a size that must fail),
 * reallocarray, free, free(NULL), free_sized and free_aligned_sized with the
 * right size, aligned_alloc, memalign and posix_memalign with valid, odd and
 * invalid alignments, valloc, pvalloc, malloc_usable_size, huge sizes, a
 * write of a block's whole usable size, malloc_trim and the cache flushes,
 * the heap statistics, and a free plus a malloc from another thread.
 *
 * After each operation every live block is checked: its contents (in full
 * up to 64 KiB, sampled beyond, in full before it is freed or moved), that
 * malloc_usable_size still says what it said. Each result is checked against
 * glibc 2.36's documented behaviour, as include/pagealloc.h promises it:
 * 16-byte alignment or the asked one rounded up to a power of two, usable
 * size at least the request, no overlap with another live block, NULL with
 * ENOMEM for what cannot fit (sizes past PTRDIFF_MAX, overflowing products,
 * alignments no address can have), EINVAL for alignments past SIZE_MAX/2+1
 * (posix_memalign: not a power-of-two multiple of sizeof(void *), *out left
 * alone), a failed realloc leaving the block intact, free keeping errno. At
 * the end everything is freed and pa_malloc_stats must count no live object.
 *
 * Not generated: the calls the allocator answers by aborting on purpose
 * (double free, a foreign or interior pointer, free_sized with a wrong size);
 * tests/preload/bad_pointer.sh covers those. A broken check aborts with a
 * line saying which, and libFuzzer keeps the input.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagealloc.h"
#include "sizeclass_table.h"

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_malloc: %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define NSLOTS 16
#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
#define MIN_ALIGN ((size_t)16)       /* alignof(max_align_t) */
#define OS_PAGE ((size_t)4096)       /* valloc, pvalloc */
#define ERRNO_SENTINEL 12345         /* no call sets errno to this */
#define FULL_CHECK (64 * KIB)        /* blocks up to this are checked in full after every op */
#define SURE_SIZE (16 * MIB)         /* requests up to this must succeed */
#define SURE_ALIGN GIB               /* alignments up to this must succeed (pagealloc.h) */
#define NO_ADDRESS ((size_t)1 << 57) /* no user address is a nonzero multiple of this */

/* ---- the input ------------------------------------------------------------------------ */

struct input {
	const uint8_t *d;
	size_t n, at;
};

static uint8_t u8(struct input *in)
{
	return in->at < in->n ? in->d[in->at++] : 0;
}

static size_t u16(struct input *in)
{
	size_t lo = u8(in);
	return lo | (size_t)u8(in) << 8;
}

/* Sizes from a selector byte: mostly small, some at class and page edges,
 * some large, a few of several MiB (which cost page faults: kept rare). */
static size_t pick_size(struct input *in)
{
	uint8_t sel = u8(in);
	uint8_t kind = sel % 32;
	if (kind < 14)
		return u8(in);
	if (kind < 20)
		return u16(in) % (PA_SC_MAX_SMALL + 1);
	if (kind < 24) {
		/* A class's size or a page multiple, or one byte either side. */
		uint8_t b = u8(in);
		size_t base = b % 2 == 0
		                  ? pa_sizeclasses[1 + (b / 2) % (PA_SC_NUM_CLASSES - 1)].size
		                  : PA_PAGE_BYTES * (1 + (b / 2) % 128);
		return base - 1 + sel / 32 % 3;
	}
	if (kind < 31)
		return u16(in) * 16 + u8(in);
	return (1 + u8(in) % 5) * MIB + u16(in);
}

/* Sizes no allocation can have (past PTRDIFF_MAX: the first NHUGE_FAIL) and
 * sizes one may or may not get (from 2^47; 2^40, which pagealloc's
 * MAP_NORESERVE reservations grant, costs a page table walk of a terabyte
 * and is left out). */
#define NHUGE_FAIL 5
static const size_t huge_sizes[] = {
    SIZE_MAX,
    SIZE_MAX - 1,
    SIZE_MAX - 4095,
    SIZE_MAX / 2 + 1,
    (size_t)PTRDIFF_MAX + 1,
    (size_t)PTRDIFF_MAX,
    (size_t)1 << 62,
    (size_t)1 << 56,
    (size_t)1 << 48,
    (size_t)1 << 47,
};
#define NHUGE (sizeof(huge_sizes) / sizeof(huge_sizes[0]))

static size_t pick_huge(struct input *in)
{
	return huge_sizes[u8(in) % NHUGE];
}

/* Alignments: powers of two up to 8 MiB, small odd ones, a table of
 * interesting ones (1 GiB, the largest documented to work), invalid ones. */
static size_t pick_align(struct input *in)
{
	static const size_t odd[] = {0, 1, 3, 8, 24, 48, 100, 4097, 12288, 65537, GIB, 3 * MIB};
	static const size_t bad[] = {SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 2, SIZE_MAX,
	                             (size_t)1 << 57,  (size_t)1 << 62,  SIZE_MAX - 15,
	                             (size_t)3 << 60};
	uint8_t a = u8(in);
	switch (a % 8) {
	case 0:
	case 1:
	case 2:
	case 3:
		return (size_t)1 << (a / 8 % 24);
	case 4:
		return a / 8;
	case 5:
	case 6:
		return odd[a / 8 % (sizeof(odd) / sizeof(odd[0]))];
	default:
		return bad[a / 8 % (sizeof(bad) / sizeof(bad[0]))];
	}
}

/* The loops over a block's bytes run without libFuzzer's comparison tracing:
 * it would trace every word of a block, and what it learns there is nothing
 * about the allocator. */
#define NO_TRACE __attribute__((no_sanitize("coverage")))

/* ---- the model -------------------------------------------------------------------------- */

struct slot {
	unsigned char *p; /* NULL: empty */
	size_t size;      /* bytes requested (free_sized passes it back) */
	size_t usable;    /* pa_malloc_usable_size when it was allocated */
	size_t align;     /* the alignment asked of an aligned call, else 0 */
	size_t valid;     /* [0, valid) holds the expected contents */
	uint64_t seed;    /* the pattern's seed; 0: zeros (calloc) */
};

static struct slot slots[NSLOTS];
static uint64_t next_seed = 1;

/* The pattern: 8-byte words that differ by seed and by offset, so a block
 * moved, shifted or mixed with another shows. */
static NO_TRACE uint64_t pattern_word(uint64_t seed, size_t word)
{
	return seed == 0 ? 0
	                 : (seed * 0x9e3779b97f4a7c15u) ^ ((uint64_t)word * 0xff51afd7ed558ccdu);
}

static NO_TRACE unsigned char pattern_byte(uint64_t seed, size_t i)
{
	return (unsigned char)(pattern_word(seed, i / 8) >> (i % 8 * 8));
}

/* Write s's pattern over [s->valid, s->usable): the whole block is known. */
static NO_TRACE void extend(struct slot *s)
{
	size_t i = s->valid;
	for (; i < s->usable && i % 8 != 0; i++)
		s->p[i] = pattern_byte(s->seed, i);
	for (; i + 8 <= s->usable; i += 8) {
		uint64_t v = pattern_word(s->seed, i / 8);
		memcpy(s->p + i, &v, 8);
	}
	for (; i < s->usable; i++)
		s->p[i] = pattern_byte(s->seed, i);
	s->valid = s->usable;
}

/* Write a new pattern over all of s's usable size, the last byte included. */
static void fill(struct slot *s)
{
	s->seed = next_seed++;
	s->valid = 0;
	extend(s);
}

/* Bytes [from, to) of s hold the pattern. */
static NO_TRACE void expect_range(const struct slot *s, size_t from, size_t to)
{
	size_t i = from;
	for (; i < to && i % 8 != 0; i++)
		CHECK(s->p[i] == pattern_byte(s->seed, i), "slot %td byte %zu of %zu changed",
		      s - slots, i, s->valid);
	for (; i + 8 <= to; i += 8) {
		uint64_t v;
		memcpy(&v, s->p + i, 8);
		CHECK(v == pattern_word(s->seed, i / 8), "slot %td word at %zu of %zu changed",
		      s - slots, i, s->valid);
	}
	for (; i < to; i++)
		CHECK(s->p[i] == pattern_byte(s->seed, i), "slot %td byte %zu of %zu changed",
		      s - slots, i, s->valid);
}

/* s's contents are intact: all of it, or (big blocks between operations) the
 * first and last 4 KiB and one word in every 4 KiB. */
static void expect_contents(const struct slot *s, int full)
{
	if (full || s->valid <= FULL_CHECK) {
		expect_range(s, 0, s->valid);
		return;
	}
	expect_range(s, 0, 4 * KIB);
	for (size_t at = 4 * KIB; at + 8 <= s->valid - 4 * KIB; at += 4 * KIB + 8)
		expect_range(s, at, at + 8);
	expect_range(s, s->valid - 4 * KIB, s->valid);
}

static size_t live_blocks(void)
{
	size_t n = 0;
	for (size_t i = 0; i < NSLOTS; i++)
		n += slots[i].p != NULL;
	return n;
}

/* A fresh block p of `size` bytes (usable >= size), aligned to `align`:
 * not overlapping the block of any slot but `self` (realloc's, whose old
 * block it replaces; NULL for none). */
static void expect_block(const unsigned char *p, size_t size, size_t align, const char *what,
                         const struct slot *self)
{
	CHECK(p != NULL, "%s(%zu) failed", what, size);
	CHECK((uintptr_t)p % align == 0, "%s(%zu) = %p, not aligned to %zu", what, size, (void *)p,
	      align);
	size_t usable = pa_malloc_usable_size((void *)p);
	CHECK(usable >= size, "%s(%zu): usable size %zu", what, size, usable);
	for (size_t i = 0; i < NSLOTS; i++) {
		const struct slot *o = &slots[i];
		if (o != self && o->p != NULL)
			CHECK(p + usable <= o->p || o->p + o->usable <= p,
			      "%s(%zu) = %p overlaps slot %zu's %p", what, size, (void *)p, i,
			      (void *)o->p);
	}
}

/* A failed call: NULL with errno err. */
static void expect_failure(const void *p, int err, const char *what, size_t a, size_t b)
{
	CHECK(p == NULL, "%s(%zu, %zu) succeeded", what, a, b);
	CHECK(errno == err, "%s(%zu, %zu): errno %d, want %d", what, a, b, errno, err);
}

/* Take the block p of size bytes into slot s and write it all. */
static void keep(struct slot *s, void *p, size_t size, size_t align)
{
	s->p = p;
	s->size = size;
	s->align = align;
	s->usable = pa_malloc_usable_size(p);
	fill(s);
}

/* Free slot s's block (after checking it in full) with free, free_sized or
 * free_aligned_sized, as `how` picks; free keeps errno. */
static void release(struct slot *s, unsigned how)
{
	if (s->p == NULL)
		return;
	expect_contents(s, 1);
	errno = ERRNO_SENTINEL;
	switch (how % 3) {
	case 0:
		pa_free(s->p);
		break;
	case 1:
		/* C23: free_sized for malloc's blocks; an aligned block (aligned_alloc,
		 * memalign, posix_memalign, valloc) is freed with its alignment */
		if (s->align > 16)
			pa_free_aligned_sized(s->p, s->align, s->size);
		else
			pa_free_sized(s->p, s->size);
		break;
	default:
		/* C23: for aligned blocks; for others an alignment of 0. */
		pa_free_aligned_sized(s->p, s->align, s->size);
		break;
	}
	CHECK(errno == ERRNO_SENTINEL, "free changed errno to %d", errno);
	s->p = NULL;
	s->valid = 0;
}

/* Slot s now holds realloc's result p of size bytes: what it held is kept up
 * to the smaller size (pagealloc copies the old usable size, as glibc does),
 * and the pattern goes on to the new usable size. */
static void resized(struct slot *s, void *p, size_t size)
{
	if (s->p == NULL) {
		s->seed = next_seed++;
		s->valid = 0;
	}
	s->p = p;
	s->size = size;
	s->align = 0;
	s->usable = pa_malloc_usable_size(p);
	if (s->valid > size)
		s->valid = size;
	expect_contents(s, 1);
	extend(s);
}

/* The alignment memalign gives for `align`, or 0 when it must fail: glibc
 * 2.36 rounds up to a power of two, at least 16; past SIZE_MAX/2+1 is
 * EINVAL. */
static size_t memalign_result(size_t align)
{
	if (align <= MIN_ALIGN)
		return MIN_ALIGN;
	if (align > SIZE_MAX / 2 + 1)
		return 0;
	size_t a = MIN_ALIGN;
	while (a < align)
		a <<= 1;
	return a;
}

/* An aligned call's result: for a sure size and alignment a block; for
 * sizes or alignments that cannot fit NULL with ENOMEM (errno for the
 * NULL-returning calls only: posix_memalign's code is checked by its
 * caller); between them either. Returns whether to keep the block. */
static int check_aligned(void *p, size_t align, size_t size, const char *what)
{
	size_t want = memalign_result(align);
	if (want == 0) {
		expect_failure(p, EINVAL, what, align, size);
		return 0;
	}
	if (size > PTRDIFF_MAX || want >= NO_ADDRESS) {
		expect_failure(p, ENOMEM, what, align, size);
		return 0;
	}
	if (size <= SURE_SIZE && want <= SURE_ALIGN) {
		expect_block(p, size, want, what, NULL);
		return 1;
	}
	if (p == NULL) {
		CHECK(errno == ENOMEM, "%s(%zu, %zu): errno %d", what, align, size, errno);
		return 0;
	}
	expect_block(p, size, want, what, NULL);
	pa_free(p);
	return 0;
}

/* ---- another thread ----------------------------------------------------------------------- */

struct handoff {
	struct slot *s;
	size_t size;
	void *got;
};

/* Free s's block here and allocate the one that replaces it: a free of
 * another thread's block, and a thread cache that is flushed at exit. */
static void *handoff_thread(void *arg)
{
	struct handoff *h = arg;
	pa_free(h->s->p);
	h->got = pa_malloc(h->size);
	return NULL;
}

/* ---- the operations ---------------------------------------------------------------------- */

enum op {
	OP_MALLOC,
	OP_CALLOC,
	OP_CALLOC_OVERFLOW,
	OP_REALLOC,
	OP_REALLOC_ZERO,
	OP_REALLOC_HUGE,
	OP_REALLOCARRAY,
	OP_FREE,
	OP_FREE_SIZED,
	OP_ALIGNED_ALLOC,
	OP_MEMALIGN,
	OP_POSIX_MEMALIGN,
	OP_VALLOC,
	OP_PVALLOC,
	OP_USABLE_SIZE,
	OP_WRITE,
	OP_HUGE,
	OP_MAINTAIN,
	OP_STATS,
	OP_OTHER_THREAD,
	NOPS
};

static const char *const op_names[NOPS] = {
    "malloc",       "calloc",        "calloc_overflow", "realloc",
    "realloc_zero", "realloc_huge",  "reallocarray",    "free",
    "free_sized",   "aligned_alloc", "memalign",        "posix_memalign",
    "valloc",       "pvalloc",       "usable_size",     "write",
    "huge",         "maintain",      "stats",           "other_thread",
};

/* FUZZ_MALLOC_TRACE=1 in the environment: one line per operation on stderr,
 * to read what a crashing input did. */
static int tracing;

static void run_op(struct input *in)
{
	enum op op = (enum op)(u8(in) % NOPS);
	struct slot *s = &slots[u8(in) % NSLOTS];
	void *p = NULL;
	size_t size = 0, align = 0, n = 0;

	switch (op) {
	case OP_MALLOC:
		release(s, 0);
		size = pick_size(in);
		p = pa_malloc(size);
		expect_block(p, size, MIN_ALIGN, "malloc", NULL);
		keep(s, p, size, 0);
		break;

	case OP_CALLOC:
		release(s, 1);
		n = u8(in) % 17;
		size = pick_size(in) / (n == 0 ? 1 : n);
		p = pa_calloc(n, size);
		expect_block(p, n * size, MIN_ALIGN, "calloc", NULL);
		s->p = p;
		s->size = n * size;
		s->align = 0;
		s->usable = pa_malloc_usable_size(p);
		s->seed = 0;
		s->valid = n * size;
		expect_contents(s, 1); /* zeros */
		break;

	case OP_CALLOC_OVERFLOW:
		/* n * size past SIZE_MAX, or past PTRDIFF_MAX. */
		n = ((size_t)1 << (32 + u8(in) % 32)) + u8(in);
		size = (SIZE_MAX / n) + 1 + u16(in);
		if (u8(in) % 2 == 0)
			size = (size_t)PTRDIFF_MAX / n + 1;
		errno = 0;
		p = pa_calloc(n, size);
		expect_failure(p, ENOMEM, "calloc", n, size);
		p = pa_calloc(size, n);
		expect_failure(p, ENOMEM, "calloc", size, n);
		break;

	case OP_REALLOC:
		/* From NULL when the slot is empty; grows or shrinks otherwise. */
		size = pick_size(in);
		if (size == 0)
			size = 1; /* realloc to 0 is OP_REALLOC_ZERO */
		if (s->p != NULL)
			expect_contents(s, 1);
		p = pa_realloc(s->p, size);
		expect_block(p, size, MIN_ALIGN, "realloc", s);
		resized(s, p, size);
		break;

	case OP_REALLOC_ZERO:
		/* glibc 2.36: frees the block, returns NULL, errno alone. */
		if (s->p != NULL)
			expect_contents(s, 1);
		errno = ERRNO_SENTINEL;
		p = pa_realloc(s->p, 0);
		if (s->p != NULL) {
			CHECK(p == NULL, "realloc(p, 0) returned %p", p);
			CHECK(errno == ERRNO_SENTINEL, "realloc(p, 0) set errno %d", errno);
			s->p = NULL;
			s->valid = 0;
		} else {
			expect_block(p, 0, MIN_ALIGN, "realloc(NULL, 0)", NULL);
			keep(s, p, 0, 0);
		}
		break;

	case OP_REALLOC_HUGE:
		/* Past PTRDIFF_MAX: NULL, ENOMEM, the block untouched. */
		size = huge_sizes[u8(in) % NHUGE_FAIL];
		errno = 0;
		p = pa_realloc(s->p, size);
		expect_failure(p, ENOMEM, "realloc", (size_t)(uintptr_t)s->p, size);
		if (s->p != NULL) {
			CHECK(pa_malloc_usable_size(s->p) == s->usable, "failed realloc resized");
			expect_contents(s, 1);
		}
		break;

	case OP_REALLOCARRAY:
		/* A product that fits (a realloc), or one that overflows (fails,
		 * the block untouched). */
		n = 1 + u8(in) % 16;
		size = pick_size(in) / n;
		if (u8(in) % 4 == 0) {
			n++;
			size = SIZE_MAX / n + 1 + u8(in);
			errno = 0;
			p = pa_reallocarray(s->p, n, size);
			expect_failure(p, ENOMEM, "reallocarray", n, size);
			if (s->p != NULL)
				expect_contents(s, 1);
			break;
		}
		if (n * size == 0)
			size = 1;
		if (s->p != NULL)
			expect_contents(s, 1);
		p = pa_reallocarray(s->p, n, size);
		expect_block(p, n * size, MIN_ALIGN, "reallocarray", s);
		resized(s, p, n * size);
		break;

	case OP_FREE:
		/* An empty slot: free(NULL), free_sized(NULL, n). */
		if (s->p == NULL) {
			errno = ERRNO_SENTINEL;
			pa_free(NULL);
			pa_free_sized(NULL, u8(in));
			pa_free_aligned_sized(NULL, 64, u8(in));
			CHECK(errno == ERRNO_SENTINEL, "free(NULL) set errno %d", errno);
			CHECK(pa_malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) != 0");
		}
		release(s, 0);
		break;

	case OP_FREE_SIZED:
		release(s, 1 + u8(in) % 2);
		break;

	case OP_ALIGNED_ALLOC:
	case OP_MEMALIGN:
		release(s, 2);
		align = pick_align(in);
		size = pick_size(in);
		if (u8(in) % 8 == 0)
			size = pick_huge(in);
		errno = 0;
		p = op == OP_MEMALIGN ? pa_memalign(align, size) : pa_aligned_alloc(align, size);
		/* kept with the alignment the block has (memalign rounds up to a
		 * power of two): what free_aligned_sized is given */
		if (check_aligned(p, align, size, op == OP_MEMALIGN ? "memalign" : "aligned_alloc"))
			keep(s, p, size, memalign_result(align));
		break;

	case OP_POSIX_MEMALIGN: {
		/* EINVAL unless a power-of-two multiple of sizeof(void *); *out
		 * is written on success only. */
		release(s, 2);
		align = pick_align(in);
		size = pick_size(in);
		if (u8(in) % 8 == 0)
			size = pick_huge(in);
		void *out = &slots; /* a value it must not overwrite on failure */
		int valid = align != 0 && align % sizeof(void *) == 0 && (align & (align - 1)) == 0;
		errno = ERRNO_SENTINEL;
		int rc = pa_posix_memalign(&out, align, size);
		if (!valid) {
			CHECK(rc == EINVAL, "posix_memalign(%zu, %zu) = %d", align, size, rc);
			CHECK(out == (void *)&slots, "posix_memalign wrote *out on EINVAL");
			CHECK(errno == ERRNO_SENTINEL, "posix_memalign EINVAL set errno %d", errno);
			break;
		}
		CHECK(rc == 0 || rc == ENOMEM, "posix_memalign(%zu, %zu) = %d", align, size, rc);
		if (rc != 0) {
			CHECK(out == (void *)&slots, "posix_memalign wrote *out on ENOMEM");
			errno = ENOMEM; /* the return code is posix_memalign's errno */
			p = NULL;
		} else {
			p = out;
		}
		if (check_aligned(p, align, size, "posix_memalign"))
			keep(s, p, size, align);
		break;
	}

	case OP_VALLOC:
	case OP_PVALLOC:
		release(s, 0);
		size = pick_size(in);
		if (u8(in) % 8 == 0)
			size = pick_huge(in);
		errno = 0;
		p = op == OP_VALLOC ? pa_valloc(size) : pa_pvalloc(size);
		n = size;
		if (op == OP_PVALLOC) /* rounded up to pages; overflowing that is ENOMEM */
			n = size > SIZE_MAX - (OS_PAGE - 1) ? SIZE_MAX
			                                    : (size + OS_PAGE - 1) & ~(OS_PAGE - 1);
		/* valloc is memalign(page size): its blocks are freed with that
		 * alignment (a 1-byte one is a 4 KiB block) */
		if (check_aligned(p, OS_PAGE, n, op == OP_VALLOC ? "valloc" : "pvalloc"))
			keep(s, p, size, OS_PAGE);
		break;

	case OP_USABLE_SIZE:
		if (s->p != NULL)
			CHECK(pa_malloc_usable_size(s->p) == s->usable, "usable size %zu, was %zu",
			      pa_malloc_usable_size(s->p), s->usable);
		else
			CHECK(pa_malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) != 0");
		break;

	case OP_WRITE:
		if (s->p != NULL) {
			expect_contents(s, 1);
			fill(s); /* all of the usable size, the last byte included */
		}
		break;

	case OP_HUGE:
		/* Sizes past PTRDIFF_MAX fail with ENOMEM; from 1 TiB either. */
		size = pick_huge(in);
		errno = 0;
		p = u8(in) % 2 == 0 ? pa_malloc(size) : pa_calloc(1, size);
		if (size > PTRDIFF_MAX) {
			expect_failure(p, ENOMEM, "malloc", size, 0);
		} else if (p == NULL) {
			CHECK(errno == ENOMEM, "malloc(%zu): errno %d", size, errno);
		} else {
			expect_block(p, size, MIN_ALIGN, "malloc", NULL);
			pa_free(p);
		}
		break;

	case OP_MAINTAIN:
		/* Paths that release memory: none may touch a live block. */
		switch (u8(in) % 5) {
		case 0:
			pa_malloc_trim(0);
			break;
		case 1:
			pa_malloc_trim((size_t)u8(in) * 64 * KIB);
			break;
		case 2:
			pa_thread_cache_flush();
			break;
		case 3:
			pa_cache_flush();
			break;
		default:
			pa_scavenge((size_t)u8(in) * PA_PAGE_BYTES);
			break;
		}
		break;

	case OP_STATS: {
		struct pa_malloc_stats ms;
		CHECK(pa_malloc_stats(&ms) == 0, "pa_malloc_stats failed");
		CHECK(ms.live_objects == live_blocks(),
		      "pa_malloc_stats: %zu live objects, %zu live", ms.live_objects,
		      live_blocks());
		break;
	}

	case OP_OTHER_THREAD: {
		if (s->p == NULL)
			break;
		expect_contents(s, 1);
		struct handoff h = {s, pick_size(in), NULL};
		pthread_t t;
		CHECK(pthread_create(&t, NULL, handoff_thread, &h) == 0, "pthread_create");
		CHECK(pthread_join(t, NULL) == 0, "pthread_join");
		s->p = NULL;
		expect_block(h.got, h.size, MIN_ALIGN, "malloc in another thread", NULL);
		keep(s, h.got, h.size, 0);
		break;
	}

	case NOPS:
		break;
	}
	if (tracing)
		fprintf(stderr, "%-15s slot %2td n %zu size %zu align %zu -> %p (slot %p)\n",
		        op_names[op], s - slots, n, size, align, p, (void *)s->p);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *t = getenv("FUZZ_MALLOC_TRACE");
	tracing = t != NULL && t[0] == '1';
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = {data, size, 0};
	while (in.at < in.n) {
		run_op(&in);
		for (size_t i = 0; i < NSLOTS; i++) {
			struct slot *s = &slots[i];
			if (s->p == NULL)
				continue;
			expect_contents(s, 0);
			CHECK(pa_malloc_usable_size(s->p) == s->usable,
			      "slot %zu: usable size changed", i);
		}
	}
	for (size_t i = 0; i < NSLOTS; i++)
		release(&slots[i], i);
	struct pa_malloc_stats ms;
	CHECK(pa_malloc_stats(&ms) == 0 && ms.live_objects == 0,
	      "all freed, pa_malloc_stats counts %zu live objects", ms.live_objects);
	return 0;
}
