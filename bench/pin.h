/*
 * pin.h — run the calling thread on one CPU only, for the bench programs
 * that place their threads (numa-bw, handoff-order, line-handoff).
 */
#ifndef PA_BENCH_PIN_H
#define PA_BENCH_PIN_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pin the calling thread to CPU cpu, or exit 1 with one line naming the
 * program (prog), the CPU and why. */
static inline void bench_pin(const char *prog, int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (err != 0) {
		fprintf(stderr, "%s: cannot run on CPU %d: %s\n", prog, cpu, strerror(err));
		exit(1);
	}
}

#endif
