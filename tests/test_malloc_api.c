/*
 * test_malloc_api.c — the pa_ malloc family (pagealloc.h) against the glibc
 * it stands in for (Debian 12: glibc 2.36), call by call.
 *
 * The corner cases are one table, rows of {name, function, arguments, what
 * glibc 2.36 does}. Each row runs twice: through glibc (the ordinary
 * malloc/free/... this binary uses; linking libpagealloc does not replace
 * them) and through the pa_ function, behind the same struct api. Both runs
 * must produce the row's recorded outcome: NULL or not, errno afterwards
 * (set to ERRNO_SENTINEL before every call, so "unchanged" is exact), the
 * return code of posix_memalign and whether it wrote *out, the alignment the
 * result must have, the usable size it must at least have, and for realloc
 * of a live block whether the old block survives a failure intact.
 *
 * Why recorded data and a live run: under AddressSanitizer "glibc" is
 * ASan's allocator, which answers these corners differently (and aborts on
 * some), so there the glibc run is skipped and pa_ is held to the recorded
 * rows alone. Without ASan the glibc run checks the recorded rows against
 * the real glibc, so the data cannot go stale.
 *
 * The rest are properties run through both APIs (glibc's half skipped under
 * ASan, or on another glibc): 16-byte alignment of every size, calloc zeroes
 * recycled memory, realloc keeps contents across every size-class boundary,
 * usable sizes are writable to the last byte, valloc/pvalloc page rounding,
 * free keeps errno, malloc_trim. pa_ only: the alignment x size matrix up to
 * 1 GiB alignment, and the C23 free_sized / free_aligned_sized (glibc 2.36
 * has neither).
 */
#include <gnu/libc-version.h>
#include <malloc.h>
#include <valgrind/valgrind.h>

#include "testutil.h"

#include "pagealloc.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* The glibc whose behaviour the rows record. */
#define GLIBC_RECORDED "2.36"

/* errno before every call: no function sets it to this, so seeing it after
 * the call means errno was left alone. */
#define ERRNO_SENTINEL 12345

/* What *out holds before posix_memalign: seeing it afterwards means *out
 * was not written. */
#define OUT_SENTINEL ((void *)(uintptr_t)0x5e47)

#define OS_PAGE ((size_t)4096)
#define MIN_ALIGN ((size_t)16) /* alignof(max_align_t) */
#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* ---- one allocator behind one interface ------------------------------------------- */

struct api {
	const char *name;
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*usable_size)(void *);
	int (*trim)(size_t);
};

static const struct api glibc_api = {
    .name = "glibc",
    .malloc = malloc,
    .free = free,
    .calloc = calloc,
    .realloc = realloc,
    .reallocarray = reallocarray,
    .aligned_alloc = aligned_alloc,
    .posix_memalign = posix_memalign,
    .memalign = memalign,
    .valloc = valloc,
    .pvalloc = pvalloc,
    .usable_size = malloc_usable_size,
    .trim = malloc_trim,
};

static const struct api pa_api = {
    .name = "pa",
    .malloc = pa_malloc,
    .free = pa_free,
    .calloc = pa_calloc,
    .realloc = pa_realloc,
    .reallocarray = pa_reallocarray,
    .aligned_alloc = pa_aligned_alloc,
    .posix_memalign = pa_posix_memalign,
    .memalign = pa_memalign,
    .valloc = pa_valloc,
    .pvalloc = pa_pvalloc,
    .usable_size = pa_malloc_usable_size,
    .trim = pa_malloc_trim,
};

/* Whether this run can compare against the real glibc the rows record
 * (ASan and valgrind's memcheck replace glibc's malloc with their own). */
static int glibc_live(void)
{
	return !UNDER_ASAN && !RUNNING_ON_VALGRIND &&
	       strcmp(gnu_get_libc_version(), GLIBC_RECORDED) == 0;
}

/* The APIs a property test runs through: pa always, glibc when live. */
static size_t apis(const struct api **out)
{
	size_t n = 0;
	if (glibc_live())
		out[n++] = &glibc_api;
	out[n++] = &pa_api;
	return n;
}

static unsigned char pattern(size_t i, size_t seed)
{
	/* (i >> 8) makes a shift by a multiple of 256 bytes visible. */
	return (unsigned char)(i * 131 + (i >> 8) * 7 + seed);
}

static void fill(unsigned char *p, size_t n, size_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(i, seed);
}

/* p[0, n) holds pattern(i, seed); a failure names tu_case. */
static void expect_pattern(const unsigned char *p, size_t n, size_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern(i, seed))
			fail_msg("%s: byte %zu of %zu is %#x, want %#x", tu_case, i, n, p[i],
			         pattern(i, seed));
}

/* ---- the corner-case table ---------------------------------------------------------- */

enum fn {
	F_MALLOC,            /* malloc(a) */
	F_CALLOC,            /* calloc(a, b) */
	F_REALLOC_NULL,      /* realloc(NULL, a) */
	F_REALLOC_LIVE,      /* realloc(p, a), p a live block of old_size bytes */
	F_REALLOCARRAY_NULL, /* reallocarray(NULL, a, b) */
	F_REALLOCARRAY_LIVE, /* reallocarray(p, a, b), p as above */
	F_ALIGNED_ALLOC,     /* aligned_alloc(a, b) */
	F_MEMALIGN,          /* memalign(a, b) */
	F_POSIX_MEMALIGN,    /* posix_memalign(&out, a, b) */
	F_VALLOC,            /* valloc(a) */
	F_PVALLOC,           /* pvalloc(a) */
};

/* What glibc 2.36 does. */
struct outcome {
	int null;      /* the result (or *out) is NULL / not written */
	int err;       /* errno afterwards; ERRNO_SENTINEL: unchanged */
	int rc;        /* posix_memalign's return code; 0 for the others */
	size_t align;  /* success: the result is a multiple of this */
	size_t usable; /* success: malloc_usable_size is at least this */
	int old_freed; /* *_LIVE returning NULL: the call freed the old block */
};

