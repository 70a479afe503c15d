/*
 * pagemap.c — the span map (pagemap.h).
 */
#include <errno.h>

#include "os.h"
#include "pagemap.h"

struct pa_span **pagemap_root[PA_PAGEMAP_ROOT_LEN];
static size_t leaves; /* committed (atomic) */

#define LEAF_BYTES (PA_PAGEMAP_LEAF_LEN * (sizeof(struct pa_span *) + 1))

/* The leaf of root index r, committed now if it was not. No lock: the page
 * heap's growth calls this with its lock held (pagemap_prepare), and a fork
 * takes the malloc layer's locks before the heap's. Two threads that race
 * for one leaf each map one; the loser of the exchange unmaps its own. */
static struct pa_span **leaf_get(uintptr_t r)
{
	struct pa_span **leaf = __atomic_load_n(&pagemap_root[r], __ATOMIC_ACQUIRE);
	if (leaf != NULL)
		return leaf;
	void *m = os_reserve(LEAF_BYTES, os_page_size());
	if (m != NULL && os_commit(m, LEAF_BYTES) != 0) {
		os_unmap(m, LEAF_BYTES);
		m = NULL;
	}
	if (m == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	if (!__atomic_compare_exchange_n(&pagemap_root[r], &leaf, (struct pa_span **)m, 0,
	                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		os_unmap(m, LEAF_BYTES); /* another thread's leaf is in place: leaf */
		return leaf;
	}
	__atomic_fetch_add(&leaves, 1, __ATOMIC_RELAXED);
	return (struct pa_span **)m;
}

int pagemap_set_class(uintptr_t base, size_t npages, struct pa_span *s, unsigned cls)
{
	for (size_t i = 0; i < npages;) {
		uintptr_t a = base + i * PA_PAGE_SIZE;
		uintptr_t r = a >> PA_PAGEMAP_LEAF_SHIFT;
		if (r >= PA_PAGEMAP_ROOT_LEN) {
			errno = ENOMEM;
			return s != NULL ? -1 : 0;
		}
		struct pa_span **leaf = s != NULL ? leaf_get(r) : pagemap_root[r];
		if (leaf == NULL)
			return s != NULL ? -1 : 0;
		size_t j = (a >> PA_PAGE_SHIFT) & (PA_PAGEMAP_LEAF_LEN - 1);
		uint8_t *classes = (uint8_t *)(leaf + PA_PAGEMAP_LEAF_LEN);
		for (; j < PA_PAGEMAP_LEAF_LEN && i < npages; j++, i++) {
			__atomic_store_n(&classes[j], (uint8_t)cls, __ATOMIC_RELAXED);
			__atomic_store_n(&leaf[j], s, __ATOMIC_RELAXED);
		}
	}
	return 0;
}

int pagemap_prepare(uintptr_t base, size_t bytes)
{
	if (bytes == 0)
		return 0;
	uintptr_t last = (base + bytes - 1) >> PA_PAGEMAP_LEAF_SHIFT;
	for (uintptr_t r = base >> PA_PAGEMAP_LEAF_SHIFT; r <= last; r++)
		if (r >= PA_PAGEMAP_ROOT_LEN || leaf_get(r) == NULL) {
			errno = ENOMEM;
			return -1;
		}
	return 0;
}

size_t pagemap_committed_bytes(void)
{
	return __atomic_load_n(&leaves, __ATOMIC_RELAXED) * LEAF_BYTES;
}
