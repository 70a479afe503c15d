/*
 * addr_fill.c SIZE — malloc SIZE-byte blocks (writing a byte of each) until
 * malloc fails, then try one malloc(64). Prints "BYTES ENOMEM SMALL": the
 * bytes got, 1 if the failure set errno to ENOMEM, 1 if the small malloc
 * then succeeded. Run under an address-space limit (ulimit -v) by
 * tests/preload/addr_limit.sh, with and without the preload.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	size_t size = strtoul(argv[1], NULL, 10), n = 0;
	for (;;) {
		errno = 0;
		char *p = malloc(size);
		if (p == NULL)
			break;
		*(volatile char *)p = 1;
		n++;
	}
	int enomem = errno == ENOMEM;
	void *small = malloc(64);
	printf("%zu %d %d\n", n * size, enomem, small != NULL);
	return 0;
}
