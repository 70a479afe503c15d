/*
 * lock.c — the contended half of lock.h's futex mutex.
 */
#include "lock.h"

#include "os.h"

#define LOCK_SPINS 100

void lock_slow(pa_lock *l)
{
	for (int i = 0; i < LOCK_SPINS; i++) {
		if (__atomic_load_n(&l->state, __ATOMIC_RELAXED) == 0 && lock_try(l))
			return;
		__builtin_ia32_pause();
	}
	/* Mark "locked with waiters" and sleep until we take it in that state. */
	while (__atomic_exchange_n(&l->state, 2, __ATOMIC_ACQUIRE) != 0)
		os_futex_wait(&l->state, 2);
}

void lock_wake(pa_lock *l)
{
	os_futex_wake(&l->state, 1);
}
