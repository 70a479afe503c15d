/*
 * test_malloc_handoff_thread.c — objects freed in another thread than the
 * one that allocated them, through the central stashes' lock-free hand-off
 * (central.h): a consumer's overflowing list stashes whole batches and its
 * producer's refills take them.
 *
 * First in turn (one thread, then the other, so every figure is exact):
 * what a consumer stashes, a producer's next refills take whole, the very
 * objects, with no span made. Then at once: a producer and a consumer hand
 * 64-byte objects through a ring, both stashing and taking as fast as they
 * can (ThreadSanitizer runs this), and at the end every object came through
 * once and every span made on the way is back with the page heap. Last,
 * the stats read while another thread drains the large stash (as the
 * scavenger's decay does) count no live object.
 * The scavenger is off: only the tests' flushes empty the stashes.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "testutil.h"

#include "central.h"
#include "pagealloc.h"
#include "sizeclass_table.h"
#include "stash.h"

/* A class whose batch is 32 objects and whose stash holds 256 of them
 * (central.h: classes of up to 64 bytes move 128 objects a batch). */
#define OBJ 128

static size_t class_spans(unsigned cls)
{
	struct pa_malloc_stats m;
	assert_int_equal(pa_malloc_stats(&m), 0);
	return m.classes[cls].spans;
}

static void run_in_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* ---- in turn ---------------------------------------------------------------- */

/* 8 batches of 64 B. A thread that only frees grows its list to one batch
 * (slow start), so its overflows stash the other 7, and at its exit the list
 * goes to the spans. */
#define TURN_BATCHES 8u
#define TURN_STASHED (TURN_BATCHES - 1u)
/* The taker's first refill takes a stashed batch whole, though its list is
 * in slow start, and its later ones whole batches too: as many mallocs as
 * the stash holds objects take them all (slow-start refills from the spans,
 * 1, 2, .. 31 objects, would have left the stash alone for 496). */
#define TURN_TAKES (TURN_STASHED * turn_batch)
/* Under a hint at 0 (a race's, below) slow-start refills do not look in
 * the stash: the taker's refills go 1, 2, .. 31 objects from the spans,
 * then whole batches, which look past the hint. */
#define TURN_TAKES_SLOW (31u * 32u / 2u + TURN_STASHED * 32u)

static size_t turn_size = OBJ;     /* the size the turns allocate */
static unsigned turn_batch = 32u;  /* its class's batch */
static unsigned turn_takes = 224u; /* the taker's mallocs: TURN_TAKES */
static void *turn_blocks[TURN_BATCHES * CENTRAL_BATCH_MAX];
static void *turn_stashed[TURN_STASHED * CENTRAL_BATCH_MAX];
/* The taker's mallocs: TURN_TAKES_SLOW, or a tiny class's 7 batches of 128. */
#define TURN_TAKEN_MAX                                                                             \
	(TURN_TAKES_SLOW > TURN_STASHED * CENTRAL_BATCH_MAX ? TURN_TAKES_SLOW                      \
	                                                    : TURN_STASHED * CENTRAL_BATCH_MAX)
static void *turn_taken[TURN_TAKEN_MAX];

static void *turn_allocate(void *arg)
{
	(void)arg;
	for (unsigned k = 0; k < TURN_BATCHES * turn_batch; k++)
		turn_blocks[k] = pa_malloc(turn_size);
	pa_thread_cache_flush(); /* the rest of its last refill */
	return NULL;
}

static void *turn_free(void *arg)
{
	(void)arg;
	for (unsigned k = 0; k < TURN_BATCHES * turn_batch; k++)
		pa_free(turn_blocks[k]);
	return NULL;
}

static void *turn_take(void *arg)
{
	size_t *stashed_after = arg;
	for (unsigned k = 0; k < turn_takes; k++)
		turn_taken[k] = pa_malloc(turn_size);
	*stashed_after = central_stashed(pa_size_to_class(turn_size));
	for (unsigned k = 0; k < turn_takes; k++)
		pa_free(turn_taken[k]);
	return NULL;
}

/* The objects of cls's stashed batches, into turn_stashed: how many. */
static unsigned stashed_objects(unsigned cls)
{
	unsigned n = 0;
	for (unsigned k = 0; k < CENTRAL_STASH_MAX; k++)
		for (void **o = central_stash_slot[cls][k]; o != NULL; o = o[0])
			turn_stashed[n++] = o;
	return n;
}