struct row {
	const char *name;
	enum fn fn;
	size_t a, b;
	size_t old_size; /* *_LIVE: the block's size before the call */
	struct outcome want;
};

#define OK(al, us)                                                                                 \
	{                                                                                          \
		0, ERRNO_SENTINEL, 0, (al), (us), 0                                                \
	}
#define FAILS(e)                                                                                   \
	{                                                                                          \
		1, (e), 0, 0, 0, 0                                                                 \
	}
#define FREES_OLD                                                                                  \
	{                                                                                          \
		1, ERRNO_SENTINEL, 0, 0, 0, 1                                                      \
	}
#define RETURNS(code)                                                                              \
	{                                                                                          \
		1, ERRNO_SENTINEL, (code), 0, 0, 0                                                 \
	}
#define RETURNS_ENOMEM                                                                             \
	{                                                                                          \
		1, ENOMEM, ENOMEM, 0, 0, 0                                                         \
	} /* glibc sets errno too */

#define HALF_PLUS_1 (SIZE_MAX / 2 + 1) /* a power of two, larger than any object */
#define HALF_PLUS_2 (SIZE_MAX / 2 + 2) /* past glibc's largest accepted alignment */
#define PTRDIFF ((size_t)PTRDIFF_MAX)

static const struct row rows[] = {
    /* malloc */
    {"malloc(0) is a pointer", F_MALLOC, 0, 0, 0, OK(MIN_ALIGN, 0)},
    {"malloc(1) is 16-aligned", F_MALLOC, 1, 0, 0, OK(MIN_ALIGN, 1)},
    {"malloc(SIZE_MAX) fails with ENOMEM", F_MALLOC, SIZE_MAX, 0, 0, FAILS(ENOMEM)},
    {"malloc(SIZE_MAX/2+1) fails with ENOMEM", F_MALLOC, HALF_PLUS_1, 0, 0, FAILS(ENOMEM)},
    {"malloc(PTRDIFF_MAX) fails with ENOMEM", F_MALLOC, PTRDIFF, 0, 0, FAILS(ENOMEM)},
    {"malloc(SIZE_MAX-4095) fails with ENOMEM", F_MALLOC, SIZE_MAX - 4095, 0, 0, FAILS(ENOMEM)},

    /* calloc */
    {"calloc(0, 0) is a pointer", F_CALLOC, 0, 0, 0, OK(MIN_ALIGN, 0)},
    {"calloc(0, 5) is a pointer", F_CALLOC, 0, 5, 0, OK(MIN_ALIGN, 0)},
    {"calloc(5, 0) is a pointer", F_CALLOC, 5, 0, 0, OK(MIN_ALIGN, 0)},
    {"calloc(3, 5) is 15 bytes", F_CALLOC, 3, 5, 0, OK(MIN_ALIGN, 15)},
    {"calloc(SIZE_MAX/2, 3) overflows: ENOMEM", F_CALLOC, SIZE_MAX / 2, 3, 0, FAILS(ENOMEM)},
    {"calloc(2^33, 2^33) overflows: ENOMEM", F_CALLOC, (size_t)1 << 33, (size_t)1 << 33, 0,
     FAILS(ENOMEM)},
    {"calloc(2^32, 2^32) overflows to 0: ENOMEM", F_CALLOC, (size_t)1 << 32, (size_t)1 << 32, 0,
     FAILS(ENOMEM)},
    {"calloc(1, SIZE_MAX) fails with ENOMEM", F_CALLOC, 1, SIZE_MAX, 0, FAILS(ENOMEM)},
    {"calloc(SIZE_MAX, 1) fails with ENOMEM", F_CALLOC, SIZE_MAX, 1, 0, FAILS(ENOMEM)},

    /* realloc */
    {"realloc(NULL, 0) is malloc(0)", F_REALLOC_NULL, 0, 0, 0, OK(MIN_ALIGN, 0)},
    {"realloc(NULL, 100) is malloc(100)", F_REALLOC_NULL, 100, 0, 0, OK(MIN_ALIGN, 100)},
    {"realloc(NULL, SIZE_MAX) fails with ENOMEM", F_REALLOC_NULL, SIZE_MAX, 0, 0, FAILS(ENOMEM)},
    {"realloc(small, 0) frees and returns NULL", F_REALLOC_LIVE, 0, 0, 16, FREES_OLD},
    {"realloc(large, 0) frees and returns NULL", F_REALLOC_LIVE, 0, 0, MIB, FREES_OLD},
    {"realloc(small, SIZE_MAX) fails, block intact", F_REALLOC_LIVE, SIZE_MAX, 0, 16,
     FAILS(ENOMEM)},
    {"realloc(large, SIZE_MAX) fails, block intact", F_REALLOC_LIVE, SIZE_MAX, 0, MIB,
     FAILS(ENOMEM)},
    {"realloc(small, SIZE_MAX/2+1) fails, block intact", F_REALLOC_LIVE, HALF_PLUS_1, 0, 100,
     FAILS(ENOMEM)},
    {"realloc(small, 100) grows", F_REALLOC_LIVE, 100, 0, 16, OK(MIN_ALIGN, 100)},
    {"realloc(large, 100) shrinks", F_REALLOC_LIVE, 100, 0, MIB, OK(MIN_ALIGN, 100)},

    /* reallocarray */
    {"reallocarray(NULL, 0, 0) is malloc(0)", F_REALLOCARRAY_NULL, 0, 0, 0, OK(MIN_ALIGN, 0)},
    {"reallocarray(NULL, 3, 5) is malloc(15)", F_REALLOCARRAY_NULL, 3, 5, 0, OK(MIN_ALIGN, 15)},
    {"reallocarray(NULL, SIZE_MAX/2, 3) overflows: ENOMEM", F_REALLOCARRAY_NULL, SIZE_MAX / 2, 3, 0,
     FAILS(ENOMEM)},
    {"reallocarray(p, SIZE_MAX/2, 3) overflows, block intact", F_REALLOCARRAY_LIVE, SIZE_MAX / 2, 3,
     100, FAILS(ENOMEM)},
    {"reallocarray(p, 2^33, 2^33) overflows, block intact", F_REALLOCARRAY_LIVE, (size_t)1 << 33,
     (size_t)1 << 33, 100, FAILS(ENOMEM)},
    {"reallocarray(p, 0, 0) frees and returns NULL", F_REALLOCARRAY_LIVE, 0, 0, 100, FREES_OLD},
    {"reallocarray(p, 0, 5) frees and returns NULL", F_REALLOCARRAY_LIVE, 0, 5, 100, FREES_OLD},
    {"reallocarray(p, 10, 30) grows", F_REALLOCARRAY_LIVE, 10, 30, 100, OK(MIN_ALIGN, 300)},

    /* posix_memalign: EINVAL unless a power-of-two multiple of sizeof(void *),
     * errno untouched; ENOMEM returned and also left in errno (glibc 2.36's
     * _mid_memalign sets it on the way out). */
    {"posix_memalign align 0: EINVAL", F_POSIX_MEMALIGN, 0, 10, 0, RETURNS(EINVAL)},
    {"posix_memalign align 1: EINVAL", F_POSIX_MEMALIGN, 1, 10, 0, RETURNS(EINVAL)},
    {"posix_memalign align 2: EINVAL", F_POSIX_MEMALIGN, 2, 10, 0, RETURNS(EINVAL)},
    {"posix_memalign align 4: EINVAL", F_POSIX_MEMALIGN, 4, 10, 0, RETURNS(EINVAL)},
    {"posix_memalign align sizeof(void*) is valid", F_POSIX_MEMALIGN, sizeof(void *), 10, 0,
     OK(MIN_ALIGN, 10)},
    {"posix_memalign align 12: EINVAL", F_POSIX_MEMALIGN, 12, 10, 0, RETURNS(EINVAL)},
    {"posix_memalign align 3*sizeof(void*): EINVAL", F_POSIX_MEMALIGN, 3 * sizeof(void *), 10, 0,
     RETURNS(EINVAL)},
    {"posix_memalign align 48: EINVAL", F_POSIX_MEMALIGN, 48, 10, 0, RETURNS(EINVAL)},
    {"posix_memalign align 4097: EINVAL", F_POSIX_MEMALIGN, 4097, 10, 0, RETURNS(EINVAL)},
    {"posix_memalign align 16", F_POSIX_MEMALIGN, 16, 10, 0, OK(16, 10)},
    {"posix_memalign align 32, size 100", F_POSIX_MEMALIGN, 32, 100, 0, OK(32, 100)},
    {"posix_memalign align 4096, size 10", F_POSIX_MEMALIGN, 4096, 10, 0, OK(4096, 10)},
    {"posix_memalign align 64, size 0", F_POSIX_MEMALIGN, 64, 0, 0, OK(64, 0)},
    {"posix_memalign align 8, size 0", F_POSIX_MEMALIGN, 8, 0, 0, OK(MIN_ALIGN, 0)},
    {"posix_memalign align 8, size SIZE_MAX: ENOMEM", F_POSIX_MEMALIGN, 8, SIZE_MAX, 0,
     RETURNS_ENOMEM},
    {"posix_memalign align 4096, size SIZE_MAX/2+1: ENOMEM", F_POSIX_MEMALIGN, 4096, HALF_PLUS_1, 0,
     RETURNS_ENOMEM},
    {"posix_memalign align SIZE_MAX/2+1: ENOMEM", F_POSIX_MEMALIGN, HALF_PLUS_1, 10, 0,
     RETURNS_ENOMEM},
    {"posix_memalign align SIZE_MAX/2+1, size 0: ENOMEM", F_POSIX_MEMALIGN, HALF_PLUS_1, 0, 0,
     RETURNS_ENOMEM},
    {"posix_memalign align SIZE_MAX/2+2: EINVAL", F_POSIX_MEMALIGN, HALF_PLUS_2, 10, 0,
     RETURNS(EINVAL)},
    {"posix_memalign align SIZE_MAX: EINVAL", F_POSIX_MEMALIGN, SIZE_MAX, 10, 0, RETURNS(EINVAL)},

    /* aligned_alloc: glibc 2.36 takes any alignment, rounding it up to a power
     * of two (at least 16); a size that is not a multiple is fine. */
    {"aligned_alloc align 0 is malloc", F_ALIGNED_ALLOC, 0, 10, 0, OK(MIN_ALIGN, 10)},
    {"aligned_alloc align 1 is malloc", F_ALIGNED_ALLOC, 1, 10, 0, OK(MIN_ALIGN, 10)},
    {"aligned_alloc align 3 rounds up", F_ALIGNED_ALLOC, 3, 10, 0, OK(MIN_ALIGN, 10)},
    {"aligned_alloc align 24 rounds to 32", F_ALIGNED_ALLOC, 24, 10, 0, OK(32, 10)},
    {"aligned_alloc align 48 rounds to 64", F_ALIGNED_ALLOC, 48, 10, 0, OK(64, 10)},
    {"aligned_alloc align 100 rounds to 128", F_ALIGNED_ALLOC, 100, 10, 0, OK(128, 10)},
    {"aligned_alloc align 4097 rounds to 8192", F_ALIGNED_ALLOC, 4097, 10, 0, OK(8192, 10)},
    {"aligned_alloc align 24, size 0", F_ALIGNED_ALLOC, 24, 0, 0, OK(32, 0)},
    {"aligned_alloc align 64, size 100 (not a multiple)", F_ALIGNED_ALLOC, 64, 100, 0, OK(64, 100)},
    {"aligned_alloc align 4096, size 5000 (not a multiple)", F_ALIGNED_ALLOC, 4096, 5000, 0,
     OK(4096, 5000)},
    {"aligned_alloc align 64, size SIZE_MAX: ENOMEM", F_ALIGNED_ALLOC, 64, SIZE_MAX, 0,
     FAILS(ENOMEM)},
    {"aligned_alloc align SIZE_MAX/2+1: ENOMEM", F_ALIGNED_ALLOC, HALF_PLUS_1, 10, 0,
     FAILS(ENOMEM)},
    {"aligned_alloc align SIZE_MAX/2+2: EINVAL", F_ALIGNED_ALLOC, HALF_PLUS_2, 10, 0,
     FAILS(EINVAL)},
    {"aligned_alloc align SIZE_MAX: EINVAL", F_ALIGNED_ALLOC, SIZE_MAX, 10, 0, FAILS(EINVAL)},

    /* memalign: the same rules as aligned_alloc in glibc 2.36. */
    {"memalign align 0 is malloc", F_MEMALIGN, 0, 10, 0, OK(MIN_ALIGN, 10)},
    {"memalign align 1 is malloc", F_MEMALIGN, 1, 10, 0, OK(MIN_ALIGN, 10)},
    {"memalign align 3 rounds up", F_MEMALIGN, 3, 10, 0, OK(MIN_ALIGN, 10)},
    {"memalign align 24 rounds to 32", F_MEMALIGN, 24, 10, 0, OK(32, 10)},
    {"memalign align 48 rounds to 64", F_MEMALIGN, 48, 10, 0, OK(64, 10)},
    {"memalign align 100 rounds to 128", F_MEMALIGN, 100, 10, 0, OK(128, 10)},
    {"memalign align 4097 rounds to 8192", F_MEMALIGN, 4097, 10, 0, OK(8192, 10)},
    {"memalign align 48, size 0", F_MEMALIGN, 48, 0, 0, OK(64, 0)},
    {"memalign align 64, size 100 (not a multiple)", F_MEMALIGN, 64, 100, 0, OK(64, 100)},
    {"memalign align 64, size SIZE_MAX: ENOMEM", F_MEMALIGN, 64, SIZE_MAX, 0, FAILS(ENOMEM)},
    {"memalign align SIZE_MAX/2+1: ENOMEM", F_MEMALIGN, HALF_PLUS_1, 10, 0, FAILS(ENOMEM)},
    {"memalign align SIZE_MAX/2+2: EINVAL", F_MEMALIGN, HALF_PLUS_2, 10, 0, FAILS(EINVAL)},
    {"memalign align SIZE_MAX: EINVAL", F_MEMALIGN, SIZE_MAX, 10, 0, FAILS(EINVAL)},

    /* valloc, pvalloc */
    {"valloc(0) is page-aligned", F_VALLOC, 0, 0, 0, OK(OS_PAGE, 0)},
    {"valloc(1) is page-aligned", F_VALLOC, 1, 0, 0, OK(OS_PAGE, 1)},
    {"valloc(4097) is page-aligned", F_VALLOC, 4097, 0, 0, OK(OS_PAGE, 4097)},
    {"valloc(SIZE_MAX) fails with ENOMEM", F_VALLOC, SIZE_MAX, 0, 0, FAILS(ENOMEM)},
    {"pvalloc(0) is a page-aligned pointer", F_PVALLOC, 0, 0, 0, OK(OS_PAGE, 0)},
    {"pvalloc(1) is a whole page", F_PVALLOC, 1, 0, 0, OK(OS_PAGE, OS_PAGE)},
    {"pvalloc(4096) is one page", F_PVALLOC, 4096, 0, 0, OK(OS_PAGE, OS_PAGE)},
    {"pvalloc(4097) is two pages", F_PVALLOC, 4097, 0, 0, OK(OS_PAGE, 2 * OS_PAGE)},
    {"pvalloc(SIZE_MAX) overflows rounding: ENOMEM", F_PVALLOC, SIZE_MAX, 0, 0, FAILS(ENOMEM)},
    {"pvalloc(SIZE_MAX-4095) fails with ENOMEM", F_PVALLOC, SIZE_MAX - 4095, 0, 0, FAILS(ENOMEM)},
};

