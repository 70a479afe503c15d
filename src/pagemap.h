/*
 * pagemap.h — which span owns an address, in O(1), for any pointer.
 *
 * Two levels over the 47 bits of user address space (x86-64's and
 * arm64's with 4-level paging; the kernel never places a mapping above 2^47
 * unless asked to, and the heap never asks): the root has one entry per GiB
 * (2^17 of them, a static array of 1 MiB), each pointing to a leaf of 2^17
 * span pointers, one per 8 KiB page (1 MiB of address space). A leaf is
 * reserved and committed when the heap first places a span in its GiB; its
 * pages materialise when first written, so a leaf costs memory only where
 * spans are (8 bytes per 8 KiB page: 1/1024 of the heap). Untouched entries
 * read as zero: a pointer the heap never owned maps to NULL, whatever it is.
 * The geometry keeps what a small process reserves small (root plus one
 * leaf, 2 MiB, the least two levels allow) because reserved space counts
 * against an address-space limit (ulimit -v): 16 GiB leaves, 16 MiB each,
 * took a quarter of a 64 MiB limit.
 *
 * Entries: every page of a small-object span maps to the span; a large
 * object maps only its first page (interior pages read NULL, see
 * span_find_owner for the slow search used to name a fault).
 *
 * Concurrency: entries are written by the thread that owns the span's pages
 * (creating or retiring the span) before any object of it is handed out or
 * after every object came back, and read with relaxed atomics: a pointer
 * passed between threads carries the happens-before that makes its entry
 * visible.
 */
#ifndef PA_PAGEMAP_H
#define PA_PAGEMAP_H

#include <stddef.h>
#include <stdint.h>

#include "hidden.h"
#include "layout.h"
#include "lock.h"

struct pa_span;

#define PA_PAGEMAP_ADDR_BITS 47u
#define PA_PAGEMAP_LEAF_SHIFT 30u /* 1 GiB per leaf */
#define PA_PAGEMAP_ROOT_LEN ((size_t)1 << (PA_PAGEMAP_ADDR_BITS - PA_PAGEMAP_LEAF_SHIFT))
#define PA_PAGEMAP_LEAF_LEN ((size_t)1 << (PA_PAGEMAP_LEAF_SHIFT - PA_PAGE_SHIFT))

extern struct pa_span **pagemap_root[PA_PAGEMAP_ROOT_LEN] PA_HIDDEN;
/* Serialises committing leaves (and is taken around fork). */
extern pa_lock pagemap_leaf_lock PA_HIDDEN;

/* The span owning the page of p, or NULL. Never faults, for any p. */
static inline struct pa_span *pagemap_lookup(uintptr_t p)
{
	uintptr_t r = p >> PA_PAGEMAP_LEAF_SHIFT;
	if (__builtin_expect(r >= PA_PAGEMAP_ROOT_LEN, 0))
		return NULL;
	struct pa_span **leaf = __atomic_load_n(&pagemap_root[r], __ATOMIC_ACQUIRE);
	if (__builtin_expect(leaf == NULL, 0))
		return NULL;
	return __atomic_load_n(&leaf[(p >> PA_PAGE_SHIFT) & (PA_PAGEMAP_LEAF_LEN - 1)],
	                       __ATOMIC_RELAXED);
}

/* pagemap_lookup for pointers above the 47-bit space too, without a bound
 * check: their top bits are masked off, so the result is some span or NULL.
 * Only for callers that then check p against the span exactly (an address
 * past 2^47 is at least 2^47 bytes from any span base, so it never passes
 * an exact object-start check: a large span's base, or off == i * size with
 * i < 2^32 and size <= 2^15, so off < 2^47). */
static inline struct pa_span *pagemap_lookup_unchecked(uintptr_t p)
{
	struct pa_span **leaf =
	    __atomic_load_n(&pagemap_root[(p >> PA_PAGEMAP_LEAF_SHIFT) & (PA_PAGEMAP_ROOT_LEN - 1)],
	                    __ATOMIC_ACQUIRE);
	if (__builtin_expect(leaf == NULL, 0))
		return NULL;
	return __atomic_load_n(&leaf[(p >> PA_PAGE_SHIFT) & (PA_PAGEMAP_LEAF_LEN - 1)],
	                       __ATOMIC_RELAXED);
}

/* Map npages pages at base (page-aligned) to s (NULL: unmap). Committing a
 * new leaf may fail, as does a page above the map's 47 bits: -1 (ENOMEM),
 * else 0. Unmapping never fails. */
int pagemap_set(uintptr_t base, size_t npages, struct pa_span *s);

/* Bytes of committed leaves (address space; touched pages are fewer). */
size_t pagemap_committed_bytes(void);

#endif