/* A producer's refills (turn_take) empty the stash and take every object of
 * turn_stashed: how many of them they took. */
static size_t taken_of_the_stashed(void)
{
	size_t stashed_after = SIZE_MAX;
	run_in_thread(turn_take, &stashed_after);
	TU_EQ(stashed_after, 0);
	size_t same = 0;
	for (unsigned k = 0; k < TURN_STASHED * turn_batch; k++)
		for (unsigned j = 0; j < turn_takes; j++)
			same += turn_stashed[k] == turn_taken[j];
	return same;
}

/* Every stash emptied (the flush's decay): cls's stash holds nothing, and
 * how many spans the class has, for stash_emptied_back_to. */
static size_t stash_emptied_spans(unsigned cls)
{
	pa_thread_cache_flush();
	TU_EQ(central_stashed(cls), 0);
	return class_spans(cls);
}

/* The same at a test's end: nothing stashed, and the spans the hand-offs
 * made have all gone back (spans: stash_emptied_spans's at its start). */
static void stash_emptied_back_to(unsigned cls, size_t spans)
{
	pa_thread_cache_flush();
	TU_EQ(central_stashed(cls), 0);
	TU_EQ(class_spans(cls), spans);
}

/* One thread allocates TURN_BATCHES batches, another frees them: the
 * freeing thread's overflows leave TURN_STASHED batches in cls's stash. */
static void turn_stash(unsigned cls)
{
	run_in_thread(turn_allocate, NULL);
	run_in_thread(turn_free, NULL);
	TU_EQ(central_stash_batches(cls), TURN_STASHED);
}

/* What the consumer stashed, the producer's whole-batch refills take: every
 * one of the 224 objects in the stash comes back to it, and the stash is
 * empty after. */
static void a_consumer_s_stashed_batches_go_whole_to_its_producer(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(OBJ);
	TU_EQ(central_batch(cls), 32);
	size_t spans = stash_emptied_spans(cls);
	turn_stash(cls);
	TU_EQ(stashed_objects(cls), TURN_STASHED * 32u);
	TU_EQ(taken_of_the_stashed(), TURN_STASHED * 32u);
	stash_emptied_back_to(cls, spans);
}

/* A thread's first malloc of a class, its list in slow start, takes the
 * newest stashed batch whole: it gets the batch's first object, the stash
 * holds one batch fewer, and its next 31 mallocs are the batch's other
 * objects, in their order. (A slow-start refill once took one object from
 * the spans, and the threads of a program that comes and goes left their
 * batches piling up in the stash: central.h.) */
struct first_refill {
	void *got[32];    /* the thread's first 32 mallocs */
	unsigned batches; /* stashed batches right after its first malloc */
};

static void *first_refill(void *arg)
{
	struct first_refill *r = arg;
	unsigned cls = pa_size_to_class(OBJ);
	r->got[0] = pa_malloc(OBJ);
	r->batches = central_stash_batches(cls);
	for (unsigned k = 1; k < 32u; k++)
		r->got[k] = pa_malloc(OBJ);
	for (unsigned k = 0; k < 32u; k++)
		pa_free(r->got[k]);
	return NULL;
}

static void a_thread_s_first_refill_takes_a_stashed_batch_whole(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(OBJ);
	size_t spans = stash_emptied_spans(cls);
	turn_stash(cls);
	void **o = central_stash_slot[cls][TURN_STASHED - 1];
	TU_EQ(o != NULL, 1);
	void *batch[32];
	for (unsigned k = 0; k < 32u; k++, o = o[0])
		batch[k] = o;
	struct first_refill r = {.batches = 0};
	run_in_thread(first_refill, &r);
	TU_EQ(r.batches, TURN_STASHED - 1u);
	for (unsigned k = 0; k < 32u; k++)
		TU_EQ(r.got[k], batch[k]);
	stash_emptied_back_to(cls, spans);
}

/* The hint (central.h: `top`) is stored without a read-modify-write, so a
 * race can leave it at the stash's cap with every slot below it empty, or
 * at 0 with the batches above it. Gives then still find the empty slots
 * (from the hint up, then from 0), and refills the batches (from the hint
 * down, then from the cap): a hint at the cap once sent every give of a
 * producer/consumer's class to its spans under the lock until the next
 * decay. Here the consumer's 7 batches go to slots 0-6 under a hint at the
 * cap, and the producer's whole-batch refills take all 224 objects under a
 * hint at 0. */
