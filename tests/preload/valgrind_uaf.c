/*
 * valgrind_uaf.c — reads a byte of a block after freeing it: memcheck must
 * report "Invalid read of size 1" inside a block "free'd" by
 * read_after_free, and exit with valgrind's --error-exitcode.
 */
#include <stdio.h>
#include <string.h>

#include "valgrind_alloc.h"

/* The pointer is read back from here after the free, which GCC cannot
 * follow (it rejects a use after free it can see). */
static char *volatile launder;

__attribute__((noinline)) static int read_after_free(void)
{
	char *p = t_malloc(100);
	memset(p, 7, 100);
	launder = p;
	t_free(p);
	return *(volatile char *)(launder + 10);
}

int main(void)
{
	printf("read %d\n", read_after_free() != 0);
	return 0;
}
