/*
 * central.h — one central list per size class: the spans of that class that
 * have free objects, behind a lock of their own (Go's mcentral).
 *
 * Thread caches (tcache.h) take objects from here in batches when they run
 * dry and give batches back when they overflow; frees from any thread reach
 * their span through the page map, so a producer/consumer program returns
 * memory to the span that owns it, whoever frees it. Spans come from the
 * page heap (through the per-CPU page caches: every span is under 16 pages)
 * when no listed span has a free object, and go back to it the moment their
 * last object returns, where the scavenger can release them.
 *
 * Lock order: a central lock, then the page heap's locks (pages.h). No two
 * central locks are held at once except by fork handling: the classes in
 * order (after the sweeps' lock, sweep.h, and before the large stash's,
 * large.h).
 */
#ifndef PA_CENTRAL_H
#define PA_CENTRAL_H

#include <stddef.h>
#include <stdint.h>

#include "lock.h"
#include "sizeclass_table.h"

struct pa_span;
struct pa_span_spares;

/* Objects per batch moved between a thread cache and the central list:
 * 16 KiB worth, at least 1 and at most CENTRAL_BATCH; CENTRAL_BATCH_MAX for
 * the classes of at most CENTRAL_BATCH_TINY bytes. A batch's trip has costs
 * of its own, whatever its objects' size (the stash's lines, the slow paths'
 * calls, the tree's root): threads handing 64-byte objects to each other
 * (xmalloc-test) took 0.87x the time with batches of 64 and 0.88x that
 * again with batches of 128, and a batch of 128 tiny objects is at most
 * 8 KiB. The stashes hold as many objects as with batches of CENTRAL_BATCH
 * (central.c: stash_cap). */
#define CENTRAL_BATCH 32u
#define CENTRAL_BATCH_MAX 128u
#define CENTRAL_BATCH_TINY 64u

static inline unsigned central_batch(unsigned cls)
{
	size_t size = pa_sizeclasses[cls].size;
	if (size <= CENTRAL_BATCH_TINY)
		return CENTRAL_BATCH_MAX;
	unsigned n = (unsigned)(16384 / size);
	return n < 1 ? 1 : n > CENTRAL_BATCH ? CENTRAL_BATCH : n;
}

/*
 * Whole batches that thread caches gave back wait in a stash (tcmalloc's
 * transfer cache) for the next refill, which takes one whole: its objects
 * are already linked, from their frees, so neither side looks up their
 * spans or writes their links again. (Both walk the batch once, over its
 * address tree: central.c, the giver writing it and the refill bringing
 * every line in at once, for writing, before the pops.) At most CENTRAL_STASH_MAX
 * batches and PA_STASH_BYTES per class (stash.h); past that a batch goes to its
 * spans. Batches the stash did not need for a while go to their spans
 * (central_stash_drain(0), from the scavenger thread), and
 * pa_thread_cache_flush and pa_malloc_trim empty every stash, so spans
 * still empty and go back to the page heap when a program stops using a
 * class.
 *
 * The stash takes no lock: it is the hand-off of objects freed in another
 * thread than the one that allocated them (a consumer's overflow stashes,
 * its producer's refill takes), and under the class's lock, which the
 * producer also takes for spans, the two threads met on the lock every
 * batch. Each slot is a batch or NULL; a give claims an empty slot with one
 * compare-and-swap (release: the batch's links were written before), a
 * refill empties a full one with one exchange (acquire). `top` is a hint,
 * not a count: the slot past the newest batch, stored (not read-modify-
 * written) by whoever last filled or emptied a slot (0 by a refill that
 * found the stash empty), so gives scan up from it and refills down, and
 * both usually find their slot at once. Races leave it off, and it drifts:
 * so a give that finds no empty slot above it looks below it too, and a
 * refill that finds no batch below it looks above it (a hint stuck at the
 * cap over an empty stash once sent xmalloc-test's every give to the spans
 * until the next decay). A give that finds the stash full reads every
 * slot, and marks it full: the next gives look only from the hint up,
 * until a refill or the decay takes a batch; a refill that finds it empty
 * marks it so likewise, until a give (a give that tried only the bottom
 * slot below the hint stashed 41-47% of xmalloc-test's gives, against
 * 71-82% with the whole look). Nothing else is read or written by both
 * threads.
 *
 * CENTRAL_STASH_MAX: 512 slots, so that the byte bound decides for the
 * small classes too (a 64-byte class's 1 MiB is 512 batches of 2 KiB): a
 * consumer that frees 4,096 objects at a time (xmalloc-test) overflowed 64.
 */
