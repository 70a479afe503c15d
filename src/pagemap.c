/*
 * pagemap.c — the span map (pagemap.h).
 */
#include <errno.h>

#include "os.h"
#include "pagemap.h"

struct pa_span ***pagemap_root[PA_PAGEMAP_ROOT_LEN];
struct pa_span **pagemap_home_mid[PA_PAGEMAP_MID_LEN];
uintptr_t pagemap_home = PA_PAGEMAP_ROOT_LEN;
/* Mapped middle arrays (not the home range's, which is static) and leaves
 * (atomic). */
static size_t mids, leaves;

#define MID_BYTES (PA_PAGEMAP_MID_LEN * sizeof(struct pa_span **))
#define LEAF_BYTES (PA_PAGEMAP_LEAF_LEN * (sizeof(struct pa_span *) + 1))

/* The middle array of root index t, committed now if it was not: the
 * first range to get one is the home range (pagemap.h), whose array is
 * static; every thread that finds pagemap_home at t puts that one in the
 * root, so a root entry and pagemap_home never disagree. Racing threads
 * each map an array for another range and the loser unmaps its own. NULL
 * (ENOMEM) when mapping fails. */
static struct pa_span ***mid_get(uintptr_t t)
{
	struct pa_span ***mid = __atomic_load_n(&pagemap_root[t], __ATOMIC_ACQUIRE);
	if (mid != NULL)
		return mid;
	uintptr_t home = PA_PAGEMAP_ROOT_LEN;
	if (__atomic_compare_exchange_n(&pagemap_home, &home, t, 0, __ATOMIC_RELAXED,
	                                __ATOMIC_RELAXED) ||
	    home == t) {
		struct pa_span ***none = NULL;
		__atomic_compare_exchange_n(&pagemap_root[t], &none, pagemap_home_mid, 0,
		                            __ATOMIC_RELEASE, __ATOMIC_RELAXED);
		return pagemap_home_mid;
	}
	int made;
	mid = os_alloc_once((void **)&pagemap_root[t], MID_BYTES, &made);
	if (made)
		__atomic_fetch_add(&mids, 1, __ATOMIC_RELAXED);
	return mid;
}

/* The leaf of leaf index r (below PA_PAGEMAP_LEAVES), committed now with its
 * middle array if they were not: NULL (ENOMEM) when that fails. No lock:
 * the page heap's growth calls this with its lock held (pagemap_prepare),
 * and a fork takes the malloc layer's locks before the heap's. */
static struct pa_span **leaf_get(uintptr_t r)
{
	struct pa_span **leaf = pagemap_leaf(r);
	if (leaf != NULL)
		return leaf;
	struct pa_span ***mid = mid_get(r >> (PA_PAGEMAP_MID_SHIFT - PA_PAGEMAP_LEAF_SHIFT));
	if (mid == NULL)
		return NULL;
	int made;
	leaf = os_alloc_once((void **)&mid[r & (PA_PAGEMAP_MID_LEN - 1)], LEAF_BYTES, &made);
	if (made)
		__atomic_fetch_add(&leaves, 1, __ATOMIC_RELAXED);
	return leaf;
}

int pagemap_set_class(uintptr_t base, size_t npages, struct pa_span *s, unsigned cls)
{
	for (size_t i = 0; i < npages;) {
		uintptr_t a = base + i * PA_PAGE_SIZE;
		uintptr_t r = a >> PA_PAGEMAP_LEAF_SHIFT;
		if (r >= PA_PAGEMAP_LEAVES) {
			errno = ENOMEM;
			return s != NULL ? -1 : 0;
		}
		struct pa_span **leaf = s != NULL ? leaf_get(r) : pagemap_leaf(r);
		if (leaf == NULL)
			return s != NULL ? -1 : 0;
		size_t j = (a >> PA_PAGE_SHIFT) & (PA_PAGEMAP_LEAF_LEN - 1);
		uint8_t *classes = (uint8_t *)(leaf + PA_PAGEMAP_LEAF_LEN);
		for (; j < PA_PAGEMAP_LEAF_LEN && i < npages; j++, i++) {
			/* The page's index in the low bits (span records are
			 * 64-byte aligned: meta.h); fbump 0, as the record's
			 * is until span_set_fbump. */
			uintptr_t w = s != NULL ? (uintptr_t)s | i : 0;
			__atomic_store_n(&classes[j], (uint8_t)cls, __ATOMIC_RELAXED);
			__atomic_store_n(&pagemap_words(leaf)[j], w, __ATOMIC_RELAXED);
		}
	}
	return 0;
}

void pagemap_set_fbump(uintptr_t base, size_t npages, uint16_t fbump)
{
	for (size_t i = 0; i < npages;) {
		uintptr_t a = base + i * PA_PAGE_SIZE;
		uintptr_t *words = pagemap_words(pagemap_leaf(a >> PA_PAGEMAP_LEAF_SHIFT));
		for (size_t j = (a >> PA_PAGE_SHIFT) & (PA_PAGEMAP_LEAF_LEN - 1);
		     j < PA_PAGEMAP_LEAF_LEN && i < npages; j++, i++) {
			uintptr_t w = __atomic_load_n(&words[j], __ATOMIC_RELAXED);
			w = (w & (((uintptr_t)1 << PA_PAGEMAP_FBUMP_SHIFT) - 1)) |
			    (uintptr_t)fbump << PA_PAGEMAP_FBUMP_SHIFT;
			__atomic_store_n(&words[j], w, __ATOMIC_RELAXED);
		}
	}
}

int pagemap_prepare(uintptr_t base, size_t bytes)
{
	if (bytes == 0)
		return 0;
	uintptr_t last = (base + bytes - 1) >> PA_PAGEMAP_LEAF_SHIFT;
	for (uintptr_t r = base >> PA_PAGEMAP_LEAF_SHIFT; r <= last; r++)
		if (r >= PA_PAGEMAP_LEAVES || leaf_get(r) == NULL) {
			errno = ENOMEM;
			return -1;
		}
	return 0;
}

size_t pagemap_committed_bytes(void)
{
	size_t home = __atomic_load_n(&pagemap_home, __ATOMIC_RELAXED) != PA_PAGEMAP_ROOT_LEN;
	return (home + __atomic_load_n(&mids, __ATOMIC_RELAXED)) * MID_BYTES +
	       __atomic_load_n(&leaves, __ATOMIC_RELAXED) * LEAF_BYTES;
}
