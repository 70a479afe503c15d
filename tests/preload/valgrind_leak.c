/*
 * valgrind_leak.c — leaks exactly three blocks of 1000 bytes, allocated in
 * leak_three_blocks, and frees everything else: memcheck must report
 * "definitely lost: 3,000 bytes in 3 blocks" with that function in the
 * allocation stack (tests/preload/valgrind.sh).
 */
#include <string.h>

#include "valgrind_alloc.h"

__attribute__((noinline)) static void leak_three_blocks(void)
{
	for (int i = 0; i < 3; i++) {
		char *p = t_malloc(1000);
		memset(p, i, 1000);
		escape(p);
	}
}

int main(void)
{
	char *keep[50];
	for (int i = 0; i < 50; i++) {
		keep[i] = t_malloc((size_t)(i + 1) * 24);
		memset(keep[i], 0, (size_t)(i + 1) * 24);
	}
	leak_three_blocks();
	for (int i = 0; i < 50; i++)
		t_free(keep[i]);
	return 0;
}
