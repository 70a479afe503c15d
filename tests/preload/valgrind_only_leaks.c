/*
 * valgrind_only_leaks.c SIZE — the program's only allocations are three
 * blocks of SIZE bytes, allocated in leak_three_blocks and leaked. Nothing
 * else moves the page heap, so its hint (and the first range's base) sit on
 * the pages of these blocks: memcheck must still call all three "definitely
 * lost", none "still reachable" (tests/preload/valgrind.sh, kind only_leaks).
 */
#include <stdlib.h>
#include <string.h>

#include "valgrind_alloc.h"

__attribute__((noinline)) static void leak_three_blocks(size_t size)
{
	for (int i = 0; i < 3; i++) {
		char *p = t_malloc(size);
		memset(p, i, size);
		escape(p);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	leak_three_blocks(strtoul(argv[1], NULL, 10));
	return 0;
}
