/*
 * bench_pagecache_shim.c — C set-up helpers for bench_pagecache.cc (see
 * bench_pagecache_shim.h). Linked into the bench executables; not a
 * benchmark itself.
 */
#include "bench_pagecache_shim.h"

#include <stdlib.h>
#include <sys/rseq.h>

#include "pagecache.h"
#include "pageheap.h"

_Static_assert((int)BPC_OFF == (int)PA_CACHE_OFF && (int)BPC_LOCKED == (int)PA_CACHE_LOCKED &&
                   (int)BPC_RSEQ == (int)PA_CACHE_RSEQ,
               "shim mode numbers match enum pa_cache_mode");
_Static_assert(sizeof(enum pa_page_fault) == sizeof(int) && PA_PAGE_OK == 0,
               "pagecache_free's result is returned as an int");

struct pa_pageheap *bpc_heap_create(void)
{
	struct pa_pageheap *h = calloc(1, sizeof(*h));
	if (h != NULL && pageheap_init(h, NULL) != 0) {
		free(h);
		h = NULL;
	}
	return h;
}

uintptr_t bpc_heap_alloc(struct pa_pageheap *h, size_t npages)
{
	return pageheap_alloc(h, npages, NULL);
}

void bpc_heap_destroy(struct pa_pageheap *h)
{
	if (h != NULL) {
		pageheap_destroy(h);
		free(h);
	}
}

struct pa_pagecache_set *bpc_set_create(struct pa_pageheap *h, int want)
{
	struct pa_pagecache_set *pc = calloc(1, sizeof(*pc));
	if (pc != NULL && pagecache_init(pc, h, (enum pa_cache_mode)want) != 0) {
		free(pc);
		pc = NULL;
	}
	return pc;
}

void bpc_set_destroy(struct pa_pagecache_set *pc)
{
	if (pc != NULL) {
		pagecache_destroy(pc);
		free(pc);
	}
}

int bpc_set_mode(const struct pa_pagecache_set *pc)
{
	return (int)pc->mode;
}
unsigned bpc_set_ncpus(const struct pa_pagecache_set *pc)
{
	return pc->ncpus;
}
void bpc_set_flush(struct pa_pagecache_set *pc)
{
	pagecache_flush_all(pc);
}

void bpc_set_counts(const struct pa_pagecache_set *pc, uint64_t *refills, uint64_t *drains)
{
	struct pa_pagecache_stats s;
	pagecache_stats(pc, &s);
	*refills = s.refills;
	*drains = s.drains;
}

const char *bpc_mode_name(int mode)
{
	switch (mode) {
	case PA_CACHE_OFF:
		return "off";
	case PA_CACHE_LOCKED:
		return "locked";
	case PA_CACHE_RSEQ:
		return "rseq";
	}
	return "?";
}

unsigned bpc_rseq_size(void)
{
	return __rseq_size;
}
long bpc_rseq_offset(void)
{
	return (long)__rseq_offset;
}
size_t bpc_heap_verify(struct pa_pageheap *h)
{
	return pageheap_verify(h);
}
