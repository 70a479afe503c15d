/*
 * prof.h — heap profiles: which code holds the memory, sampled cheaply
 * enough to leave on.
 *
 * Sampling. Each thread counts down the bytes it allocates from a random
 * threshold drawn from an exponential distribution of mean prof_sample
 * (Go's and jemalloc's scheme): the allocation that takes the count below
 * zero is sampled, and the count is drawn again. A sample of n requested
 * bytes then stands for 1 / (1 - e^(-n / prof_sample)) allocations like it
 * (the chance that a block of n bytes is sampled is 1 - e^(-n / mean)), so
 * the weighted sums are unbiased estimates of what was allocated and what is
 * live, per site. The count lives in the thread cache (tcache.h): the
 * malloc fast path subtracts and tests it, two instructions.
 *
 * A sampled block is a large span of its own (malloc.c, large.h), as
 * tcmalloc places its sampled objects: whatever its size, it has its own
 * pages and its span record's spare bitmap word points to its sample
 * (span_sample). pa_free of a small block never looks for a sample: a
 * sampled block is a large one to it, and only the large free path (which
 * reads the record anyway) checks the word. A sampled small block costs a
 * page (8 KiB) for at most one in prof_sample bytes allocated: under 2%
 * of the heap at the default 512 KiB, and its usable size stays its
 * class's (malloc_usable_size answers as for any block of that size).
 *
 * Sites. A sample's stack (up to PROF_MAX_DEPTH frames, from the unwind
 * tables, so code built without frame pointers works: stack.h)
 * is trimmed of the allocator's frames: everything up to the last frame,
 * among the first PROF_TRIM_SCAN, of an allocator function listed in the
 * section pa_prof_entry (pa_malloc, malloc, operator new..., and what they
 * tail-call: malloc.c and preload/new_delete.cc list them). A site is one distinct stack (a hash
 * table of buckets, never freed); each sums its samples' estimates: allocated objects and bytes,
 * freed objects and bytes.
 *
 * Files. With prof_prefix set, profiles are written as
 * PREFIX.PID.SEQ.KIND.pb.gz (profwrite.h): at exit (final), at each new
 * peak of the estimated live heap at least 10% above the last written
 * (peak; from 32 * prof_sample up), every prof_interval bytes allocated
 * (interval), at prof_signal (signal: the handler only sets a flag; the
 * scavenger's next tick or the next sample writes), and from pa_prof_dump
 * (dump, or the path the caller names).
 *
 * Nothing here calls malloc: records and buckets come from os_alloc'd
 * blocks. Stack capture takes no lock at all (stack.h), and a thread that
 * is already inside the profiler is not sampled again.
 *
 * Locking: one lock (prof_lock) for the buckets, the records and the
 * totals; samples are rare (one per prof_sample bytes), so it is not hot.
 * Writes of files are serialised by a second lock, taken without the first.
 */
#ifndef PA_PROF_H
#define PA_PROF_H

#include <stddef.h>
#include <stdint.h>

#include "hidden.h"
#include "lock.h"

/* An entry of the section pa_prof_entry: an allocator function whose frame,
 * and every frame inside it, a sample's stack leaves out. */
typedef void (*prof_entry_fn)(void);

/* The thread's sampler: embedded in its thread cache, written only by it. */
struct prof_thread {
	uint64_t rng; /* xorshift64* state; 0 until the first draw */
	uint8_t busy; /* inside the profiler, or in the allocator's own calls
	               * into libc that allocate: no sample */
};

/* A sampled block's record (span_sample). */
struct prof_sample;

/* The next count-down for a thread: an exponential draw of mean
 * prof_sample, or, with sampling off, 64 * prof_sample (so a thread notices
 * prof being turned on within that many bytes). */
int64_t prof_next_count(struct prof_thread *pt);

/* An exponential draw of the given mean from pt's generator (the guarded
 * sampler's count too: guard.h). */
int64_t prof_draw(struct prof_thread *pt, double mean);

/* The calling program's stack, the allocator's frames trimmed (the
 * section pa_prof_entry, above), into pc[max]; returns its depth. Takes no
 * lock and allocates nothing. */
unsigned prof_stack(uintptr_t *pc, unsigned max);

/* Is sampling on now (prof=on and not under memcheck)? */
int prof_active(void);

/* Record the block p (its span made for it, size n requested, usable
 * bytes usable, held: the bytes of its span) allocated by the calling
 * thread; the stack is captured here. Returns the record to keep in the span, or NULL (no memory
 * for it, or the thread is busy in the profiler: the block is then simply not sampled). Only
 * threads with a cache sample (pt is in it). */
struct prof_sample *prof_record(struct prof_thread *pt, size_t n, size_t usable, size_t held);

/* The sampled block of record r is freed. */
void prof_unrecord(struct prof_sample *r);

/* What r's block holds (its usable size: malloc_usable_size). */
size_t prof_sample_usable(const struct prof_sample *r);

/* The scavenger's tick and each sample: write the profile a signal asked
 * for, if any. */
void prof_background(void);

/* Totals for the stats and the heap story. */
struct prof_totals {
	size_t samples_live;  /* sampled blocks live now */
	size_t samples_total; /* sampled since start */
	size_t sites;         /* distinct stacks */
	size_t meta_bytes;    /* memory the profiler mapped for its records */
	size_t sample_pages;  /* bytes of the spans live sampled blocks hold */
	size_t sample_extra;  /* of them, beyond the blocks' usable sizes */
	double inuse_bytes;   /* estimated live bytes */
	double alloc_bytes;   /* estimated allocated bytes since start */
	size_t files_written;
	size_t write_errors;
};
void prof_totals(struct prof_totals *t);

/* pa_prof_dump and pa_prof_active (malloc.c's, after the heap's set-up). */
int prof_dump(const char *path);
int prof_set_active(int on);

/* Called by malloc init (config read: prof_signal's handler). */
void prof_init(void);

/* Around fork: the locks; in the child, the new pid's file names. */
void prof_fork(enum pa_fork_phase phase);

#endif