/* What one call did. */
struct got {
	void *p; /* the result, or *out of a successful posix_memalign */
	int err;
	int rc;
	int out_written; /* posix_memalign changed *out */
	void *old;       /* *_LIVE: the block passed in */
};

/* Some of these calls are silly on purpose (sizes past PTRDIFF_MAX). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="

static struct got call(const struct api *api, const struct row *r)
{
	struct got g = {0};
	void *out = OUT_SENTINEL;
	if (r->fn == F_REALLOC_LIVE || r->fn == F_REALLOCARRAY_LIVE) {
		g.old = api->malloc(r->old_size);
		assert_non_null(g.old);
		fill(g.old, r->old_size, r->old_size);
	}
	errno = ERRNO_SENTINEL;
	switch (r->fn) {
	case F_MALLOC:
		g.p = api->malloc(r->a);
		break;
	case F_CALLOC:
		g.p = api->calloc(r->a, r->b);
		break;
	case F_REALLOC_NULL:
		g.p = api->realloc(NULL, r->a);
		break;
	case F_REALLOC_LIVE:
		g.p = api->realloc(g.old, r->a);
		break;
	case F_REALLOCARRAY_NULL:
		g.p = api->reallocarray(NULL, r->a, r->b);
		break;
	case F_REALLOCARRAY_LIVE:
		g.p = api->reallocarray(g.old, r->a, r->b);
		break;
	case F_ALIGNED_ALLOC:
		g.p = api->aligned_alloc(r->a, r->b);
		break;
	case F_MEMALIGN:
		g.p = api->memalign(r->a, r->b);
		break;
	case F_POSIX_MEMALIGN:
		g.rc = api->posix_memalign(&out, r->a, r->b);
		break;
	case F_VALLOC:
		g.p = api->valloc(r->a);
		break;
	case F_PVALLOC:
		g.p = api->pvalloc(r->a);
		break;
	}
	/* GCC knows posix_memalign as a builtin that leaves errno alone and would
	 * fold the read below to ERRNO_SENTINEL; glibc does set it. Reload. */
	__asm__ volatile("" ::: "memory");
	g.err = errno;
	if (r->fn == F_POSIX_MEMALIGN) {
		g.out_written = out != OUT_SENTINEL;
		g.p = g.rc == 0 ? out : NULL;
	}
	return g;
}

