/*
 * lock.h — a small mutex that never allocates: three-state futex lock
 * (0 unlocked, 1 locked, 2 locked with waiters), after Drepper's "Futexes Are
 * Tricky". Usable before libc is initialised, inside malloc, and across fork
 * (the child re-initialises it with lock_init). A few spins before sleeping,
 * because page-heap critical sections are short.
 */
#ifndef PA_LOCK_H
#define PA_LOCK_H

#include <stdint.h>

typedef struct {
	uint32_t state;
} pa_lock;

#define PA_LOCK_INIT                                                                               \
	{                                                                                          \
		0                                                                                  \
	}

/* The phases of fork() around which a module takes its locks (prepare, in
 * the parent before the fork), releases them (parent, after it) or resets
 * them (child, where only the forking thread runs). */
enum pa_fork_phase { PA_FORK_PREPARE, PA_FORK_PARENT, PA_FORK_CHILD };

void lock_slow(pa_lock *l);
void lock_wake(pa_lock *l);

static inline void lock_init(pa_lock *l)
{
	__atomic_store_n(&l->state, 0, __ATOMIC_RELAXED);
}

static inline int lock_try(pa_lock *l)
{
	uint32_t expected = 0;
	return __atomic_compare_exchange_n(&l->state, &expected, 1, 0, __ATOMIC_ACQUIRE,
	                                   __ATOMIC_RELAXED);
}

static inline void lock_acquire(pa_lock *l)
{
	if (!lock_try(l))
		lock_slow(l);
}

static inline void lock_release(pa_lock *l)
{
	if (__atomic_exchange_n(&l->state, 0, __ATOMIC_RELEASE) == 2)
		lock_wake(l);
}

#endif
