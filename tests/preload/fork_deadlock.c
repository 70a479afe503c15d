/*
 * fork_deadlock.c — fork while other threads are inside malloc (the shape of
 * glibc's tst-malloc-fork-deadlock), through the C library's names, so that
 * under LD_PRELOAD it is libpagealloc's fork handlers that are tested.
 *
 *   fork_deadlock FORKS exit|_exit
 *
 * Four threads malloc, realloc and free blocks of 16 bytes to 256 KiB in a
 * loop (small classes, the central lists and the page heap, so every lock
 * is taken by someone at some moment). The main thread forks FORKS times;
 * each child sets an alarm (a hang there is a SIGALRM death, not a hung
 * test), allocates from the same size classes, from a new thread of its own
 * too, frees everything and leaves through exit(0) (atexit handlers, stdio
 * flushing) or _exit(0). The parent waits for each child and fails, naming
 * the iteration, unless it exited with 0. The whole run has an alarm too.
 * Prints "forks=N mode=M ok" and exits 0 when every child did.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "preload_check.h"

/* The whole run's alarm is the test's timeout (preload.cmake): a hang is a
 * child's, caught after CHILD_ALARM_S; the run takes up to ~100 s in the
 * Debug build on a loaded 2-core machine. */
enum { NTHREADS = 4, CHILD_ALARM_S = 10, TOTAL_ALARM_S = 360 };

/*
 * The gate: open while the main thread prepares and makes a fork, closed
 * while it waits for the child, so that on a machine with few cores the
 * children do not compete with the churning threads (fork ~1 ms, not 30).
 * The churners pass it every 64 operations; at the fork some of them are
 * inside malloc, running on another core or preempted there.
 */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;
static int stop;

static void gate_set(int open)
{
	pthread_mutex_lock(&gate_lock);
	__atomic_store_n(&gate_open, open, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
}

static void gate_pass(void)
{
	if (__atomic_load_n(&gate_open, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&gate_lock);
	while (!__atomic_load_n(&gate_open, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&stop, __ATOMIC_RELAXED))
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
}

static size_t size_for(uint64_t r)
{
	switch (r % 8) {
	case 0:
		return 16 + (r >> 3) % (256 << 10); /* up to 256 KiB: the page heap */
	case 1:
		return 4096 + (r >> 3) % 32768; /* the largest classes */
	default:
		return 1 + (r >> 3) % 1024;
	}
}

static uint64_t step(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *churn(void *arg)
{
	uint64_t rng = 0x2545f4914f6cdd1dull + (uintptr_t)arg;
	void *slots[64] = {0};
	for (unsigned n = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); n++) {
		if (n % 64 == 0)
			gate_pass();
		uint64_t r = step(&rng);
		unsigned i = r % 64;
		if (slots[i] != NULL && (r >> 20) % 4 == 0) {
			void *q = realloc(slots[i], size_for(r >> 7));
			if (q != NULL)
				slots[i] = q;
		} else {
			free(slots[i]);
			slots[i] = malloc(size_for(r >> 7));
			if (slots[i] != NULL)
				memset(slots[i], 0x5a, 16);
		}
	}
	for (unsigned i = 0; i < 64; i++)
		free(slots[i]);
	return NULL;
}

static void *child_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100; i++)
		free(malloc(size_for((uint64_t)i * 0x9e3779b97f4a7c15ull)));
	return NULL;
}

static void child(int use__exit)
{
	alarm(CHILD_ALARM_S);
	void *p[32];
	for (int i = 0; i < 32; i++) {
		p[i] = malloc(size_for((uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull));
		if (p[i] == NULL)
			_exit(2);
		memset(p[i], 1, 16);
	}
	for (int i = 0; i < 32; i++)
		free(p[i]);
	/* A thread of the child's own: its first allocation builds a cache. */
	pthread_t t;
	if (pthread_create(&t, NULL, child_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
		_exit(4);
	if (use__exit)
		_exit(0);
	exit(0);
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[2], "exit") != 0 && strcmp(argv[2], "_exit") != 0)) {
		fprintf(stderr, "usage: fork_deadlock FORKS exit|_exit\n");
		return 2;
	}
	PRELOAD_CHECK_MALLOC();
	long forks = strtol(argv[1], NULL, 10);
	/* PA_TEST_SCALE multiplies the work, as for the cmocka tests
	 * (testutil.h's tu_scale: tools/test.sh's quick check sets 0.1). */
	const char *scale = getenv("PA_TEST_SCALE");
	if (scale != NULL && strtod(scale, NULL) > 0)
		forks = (long)((double)forks * strtod(scale, NULL));
	if (forks < 1)
		forks = 1;
	int use__exit = strcmp(argv[2], "_exit") == 0;
	alarm(TOTAL_ALARM_S);

	pthread_t th[NTHREADS];
	for (uintptr_t t = 0; t < NTHREADS; t++)
		if (pthread_create(&th[t], NULL, churn, (void *)t) != 0) {
			fprintf(stderr, "fork_deadlock: pthread_create failed\n");
			return 1;
		}

	int failed = 0;
	for (long i = 0; i < forks && !failed; i++) {
		/* Let the threads get back into malloc before the fork. */
		gate_set(1);
		for (int j = 0; j < 200; j++)
			free(malloc(size_for((uint64_t)(i * 200 + j))));
		pid_t pid = fork();
		if (pid < 0) {
			fprintf(stderr, "fork_deadlock: fork %ld: %s\n", i, strerror(errno));
			failed = 1;
			break;
		}
		if (pid == 0)
			child(use__exit);
		gate_set(0);
		int status;
		while (waitpid(pid, &status, 0) < 0) {
			if (errno != EINTR) {
				fprintf(stderr, "fork_deadlock: waitpid: %s\n", strerror(errno));
				return 1;
			}
		}
		if (WIFSIGNALED(status)) {
			fprintf(stderr,
			        "fork_deadlock: child of fork %ld killed by signal %d (%s)%s\n", i,
			        WTERMSIG(status), strsignal(WTERMSIG(status)),
			        WTERMSIG(status) == SIGALRM ? ": it hung" : "");
			failed = 1;
		} else if (WEXITSTATUS(status) != 0) {
			fprintf(stderr, "fork_deadlock: child of fork %ld exited with %d\n", i,
			        WEXITSTATUS(status));
			failed = 1;
		}
	}

	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	gate_set(1);
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	if (failed)
		return 1;
	printf("forks=%ld mode=%s ok\n", forks, argv[2]);
	return 0;
}
