/*
 * valgrind_clean.c — a correct program that takes many paths through the
 * allocator (every small size up to 4 KiB, large blocks, calloc, realloc
 * growing and shrinking across classes, aligned allocation, blocks freed
 * by another thread) and frees everything: memcheck must report
 * "ERROR SUMMARY: 0 errors" and nothing definitely lost.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "valgrind_alloc.h"

enum { N = 512 };

static char *handed[N];

static void *free_handed(void *arg)
{
	(void)arg;
	for (int i = 0; i < N; i++)
		t_free(handed[i]);
	return NULL;
}

int main(void)
{
	unsigned long sum = 0;
	for (size_t n = 1; n <= 4096; n += 7) {
		unsigned char *p = t_malloc(n);
		memset(p, (int)n, n);
		sum += p[n - 1];
		t_free(p);
	}
	for (size_t n = 1; n <= 4 << 20; n *= 3) {
		unsigned char *p = t_calloc(1, n);
		for (size_t i = 0; i < n; i += 4096)
			sum += p[i];
		t_free(p);
	}
	char *r = NULL;
	for (size_t n = 8; n <= 1 << 20; n *= 2) {
		r = t_realloc(r, n);
		memset(r + n / 2, 'r', n / 2);
	}
	for (size_t n = 1 << 20; n >= 8; n /= 4) {
		r = t_realloc(r, n);
		sum += (unsigned char)r[n - 1];
	}
	t_free(r);
	for (size_t a = 8; a <= 8192; a *= 2) {
		void *p = t_aligned_alloc(a, a * 3);
		void *q = NULL;
		if (t_posix_memalign(&q, a, 100) != 0 || ((uintptr_t)p | (uintptr_t)q) % a != 0)
			return 1;
		memset(p, 1, a * 3);
		memset(q, 2, 100);
		t_free(p);
		t_free(q);
	}
	for (int i = 0; i < N; i++) {
		handed[i] = t_malloc((size_t)(i % 64 + 1) * 16);
		handed[i][0] = (char)i;
	}
	pthread_t t;
	if (pthread_create(&t, NULL, free_handed, NULL) != 0 || pthread_join(t, NULL) != 0)
		return 1;
	printf("sum %lu\n", sum);
	return 0;
}