#define CENTRAL_STASH_MAX 512u

/* Thread caches that carve spans of their own, per class (central_take). */
#define CENTRAL_CARVE_SLOTS 4u

/*
 * Fullest first. The spans of a class with a free object (partial spans)
 * are listed by occupancy: CENTRAL_BUCKETS lists, list b holding the spans
 * whose objects out of the span (in use: live, cached or stashed) are
 * between b/CENTRAL_BUCKETS and (b+1)/CENTRAL_BUCKETS of the span's
 * (central_bucket), a bit per list that is not empty in `nonempty`. A
 * refill takes the fullest listed span (the first of the highest non-empty
 * list), so new objects go where objects already live and sparse spans are
 * left to drain: after a program frees most of its objects, the survivors
 * do not stay spread over every span they were ever given (tcmalloc's span
 * lists by allocated count, its 2024 fleet paper: -3.4% RAM). A span
 * changes list only when its count crosses a list's edge; give_locked
 * looks once per run of a batch's objects in one span, so the cost is on
 * the central path, never on a thread cache's.
 *
 * The same counts answer the defrag contract (central_defrag_*, below):
 * which spans a move out of would empty, and which span to move into.
 */
#define CENTRAL_BUCKETS 8u

/* The list of a partial span with `inuse` of its `objects` out (inuse <
 * objects): inuse * CENTRAL_BUCKETS / objects, as a multiply by `mul`,
 * central_bucket_mul(objects), and a shift. Exact: mul exceeds 2^27 /
 * objects by less than 1, which moves inuse * mul by less than inuse, and
 * a quotient's fraction is at least 1 / objects below the next integer,
 * 2^24 / objects > 512 (inuse < objects <= 512) in the product's units. */
static inline uint32_t central_bucket_mul(unsigned objects)
{
	return (uint32_t)(((uint32_t)CENTRAL_BUCKETS << 24) / objects + 1u);
}

static inline unsigned central_bucket(unsigned inuse, uint32_t mul)
{
	return (unsigned)(((uint64_t)inuse * mul) >> 24);
}

/*
 * The defrag rule: is a block of a partial span with `inuse` objects out
 * worth moving, in a class whose `npartial` partial spans hold
 * `partial_inuse` objects out? When the span is at most 12.5% fuller than
 * the class's partial spans on average (Redis's rule, from jemalloc's
 * je_get_defrag_hint): then its objects are among the ones to move so that
 * it empties, and the fuller spans they move into fill. The caller also
 * requires that the span is not a cache's to carve and that another
 * partial span at least as full exists (the move's destination): of two
 * equally full spans the one asked about first drains into the other, and
 * nothing moves back.
 */
static inline int central_defrag_rule(size_t inuse, size_t npartial, size_t partial_inuse)
{
	return inuse * npartial * 8u <= partial_inuse * 9u;
}

struct pa_central {
	pa_lock lock;
	/* Protected by lock. */
	struct pa_span *partial[CENTRAL_BUCKETS]; /* spans with a free object, by occupancy */
	uint32_t nonempty;                        /* bit b: partial[b] is not empty */
	uint32_t nbucket[CENTRAL_BUCKETS];        /* spans in partial[b] */
	size_t npartial;                          /* spans listed in partial[] */
	size_t partial_inuse;                     /* their objects out of the span */
	uint32_t bucket_mul;                      /* central_bucket_mul(objects), set with
	                                           * the class's first span */
	uint32_t frag;         /* the class's spans drain (central.c: draining spans); relaxed
	                        * atomic stores under the lock, read without it */
	uint32_t frag_since;   /* how long it has been fragmented (central.c: FRAG_*); the
	                        * same */
	size_t spans;          /* spans of this class */
	size_t out;            /* objects out of their spans: in caches, stashed or live */
	size_t rel_pages;      /* 4 KiB pages of its spans released by a sweep (sweep.h) */
	size_t dirty;          /* spans with an object back since their last sweep */
	size_t grows;          /* spans the class has had (central.c: populate_taken) */
	struct pa_span *fresh; /* its newest span grown from released pages, past its first
	                        * (the same) */
	/* The spans thread caches carve (central_take): an owner (its cache,
	 * by its spare span records) and its span per slot; owner NULL: a
	 * free slot. */
	struct {
		const void *owner;
		struct pa_span *span;
	} carve[CENTRAL_CARVE_SLOTS];
} __attribute__((aligned(64)));

