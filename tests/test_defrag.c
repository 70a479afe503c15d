/*
 * test_defrag.c — fullest first and the defrag contract (central.h, heap.h,
 * pagealloc.h: pa_defrag_*).
 *
 * Each case builds exact span states of a size class no other case uses,
 * through pa_defrag_malloc (one object from the fullest partial span, a new
 * span when there is none: so N objects fill spans one after the other)
 * and pa_defrag_free (straight to the span), which no thread cache comes
 * between. Then it checks what the lists say (pa_malloc_stats's partial
 * spans, free slots and occupancy histogram), which span a refill takes,
 * what the hint answers for each span by the rule (at most 12.5% fuller
 * than the class's partial spans on average, another at least as full),
 * where a move lands, and that the bytes moved with it. Heap-profile
 * sampling is off: a sampled block is a span of its own (prof.h).
 */
#include <signal.h>
#include <sys/mman.h>

#include "testutil.h"

#include "central.h"
#include "pagealloc.h"
#include "pagemap.h"
#include "span.h"

static unsigned class_of(size_t size)
{
	return pa_size_to_class(size);
}

static struct pa_span *span_of(const void *p)
{
	return pagemap_lookup((uintptr_t)p);
}

static struct pa_class_stats class_stats(unsigned cls)
{
	static struct pa_malloc_stats st; /* 4 KiB: off the stack */
	assert_int_equal(pa_malloc_stats(&st), 0);
	return st.classes[cls];
}

/* n objects of `size` bytes from pa_defrag_malloc, each filled with its
 * index. */
static void defrag_fill(void **v, size_t n, size_t size)
{
	for (size_t i = 0; i < n; i++) {
		v[i] = pa_defrag_malloc(size);
		assert_non_null(v[i]);
		memset(v[i], (int)(i & 0xff), size);
	}
}

/* Spans A, B, C of the 256-byte class (32 objects each) with 4, 20 and 10
 * objects in use: partial spans 3, free slots 28 + 12 + 22, lists 1, 5, 2
 * (in-use * 8 / 32). */
