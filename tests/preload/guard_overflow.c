/*
 * guard_overflow.c — a C program that writes one byte past a 32-byte block
 * from malloc (tests/preload/guard.sh runs it preloaded with
 * guard_sample=1). It prints "pointer PTR" first, so the script can check
 * the line names it.
 */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	char *volatile p = malloc(32);
	printf("pointer %p\n", (void *)p);
	fflush(stdout);
	p[32] = 1;
	free(p);
	return 0;
}