#pragma GCC diagnostic pop

/* Report one way api's run of row r differs from the row; returns 1. */
static int mismatch(const struct api *api, const struct row *r, const char *what, long long got,
                    long long want)
{
	print_error("row \"%s\": %s: %s is %lld, want %lld%s\n", r->name, api->name, what, got,
	            want,
	            api == &glibc_api ? " (glibc " GLIBC_RECORDED " disagrees with the recorded "
	                                "row: fix the row)"
	                              : "");
	return 1;
}

#define ROW_EQ(what, gotv, wantv)                                                                  \
	do {                                                                                       \
		long long g_ = (long long)(gotv), w_ = (long long)(wantv);                         \
		if (g_ != w_)                                                                      \
			bad += mismatch(api, r, what, g_, w_);                                     \
	} while (0)

/* The first byte of p[0, n) that is not pattern(i, seed), or n. */
static size_t pattern_break(const unsigned char *p, size_t n, size_t seed)
{
	size_t i = 0;
	while (i < n && p[i] == pattern(i, seed))
		i++;
	return i;
}

/*
 * Run row r through api and hold the outcome to the row; returns the number
 * of differences, each reported. Clean-up follows what the call actually
 * did, so one wrong row does not stop the rest of the table.
 */
static int check_row(const struct api *api, const struct row *r)
{
	int bad = 0;
	struct got g = call(api, r);
	const struct outcome *w = &r->want;

	ROW_EQ("result is NULL", g.p == NULL, w->null);
	ROW_EQ("errno", g.err, w->err);
	if (r->fn == F_POSIX_MEMALIGN) {
		ROW_EQ("return code", g.rc, w->rc);
		ROW_EQ("*out written", g.out_written, !w->null);
	}
	if (g.p != NULL) {
		if (w->align != 0)
			ROW_EQ("address % required alignment", (uintptr_t)g.p % w->align, 0);
		ROW_EQ("address % 16", (uintptr_t)g.p % MIN_ALIGN, 0);
		size_t usable = api->usable_size(g.p);
		ROW_EQ("usable size >= the row's minimum", usable >= w->usable, 1);
		if (g.old != NULL) {
			/* Contents survive up to the smaller of the two sizes. */
			size_t to = r->fn == F_REALLOC_LIVE ? r->a : r->a * r->b;
			size_t keep = r->old_size < to ? r->old_size : to;
			ROW_EQ("first byte not carried over", pattern_break(g.p, keep, r->old_size),
			       keep);
		}
		memset(g.p, 0x5a, usable);
		api->free(g.p);
	} else if (g.old != NULL) {
		/* NULL with errno unchanged: the call freed the old block (realloc
		 * to 0). NULL with ENOMEM: it failed and the block must be intact
		 * and live. */
		int freed = g.err == ERRNO_SENTINEL;
		ROW_EQ("old block freed by the call", freed, w->old_freed);
		if (!freed) {
			ROW_EQ("old block: first changed byte",
			       pattern_break(g.old, r->old_size, r->old_size), r->old_size);
			ROW_EQ("old block: usable size >= its size",
			       api->usable_size(g.old) >= r->old_size, 1);
			api->free(g.old);
		}
	}
	return bad;
}

