/*
 * span.c — span descriptors, their setup, and the message for a bad pointer.
 */
#include <errno.h>
#include <string.h>

#include "lock.h"
#include "meta.h"
#include "msg.h"
#include "os.h"
#include "pagemap.h"
#include "span.h"
#include "vg.h"

uintptr_t span_key_secret;

/* Short records (span_new), and long ones (the smallest classes; every span
 * under valgrind). */
static struct pa_meta_pool span_pool = PA_META_POOL_INIT_AHEAD(PA_SPAN_SHORT);
static struct pa_meta_pool span_pool_long = PA_META_POOL_INIT_AHEAD(PA_SPAN_LONG);

/* Whether a span of class cls takes a long record. */
static inline int span_long(unsigned cls)
{
	return span_alloc_words(cls) > 2u || vg_active();
}

size_t span_record_bytes(unsigned cls)
{
	return span_long(cls) ? PA_SPAN_LONG : PA_SPAN_SHORT;
}

/* Zero a short record (64-byte aligned) with four 16-byte stores: gcc's
 * memset is `rep stosq`, whose start-up cost was 2.6% of wl-large's CPU
 * (every large object makes a span). */
static inline void zero_short(struct pa_span *s)
{
	typedef long long v2di __attribute__((vector_size(16), may_alias));
	const v2di z = {0, 0};
	v2di *w = (v2di *)(void *)s;
	w[0] = z;
	w[1] = z;
	w[2] = z;
	w[3] = z;
}

/* A zeroed record: for a short one a spare of sp if it is not NULL, else
 * the pool's (half of PA_SPAN_SPARES at a time). */
struct pa_span *span_new(unsigned cls, struct pa_span_spares *sp)
{
	struct pa_span *s;
	if (span_long(cls)) {
		s = meta_alloc(&span_pool_long);
	} else if (sp == NULL) {
		s = meta_alloc(&span_pool);
	} else {
		if (sp->n == 0) {
			sp->n = meta_alloc_n(&span_pool, (void **)sp->rec, PA_SPAN_SPARES / 2);
			if (sp->n == 0) {
				errno = ENOMEM;
				return NULL;
			}
		}
		s = sp->rec[--sp->n];
		zero_short(s);
	}
	if (s != NULL)
		s->cls = (uint8_t)cls;
	return s;
}

/* A short record into sp, if it is not NULL; when sp is full, its older
 * half goes back to the pool first. */
void span_delete(struct pa_span *s, struct pa_span_spares *sp)
{
	if (span_long(s->cls)) {
		meta_free(&span_pool_long, s);
		return;
	}
	if (sp == NULL) {
		meta_free(&span_pool, s);
		return;
	}
	if (sp->n == PA_SPAN_SPARES) {
		const unsigned half = PA_SPAN_SPARES / 2;
		meta_free_n(&span_pool, (void *const *)sp->rec, half);
		for (unsigned k = half; k < PA_SPAN_SPARES; k++)
			sp->rec[k - half] = sp->rec[k];
		sp->n -= half;
	}
	sp->rec[sp->n++] = s;
}

void span_delete_n(struct pa_span *const *recs, unsigned n)
{
	void *shorts[PA_SPAN_DELETE_MAX], *longs[PA_SPAN_DELETE_MAX];
	unsigned ns = 0, nl = 0;
	for (unsigned k = 0; k < n && k < PA_SPAN_DELETE_MAX; k++) {
		if (span_long(recs[k]->cls))
			longs[nl++] = recs[k];
		else
			shorts[ns++] = recs[k];
	}
	if (ns != 0)
		meta_free_n(&span_pool, shorts, ns);
	if (nl != 0)
		meta_free_n(&span_pool_long, longs, nl);
}

void span_spares_free(struct pa_span_spares *sp)
{
	meta_free_n(&span_pool, (void *const *)sp->rec, sp->n);
	sp->n = 0;
}

