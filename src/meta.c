/*
 * meta.c — fixed-size record pools (meta.h).
 */
#include <errno.h>
#include <string.h>

#include "meta.h"
#include "os.h"

/* A block's header, in its first PA_META_HEADER bytes. */
struct pa_meta_block {
	struct pa_meta_block *next, **prevnext; /* the pool's avail list (NULL: full) */
	void *free;                             /* returned records, linked by first word */
	uint32_t bump;                          /* records at index >= bump never used */
	uint32_t nlive;                         /* records handed out */
	uint32_t released;                      /* 1: pages after the header's released */
};

_Static_assert(sizeof(struct pa_meta_block) <= PA_META_HEADER, "the header fits");

static struct pa_meta_block *block_of(const void *rec)
{
	return (struct pa_meta_block *)((uintptr_t)rec & ~(uintptr_t)(PA_META_BLOCK - 1));
}

/* Bytes a released block gives back: all but the header's OS page. */
static size_t released_bytes(void)
{
	return PA_META_BLOCK - os_page_size();
}

/* List b among the blocks with room, lowest address first. */
static void avail_insert(struct pa_meta_pool *p, struct pa_meta_block *b)
{
	struct pa_meta_block **at = &p->avail;
	while (*at != NULL && *at < b)
		at = &(*at)->next;
	b->next = *at;
	if (b->next != NULL)
		b->next->prevnext = &b->next;
	b->prevnext = at;
	*at = b;
}

static void avail_remove(struct pa_meta_block *b)
{
	*b->prevnext = b->next;
	if (b->next != NULL)
		b->next->prevnext = b->prevnext;
	b->next = NULL;
	b->prevnext = NULL;
}

/* A new, empty block, listed; lock held. NULL when the OS refuses. */
static struct pa_meta_block *block_new(struct pa_meta_pool *p)
{
	void *m = os_reserve(PA_META_BLOCK, PA_META_BLOCK, 0);
	if (m == NULL)
		return NULL;
	if (os_commit(m, PA_META_BLOCK) != 0) {
		os_unmap(m, PA_META_BLOCK);
		return NULL;
	}
	struct pa_meta_block *b = m;
	p->mapped += PA_META_BLOCK;
	p->empty++;
	avail_insert(p, b);
	return b;
}

void *meta_alloc(struct pa_meta_pool *p)
{
	lock_acquire(&p->lock);
	struct pa_meta_block *b = p->avail;
	if (b == NULL && (b = block_new(p)) == NULL) {
		lock_release(&p->lock);
		errno = ENOMEM;
		return NULL;
	}
	if (b->nlive == 0) {
		if (b->released) {
			b->released = 0;
			p->released -= released_bytes();
		} else {
			p->empty--;
		}
	}
	void *rec = b->free;
	if (rec != NULL)
		b->free = *(void **)rec;
	else
		rec = (char *)b + PA_META_HEADER + (size_t)b->bump++ * p->size;
	b->nlive++;
	p->live++;
	if (b->free == NULL && b->bump == meta_per_block(p->size))
		avail_remove(b);
	lock_release(&p->lock);
	memset(rec, 0, p->size);
	return rec;
}

void meta_free(struct pa_meta_pool *p, void *rec)
{
	struct pa_meta_block *b = block_of(rec);
	lock_acquire(&p->lock);
	*(void **)rec = b->free;
	b->free = rec;
	p->live--;
	if (b->prevnext == NULL)
		avail_insert(p, b);
	if (--b->nlive == 0) {
		if (p->empty == 0) {
			p->empty = 1; /* kept resident for the next burst */
		} else if (os_release((char *)b + os_page_size(), released_bytes(), 0) == 0) {
			/* Starts over: its records are taken in order again. */
			b->free = NULL;
			b->bump = 0;
			b->released = 1;
			p->released += released_bytes();
		} else {
			p->empty++; /* the kernel refused: it stays resident */
		}
	}
	lock_release(&p->lock);
}