static void test_corner_cases_match_glibc_2_36(void **state)
{
	(void)state;
	int live = glibc_live(), bad = 0;
	if (!live)
		print_message("glibc %s%s: holding pa_ to the recorded glibc %s rows only\n",
		              gnu_get_libc_version(), UNDER_ASAN ? " under ASan" : "",
		              GLIBC_RECORDED);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		if (live)
			bad += check_row(&glibc_api, &rows[i]);
		bad += check_row(&pa_api, &rows[i]);
	}
	TU_EQ(bad, 0);
}

/* ---- malloc ---------------------------------------------------------------------------- */

static void test_malloc_zero_is_unique_and_freeable(void **state)
{
	(void)state;
	const struct api *a[2];
	for (size_t k = apis(a), j = 0; j < k; j++) {
		enum { N = 64 };
		void *p[N];
		for (size_t i = 0; i < N; i++) {
			p[i] = a[j]->malloc(0);
			if (p[i] == NULL)
				fail_msg("%s: malloc(0) #%zu is NULL", a[j]->name, i);
			for (size_t h = 0; h < i; h++)
				if (p[h] == p[i])
					fail_msg("%s: malloc(0) #%zu == #%zu (%p)", a[j]->name, i,
					         h, p[i]);
		}
		for (size_t i = 0; i < N; i++)
			a[j]->free(p[i]);
	}
}

/* Sizes 1..4096, then a spread to 8 MiB: every power of two, one below and
 * one above, and midpoints. */
static size_t spread_sizes(size_t *out, size_t cap)
{
	size_t n = 0;
	for (size_t s = 1; s <= 4096; s++)
		out[n++] = s;
	for (size_t p = 8192; p <= 8 * MIB; p *= 2) {
		size_t v[] = {p / 2 + p / 4 - 1, p - 1, p, p + 1, p + p / 2};
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			if (v[i] > 4096 && v[i] <= 8 * MIB)
				out[n++] = v[i];
	}
	assert_true(n <= cap);
	return n;
}