static void a_stale_hint_still_finds_the_free_slots_and_the_batches(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(OBJ);
	uint32_t cap = stash_cap_of((size_t)central_batch(cls) * OBJ, CENTRAL_STASH_MAX);
	TU_EQ(cap, 256);
	size_t spans = stash_emptied_spans(cls);
	run_in_thread(turn_allocate, NULL);
	__atomic_store_n(&central_stash[cls].top, cap, __ATOMIC_RELAXED);
	run_in_thread(turn_free, NULL);
	TU_EQ(central_stash_batches(cls), TURN_STASHED);
	for (unsigned k = 0; k < TURN_STASHED; k++)
		TU_EQ(central_stash_slot[cls][k] != NULL, 1);
	TU_EQ(__atomic_load_n(&central_stash[cls].top, __ATOMIC_RELAXED), TURN_STASHED);
	__atomic_store_n(&central_stash[cls].top, 0, __ATOMIC_RELAXED);
	size_t stashed_after = SIZE_MAX;
	turn_takes = TURN_TAKES_SLOW;
	run_in_thread(turn_take, &stashed_after);
	turn_takes = TURN_TAKES;
	TU_EQ(stashed_after, 0);
	stash_emptied_back_to(cls, spans);
}

/* A stashed batch's address tree (central.c): object k > 0 of the batch, in
 * its links' order, is in word 2 + (k - 1) % F of object (k - 1) / F, where
 * F is the object's words less the link and the free-key (at most 31). For
 * every stashed batch of each size, every one of its later objects (63 in
 * the 128-object batches of 32 and 64 bytes, 31 in the others) is where the
 * rule puts it; and the producer's refills then take every stashed object,
 * as without the tree. */
static void a_stashed_batch_holds_its_objects_address_tree(void **state)
{
	(void)state;
	static const struct {
		size_t size;
		unsigned fan, batch;
	} cases[] = {{32, 2, 128}, {64, 6, 128}, {128, 14, 32}, {256, 30, 32}};
	for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		turn_size = cases[c].size;
		unsigned cls = pa_size_to_class(turn_size), fan = cases[c].fan;
		TU_EQ(pa_sizeclasses[cls].size, turn_size);
		unsigned b = cases[c].batch;
		TU_EQ(central_batch(cls), b);
		turn_batch = b;
		turn_takes = TURN_TAKES;
		size_t spans = stash_emptied_spans(cls);
		turn_stash(cls);
		unsigned batches = 0, placed = 0;
		for (unsigned k = 0; k < CENTRAL_STASH_MAX; k++) {
			void **a[CENTRAL_BATCH_MAX];
			unsigned n = 0;
			for (void **o = central_stash_slot[cls][k]; o != NULL; o = o[0])
				a[n++ % CENTRAL_BATCH_MAX] = o;
			if (n == 0)
				continue;
			TU_EQ(n, b);
			batches++;
			for (unsigned j = 1; j < b; j++)
				placed += a[(j - 1) / fan][2 + (j - 1) % fan] == (void *)a[j];
		}
		TU_EQ(batches, TURN_STASHED);
		TU_EQ(placed, TURN_STASHED * (b - 1u));
		size_t stashed_after = SIZE_MAX;
		run_in_thread(turn_take, &stashed_after);
		TU_EQ(stashed_after, 0);
		stash_emptied_back_to(cls, spans);
	}
	turn_size = OBJ;
	turn_batch = 32u;
	turn_takes = TURN_TAKES;
}

/* A program that writes into a freed object while its batch is stashed may
 * overwrite the tree. A refill reads no address that is not on a page of
 * the batch's class: here the head of every stashed batch holds an address
 * with no page (0x1000) in its first tree word, and the address of a
 * 256-byte object (another class's page) in its second, and the producer's
 * refills still take all 224 objects, the very ones stashed, through their
 * links (without the check the first read faults). */
static void a_tree_overwritten_after_the_free_costs_no_object(void **state)
{
	(void)state;
	turn_size = OBJ;
	unsigned cls = pa_size_to_class(OBJ);
	void *other = pa_malloc(256);
	TU_EQ(pa_size_to_class(256) != cls, 1);
	size_t spans = stash_emptied_spans(cls);
	run_in_thread(turn_allocate, NULL);
	run_in_thread(turn_free, NULL);
	unsigned spoilt = 0;
	for (unsigned k = 0; k < CENTRAL_STASH_MAX; k++) {
		void **head = central_stash_slot[cls][k];
		if (head == NULL)
			continue;
		head[2] = (void *)(uintptr_t)0x1000;
		head[3] = other;
		spoilt++;
	}
	TU_EQ(spoilt, TURN_STASHED);
	TU_EQ(stashed_objects(cls), TURN_STASHED * 32u);
	TU_EQ(taken_of_the_stashed(), TURN_STASHED * 32u);
	pa_free(other);
	stash_emptied_back_to(cls, spans);
}