/* A class's stash: atomics, no lock (above). Its marks are apart from
 * central[] so that the class's lock and span lists share no line with
 * them, and its slots apart from the marks (central_stash_slot), so that a
 * class that never stashed reads and writes none of its 4 KiB of slots: on
 * a kernel that backs even a read of untouched memory with a page of its
 * own (the AMD EPYC VM of docs/benchmarks.md does), each class a program
 * used cost a resident page (80 KiB of `sleep`'s RSS). */
struct pa_batch_stash {
	uint32_t top; /* the hint (above): relaxed atomic loads and stores */
	/* Marks, the same: a give found every slot taken since the last
	 * refill or decay (full); a give came since a refill last found the
	 * stash empty (given, 0 from the start: nothing was ever given). A
	 * full, or a given of 0, skips the look past the hint that would read
	 * every slot again. used: a give ever came (never cleared); without
	 * one the slots were never written, and no one reads them. All are
	 * written only where they change. */
	uint32_t full, given, used;
} __attribute__((aligned(64)));

extern struct pa_batch_stash central_stash[PA_SC_NUM_CLASSES] PA_HIDDEN;

/* A batch's first object, or NULL; CAS NULL -> batch (release), exchange
 * -> NULL (acquire). */
extern void *central_stash_slot[PA_SC_NUM_CLASSES][CENTRAL_STASH_MAX] PA_HIDDEN;

/* Indexed by class; class 0 is the large objects' (large.h): unused. */
extern struct pa_central central[PA_SC_NUM_CLASSES] PA_HIDDEN;

/* New small spans whose pages came from released memory (pages that read as
 * zero, which the program's writes now make resident: its RSS grows), a
 * count. Those who keep freed pages aside for reuse (the thread caches'
 * large slots, large.h) look at it to give them back when the small classes
 * grow into fresh memory instead. */
extern uint64_t central_fresh PA_HIDDEN;
static inline uint64_t central_fresh_count(void)
{
	return __atomic_load_n(&central_fresh, __ATOMIC_RELAXED);
}

/*
 * Take up to n objects of class cls; they are linked through their first
 * word from *head. Returns how many (0: out of memory, errno = ENOMEM).
 * `owner` is the calling thread's thread cache, by the spare span records
 * it hands down (span.h: spans made on the way take their records from
 * them), or NULL when the thread has no cache. With an owner (a thread
 * cache's refill), a whole batch comes from the stash when it has one, for
 * any n up to central_batch(cls): the count returned is then the batch's,
 * which may be more than n. (A refill in slow start asks for fewer: had it
 * gone to the spans, a program whose threads come and go, each one's lists
 * in slow start, took fresh objects from the spans while the batches its
 * threads gave back piled up in the stash; mstress's stashes held 5.8 MiB
 * at exit.) Objects from spans come first from the span
 * the owner carves, until it is full; *carving says whether the owner
 * holds one of the class's carve slots afterwards (carving NULL: no
 * carving, shared spans only).
 *
 * Thread-affine spans: objects of two threads side by side in one span
 * share cache lines that both threads write (two threads each churning
 * their own objects of one class ran 17-35% slower than one thread, and as
 * fast when their classes differed). So up to CENTRAL_CARVE_SLOTS caches
 * per class each carve a span of their own (the class's carve slots, under
 * its lock): a refill that needs a span takes the first listed span no one
 * carves, or makes one, and takes a free slot for it. With every slot
 * taken, a cache shares the spans as before. A slot is freed when its span
 * fills or retires, or its owner lets go (central_uncarve: the cache is
 * released). Caches carve only while there are at most CENTRAL_CARVE_SLOTS
 * of them (tcache.c): with more threads than slots most share anyway, and
 * the slots' spans, skipped by the others, cost memory (wl-threads, 64
 * threads: 1.3 MiB more).
 *
 * sp, below: the calling thread's spare span records (span.h), or NULL,
 * for the spans retired on the way.
 */
