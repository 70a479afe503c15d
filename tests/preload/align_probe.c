/*
 * align_probe.c — glibc's rules for aligned allocation, probed call by call
 * through the C library's names: memalign, aligned_alloc and posix_memalign
 * over a sweep of alignments, each with sizes 0, 1, alignment - 1,
 * alignment, alignment + 1 and a large one; valloc and pvalloc over the
 * sizes around a page. One line per call: NULL or not, errno afterwards
 * (set to a sentinel before the call; "kept" when it is still that),
 * posix_memalign's return code and whether it wrote *out, and of a block
 * whether it is aligned to what the call promises and holds the size asked
 * for (all of it written, then freed).
 *
 * Run without and with the preloaded libpagealloc (tests/preload/matrix.sh,
 * job align_probe), the output must be the same: libpagealloc answers as
 * the glibc it stands in for (Debian 12's 2.36; the job is skipped on
 * another).
 *
 * What a block is checked against: memalign and aligned_alloc (aliases in
 * glibc 2.36) promise max(16, alignment rounded up to a power of two),
 * posix_memalign max(16, alignment), valloc and pvalloc a 4 KiB page, and
 * pvalloc whole pages.
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload_check.h"

#define SENTINEL 12345
#define MIN_ALIGN ((size_t)16) /* glibc's MALLOC_ALIGNMENT on x86-64 */
#define OS_PAGE ((size_t)4096)
#define HALF_PLUS_1 (SIZE_MAX / 2 + 1)
#define LARGE ((size_t)3 << 20) /* past glibc's mmap threshold, 3 MiB */

/* Through volatile pointers: the compiler knows these functions as
 * builtins and would fold what it believes they do (posix_memalign leaving
 * errno alone, a size past PTRDIFF_MAX failing). */
static void *(*volatile memalign_fn)(size_t, size_t) = memalign;
static void *(*volatile aligned_alloc_fn)(size_t, size_t) = aligned_alloc;
static int (*volatile posix_memalign_fn)(void **, size_t, size_t) = posix_memalign;
static void *(*volatile valloc_fn)(size_t) = valloc;
static void *(*volatile pvalloc_fn)(size_t) = pvalloc;

static const size_t alignments[] = {
    0,           1,        2, 3, 8, 16, 24, 32, 48, 4096, 8192, (size_t)1 << 20, (size_t)1 << 21,
    HALF_PLUS_1, SIZE_MAX,
};

static const char *errno_name(int e)
{
	static char buf[32];
	switch (e) {
	case SENTINEL:
		return "kept";
	case ENOMEM:
		return "ENOMEM";
	case EINVAL:
		return "EINVAL";
	}
	snprintf(buf, sizeof(buf), "%d", e);
	return buf;
}

static size_t pow2_at_least(size_t a)
{
	size_t p = 1;
	while (p < a && p <= SIZE_MAX / 2)
		p <<= 1;
	return p;
}

static const char *yes(int b)
{
	return b ? "yes" : "no";
}

/* "NULL" or the block's checks; a block is written in full and freed. */
static void describe(const char *call, void *p, int err, size_t promise, size_t size)
{
	if (p == NULL) {
		printf("%s: NULL, errno %s\n", call, errno_name(err));
		return;
	}
	size_t usable = malloc_usable_size(p);
	printf("%s: block, errno %s, aligned %s, holds the size %s\n", call, errno_name(err),
	       yes((uintptr_t)p % promise == 0), yes(usable >= size));
	memset(p, 0x5a, size);
	free(p);
}

static void probe_memalign(const char *name, void *(*fn)(size_t, size_t), size_t align, size_t size)
{
	char call[96];
	snprintf(call, sizeof(call), "%s(%zu, %zu)", name, align, size);
	errno = SENTINEL;
	void *p = fn(align, size);
	int err = errno;
	size_t promise = pow2_at_least(align);
	describe(call, p, err, promise > MIN_ALIGN ? promise : MIN_ALIGN, size);
}

static void probe_posix_memalign(size_t align, size_t size)
{
	char call[96];
	snprintf(call, sizeof(call), "posix_memalign(%zu, %zu)", align, size);
	void *out = &out; /* a value no allocator returns */
	errno = SENTINEL;
	int rc = posix_memalign_fn(&out, align, size);
	int err = errno;
	if (rc != 0) {
		printf("%s: returns %s, *out %s, errno %s\n", call, errno_name(rc),
		       out == &out ? "kept" : "written", errno_name(err));
		return;
	}
	strcat(call, ": returns 0");
	describe(call, out, err, align > MIN_ALIGN ? align : MIN_ALIGN, size);
}

static void probe_valloc(size_t size)
{
	char call[96];
	snprintf(call, sizeof(call), "valloc(%zu)", size);
	errno = SENTINEL;
	void *p = valloc_fn(size);
	describe(call, p, errno, OS_PAGE, size);
	snprintf(call, sizeof(call), "pvalloc(%zu)", size);
	errno = SENTINEL;
	p = pvalloc_fn(size);
	int err = errno;
	/* Whole pages: the size rounded up to a page must fit. */
	size_t pages =
	    size <= SIZE_MAX - (OS_PAGE - 1) ? (size + OS_PAGE - 1) & ~(OS_PAGE - 1) : size;
	describe(call, p, err, OS_PAGE, pages);
}

/* Is v one of s[0, n)? */
static int seen_before(const size_t *s, size_t n, size_t v)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == v)
			return 1;
	return 0;
}

int main(void)
{
	PRELOAD_CHECK_MALLOC();
	for (size_t i = 0; i < sizeof(alignments) / sizeof(alignments[0]); i++) {
		size_t a = alignments[i];
		/* alignment - 1 and + 1 wrap at 0 and SIZE_MAX: huge and tiny sizes. */
		const size_t sizes[] = {0, 1, a - 1, a, a + 1, LARGE};
		for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
			if (seen_before(sizes, j, sizes[j]))
				continue; /* probed already (alignments 0, 1 and SIZE_MAX) */
			probe_memalign("memalign", memalign_fn, a, sizes[j]);
			probe_memalign("aligned_alloc", aligned_alloc_fn, a, sizes[j]);
			probe_posix_memalign(a, sizes[j]);
		}
	}
	const size_t vsizes[] = {0,           1,     OS_PAGE - 1, OS_PAGE,
	                         OS_PAGE + 1, LARGE, HALF_PLUS_1, SIZE_MAX - OS_PAGE + 1,
	                         SIZE_MAX};
	for (size_t j = 0; j < sizeof(vsizes) / sizeof(vsizes[0]); j++)
		probe_valloc(vsizes[j]);
	return 0;
}