static void lists_order_refills_and_hints(void **state)
{
	(void)state;
	const size_t size = 256;
	const unsigned cls = class_of(size), per = pa_sizeclasses[cls].objects;
	TU_EQ(per, 32);
	void *v[96];
	defrag_fill(v, 96, size);
	struct pa_span *a = span_of(v[0]), *b = span_of(v[32]), *c = span_of(v[64]);
	for (unsigned i = 0; i < 96; i++)
		TU_EQ(span_of(v[i]) == (i < 32   ? a
		                        : i < 64 ? b
		                                 : c),
		      1); /* one span, then the next */
	TU_EQ(class_stats(cls).spans, 3);
	TU_EQ(class_stats(cls).partial_spans, 0); /* all full */

	const unsigned keep[3] = {4, 20, 10};
	for (unsigned s = 0; s < 3; s++)
		for (unsigned i = keep[s]; i < per; i++) {
			pa_defrag_free(v[s * per + i]);
			v[s * per + i] = NULL;
		}
	struct pa_class_stats k = class_stats(cls);
	TU_EQ(k.spans, 3);
	TU_EQ(k.partial_spans, 3);
	TU_EQ(k.partial_free, 28 + 12 + 22);
	TU_EQ(k.objects, 4 + 20 + 10);
	struct central_occupancy o;
	central_occupancy(cls, &o);
	TU_EQ(o.bucket_spans[1], 1); /* A: 4 of 32 */
	TU_EQ(o.bucket_spans[5], 1); /* B: 20 of 32 */
	TU_EQ(o.bucket_spans[2], 1); /* C: 10 of 32 */
	TU_EQ(o.bucket_spans[0] + o.bucket_spans[3] + o.bucket_spans[4] + o.bucket_spans[6] +
	          o.bucket_spans[7],
	      0);
	TU_EQ(pa_defrag_frag_bytes() >= (28 + 12 + 22) * size, 1);

	/* The average is 34 / 3: A (4) and C (10) are at most 12.5% above
	 * it, B (20) is not; B is the fuller span they would move into. */
	TU_EQ(pa_defrag_hint(v[0]), 1);
	TU_EQ(pa_defrag_hint(v[32]), 0);
	TU_EQ(pa_defrag_hint(v[64]), 1);

	/* A refill takes the fullest: B. */
	void *n = pa_defrag_malloc(size);
	TU_EQ(span_of(n) == b, 1);
	pa_defrag_free(n);

	/* A move of A's object lands in B, its bytes with it; A has one
	 * object fewer, B one more. */
	void *moved = pa_defrag_move(v[1]);
	TU_EQ(span_of(moved) == b, 1);
	const unsigned char *m = moved;
	for (size_t j = 0; j < size; j++)
		if (m[j] != 1)
			fail_msg("byte %zu of the moved block is %u, want 1", j, m[j]);
	v[1] = moved;
	k = class_stats(cls);
	TU_EQ(k.partial_free, 29 + 11 + 22);
	TU_EQ(k.objects, 34);
	/* B's own object stays where it is. */
	TU_EQ(pa_defrag_move(v[32]) == v[32], 1);

	/* Emptying A by moves retires it: 3 more moves, then 2 spans. */
	for (unsigned i = 0; i < 4; i++)
		if (span_of(v[i]) == a)
			v[i] = pa_defrag_move(v[i]);
	k = class_stats(cls);
	TU_EQ(k.spans, 2);
	TU_EQ(k.partial_free, 8 + 22); /* B has 24, C 10 */

	/* The thread cache's refill takes the fullest span too. */
	pa_thread_cache_flush();
	void *t = pa_malloc(size);
	TU_EQ(span_of(t) == b, 1);
	pa_free(t);
	pa_thread_cache_flush();
	for (unsigned i = 0; i < 96; i++)
		pa_defrag_free(v[i]);
	TU_EQ(class_stats(cls).spans, 0);
}

/* Seed 000's shape in miniature: 8 spans of the 320-byte class (25
 * objects each), one object kept in each. Every kept object but the
 * destination's own moves (7, the fewest that leave 8 objects in one
 * span), and one span is left with 17 free slots. */
static void seed000_moves_the_fewest_objects(void **state)
{
	(void)state;
	const size_t size = 320;
	const unsigned cls = class_of(size), per = pa_sizeclasses[cls].objects;
	TU_EQ(per, 25);
	void *v[8 * 25], *kept[8];
	defrag_fill(v, 8 * per, size);
	for (unsigned s = 0; s < 8; s++) {
		kept[s] = v[s * per];
		for (unsigned i = 1; i < per; i++)
			pa_defrag_free(v[s * per + i]);
	}
	struct pa_class_stats k = class_stats(cls);
	TU_EQ(k.spans, 8);
	TU_EQ(k.partial_spans, 8);
	TU_EQ(k.partial_free, 8 * 24);
	struct central_occupancy o;
	central_occupancy(cls, &o);
	TU_EQ(o.bucket_spans[0], 8);
	unsigned moves = 0;
	for (unsigned s = 0; s < 8; s++) {
		void *q = pa_defrag_move(kept[s]);
		moves += q != kept[s];
		kept[s] = q;
	}
	TU_EQ(moves, 7);
	k = class_stats(cls);
	TU_EQ(k.spans, 1);
	TU_EQ(k.partial_free, 17);
	for (unsigned s = 0; s < 8; s++) {
		TU_EQ(span_of(kept[s]) == span_of(kept[0]), 1);
		TU_EQ(((unsigned char *)kept[s])[size - 1], (s * per) & 0xff);
		TU_EQ(pa_defrag_hint(kept[s]), 0); /* nothing left to gain */
		pa_defrag_free(kept[s]);
	}
	TU_EQ(class_stats(cls).spans, 0);
}

