/*
 * test_defrag_thread.c — the defrag contract from many threads at once.
 *
 * Four threads each keep 4,000 blocks of 16-320 bytes (sizes that share
 * classes across threads), each block filled with bytes derived from its
 * slot. In rounds, each thread frees three blocks in four and allocates
 * new ones (with malloc, pa_defrag_malloc or, for one block in eight, frees
 * with pa_defrag_free), then moves every block the hint names with
 * pa_defrag_move, or by hand with pa_defrag_malloc, memcpy and
 * pa_defrag_free (Redis's way), and checks every block's bytes. A fifth
 * thread reads pa_defrag_frag_bytes and pa_malloc_stats meanwhile. At the
 * end every block is freed: the classes' live objects are back to what
 * they were, and no block was ever found changed. Run under TSan by the
 * test command (the name has "thread").
 */
#include <pthread.h>

#include "testutil.h"

#include "pagealloc.h"

#define THREADS 4
#define BLOCKS 4000
#define ROUNDS 6

struct worker {
	int id;
	void *p[BLOCKS];
	size_t n[BLOCKS];
	size_t moved, bad;
};

static volatile int readers_stop;

static unsigned char byte_of(int id, size_t slot, size_t k)
{
	return (unsigned char)(id * 31 + slot * 7 + k);
}

static void fill(struct worker *w, size_t i)
{
	unsigned char *b = w->p[i];
	for (size_t k = 0; k < w->n[i]; k++)
		b[k] = byte_of(w->id, i, k);
}

static int intact(const struct worker *w, size_t i)
{
	const unsigned char *b = w->p[i];
	for (size_t k = 0; k < w->n[i]; k++)
		if (b[k] != byte_of(w->id, i, k))
			return 0;
	return 1;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t rng = 0x1234567u + (uint64_t)w->id;
	for (size_t i = 0; i < BLOCKS; i++) {
		w->n[i] = 16 + tu_xorshift(&rng) % 305;
		w->p[i] = pa_malloc(w->n[i]);
		fill(w, i);
	}
	for (int r = 0; r < ROUNDS; r++) {
		for (size_t i = 0; i < BLOCKS; i++) {
			if (tu_xorshift(&rng) % 4 == 0)
				continue;
			if (tu_xorshift(&rng) % 8 == 0)
				pa_defrag_free(w->p[i]);
			else
				pa_free(w->p[i]);
			w->n[i] = 16 + tu_xorshift(&rng) % 305;
			w->p[i] = i % 2 ? pa_malloc(w->n[i]) : pa_defrag_malloc(w->n[i]);
			fill(w, i);
		}
		for (size_t i = 0; i < BLOCKS; i++) {
			if (i % 3 == 0 && pa_defrag_hint(w->p[i])) {
				void *q = pa_defrag_malloc(w->n[i]);
				memcpy(q, w->p[i], w->n[i]);
				pa_defrag_free(w->p[i]);
				w->p[i] = q;
				w->moved++;
			} else {
				void *q = pa_defrag_move(w->p[i]);
				w->moved += q != w->p[i];
				w->p[i] = q;
			}
		}
		for (size_t i = 0; i < BLOCKS; i++)
			w->bad += !intact(w, i);
	}
	return NULL;
}

static void *read_figures(void *arg)
{
	(void)arg;
	static struct pa_malloc_stats st;
	size_t reads = 0;
	while (!__atomic_load_n(&readers_stop, __ATOMIC_RELAXED)) {
		pa_defrag_frag_bytes();
		pa_malloc_stats(&st);
		reads++;
	}
	return (void *)reads;
}

static void threads_move_their_blocks_and_nothing_changes(void **state)
{
	(void)state;
	static struct worker w[THREADS];
	static struct pa_malloc_stats before, after;
	pa_thread_cache_flush();
	assert_int_equal(pa_malloc_stats(&before), 0);
	pthread_t t[THREADS], reader;
	assert_int_equal(pthread_create(&reader, NULL, read_figures, NULL), 0);
	for (int i = 0; i < THREADS; i++) {
		w[i].id = i;
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	__atomic_store_n(&readers_stop, 1, __ATOMIC_RELAXED);
	void *reads;
	assert_int_equal(pthread_join(reader, &reads), 0);
	size_t moved = 0;
	for (int i = 0; i < THREADS; i++) {
		TU_EQ(w[i].bad, 0);
		moved += w[i].moved;
		for (size_t j = 0; j < BLOCKS; j++)
			pa_free(w[i].p[j]);
	}
	TU_EQ(moved > 0, 1); /* the shape leaves partial spans: some blocks moved */
	TU_EQ(reads != NULL, 1);
	pa_thread_cache_flush();
	assert_int_equal(pa_malloc_stats(&after), 0);
	for (size_t c = 1; c < after.nclasses; c++)
		if (after.classes[c].size <= 320)
			TU_EQ(after.classes[c].objects, before.classes[c].objects);
}

static int setup(void **state)
{
	(void)state;
	return pa_config_set("prof", "off");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TU_TEST(threads_move_their_blocks_and_nothing_changes),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