static void test_malloc_every_size_to_8_mib_is_16_aligned_disjoint_and_keeps_errno(void **state)
{
	(void)state;
	static size_t sizes[4096 + 64];
	static unsigned char *p[4096 + 64];
	size_t n = spread_sizes(sizes, sizeof(sizes) / sizeof(sizes[0]));
	const struct api *a[2];
	for (size_t k = apis(a), j = 0; j < k; j++) {
		/* All live at once, first and last bytes stamped: an overlap shows
		 * as a wrong stamp. */
		for (size_t i = 0; i < n; i++) {
			errno = ERRNO_SENTINEL;
			p[i] = a[j]->malloc(sizes[i]);
			if (errno != ERRNO_SENTINEL)
				fail_msg("%s: malloc(%zu) succeeded but set errno to %d",
				         a[j]->name, sizes[i], errno);
			if (p[i] == NULL)
				fail_msg("%s: malloc(%zu) is NULL", a[j]->name, sizes[i]);
			if ((uintptr_t)p[i] % MIN_ALIGN != 0)
				fail_msg("%s: malloc(%zu) = %p is not 16-aligned", a[j]->name,
				         sizes[i], (void *)p[i]);
			if (a[j]->usable_size(p[i]) < sizes[i])
				fail_msg("%s: malloc(%zu): usable size %zu", a[j]->name, sizes[i],
				         a[j]->usable_size(p[i]));
			p[i][0] = (unsigned char)i;
			p[i][sizes[i] - 1] = (unsigned char)(i >> 8);
		}
		for (size_t i = 0; i < n; i++) {
			if (p[i][0] != (unsigned char)i ||
			    p[i][sizes[i] - 1] != (unsigned char)(i >> 8))
				fail_msg("%s: malloc(%zu) at %p was overwritten by another block",
				         a[j]->name, sizes[i], (void *)p[i]);
			a[j]->free(p[i]);
		}
	}
}

/* ---- calloc ---------------------------------------------------------------------------- */

static void test_calloc_zeroes_memory_that_was_dirtied_and_freed(void **state)
{
	(void)state;
	/* Small classes, the largest small class, pages, and large blocks past
	 * 32 KiB and 128 KiB (glibc's mmap threshold). */
	static const size_t sizes[] = {1,         8,         16,        24,    100,        1000,
	                               4095,      4096,      4097,      32768, 32769,      40 * KIB,
	                               128 * KIB, 129 * KIB, 200 * KIB, MIB,   4 * MIB + 1};
	enum { N = 8 };
	const struct api *a[2];
	for (size_t k = apis(a), j = 0; j < k; j++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t size = sizes[s];
			unsigned char *p[N];
			for (size_t i = 0; i < N; i++) {
				p[i] = a[j]->malloc(size);
				assert_non_null(p[i]);
				memset(p[i], 0xaa, a[j]->usable_size(p[i]));
			}
			for (size_t i = 0; i < N; i++)
				a[j]->free(p[i]);
			/* Half as calloc(1, size), half as calloc(size, 1). */
			for (size_t i = 0; i < N; i++) {
				p[i] = i % 2 ? a[j]->calloc(1, size) : a[j]->calloc(size, 1);
				assert_non_null(p[i]);
				for (size_t b = 0; b < size; b++)
					if (p[i][b] != 0)
						fail_msg("%s: calloc of %zu bytes: byte %zu is %#x",
						         a[j]->name, size, b, p[i][b]);
				memset(p[i], 0xaa, size);
			}
			for (size_t i = 0; i < N; i++)
				a[j]->free(p[i]);
		}
	}
}

/* ---- realloc ---------------------------------------------------------------------------- */

/* The edges of the size classes and of the small/large split. */
static const size_t class_edges[] = {1,     8,     16,     17,     24,   32,     33,    48,
                                     64,    100,   128,    129,    256,  512,    1000,  1024,
                                     1025,  2048,  4096,   4097,   8192, 8193,   16384, 32768,
                                     32769, 65536, 131072, 262145, MIB,  4 * MIB};
#define NEDGES (sizeof(class_edges) / sizeof(class_edges[0]))

static void test_realloc_keeps_contents_between_every_pair_of_class_edges(void **state)
{
	(void)state;
	const struct api *a[2];
	for (size_t k = apis(a), j = 0; j < k; j++) {
		for (size_t f = 0; f < NEDGES; f++) {
			for (size_t t = 0; t < NEDGES; t++) {
				size_t from = class_edges[f], to = class_edges[t];
				char name[96];
				snprintf(name, sizeof(name), "%s: realloc %zu -> %zu", a[j]->name,
				         from, to);
				tu_case = name;
				unsigned char *p = a[j]->malloc(from);
				assert_non_null(p);
				fill(p, from, f * 31 + t);
				unsigned char *q = a[j]->realloc(p, to);
				assert_non_null(q);
				TU_EQ((uintptr_t)q % MIN_ALIGN, 0);
				assert_true(a[j]->usable_size(q) >= to);
				expect_pattern(q, from < to ? from : to, f * 31 + t);
				q[to - 1] = 1;
				a[j]->free(q);
			}
		}
	}
	tu_case = "";
}

/* One block carried up through every edge and back down again. */
static void test_realloc_chain_up_and_down_the_class_edges_keeps_contents(void **state)
{
	(void)state;
	const struct api *a[2];
	for (size_t k = apis(a), j = 0; j < k; j++) {
		unsigned char *p = a[j]->malloc(class_edges[0]);
		assert_non_null(p);
		fill(p, class_edges[0], 7);
		size_t have = class_edges[0];
		for (size_t step = 1; step < 2 * NEDGES - 1; step++) {
			size_t e = step < NEDGES ? step : 2 * NEDGES - 2 - step;
			size_t to = class_edges[e];
			char name[96];
			snprintf(name, sizeof(name), "%s: chain step %zu, realloc %zu -> %zu",
			         a[j]->name, step, have, to);
			tu_case = name;
			p = a[j]->realloc(p, to);
			assert_non_null(p);
			expect_pattern(p, have < to ? have : to, 7);
			/* The grown tail gets the pattern too, so the way down checks
			 * every byte the way up wrote. */
			if (to > have)
				fill(p, to, 7);
			have = to;
		}
		a[j]->free(p);
	}
	tu_case = "";
}

/* ---- malloc_usable_size ---------------------------------------------------------------- */

static void test_usable_size_of_null_is_zero(void **state)
{
	(void)state;
	const struct api *a[2];
	for (size_t k = apis(a), j = 0; j < k; j++)
		TU_EQ(a[j]->usable_size(NULL), 0);
}