/* A stash's marks (central.h): full, given and used, and the hint. */
struct marks {
	uint32_t top, full, given, used;
};

static struct marks marks_of(unsigned cls)
{
	struct pa_batch_stash *st = &central_stash[cls];
	return (struct marks){__atomic_load_n(&st->top, __ATOMIC_RELAXED),
	                      __atomic_load_n(&st->full, __ATOMIC_RELAXED),
	                      __atomic_load_n(&st->given, __ATOMIC_RELAXED),
	                      __atomic_load_n(&st->used, __ATOMIC_RELAXED)};
}

/* A thread's n mallocs of size bytes, the stash's marks right after them,
 * then its frees of them all (its overflows give batches back). */
struct refill_run {
	size_t size;
	unsigned n;
	struct marks after;
};

static void *malloc_then_marks(void *arg)
{
	struct refill_run *r = arg;
	static void *p[640];
	if (r->n > sizeof p / sizeof p[0])
		abort(); /* no cmocka assertion outside the test's own thread */
	for (unsigned k = 0; k < r->n; k++)
		p[k] = pa_malloc(r->size);
	r->after = marks_of(pa_size_to_class(r->size));
	for (unsigned k = 0; k < r->n; k++)
		pa_free(p[k]);
	return NULL;
}

/* A thread's first 32 mallocs: its first refill takes the newest stashed
 * batch whole (no slow start from the spans), and the 32 objects serve the
 * rest. */
static struct marks refill_one_batch(void)
{
	struct refill_run r = {OBJ, 32u, {0, 0, 0, 0}};
	run_in_thread(malloc_then_marks, &r);
	return r.after;
}

/* 528 mallocs of a thread: with the stash empty, slow refills from the
 * spans (1 .. 31 objects) and one of a batch. */
static struct marks refill_from_spans(void)
{
	struct refill_run r = {OBJ, 31u * 32u / 2u + 32u, {0, 0, 0, 0}};
	run_in_thread(malloc_then_marks, &r);
	return r.after;
}

/* 258 batches: a freeing thread's 257 overflows fill the 256 slots and
 * find the stash full once. */
#define FULL_OBJECTS (258u * 32u)
/* The same for a tiny class (32 bytes, batches of 128): 130 batches, 128
 * slots, the 16,384 objects of batches of 32 in 512 slots. */
#define FULL_TINY 32u
#define FULL_TINY_OBJECTS (130u * 128u)
static void *full_blocks[FULL_TINY_OBJECTS];
static size_t full_size = OBJ;
static unsigned full_objects = FULL_OBJECTS;

static void *full_allocate(void *arg)
{
	(void)arg;
	for (unsigned k = 0; k < full_objects; k++)
		full_blocks[k] = pa_malloc(full_size);
	pa_thread_cache_flush();
	return NULL;
}

static void *full_free(void *arg)
{
	(void)arg;
	for (unsigned k = 0; k < full_objects; k++)
		pa_free(full_blocks[k]);
	return NULL;
}

/* A class of up to 64 bytes moves 128 objects a batch, and its stash holds
 * as many objects as with batches of 32 (central.c: stash_cap): 16,384 of
 * 32 bytes in 128 slots, where batches of 32 fill all 512 (and batches of
 * 128 in 512 slots would hold four times as many). */
static void a_tiny_class_s_stash_holds_the_objects_of_batches_of_32(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(FULL_TINY);
	TU_EQ(central_batch(cls), 128);
	TU_EQ(stash_cap_of(32u * FULL_TINY, CENTRAL_STASH_MAX), 512);
	size_t spans = stash_emptied_spans(cls);
	full_size = FULL_TINY;
	full_objects = FULL_TINY_OBJECTS;
	run_in_thread(full_allocate, NULL);
	run_in_thread(full_free, NULL);
	full_size = OBJ;
	full_objects = FULL_OBJECTS;
	TU_EQ(central_stash_batches(cls), 128);
	TU_EQ(central_stashed(cls), 16384);
	TU_EQ(marks_of(cls).full, 1);
	stash_emptied_back_to(cls, spans);
}