/* What the hint does not judge: 0, and a move returns the pointer. */
static void hint_is_0_for_what_it_cannot_judge(void **state)
{
	(void)state;
	TU_EQ(pa_defrag_hint(NULL), 0);
	TU_EQ(pa_defrag_move(NULL) == NULL, 1);
	void *big = pa_malloc(100000);
	TU_EQ(pa_defrag_hint(big), 0);
	TU_EQ(pa_defrag_move(big) == big, 1);
	pa_defrag_free(big); /* as pa_free */
	pa_heap_t *h = pa_heap_new();
	void *hp[2] = {pa_heap_malloc(h, 352), pa_heap_malloc(h, 352)};
	TU_EQ(pa_defrag_hint(hp[0]), 0); /* another heap's */
	TU_EQ(pa_defrag_move(hp[0]) == hp[0], 1);
	/* A lone span: no other span to move into. */
	void *p = pa_defrag_malloc(1280);
	TU_EQ(class_stats(class_of(1280)).partial_spans, 1);
	TU_EQ(pa_defrag_hint(p), 0);
	TU_EQ(pa_defrag_move(p) == p, 1);
	pa_defrag_free(p);
	TU_EQ(class_stats(class_of(1280)).spans, 0);
	pa_heap_destroy(h);
}

/* The same within a heap: the heap's figures, its hint and its move. */
static void heaps_defrag_within_the_heap(void **state)
{
	(void)state;
	const size_t size = 288;
	const unsigned cls = class_of(size), per = pa_sizeclasses[cls].objects;
	TU_EQ(per, 28);
	pa_heap_t *h = pa_heap_new();
	assert_non_null(h);
	void *v[3 * 28];
	for (unsigned i = 0; i < 3 * per; i++) {
		v[i] = pa_heap_defrag_malloc(h, size);
		assert_non_null(v[i]);
		memset(v[i], (int)i, size);
	}
	struct pa_heap_stats st;
	pa_heap_stats(h, &st);
	TU_EQ(st.spans, 3);
	/* 2, 20 and 6 objects left in the three spans: average 28 / 3 */
	const unsigned keep[3] = {2, 20, 6};
	for (unsigned s = 0; s < 3; s++)
		for (unsigned i = keep[s]; i < per; i++) {
			pa_heap_defrag_free(h, v[s * per + i]);
			v[s * per + i] = NULL;
		}
	TU_EQ(pa_heap_defrag_hint(h, v[0]), 1);
	TU_EQ(pa_heap_defrag_hint(h, v[per]), 0);
	TU_EQ(pa_heap_defrag_hint(h, v[2 * per]), 1);
	pa_heap_t *other = pa_heap_new();
	TU_EQ(pa_heap_defrag_hint(other, v[0]), 0); /* not other's */
	TU_EQ(pa_heap_defrag_move(other, v[0]) == v[0], 1);
	pa_heap_destroy(other);
	for (unsigned i = 0; i < 3 * per; i++) {
		if (v[i] == NULL)
			continue;
		void *q = pa_heap_defrag_move(h, v[i]);
		if (i / per != 1)
			TU_EQ(span_of(q) == span_of(v[per]), 1); /* into the fullest */
		else
			TU_EQ(q == v[i], 1);
		TU_EQ(((unsigned char *)q)[size - 1], i & 0xff);
		v[i] = q;
	}
	pa_heap_stats(h, &st);
	/* A went back to the page heap; B is full; C, empty, stays as the
	 * class's only span with room (heap.c keeps one). */
	TU_EQ(st.spans, 2);
	TU_EQ(st.live_objects, 28);
	pa_heap_destroy(h);
}

