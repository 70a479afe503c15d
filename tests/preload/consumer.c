/*
 * consumer.c — a user's program built against the installed libpagealloc
 * (tests/preload/install_test.sh): allocates through the pa_ API and checks
 * what the statistics say. Prints "consumer ok" on success.
 */
#include <pagealloc.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	if (pa_config("scavenger=off") != 0)
		return 1;
	char *blocks[100];
	for (int i = 0; i < 100; i++) {
		blocks[i] = pa_malloc((size_t)(i + 1) * 100);
		if (blocks[i] == NULL)
			return 1;
		memset(blocks[i], i, (size_t)(i + 1) * 100);
	}
	struct pa_malloc_stats ms;
	if (pa_malloc_stats(&ms) != 0 || ms.heap_alloc < 100 * 100)
		return 1;
	for (int i = 0; i < 100; i++)
		pa_free(blocks[i]);
	printf("consumer ok\n");
	return 0;
}