/* A give that finds every slot taken reads them all once and marks the
 * stash full; the gives after it look only from the hint up, until a
 * refill takes a batch (or the decay empties slots). A refill that finds
 * no batch clears the given mark, and sets the hint to 0, until a give. */
static void a_full_or_empty_stash_is_marked_until_the_other_side_comes(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(OBJ);
	size_t spans = stash_emptied_spans(cls);
	run_in_thread(full_allocate, NULL);
	run_in_thread(full_free, NULL);
	TU_EQ(central_stash_batches(cls), 256);
	struct marks m = marks_of(cls);
	TU_EQ(m.top, 256);
	TU_EQ(m.full, 1);
	TU_EQ(m.given, 1);
	/* One whole-batch refill: the newest batch, and the full mark goes. */
	m = refill_one_batch();
	TU_EQ(m.top, 255);
	TU_EQ(m.full, 0);
	/* The decay (here the flush's) empties the stash; a refill then finds
	 * none. */
	pa_thread_cache_flush();
	TU_EQ(central_stashed(cls), 0);
	TU_EQ(marks_of(cls).full, 0);
	__atomic_store_n(&central_stash[cls].top, 256, __ATOMIC_RELAXED);
	m = refill_from_spans();
	TU_EQ(m.top, 0);
	TU_EQ(m.given, 0);
	/* Its own overflows at exit were gives: the given mark is back. */
	TU_EQ(marks_of(cls).given, 1);
	stash_emptied_back_to(cls, spans);
}

/* A class no thread ever freed into: whole-batch refills look in its empty
 * stash and write nothing there (marks and hint stay 0), nor read its
 * slots: no page of it is made resident. Before, each look wrote the hint
 * and the empty mark, a dirty page for every class a program allocated
 * from (80 KiB of `sleep`'s RSS on the AMD EPYC VM). */
#define UNSTASHED 1500u

static void an_empty_stash_s_refills_write_nothing_to_it(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(UNSTASHED);
	TU_EQ(central_batch(cls), 16384u / pa_sizeclasses[cls].size);
	struct marks m = marks_of(cls);
	TU_EQ(m.top + m.full + m.given + m.used, 0);
	/* 640 mallocs: slow start, then whole-batch refills (batches of 16). */
	struct refill_run r = {UNSTASHED, 40u * 16u, {0, 0, 0, 0}};
	run_in_thread(malloc_then_marks, &r);
	m = r.after;
	TU_EQ(m.top, 0);
	TU_EQ(m.full, 0);
	TU_EQ(m.given, 0);
	TU_EQ(m.used, 0);
	/* The thread's frees overflowed its cache: gives, and from then on the
	 * stash is used. */
	m = marks_of(cls);
	TU_EQ(m.used, 1);
	TU_EQ(m.given, 1);
	TU_EQ(central_stash_batches(cls) > 0, 1);
	pa_thread_cache_flush();
	TU_EQ(central_stash_batches(cls), 0);
	TU_EQ(marks_of(cls).used, 1);
}

/* ---- at once ---------------------------------------------------------------- */

#if TU_UNDER_SANITIZER
#define RING_OBJECTS 200000u
#else
#define RING_OBJECTS 2000000u
#endif
#define RING_SLOTS 256u /* a power of two */

struct ring {
	_Alignas(64) atomic_uint head; /* written by the producer */
	_Alignas(64) atomic_uint tail; /* written by the consumer */
	_Alignas(64) uint64_t *slot[RING_SLOTS];
	uint64_t sum; /* the consumer's: of the values it read */
};

static void *ring_produce(void *arg)
{
	struct ring *r = arg;
	for (unsigned i = 0; i < RING_OBJECTS; i++) {
		uint64_t *p = pa_malloc(OBJ);
		assert_non_null(p);
		p[7] = i; /* not the free list's words */
		while (i - atomic_load_explicit(&r->tail, memory_order_acquire) == RING_SLOTS)
			sched_yield();
		r->slot[i % RING_SLOTS] = p;
		atomic_store_explicit(&r->head, i + 1, memory_order_release);
	}
	return NULL;
}

