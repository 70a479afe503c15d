/*
 * threads_fork.c — sampling with threads, dlopen and fork, for
 * profile_threads_fork_dlopen (threads_fork.sh says what the profiles must
 * hold). Run preloaded with prof_sample=64K and prof_prefix set:
 *
 *   1. A thread loops dlopen/dlclose over libraries every Debian 12 system
 *      has (glibc's own: libm, libresolv, libdl, libutil, librt), so the
 *      loader's lists change, and its locks are taken, while four threads
 *      capture stacks through the unwind tables (dl_iterate_phdr): each
 *      keeps 32 MiB of 512-byte blocks at thread_work (128 MiB in all).
 *      The loader's own mallocs are sampled too.
 *   2. The dlopen thread is stopped (joined); the four threads go on
 *      allocating and freeing 256-byte blocks at thread_churn, sampled
 *      every 64 KiB or so each, until step 3 ends.
 *   3. Meanwhile the main thread forks CHILDREN times, one child at a time:
 *      each child keeps 32 MiB of 256 KiB blocks at child_only (samples
 *      taken in a child whose parent's threads were inside malloc, the
 *      profiler or the unwinder when it forked) and returns from main
 *      (exit: it writes its own final profile, PREFIX.CHILDPID.SEQ.final
 *      .pb.gz); the parent waits for it.
 *   4. The workers are stopped and joined; the parent prints "parent PID"
 *      and "child PID" lines and returns from main (its final profile).
 *
 * Why the dlopen thread stops before the forks: dlclose runs the library's
 * finalizers under glibc's __exit_funcs_lock, and a child forked meanwhile
 * inherits that lock taken: its exit() then waits for it forever (seen:
 * __run_exit_handlers in futex_wait, nothing of the allocator on the
 * stack). POSIX allows a child of a threaded process only async-signal-safe
 * calls before exec, exit() is not one; a child that writes a final
 * profile must exit(), so no dlclose may be running when it is forked.
 *
 * A deadlock (in the unwinder, the loader or the profiler's locks, around
 * fork) hangs the program: the test's timeout catches it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prof_prog.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define WORKERS 4
#define WORK_SIZE 512
#define WORK_N (32 * MiB / WORK_SIZE)
#define CHILD_SIZE (256 * KiB)
#define CHILD_N (32 * MiB / CHILD_SIZE)
#define CHILDREN 8

static void *work_keep[WORKERS][WORK_N];
static void *child_keep[CHILD_N];
static int stop_loading, stop_churning, kept_done;
static void *volatile churn_sink[4];
static unsigned long loads;

static const char *const libraries[] = {"libm.so.6", "libresolv.so.2", "libdl.so.2", "libutil.so.1",
                                        "librt.so.1"};

static void *load_loop(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop_loading, __ATOMIC_ACQUIRE)) {
		for (size_t i = 0; i < sizeof(libraries) / sizeof(libraries[0]); i++) {
			void *h = dlopen(libraries[i], RTLD_NOW | RTLD_LOCAL);
			if (h == NULL) {
				fprintf(stderr, "dlopen %s: %s\n", libraries[i], dlerror());
				exit(1);
			}
			dlclose(h);
			__atomic_add_fetch(&loads, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

PROG_NOINLINE static void thread_work(void **keep)
{
	for (size_t i = 0; i < WORK_N; i++)
		keep[i] = prog_check(malloc(WORK_SIZE));
}

PROG_NOINLINE static void thread_churn(int t)
{
	while (!__atomic_load_n(&stop_churning, __ATOMIC_ACQUIRE)) {
		churn_sink[t] = prog_check(malloc(256));
		free(churn_sink[t]);
	}
}

static void *worker(void *arg)
{
	int t = (int)((void **)arg - work_keep[0]) / WORK_N;
	thread_work(arg);
	__atomic_add_fetch(&kept_done, 1, __ATOMIC_RELEASE);
	thread_churn(t);
	return NULL;
}

PROG_NOINLINE static void child_only(void)
{
	for (size_t i = 0; i < CHILD_N; i++)
		child_keep[i] = prog_check(malloc(CHILD_SIZE));
}

int main(void)
{
	pthread_t loader, workers[WORKERS];
	if (pthread_create(&loader, NULL, load_loop, NULL) != 0)
		return 1;
	for (int t = 0; t < WORKERS; t++)
		if (pthread_create(&workers[t], NULL, worker, work_keep[t]) != 0)
			return 1;
	while (__atomic_load_n(&kept_done, __ATOMIC_ACQUIRE) < WORKERS)
		usleep(1000);
	__atomic_store_n(&stop_loading, 1, __ATOMIC_RELEASE);
	pthread_join(loader, NULL);

	pid_t children[CHILDREN];
	for (int c = 0; c < CHILDREN; c++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			child_only();
			return prog_checksum(child_keep, CHILD_N) == 1;
		}
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0) {
			fprintf(stderr, "child %d failed (status %#x)\n", (int)pid, status);
			return 1;
		}
		children[c] = pid;
	}
	__atomic_store_n(&stop_churning, 1, __ATOMIC_RELEASE);
	for (int t = 0; t < WORKERS; t++)
		pthread_join(workers[t], NULL);

	unsigned long sum = 0;
	for (int t = 0; t < WORKERS; t++)
		sum += prog_checksum(work_keep[t], WORK_N);
	printf("parent %d\n", (int)getpid());
	for (int c = 0; c < CHILDREN; c++)
		printf("child %d\n", (int)children[c]);
	printf("dlopen/dlclose %lu times, checksum %lu\n", loads, sum);
	return 0;
}
