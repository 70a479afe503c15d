/*
 * leak.c — a C program that leaks, for profile_leak_c (leak.sh): under
 * `pagealloc run --heap-profile DIR --prof-sample 64K` it leaks 40 MiB at
 * leak_records (160 records of 256 KiB) and frees everything else it
 * allocates (scratch: 64 MiB in blocks of 100 bytes to 1 MiB). It writes
 * its pid on stdout (write(2), no stdio buffer), for the final profile's
 * name.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof_prog.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define RECORDS 160

struct record {
	struct record *next;
	char body[256 * KiB - sizeof(struct record *)];
};

static struct record *volatile leaked; /* a list the program forgets */
static void *scratch[4096];

PROG_NOINLINE static void leak_records(void)
{
	for (int i = 0; i < RECORDS; i++) {
		struct record *r = prog_check(malloc(sizeof(*r)));
		r->next = leaked;
		r->body[0] = (char)i;
		leaked = r;
	}
}

PROG_NOINLINE static void scratch_work(void)
{
	size_t total = 0;
	for (unsigned round = 0; total < 64 * MiB; round++) {
		size_t n = 0;
		for (; n < sizeof(scratch) / sizeof(scratch[0]) && total < 64 * MiB; n++) {
			size_t size = (size_t)100 << ((round + n) % 14); /* 100 B to 800 KiB */
			scratch[n] = prog_check(malloc(size));
			memset(scratch[n], 1, 64);
			total += size;
		}
		while (n > 0)
			free(scratch[--n]);
	}
}

int main(void)
{
	scratch_work();
	leak_records();
	scratch_work();
	leaked = NULL; /* forgotten: 40 MiB leaked */
	char line[32];
	int len = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
	return write(1, line, (size_t)len) == len ? 0 : 1;
}