int span_init_small(struct pa_span *s, unsigned cls, uintptr_t base)
{
	const struct pa_sizeclass *c = &pa_sizeclasses[cls];
	span_set_base(s, base);
	s->npages = c->pages;
	s->magic = c->div_magic;
	s->cls = (uint8_t)cls;
	s->nfree = c->objects;
	s->bump = 0;
	s->fbump = 0;
	s->scan = 0;
	__atomic_store_n(&s->dirty, 0, __ATOMIC_RELAXED);
	s->relmap = 0;
	s->gave_epoch = 0;
	s->next = NULL;
	s->prevnext = NULL;
	memset(s->alloc, 0, span_alloc_words(cls) * sizeof(s->alloc[0]));
	if (cls == 0)
		s->alloc[1] = 0; /* span_sample: none */
	return pagemap_set_class(base, s->npages, s, cls);
}

size_t span_meta_trim(int force)
{
	return meta_trim(&span_pool, force) + meta_trim(&span_pool_long, force);
}

void span_meta_stats(size_t *mapped, size_t *released, size_t *live)
{
	*mapped = *released = *live = 0;
	struct pa_meta_pool *pools[] = {&span_pool, &span_pool_long};
	for (unsigned k = 0; k < 2; k++) {
		lock_acquire(&pools[k]->lock);
		*mapped += pools[k]->mapped;
		*released += pools[k]->released;
		*live += pools[k]->live;
		lock_release(&pools[k]->lock);
	}
}

void span_fork(enum pa_fork_phase phase)
{
	switch (phase) {
	case PA_FORK_PREPARE:
		lock_acquire(&span_pool.lock);
		lock_acquire(&span_pool_long.lock);
		break;
	case PA_FORK_PARENT:
		lock_release(&span_pool_long.lock);
		lock_release(&span_pool.lock);
		break;
	case PA_FORK_CHILD:
		lock_init(&span_pool_long.lock);
		lock_init(&span_pool.lock);
		break;
	}
}

static const char *fault_text(enum pa_obj_fault f)
{
	switch (f) {
	case PA_OBJ_FOREIGN:
		return "not a live block of this heap (foreign pointer, or freed already)";
	case PA_OBJ_INTERIOR:
		return "points inside a block, not at its start (interior pointer)";
	case PA_OBJ_DOUBLE_FREE:
		return "block is already free (double free)";
	case PA_OBJ_BAD_SIZE:
		return "size is larger than the block (wrong size)";
	case PA_OBJ_BAD_ALIGN:
		return "block does not have that alignment (wrong alignment)";
	case PA_OBJ_WRITTEN:
		return "write after free";
	}
	return "bad pointer";
}

/* Is p inside a large object whose first page lies below it? The page map
 * maps only a large object's first page: look down page by page (a slow
 * search, run only to name a fault). */
static int inside_large(uintptr_t p)
{
	uintptr_t page = p & ~(PA_PAGE_SIZE - 1);
	for (size_t k = 1; k <= PA_PAGEMAP_LEAF_LEN && page >= k * PA_PAGE_SIZE; k++) {
		struct pa_span *s = pagemap_lookup(page - k * PA_PAGE_SIZE);
		if (s != NULL)
			return s->cls == 0 && p < span_base(s) + s->npages * PA_PAGE_SIZE;
	}
	return 0;
}

_Noreturn void span_report(const char *func, const void *p, enum pa_obj_fault f)
{
	if (f == PA_OBJ_FOREIGN && p != NULL && inside_large((uintptr_t)p))
		f = PA_OBJ_INTERIOR;
	/* realloc or malloc_usable_size of a freed block: not a second free. */
	int frees = strstr(func, "free") != NULL || strstr(func, "Free") != NULL ||
	            strncmp(func, "operator delete", 15) == 0;
	const char *text = f == PA_OBJ_DOUBLE_FREE && !frees
	                       ? "block is already free (use after free)"
	                       : fault_text(f);
	struct pa_msg m;
	msg_begin(&m);
	msg_str(&m, func);
	msg_str(&m, "(");
	msg_hex(&m, (uintptr_t)p);
	msg_str(&m, "): ");
	msg_str(&m, text);
	msg_end(&m);
	os_abort();
}
