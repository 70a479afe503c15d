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
 * and C++'s sized deletes, each given one byte more than the block holds
 * (malloc_usable_size + 1), or a block already freed:
 *   delete_sized_wrong          operator delete(p, 17) of new(16)
 *   delete_array_sized_wrong    operator delete[](p, size) of new[](100)
 *   delete_aligned_sized_wrong  operator delete(p, size, 64) of new(100, 64)
 *   delete_sized_large_wrong    operator delete(p, size) of new(40000)
 *   delete_sized_twice          operator delete(p, 64) twice of new(64)
 * and given a smaller size, of another class or page count:
 *   delete_sized_smaller        operator delete(p, 8) of new(100)
 *   delete_sized_large_smaller  operator delete(p, 1000) of new(256 KiB)
 * and a freed 64-byte block whose second word (its free-key) is written,
 * found when malloc_trim hands the thread's cache back to the spans:
 *   write_after_free
 */
#include <dlfcn.h>
#include <malloc.h>
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

/* A C++ operator of the preloaded library, by its mangled name. */
static void *cxx_operator(const char *name)
{
	void *f = dlsym(RTLD_DEFAULT, name);
	if (f == NULL) {
		fprintf(stderr, "bad_pointer: no %s in the process\n", name);
		exit(1);
	}
	return f;
}

/* operator new(n) or new[](n) (by name), then the sized delete `del` of
 * its block with one byte more than the block holds. */
static void delete_one_byte_over(const char *new_name, size_t n, const char *del)
{
	void *(*alloc)(size_t) = (void *(*)(size_t))cxx_operator(new_name);
	void (*release)(void *, size_t) = (void (*)(void *, size_t))cxx_operator(del);
	char *p = alloc(n);
	memset(p, 5, n);
	size_t wrong = malloc_usable_size(p) + 1;
	release(announce(p), wrong);
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
	} else if (strcmp(c, "delete_sized_wrong") == 0) {
		delete_one_byte_over("_Znwm", 16, "_ZdlPvm");
	} else if (strcmp(c, "delete_array_sized_wrong") == 0) {
		delete_one_byte_over("_Znam", 100, "_ZdaPvm");
	} else if (strcmp(c, "delete_aligned_sized_wrong") == 0) {
		void *(*alloc)(size_t, size_t) =
		    (void *(*)(size_t, size_t))cxx_operator("_ZnwmSt11align_val_t");
		void (*del)(void *, size_t, size_t) =
		    (void (*)(void *, size_t, size_t))cxx_operator("_ZdlPvmSt11align_val_t");
		char *p = alloc(100, 64);
		memset(p, 5, 100);
		del(announce(p), malloc_usable_size(p) + 1, 64);
	} else if (strcmp(c, "delete_sized_large_wrong") == 0) {
		delete_one_byte_over("_Znwm", 40000, "_ZdlPvm");
	} else if (strcmp(c, "delete_sized_smaller") == 0 ||
	           strcmp(c, "delete_sized_large_smaller") == 0) {
		size_t n = strcmp(c, "delete_sized_smaller") == 0 ? 100 : 256 << 10;
		void *(*alloc)(size_t) = (void *(*)(size_t))cxx_operator("_Znwm");
		void (*del)(void *, size_t) = (void (*)(void *, size_t))cxx_operator("_ZdlPvm");
		char *p = alloc(n);
		memset(p, 7, n);
		del(announce(p), n == 100 ? 8 : 1000);
	} else if (strcmp(c, "delete_sized_twice") == 0) {
		void *(*alloc)(size_t) = (void *(*)(size_t))cxx_operator("_Znwm");
		void (*del)(void *, size_t) = (void (*)(void *, size_t))cxx_operator("_ZdlPvm");
		char *p = alloc(64);
		memset(p, 6, 64);
		launder = p;
		del(p, 64);
		del(announce(launder), 64);
	} else if (strcmp(c, "write_after_free") == 0) {
		char *keeper = malloc(64), *p = malloc(64);
		memset(p, 7, 64);
		launder = p;
		free(p);
		((void *volatile *)announce(launder))[1] = keeper;
		malloc_trim(0);
	} else {
		fprintf(stderr, "bad_pointer: unknown case %s\n", c);
		return 2;
	}
	fprintf(stderr, "bad_pointer: %s: the call returned; nothing caught it\n", c);
	return 1;
}
