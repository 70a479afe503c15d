/*
 * wl_queue.h — a blocking multi-producer queue of pointer batches, for the
 * workloads that free in another thread than the one that allocated
 * (wl_larson.c, wl_prodcons.c).
 *
 * Objects travel in batches of WL_BATCH pointers so the queue's mutex is
 * taken once per batch, not per object: the allocator's remote-free path is
 * what is measured, not the queue. Batches are kept in a ring of `cap`
 * slots; a full queue blocks the producer (bounded memory), an empty one
 * the consumer. The ring itself is allocated once, at init.
 */
#ifndef WL_QUEUE_H
#define WL_QUEUE_H

#include "wl_common.h"

#define WL_BATCH 64

struct wl_batch {
	size_t n;
	void *p[WL_BATCH];
};

struct wl_queue {
	pthread_mutex_t mu;
	pthread_cond_t not_empty, not_full;
	struct wl_batch *ring; /* cap slots; protected by mu, as are head, len, closed */
	size_t cap, head, len;
	int closed; /* no more pushes: an empty queue ends the consumer */
};

static inline void wl_queue_init(struct wl_queue *q, size_t cap)
{
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->not_empty, NULL);
	pthread_cond_init(&q->not_full, NULL);
	q->ring = (struct wl_batch *)wl_xmalloc(cap * sizeof(*q->ring));
	q->cap = cap;
	q->head = q->len = 0;
	q->closed = 0;
}

static inline void wl_queue_destroy(struct wl_queue *q)
{
	free(q->ring);
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->not_empty);
	pthread_cond_destroy(&q->not_full);
}

/* Blocks while full. */
static inline void wl_queue_push(struct wl_queue *q, const struct wl_batch *b)
{
	pthread_mutex_lock(&q->mu);
	while (q->len == q->cap)
		pthread_cond_wait(&q->not_full, &q->mu);
	q->ring[(q->head + q->len++) % q->cap] = *b;
	pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->mu);
}

/* Adds b without blocking; 0 if the queue is full. */
static inline int wl_queue_try_push(struct wl_queue *q, const struct wl_batch *b)
{
	int put = 0;
	pthread_mutex_lock(&q->mu);
	if (q->len < q->cap) {
		q->ring[(q->head + q->len++) % q->cap] = *b;
		pthread_cond_signal(&q->not_empty);
		put = 1;
	}
	pthread_mutex_unlock(&q->mu);
	return put;
}

/* Takes one batch without blocking; 0 if the queue is empty. */
static inline int wl_queue_try_pop(struct wl_queue *q, struct wl_batch *b)
{
	int got = 0;
	pthread_mutex_lock(&q->mu);
	if (q->len > 0) {
		*b = q->ring[q->head];
		q->head = (q->head + 1) % q->cap;
		q->len--;
		got = 1;
		pthread_cond_signal(&q->not_full);
	}
	pthread_mutex_unlock(&q->mu);
	return got;
}

/* Blocks while empty and open; 0 once closed and drained. */
static inline int wl_queue_pop(struct wl_queue *q, struct wl_batch *b)
{
	pthread_mutex_lock(&q->mu);
	while (q->len == 0 && !q->closed)
		pthread_cond_wait(&q->not_empty, &q->mu);
	int got = q->len > 0;
	if (got) {
		*b = q->ring[q->head];
		q->head = (q->head + 1) % q->cap;
		q->len--;
		pthread_cond_signal(&q->not_full);
	}
	pthread_mutex_unlock(&q->mu);
	return got;
}

static inline void wl_queue_close(struct wl_queue *q)
{
	pthread_mutex_lock(&q->mu);
	q->closed = 1;
	pthread_cond_broadcast(&q->not_empty);
	pthread_mutex_unlock(&q->mu);
}

#endif /* WL_QUEUE_H */