static void test_every_usable_byte_is_writable(void **state)
{
	(void)state;
	const struct api *a[2];
	for (size_t k = apis(a), j = 0; j < k; j++) {
		for (size_t e = 0; e < NEDGES + 1; e++) {
			size_t size = e == 0 ? 0 : class_edges[e - 1];
			for (size_t d = 0; d < 3; d++) {
				size_t s = size + d;
				unsigned char *p = a[j]->malloc(s);
				assert_non_null(p);
				size_t u = a[j]->usable_size(p);
				if (u < s)
					fail_msg("%s: malloc(%zu): usable size %zu", a[j]->name, s,
					         u);
				char name[64];
				snprintf(name, sizeof(name), "%s: malloc(%zu), usable %zu",
				         a[j]->name, s, u);
				tu_case = name;
				fill(p, u, s);
				expect_pattern(p, u, s);
				a[j]->free(p);
			}
		}
	}
	tu_case = "";
}

/* ---- valloc and pvalloc ---------------------------------------------------------------- */

static void test_valloc_and_pvalloc_are_page_aligned_and_pvalloc_rounds_to_pages(void **state)
{
	(void)state;
	static const size_t sizes[] = {1,    15,    4095,  4096,   4097, 8191,
	                               8192, 32768, 32769, 100000, MIB,  MIB + 1};
	const struct api *a[2];
	for (size_t k = apis(a), j = 0; j < k; j++) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t s = sizes[i], pages = (s + OS_PAGE - 1) / OS_PAGE * OS_PAGE;
			unsigned char *v = a[j]->valloc(s), *pv = a[j]->pvalloc(s);
			assert_non_null(v);
			assert_non_null(pv);
			if ((uintptr_t)v % OS_PAGE != 0 || (uintptr_t)pv % OS_PAGE != 0)
				fail_msg("%s: size %zu: valloc %p, pvalloc %p", a[j]->name, s,
				         (void *)v, (void *)pv);
			if (a[j]->usable_size(v) < s)
				fail_msg("%s: valloc(%zu): usable size %zu", a[j]->name, s,
				         a[j]->usable_size(v));
			if (a[j]->usable_size(pv) < pages)
				fail_msg("%s: pvalloc(%zu): usable size %zu < %zu", a[j]->name, s,
				         a[j]->usable_size(pv), pages);
			memset(v, 1, s);
			memset(pv, 2, pages);
			a[j]->free(v);
			a[j]->free(pv);
		}
	}
}

/* ---- free ------------------------------------------------------------------------------- */

static void test_free_preserves_errno(void **state)
{
	(void)state;
	static const size_t sizes[] = {0, 1, 100, 32768, 32769, MIB, 16 * MIB};
	const struct api *a[2];
	for (size_t k = apis(a), j = 0; j < k; j++) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			void *p = a[j]->malloc(sizes[i]);
			assert_non_null(p);
			errno = 4242;
			a[j]->free(p);
			if (errno != 4242)
				fail_msg("%s: free of a %zu-byte block set errno to %d", a[j]->name,
				         sizes[i], errno);
		}
		errno = 4242;
		a[j]->free(NULL);
		TU_EQ(errno, 4242);
	}
}

/* ---- pa_ only: alignment x size ---------------------------------------------------------- */

static const size_t matrix_sizes[] = {0,    1,    15,    16,    17,      100,    4096,
                                      8192, 8193, 32768, 32769, 1 << 20, 3 << 20};

/* One aligned allocation through `fn` (F_ALIGNED_ALLOC, F_MEMALIGN or
 * F_POSIX_MEMALIGN): not NULL, aligned, at least size usable, first and last
 * byte writable, errno left alone (as glibc leaves it on success); then
 * freed. */
static void check_aligned(enum fn fn, size_t align, size_t size)
{
	static const char *names[] = {[F_ALIGNED_ALLOC] = "pa_aligned_alloc",
	                              [F_MEMALIGN] = "pa_memalign",
	                              [F_POSIX_MEMALIGN] = "pa_posix_memalign"};
	const char *how = names[fn];
	void *p = OUT_SENTINEL;
	int rc = 0;
	errno = ERRNO_SENTINEL;
	if (fn == F_ALIGNED_ALLOC)
		p = pa_aligned_alloc(align, size);
	else if (fn == F_MEMALIGN)
		p = pa_memalign(align, size);
	else
		rc = pa_posix_memalign(&p, align, size);
	int err = errno;
	if (rc != 0 || p == NULL || p == OUT_SENTINEL)
		fail_msg("%s(align %zu, size %zu) failed: %p, rc %d, errno %d", how, align, size, p,
		         rc, err);
	if (err != ERRNO_SENTINEL)
		fail_msg("%s(align %zu, size %zu) succeeded but set errno to %d", how, align, size,
		         err);
	if ((uintptr_t)p % align != 0 || (uintptr_t)p % MIN_ALIGN != 0)
		fail_msg("%s(align %zu, size %zu) = %p is misaligned", how, align, size, p);
	size_t u = pa_malloc_usable_size(p);
	if (u < size)
		fail_msg("%s(align %zu, size %zu): usable size %zu", how, align, size, u);
	unsigned char *b = p;
	if (size > 0) {
		b[0] = 0x11;
		b[size - 1] = 0x22;
		if ((size > 1 && b[0] != 0x11) || b[size - 1] != 0x22)
			fail_msg("%s(align %zu, size %zu): first/last byte", how, align, size);
	}
	pa_free(p);
}

static void test_every_power_of_two_alignment_to_1_gib_with_every_size_keeps_errno(void **state)
{
	(void)state;
	for (unsigned k = 0; k <= 30; k++) {
		size_t align = (size_t)1 << k;
		for (size_t i = 0; i < sizeof(matrix_sizes) / sizeof(matrix_sizes[0]); i++) {
			size_t size = matrix_sizes[i];
			/* 1 GiB alignment: two sizes, to keep the address space bounded. */
			if (k == 30 && size != 1 && size != (3 << 20))
				continue;
			check_aligned(F_ALIGNED_ALLOC, align, size);
			check_aligned(F_MEMALIGN, align, size);
			if (align >= sizeof(void *))
				check_aligned(F_POSIX_MEMALIGN, align, size);
		}
	}
}