/* Draining spans (central.c): in a class with 8 or more partial spans and
 * more than half its slots free in them, throughout a decay period (from
 * one decay to the next: central_stash_drain, which a flush also runs), a
 * free of an object of a span at most a quarter full goes straight back to
 * the span, not to the thread's cache (whose next malloc would refill the
 * sparse span at once); a span fuller than that, or a class that is not
 * fragmented or not yet for a whole period, frees into the cache as
 * always. 416-byte class: 19 objects a span. */
static void sparse_spans_of_a_fragmented_class_drain(void **state)
{
	(void)state;
	const size_t size = 416;
	const unsigned cls = class_of(size), per = pa_sizeclasses[cls].objects;
	TU_EQ(per, 19);
	void *v[10 * 19];
	defrag_fill(v, 10 * per, size);
	/* Spans 0-8 keep 2 objects (2 * 8 < 19: the lowest list), span 9 keeps
	 * 17: 10 partial spans, 17 * 9 + 2 = 155 free slots of 190. */
	for (unsigned s = 0; s < 10; s++)
		for (unsigned i = s < 9 ? 2 : 17; i < per; i++) {
			pa_defrag_free(v[s * per + i]);
			v[s * per + i] = NULL;
		}
	pa_thread_cache_flush(); /* a decay: fragmented since before it */
	struct pa_class_stats k = class_stats(cls);
	TU_EQ(k.partial_spans, 10);
	TU_EQ(k.partial_free, 155);
	TU_EQ(k.cached, 0);
	/* Not yet a whole period: an object of a sparse span into the cache. */
	pa_free(v[0]);
	k = class_stats(cls);
	TU_EQ(k.partial_free, 155);
	TU_EQ(k.cached, 1);
	/* The next decay marks the class (and the flush sends v[0] home). */
	pa_thread_cache_flush();
	k = class_stats(cls);
	TU_EQ(k.partial_free, 156);
	TU_EQ(k.cached, 0);
	/* An object of a sparse span: straight back, not cached. */
	pa_free(v[per]);
	k = class_stats(cls);
	TU_EQ(k.partial_free, 157);
	TU_EQ(k.cached, 0);
	/* An object of the dense span: into the cache. */
	pa_free(v[9 * per]);
	k = class_stats(cls);
	TU_EQ(k.partial_free, 157);
	TU_EQ(k.cached, 1);
	/* The sparse span's last object: the span goes back to the page heap. */
	pa_free(v[1]);
	k = class_stats(cls);
	TU_EQ(k.spans, 9);
	TU_EQ(k.partial_free, 157 - 18); /* its 18 free slots went with it */
	pa_thread_cache_flush();
	for (unsigned i = 2; i < 10 * per; i++)
		if (i != per && i != 9 * per)
			pa_defrag_free(v[i]);
	TU_EQ(class_stats(cls).spans, 0);
}

/* A class that stops being fragmented between two decays starts its
 * period again: a producer's refills taking back what its consumer just
 * gave its spans pass through the fragmented state for a moment at a time,
 * and marking it then sent the consumer's frees to the lock one by one
 * (central.c). 640-byte class. */
