/*
 * guard.h — guarded sampling (GWP-ASan's scheme): now and then a block goes
 * on pages of its own between inaccessible guard pages, so that the first
 * read or write past its end, before its start or after its free faults, and
 * the fault is reported in one line: the kind, the address, the block, the
 * stacks that allocated and freed it. Then the program dies of the SIGSEGV
 * as it would have.
 *
 * The pool. One PROT_NONE reservation (os_reserve), made by the first
 * guarded allocation: nslots slots of slot bytes (guard_max rounded up to OS
 * pages) with a guard page between each two and at both ends:
 *
 *   | G | slot 0 | G | slot 1 | G | ... | slot nslots-1 | G |
 *
 * A guarded block of n bytes ends against its slot's end (its start rounded
 * down to its alignment, at least 16), or, with guard_underflow=on, every
 * other block starts at its slot's start (an underflow then faults at once).
 * Only the OS pages the block covers are made readable and writable; the
 * rest of its slot stays PROT_NONE, so an underflow of a right-aligned block
 * faults at the first page boundary below it. A zero-size block is its
 * slot's end: its first byte is on the guard page.
 *
 * Guard bytes. The bytes from a block's end to the end of its last readable
 * page (the alignment gap, up to 15 bytes for a right-aligned block, the rest
 * of the page for a left-aligned one) do not fault: they hold a pattern
 * (canary_at) from the allocation on, checked when the block is freed or
 * reallocated and, for blocks still live, at exit (a destructor). A byte
 * changed there is reported as a heap-buffer-overflow with the block's
 * stacks, then abort: a one-byte overflow of any size is caught.
 *
 * Big blocks. With guard_sample=1 every block is guarded, whatever its size
 * (guard_max caps sampled guarding only): a block larger than a slot, or
 * aligned past the OS page, gets a reservation of its own (a guard page, its
 * pages, a guard page), right-aligned as in a slot. Their records are a
 * second table of GUARD_BIG_MAX, reused oldest freed first as the slots are;
 * a freed big block's reservation stays PROT_NONE until its record is
 * reused, then is unmapped.
 *
 * Freed. A freed block's pages go back to the OS (MADV_DONTNEED: a reused
 * slot reads as zero, as calloc wants) and are protected again, and its slot
 * joins the tail of a FIFO. A new block takes a slot never used while there
 * is one, then the oldest freed: a freed block stays inaccessible as long as
 * the pool allows. A full pool (every slot live) guards nothing more until a
 * block is freed: the allocation is an ordinary one.
 *
 * Records. Per slot (its own os_alloc'd array, never in the guarded pages):
 * the block, its size and state, the stacks (prof_stack: the allocator's
 * frames trimmed) of its allocation and free.
 *
 * Choosing. Each thread's heap-profile count (tcache.h: sample_left, the
 * bytes before the next event) also counts down to the next guarded block,
 * so with guarded sampling on the malloc fast path does exactly what it did
 * without it: the slow path that handles a sample (tcache_sample_fire) tells
 * the two events apart. The count is in bytes: a block is chosen with a
 * chance that grows with its size (as the heap profile's samples are). With
 * guard_sample=N the mean distance between guarded blocks is N *
 * GUARD_UNIT_BYTES, about one block in N where blocks average that size;
 * with guard_sample=1 the count is -1 after each event, so every allocation
 * takes the slow path and every block up to guard_max is guarded.
 *
 * The handler. The first guarded allocation installs a SIGSEGV handler
 * (SA_SIGINFO, on the thread's alternate stack if it has one), keeping the
 * disposition it replaced: a fault outside the pool goes there (os.h's
 * os_fault_chain: the program's handler, or the default action). A handler
 * the program installs later replaces ours, as the program asked. In the
 * handler nothing allocates or locks: the slot records are read as they
 * are, frames printed as FILE+0xOFFSET (_dl_find_object, lock-free; the
 * offset is what addr2line -e FILE takes).
 *
 * Off under memcheck (vg_active), as the heap profile is: memcheck would
 * see the pool as memory it never allocated.
 *
 * Locking: guard_lock for the records' states, the two rings (slots, big
 * records) and the pool's set-up; the stacks are captured outside it, and
 * a big block's reservation is made and unmapped outside it. guard_lo and
 * guard_hi are written once, under it; big_lo, big_hi, the big ring's count
 * of records used and each big record's length are published (release)
 * under or after it: all are read without it (the handler, guard_owns).
 */
#ifndef PA_GUARD_H
#define PA_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "hidden.h"
#include "lock.h"
#include "msg.h"
#include "prof.h"

/* With guard_sample=N, N * GUARD_UNIT_BYTES bytes allocated between guarded
 * blocks on average: one block in N for blocks of this mean size. */
#define GUARD_UNIT_BYTES 64u
/* Frames kept of each stack (the one line prints them all). */
#define GUARD_DEPTH 16u
/* The pool's address space at most (its slots fewer for a larger
 * guard_max), and its slots at most: each live guarded block splits the
 * mapping into about two more areas, and Linux allows 65530 a process. */
#define GUARD_POOL_MAX ((size_t)512 << 20)
#define GUARD_SLOTS_MAX 16384u
/* Big blocks (guard_sample=1) at most, live and freed together, and the
 * largest size and alignment guarded. */
#define GUARD_BIG_MAX 4096u
#define GUARD_BIG_BYTES_MAX ((size_t)1 << 40)
#define GUARD_ALIGN_MAX ((size_t)1 << 20)

/* The pool's bounds [guard_lo, guard_hi), both 0 until it is made. */
extern uintptr_t guard_lo PA_HIDDEN, guard_hi PA_HIDDEN;

/* Is p guarded memory: in the pool or a big block's reservation? (A
 * pointer that failed the page map's checks.) */
int guard_owns(const void *p);

/* Is guarded sampling on (guard_sample not 0, not under memcheck)? */
int guard_active(void);

/* Bytes the calling thread allocates before its next guarded block: -1 with
 * guard_sample=1 (the next allocation), INT64_MAX with it off. */
int64_t guard_next_count(struct prof_thread *pt);

/* A guarded block of n bytes at an `align`-aligned address (a power of
 * two), reading as zero, or NULL: n over guard_max (with guard_sample not
 * 1), n or align over GUARD_BIG_BYTES_MAX or GUARD_ALIGN_MAX, the pool full
 * or not to be had. errno is kept. */
void *guard_alloc(size_t n, size_t align);

/* The size asked for of live guarded block p (malloc_usable_size); a pointer
 * in the pool that is not one is reported under the name of `func` (abort):
 * a freed block (double free, or use after free), an interior pointer. */
size_t guard_size(const char *func, const void *p);

/* Free live guarded block p (checked as guard_size does, and its guard
 * bytes: an overflow is reported, abort). errno is kept. */
void guard_free(const char *func, void *p);

/* "; allocated at STACK" of guarded block p onto m (nothing if p is not
 * one's start): for reports made outside this file. */
void guard_msg_alloc_stack(struct pa_msg *m, const void *p);

/* The guard bytes of every live guarded block checked (abort on the first
 * overflow); run at exit. */
void guard_check_live(void);

/* Around fork: guard_lock. */
void guard_fork(enum pa_fork_phase phase);

#endif
