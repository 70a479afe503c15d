/*
 * central.c — per-class central lists of spans (central.h).
 */
#include <errno.h>

#include "central.h"
#include "os.h"
#include "pagemap.h"
#include "pages.h"
#include "span.h"
#include "vg.h"

struct pa_central central[PA_SC_NUM_CLASSES];

static void list_push(struct pa_central *c, struct pa_span *s)
{
	s->next = c->partial;
	if (s->next != NULL)
		s->next->prevnext = &s->next;
	s->prevnext = &c->partial;
	c->partial = s;
}

static void list_remove(struct pa_span *s)
{
	*s->prevnext = s->next;
	if (s->next != NULL)
		s->next->prevnext = s->prevnext;
	s->next = NULL;
	s->prevnext = NULL;
}

/* A new empty span of class cls, listed; lock held. NULL when out of memory. */
static struct pa_span *grow_locked(struct pa_central *c, unsigned cls)
{
	struct pa_span *s = span_new();
	if (s == NULL)
		return NULL;
	uintptr_t base = pages_alloc(pa_sizeclasses[cls].pages, NULL);
	if (base == 0) {
		span_delete(s);
		return NULL;
	}
	if (vg_active())
		VALGRIND_MAKE_MEM_NOACCESS((void *)base, pa_sizeclasses[cls].pages * PA_PAGE_SIZE);
	if (span_init_small(s, cls, base) != 0) {
		pages_free(base, pa_sizeclasses[cls].pages);
		span_delete(s);
		errno = ENOMEM;
		return NULL;
	}
	c->spans++;
	list_push(c, s);
	return s;
}

unsigned central_take(unsigned cls, unsigned n, void **head)
{
	struct pa_central *c = &central[cls];
	void *list = NULL;
	unsigned got = 0;
	lock_acquire(&c->lock);
	while (got < n) {
		struct pa_span *s = c->partial;
		if (s == NULL && (s = grow_locked(c, cls)) == NULL)
			break;
		while (got < n && s->nfree > 0) {
			void **o;
			unsigned i;
			if (s->free != NULL) {
				o = s->free;
				vg_links_open(o);
				s->free = o[0];
				int exact;
				i = span_index(s, (uintptr_t)o, &exact);
			} else {
				i = s->bump;
				/* pa_free reads it without the lock */
				__atomic_store_n(&s->bump, (uint16_t)(i + 1), __ATOMIC_RELAXED);
				o = (void **)(span_base(s) + (uintptr_t)i * s->size);
				vg_links_open(o);
			}
			span_bit_set(s, i, 1);
			s->nfree--;
			o[0] = list;
			list = o;
			got++;
		}
		if (s->nfree == 0)
			list_remove(s);
	}
	c->out += got;
	lock_release(&c->lock);
	*head = list;
	return got;
}

/* Every object of s is back: give its pages to the heap; lock held. */
static void retire_locked(struct pa_central *c, struct pa_span *s)
{
	if (s->prevnext != NULL)
		list_remove(s);
	c->spans--;
	pagemap_set(span_base(s), s->npages, NULL);
	pages_free(span_base(s), s->npages);
	if (s->vg_sizes != NULL)
		os_unmap(s->vg_sizes, s->objects * sizeof(uint32_t));
	span_delete(s);
}

void central_give(unsigned cls, void *head, unsigned n)
{
	struct pa_central *c = &central[cls];
	lock_acquire(&c->lock);
	for (unsigned k = 0; k < n; k++) {
		void **o = head;
		head = o[0];
		struct pa_span *s = pagemap_lookup((uintptr_t)o);
		int exact;
		unsigned i = span_index(s, (uintptr_t)o, &exact);
		if (!span_bit(s, i)) {
			lock_release(&c->lock);
			span_report("free", o, PA_OBJ_DOUBLE_FREE);
		}
		span_bit_set(s, i, 0);
		o[0] = s->free;
		s->free = o;
		c->out--;
		if (++s->nfree == s->objects)
			retire_locked(c, s);
		else if (s->prevnext == NULL)
			list_push(c, s);
	}
	lock_release(&c->lock);
}

void central_lock_all(void)
{
	for (unsigned i = 1; i < PA_SC_NUM_CLASSES; i++)
		lock_acquire(&central[i].lock);
}

void central_unlock_all(void)
{
	for (unsigned i = PA_SC_NUM_CLASSES; i-- > 1;)
		lock_release(&central[i].lock);
}

void central_reset_locks(void)
{
	for (unsigned i = 1; i < PA_SC_NUM_CLASSES; i++)
		lock_init(&central[i].lock);
}
