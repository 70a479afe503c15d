/*
 * bad_pointer.c — a bad pointer handed to the C library's names, so that
 * under LD_PRELOAD it reaches libpagealloc through the real entry points:
 *
 *   bad_pointer CASE
 *
 * prints "pointer 0x..." (the pointer it is about to pass, %p) on stdout,
 * then makes the call. libpagealloc must print exactly one line,
 * "pagealloc: FUNC(0x...): ..." naming the function and that pointer, and
 * abort (tests/preload/bad_pointer.sh checks it). If the call returns, the
 * program says so and exits 1. Cases:
 *   free_stack         free of a local variable's address
 *   free_mmap          free of a page from mmap (another allocator's memory)
 *   free_static        free of a static array
 *   double_free        free twice of a 64-byte block
 *   double_free_large  free twice of a 1 MiB block
 *   realloc_freed      realloc of a freed 100-byte block
 *   free_interior      free of a block's address plus 16
 *   delete_static      C++'s operator delete (_ZdlPv) of a static array
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "preload_check.h"

static char static_array[4096];

/* The pointer goes through here so that the compiler cannot see the fault
 * (GCC warns about, or drops, a free of a non-heap object it can see). */
static void *volatile launder;

static void *announce(void *p)
{
	printf("pointer %p\n", p);
	fflush(stdout);
	launder = p;
	return launder;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: bad_pointer CASE\n");
		return 2;
	}
	PRELOAD_CHECK_MALLOC();
	const char *c = argv[1];
	if (strcmp(c, "free_stack") == 0) {
		char local[64];
		memset(local, 1, sizeof(local));
		free(announce(local));
	} else if (strcmp(c, "free_mmap") == 0) {
		void *m =
		    mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return 1;
		free(announce((char *)m + 4096));
	} else if (strcmp(c, "free_static") == 0) {
		free(announce(static_array + 256));
	} else if (strcmp(c, "double_free") == 0 || strcmp(c, "double_free_large") == 0) {
		size_t n = strcmp(c, "double_free") == 0 ? 64 : 1 << 20;
		char *p = malloc(n);
		memset(p, 2, n);
		launder = p;
		free(p);
		free(announce(launder));
	} else if (strcmp(c, "realloc_freed") == 0) {
		char *p = malloc(100);
		memset(p, 3, 100);
		launder = p;
		free(p);
		void *q = realloc(announce(launder), 200);
		printf("realloc returned %p\n", q);
	} else if (strcmp(c, "free_interior") == 0) {
		char *p = malloc(256);
		memset(p, 4, 256);
		free(announce(p + 16));
	} else if (strcmp(c, "delete_static") == 0) {
		/* operator delete(void *), as a C++ program would call it. */
		void (*del)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "_ZdlPv");
		if (del == NULL) {
			fprintf(stderr, "bad_pointer: no operator delete in the process\n");
			return 1;
		}
		del(announce(static_array + 512));
	} else {
		fprintf(stderr, "bad_pointer: unknown case %s\n", c);
		return 2;
	}
	fprintf(stderr, "bad_pointer: %s: the call returned; nothing caught it\n", c);
	return 1;
}
