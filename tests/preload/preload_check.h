/*
 * preload_check.h — lets a test program prove which allocator serves it.
 *
 * When the environment variable PA_EXPECT_MALLOC is set (the tests set it to
 * "libpagealloc-preload.so" whenever they preload the library), the program
 * asks the dynamic linker which object `malloc` (and, in C++, `operator new`)
 * resolved to and exits with status 3 and one line on stderr if that
 * object's path does not contain the expected text. Unset, it checks
 * nothing, so the same binary gives the reference output without the preload.
 */
#ifndef PRELOAD_CHECK_H
#define PRELOAD_CHECK_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void preload_check_symbol(const char *what, void *addr)
{
	const char *want = getenv("PA_EXPECT_MALLOC");
	if (want == NULL || *want == '\0')
		return;
	Dl_info info;
	if (dladdr(addr, &info) == 0 || info.dli_fname == NULL) {
		fprintf(stderr, "preload_check: dladdr(%s) failed\n", what);
		exit(3);
	}
	if (strstr(info.dli_fname, want) == NULL) {
		fprintf(stderr, "preload_check: %s comes from %s, not from %s\n", what,
		        info.dli_fname, want);
		exit(3);
	}
}

#define PRELOAD_CHECK_MALLOC()                                                                     \
	do {                                                                                       \
		preload_check_symbol("malloc", (void *)&malloc);                                   \
		preload_check_symbol("free", (void *)&free);                                       \
	} while (0)

#endif