static void *ring_consume(void *arg)
{
	struct ring *r = arg;
	for (unsigned i = 0; i < RING_OBJECTS; i++) {
		while (atomic_load_explicit(&r->head, memory_order_acquire) == i)
			sched_yield();
		uint64_t *p = r->slot[i % RING_SLOTS];
		r->sum += p[7];
		pa_free(p);
		atomic_store_explicit(&r->tail, i + 1, memory_order_release);
	}
	return NULL;
}

/* Every object arrives once (the sum of 0 .. n-1) and, with both threads
 * gone and the stashes emptied, every span the hand-off made has gone back:
 * no batch was lost or given twice between the two threads. */
static void a_producer_and_its_consumer_hand_off_every_object_once(void **state)
{
	(void)state;
	unsigned cls = pa_size_to_class(OBJ);
	pa_thread_cache_flush();
	size_t spans = class_spans(cls);
	static struct ring r;
	pthread_t prod, cons;
	assert_int_equal(pthread_create(&prod, NULL, ring_produce, &r), 0);
	assert_int_equal(pthread_create(&cons, NULL, ring_consume, &r), 0);
	assert_int_equal(pthread_join(prod, NULL), 0);
	assert_int_equal(pthread_join(cons, NULL), 0);
	TU_EQ(r.sum, (uint64_t)RING_OBJECTS * (RING_OBJECTS - 1u) / 2u);
	stash_emptied_back_to(cls, spans);
	struct pa_malloc_stats m;
	assert_int_equal(pa_malloc_stats(&m), 0);
	TU_EQ(m.classes[cls].objects, 0);
}

/* ---- the stats while another thread drains the large stash -------------------------------- */

/* 5-page blocks (large: past PA_SC_MAX_SMALL). The first 4 freed stay in
 * the thread's slots, the large stash keeps the other 20 spans (large.h), and
 * a flush in another thread sends those to the page heap one by one. */
#define DRAIN_BLOCKS 24u
#define DRAIN_ROUNDS 300u

static atomic_uint drain_asked, drain_done;

static void *drain_each_round(void *arg)
{
	(void)arg;
	for (unsigned r = 1; r <= DRAIN_ROUNDS; r++) {
		while (atomic_load(&drain_asked) != r)
			sched_yield();
		pa_thread_cache_flush(); /* the stashes, all of them */
		atomic_store(&drain_done, r);
	}
	return NULL;
}

/* Spans cut from the stash and not yet back in the page heap are neither
 * stashed nor live: the stats, read all through the drain, count no live
 * object. */
static void a_drain_in_another_thread_never_shows_as_live_objects(void **state)
{
	(void)state;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, drain_each_round, NULL), 0);
	size_t reads = 0, wrong = 0, worst = 0;
	for (unsigned r = 1; r <= DRAIN_ROUNDS; r++) {
		void *p[DRAIN_BLOCKS];
		for (unsigned i = 0; i < DRAIN_BLOCKS; i++)
			assert_non_null(p[i] = pa_malloc(5 * PA_PAGE_BYTES - 100));
		for (unsigned i = 0; i < DRAIN_BLOCKS; i++)
			pa_free(p[i]);
		atomic_store(&drain_asked, r);
		do {
			struct pa_malloc_stats m;
			assert_int_equal(pa_malloc_stats(&m), 0);
			reads++;
			if (m.live_objects != 0) {
				wrong++;
				worst = m.live_objects > worst ? m.live_objects : worst;
			}
		} while (atomic_load(&drain_done) != r);
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	if (wrong != 0)
		fail_msg("%zu of %zu reads during drains counted live objects (up to %zu)", wrong,
		         reads, worst);
}

static int setup(void **state)
{
	(void)state;
	return pa_config_set("scavenger", "off") | pa_config_set("prof", "off");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(a_consumer_s_stashed_batches_go_whole_to_its_producer),
	    TU_TEST(a_thread_s_first_refill_takes_a_stashed_batch_whole),
	    TU_TEST(a_tiny_class_s_stash_holds_the_objects_of_batches_of_32),
	    TU_TEST(a_stale_hint_still_finds_the_free_slots_and_the_batches),
	    TU_TEST(a_stashed_batch_holds_its_objects_address_tree),
	    TU_TEST(a_tree_overwritten_after_the_free_costs_no_object),
	    TU_TEST(a_full_or_empty_stash_is_marked_until_the_other_side_comes),
	    TU_TEST(an_empty_stash_s_refills_write_nothing_to_it),
	    TU_TEST(a_producer_and_its_consumer_hand_off_every_object_once),
	    TU_TEST(a_drain_in_another_thread_never_shows_as_live_objects),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