static void a_class_fragmented_for_less_than_a_period_does_not_drain(void **state)
{
	(void)state;
	const size_t size = 640;
	const unsigned cls = class_of(size), per = pa_sizeclasses[cls].objects;
	TU_EQ(per, 12);
	void *v[10 * 12], *back[10 * 12];
	defrag_fill(v, 10 * per, size);
	/* Spans 0-8 keep 2 objects (2 * 8 < 2 * 12: the two lowest lists),
	 * span 9 keeps 10: 9 * 10 + 2 = 92 free slots of 120. */
	for (unsigned s = 0; s < 10; s++)
		for (unsigned i = s < 9 ? 2 : 10; i < per; i++) {
			pa_defrag_free(v[s * per + i]);
			v[s * per + i] = NULL;
		}
	central_stash_drain(0, NULL); /* a decay: fragmented since before it */
	/* Not fragmented any more (92 - 32 = 60 free slots: half, not more),
	 * then fragmented again. */
	for (unsigned i = 0; i < 32; i++)
		back[i] = pa_defrag_malloc(size);
	TU_EQ(class_stats(cls).partial_free, 60);
	for (unsigned i = 0; i < 32; i++)
		pa_defrag_free(back[i]);
	TU_EQ(class_stats(cls).partial_free, 92);
	central_stash_drain(0, NULL); /* fragmented since after the last one */
	/* Not throughout a period: an object of a sparse span into the cache. */
	pa_free(v[0]);
	struct pa_class_stats k = class_stats(cls);
	TU_EQ(k.partial_free, 92);
	TU_EQ(k.cached, 1);
	pa_thread_cache_flush();
	for (unsigned i = 1; i < 10 * per; i++)
		pa_defrag_free(v[i]);
	TU_EQ(class_stats(cls).spans, 0);
}

/* The lists' multiply and shift is the division it stands for, for every
 * count of every class. */
static void bucket_is_inuse_times_8_over_objects(void **state)
{
	(void)state;
	for (unsigned cls = 1; cls < PA_SC_NUM_CLASSES; cls++) {
		unsigned objects = pa_sizeclasses[cls].objects;
		uint32_t mul = central_bucket_mul(objects);
		for (unsigned inuse = 0; inuse < objects; inuse++)
			if (central_bucket(inuse, mul) != inuse * CENTRAL_BUCKETS / objects)
				fail_msg("class %u, %u of %u in use: list %u, want %u", cls, inuse,
				         objects, central_bucket(inuse, mul),
				         inuse * CENTRAL_BUCKETS / objects);
	}
}

/* A bad pointer gets pa_free's one line, under the function's name. */
static uintptr_t *bad_ptr;
static void hint_of_a_freed_block(void *arg)
{
	(void)arg;
	void *p = pa_defrag_malloc(416), *keep = pa_defrag_malloc(416);
	(void)keep;
	pa_defrag_free(p);
	*bad_ptr = (uintptr_t)p;
	pa_defrag_hint(p);
}

static void defrag_free_twice(void *arg)
{
	(void)arg;
	void *p = pa_defrag_malloc(416), *keep = pa_defrag_malloc(416);
	(void)keep;
	pa_defrag_free(p);
	*bad_ptr = (uintptr_t)p;
	pa_defrag_free(p);
}

static void bad_pointers_get_one_line(void **state)
{
	(void)state;
	bad_ptr = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(bad_ptr != MAP_FAILED);
	char err[1024];
	int status = tu_run_child(hint_of_a_freed_block, NULL, err, sizeof(err));
	tu_expect_fault_line("hint of a freed block", status, err, "pa_defrag_hint", *bad_ptr,
	                     "block is already free (use after free)");
	status = tu_run_child(defrag_free_twice, NULL, err, sizeof(err));
	tu_expect_fault_line("defrag free twice", status, err, "pa_defrag_free", *bad_ptr,
	                     "block is already free (double free)");
	munmap(bad_ptr, 4096);
}

static int setup(void **state)
{
	(void)state;
	/* No scavenger: its decays would mark fragmented classes at times of
	 * their own (sparse_spans_of_a_fragmented_class_drain). */
	return pa_config_set("prof", "off") | pa_config_set("scavenger", "off");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(bucket_is_inuse_times_8_over_objects),
	    TU_TEST(sparse_spans_of_a_fragmented_class_drain),
	    TU_TEST(a_class_fragmented_for_less_than_a_period_does_not_drain),
	    TU_TEST(lists_order_refills_and_hints),
	    TU_TEST(seed000_moves_the_fewest_objects),
	    TU_TEST(hint_is_0_for_what_it_cannot_judge),
	    TU_TEST(heaps_defrag_within_the_heap),
	    TU_TEST(bad_pointers_get_one_line),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