unsigned central_take(unsigned cls, unsigned n, void **head, struct pa_span_spares *owner,
                      int *carving);

/* owner lets go of its carve slot in class cls; the _held form with the
 * class's lock held, or in fork's child, where only the caller runs. */
void central_uncarve(unsigned cls, const void *owner);
void central_uncarve_held(unsigned cls, const void *owner);

/* Give n objects of class cls, linked through their first word, back to
 * their spans. An object whose span says it is free already is reported as
 * a double free (abort; a stashed one when its batch goes to the spans). */
void central_give(unsigned cls, void *head, unsigned n, struct pa_span_spares *sp);

/* The same for a thread cache's overflow: a whole batch goes to the stash
 * while it has room. */
void central_give_or_stash(unsigned cls, void *head, unsigned n, struct pa_span_spares *sp);

/* Small span s, which a heap owned (heap.h) and whose live objects it
 * leaves to the default heap, joins its class's central list (with no live
 * object: back to the page heap, its record to sp). */
void central_adopt(struct pa_span *s, struct pa_span_spares *sp);

/*
 * The defrag contract (pagealloc.h: pa_defrag_*) on the default heap's
 * small spans. central_defrag_hint: is live object p of span s (a central
 * list's span, not a heap's) worth moving now? The rule above, with s
 * partial, not carved, and a partial span other than s at least as full.
 * central_defrag_take: one object of class cls, straight from a span and
 * never from a stash or cache: from the fullest partial span other than
 * `from` that is at least as full as `from` (NULL when there is none), or
 * with `from` NULL from the fullest partial span, or a new one when none is
 * listed (NULL: out of memory, errno = ENOMEM). The object's second word is
 * cleared. central_defrag_give: live object p back to its span at once (a
 * checked block of a central list's span); its record to sp when the span
 * retires.
 */
int central_defrag_hint(struct pa_span *s);
void *central_defrag_take(unsigned cls, struct pa_span *from, struct pa_span_spares *sp);
void central_defrag_give(void *p, struct pa_span_spares *sp);

/* Live object p of a central list's span whose fbump is 0 (pa_free's slow
 * path): when its span drains (central.c: a sparse span of a fragmented
 * class), p goes straight back to it and 1 is returned; else 0, and the
 * caller frees p as any other (the span's mark is brought up to date). */
int central_give_draining(void *p, struct pa_span_spares *sp);

/* What a class's spans hold (under its lock, one instant): spans, partial
 * spans, and the free slots inside partial spans (the objects a full
 * defrag could win back: spans - partial are full, so their slots are
 * none). */
struct central_occupancy {
	size_t spans, partial, partial_free;
	size_t bucket_spans[CENTRAL_BUCKETS]; /* partial spans per list */
};
void central_occupancy(unsigned cls, struct central_occupancy *o);

/* Batches in class cls's stash, and the objects they hold (a count of its
 * full slots, exact while no other thread stashes or takes: for the stats). */
unsigned central_stash_batches(unsigned cls);
size_t central_stashed(unsigned cls);

/* Send the stashed batches of every class to their spans: all of them
 * (all != 0), or those the stash kept unused since the previous call: each
 * slot still holding the batch it held then (jemalloc's and tcmalloc's
 * low-water mark, per slot). Returns objects moved. Each call is also a
 * decay's look at the classes' fragmentation: a class fragmented
 * throughout the time between two calls is marked to drain (central.c:
 * draining spans). */
size_t central_stash_drain(int all, struct pa_span_spares *sp);

/* fork: take every central lock (prepare), release them (parent), or reset
 * them (child). The stashes take none: each slot changes in one atomic
 * step, after the batch it gets is linked, so the child finds every slot
 * empty or holding a whole batch. */
void central_lock_all(void);
void central_unlock_all(void);
void central_reset_locks(void);

#endif