/* Alignments that are not powers of two round up to the next one. */
static void test_aligned_alloc_rounds_every_alignment_to_a_power_of_two(void **state)
{
	(void)state;
	for (size_t align = 1; align <= 5000; align += align < 300 ? 1 : 97) {
		size_t want = MIN_ALIGN;
		while (want < align)
			want *= 2;
		void *p = pa_aligned_alloc(align, 24), *q = pa_memalign(align, 24);
		if (p == NULL || q == NULL || (uintptr_t)p % want != 0 || (uintptr_t)q % want != 0)
			fail_msg("align %zu: aligned_alloc %p, memalign %p, want a multiple of %zu",
			         align, p, q, want);
		pa_free(p);
		pa_free(q);
	}
}

/* ---- pa_ only: C23 free_sized and free_aligned_sized -------------------------------------- */

static size_t live_objects(void)
{
	static struct pa_malloc_stats s; /* large: off the stack */
	pa_thread_cache_flush();
	assert_int_equal(pa_malloc_stats(&s), 0);
	return s.live_objects;
}

static void test_free_sized_with_the_allocation_size_frees_the_block(void **state)
{
	(void)state;
	static const size_t sizes[] = {0,    1,     16,    17,    100,     4096,
	                               8193, 32768, 32769, 65536, 1 << 20, 3 << 20};
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	void *p[N], *c[N];
	size_t before = live_objects();
	for (size_t i = 0; i < N; i++) {
		p[i] = pa_malloc(sizes[i]);
		c[i] = pa_calloc(sizes[i] ? 3 : 0, sizes[i] / 3 + 1);
		assert_non_null(p[i]);
		assert_non_null(c[i]);
	}
	TU_EQ(live_objects(), before + 2 * N);
	for (size_t i = 0; i < N; i++) {
		errno = 4242;
		pa_free_sized(p[i], sizes[i]);
		pa_free_sized(c[i], (sizes[i] ? 3 : 0) * (sizes[i] / 3 + 1));
		TU_EQ(errno, 4242);
	}
	TU_EQ(live_objects(), before);
	pa_free_sized(NULL, 0);
	pa_free_sized(NULL, 100);
	TU_EQ(live_objects(), before);
}

static void test_free_aligned_sized_frees_aligned_alloc_blocks(void **state)
{
	(void)state;
	static const size_t aligns[] = {16, 64, 4096, 65536, 1 << 21};
	static const size_t sizes[] = {0, 16, 100, 4096, 32769, 1 << 20};
	enum { NA = sizeof(aligns) / sizeof(aligns[0]), NS = sizeof(sizes) / sizeof(sizes[0]) };
	void *p[NA][NS];
	size_t before = live_objects();
	for (size_t a = 0; a < NA; a++)
		for (size_t s = 0; s < NS; s++) {
			p[a][s] = pa_aligned_alloc(aligns[a], sizes[s]);
			assert_non_null(p[a][s]);
			TU_EQ((uintptr_t)p[a][s] % aligns[a], 0);
		}
	TU_EQ(live_objects(), before + NA * NS);
	for (size_t a = 0; a < NA; a++)
		for (size_t s = 0; s < NS; s++) {
			errno = 4242;
			pa_free_aligned_sized(p[a][s], aligns[a], sizes[s]);
			TU_EQ(errno, 4242);
		}
	TU_EQ(live_objects(), before);
	pa_free_aligned_sized(NULL, 64, 0);
	pa_free_aligned_sized(NULL, 4096, 100);
	TU_EQ(live_objects(), before);
}

/* ---- malloc_trim -------------------------------------------------------------------------- */

static void test_malloc_trim_returns_0_or_1_and_the_heap_still_works(void **state)
{
	(void)state;
	const struct api *a[2];
	for (size_t k = apis(a), j = 0; j < k; j++) {
		enum { N = 256 };
		void *p[N];
		for (size_t i = 0; i < N; i++) {
			p[i] = a[j]->malloc(i * 1024 + 1);
			assert_non_null(p[i]);
			memset(p[i], 3, i * 1024 + 1);
		}
		for (size_t i = 0; i < N; i++)
			a[j]->free(p[i]);
		for (size_t pad = 0; pad <= MIB; pad += MIB) {
			int rc = a[j]->trim(pad);
			if (rc != 0 && rc != 1)
				fail_msg("%s: malloc_trim(%zu) = %d", a[j]->name, pad, rc);
		}
		for (size_t i = 0; i < N; i++) {
			p[i] = a[j]->malloc(i * 1024 + 1);
			assert_non_null(p[i]);
			memset(p[i], 4, i * 1024 + 1);
		}
		for (size_t i = 0; i < N; i++)
			a[j]->free(p[i]);
		int rc = a[j]->trim(0);
		assert_true(rc == 0 || rc == 1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(test_corner_cases_match_glibc_2_36),
	    TU_TEST(test_malloc_zero_is_unique_and_freeable),
	    TU_TEST(test_malloc_every_size_to_8_mib_is_16_aligned_disjoint_and_keeps_errno),
	    TU_TEST(test_calloc_zeroes_memory_that_was_dirtied_and_freed),
	    TU_TEST(test_realloc_keeps_contents_between_every_pair_of_class_edges),
	    TU_TEST(test_realloc_chain_up_and_down_the_class_edges_keeps_contents),
	    TU_TEST(test_usable_size_of_null_is_zero),
	    TU_TEST(test_every_usable_byte_is_writable),
	    TU_TEST(test_valloc_and_pvalloc_are_page_aligned_and_pvalloc_rounds_to_pages),
	    TU_TEST(test_free_preserves_errno),
	    TU_TEST(test_every_power_of_two_alignment_to_1_gib_with_every_size_keeps_errno),
	    TU_TEST(test_aligned_alloc_rounds_every_alignment_to_a_power_of_two),
	    TU_TEST(test_free_sized_with_the_allocation_size_frees_the_block),
	    TU_TEST(test_free_aligned_sized_frees_aligned_alloc_blocks),
	    TU_TEST(test_malloc_trim_returns_0_or_1_and_the_heap_still_works),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
