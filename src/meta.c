/*
 * meta.c — fixed-size record pools (meta.h).
 */
#include <errno.h>
#include <string.h>

#include "meta.h"
#include "os.h"

void *meta_alloc(struct pa_meta_pool *p)
{
	lock_acquire(&p->lock);
	void *rec = p->free;
	if (rec != NULL) {
		p->free = *(void **)rec;
	} else {
		if ((size_t)(p->end - p->next) < p->size) {
			char *block = os_alloc(PA_META_BLOCK);
			if (block == NULL) {
				lock_release(&p->lock);
				errno = ENOMEM;
				return NULL;
			}
			p->next = block;
			p->end = block + PA_META_BLOCK;
			p->mapped += PA_META_BLOCK;
		}
		rec = p->next;
		p->next += p->size;
	}
	p->live++;
	lock_release(&p->lock);
	memset(rec, 0, p->size);
	return rec;
}

void meta_free(struct pa_meta_pool *p, void *rec)
{
	lock_acquire(&p->lock);
	*(void **)rec = p->free;
	p->free = rec;
	p->live--;
	lock_release(&p->lock);
}
