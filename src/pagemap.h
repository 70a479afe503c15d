/*
 * pagemap.h — which span owns an address, in O(1), for any pointer.
 *
 * Two levels over the 47 bits of user address space (x86-64's and
 * arm64's with 4-level paging; the kernel never places a mapping above 2^47
 * unless asked to, and the heap never asks): the root has one entry per GiB
 * (2^17 of them, a static array of 1 MiB), each pointing to a leaf of 2^17
 * span pointers, one per 8 KiB page (1 MiB of address space). A leaf is
 * reserved and committed when the page heap grows into its GiB
 * (pagemap_prepare; else at the first span placed there), without a lock:
 * racing threads each map one and the loser unmaps its own. Its
 * pages materialise when first written, so a leaf costs memory only where
 * spans are (8 bytes per 8 KiB page: 1/1024 of the heap). Untouched entries
 * read as zero: a pointer the heap never owned maps to NULL, whatever it is.
 * The geometry keeps what a small process reserves small (root plus one
 * leaf, 2.1 MiB, the least two levels allow) because reserved space counts
 * against an address-space limit (ulimit -v): 16 GiB leaves, 16 MiB each,
 * took a quarter of a 64 MiB limit.
 *
 * Entries: every page of a small-object span maps to the span; a large
 * object maps only its first page (interior pages read NULL, see
 * span_find_owner for the slow search used to name a fault). After its
 * span pointers a leaf holds one byte per page, the class of the span's
 * objects (0: a large object, or none), written with the pointer: pa_free
 * pushes with it, so its push does not wait for the span record (a leaf
 * is then 1.125 MiB of address space; the bytes cost 1/8192 of the heap).
 * A thread's cache holds the leaf its last pa_free used (tcache.h), which
 * takes the root's load off that path too (docs/design.md, *Page map*).
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

struct pa_span;

#define PA_PAGEMAP_ADDR_BITS 47u
#define PA_PAGEMAP_LEAF_SHIFT 30u /* 1 GiB per leaf */
#define PA_PAGEMAP_ROOT_LEN ((size_t)1 << (PA_PAGEMAP_ADDR_BITS - PA_PAGEMAP_LEAF_SHIFT))
#define PA_PAGEMAP_LEAF_LEN ((size_t)1 << (PA_PAGEMAP_LEAF_SHIFT - PA_PAGE_SHIFT))

extern struct pa_span **pagemap_root[PA_PAGEMAP_ROOT_LEN] PA_HIDDEN;

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

/* A leaf's class bytes: PA_PAGEMAP_LEAF_LEN of them after its pointers. */
static inline const uint8_t *pagemap_leaf_classes(struct pa_span *const *leaf)
{
	return (const uint8_t *)(leaf + PA_PAGEMAP_LEAF_LEN);
}

/* The leaf of root index r, or NULL. An r past the root (an address above
 * the 47-bit space) is masked to it, without a bound check: the result is
 * some leaf or NULL, so only for callers that then check p against the span
 * exactly (an address past 2^47 is at least 2^47 bytes from any span base,
 * so it never passes an exact object-start check: a large span's base, or
 * off == i * size with i < 2^32 and size <= 2^15, so off < 2^47). */
static inline struct pa_span **pagemap_leaf(uintptr_t r)
{
	return __atomic_load_n(&pagemap_root[r & (PA_PAGEMAP_ROOT_LEN - 1)], __ATOMIC_ACQUIRE);
}

/* The span owning the page of p, or NULL, in leaf, the leaf of p; *cls: the
 * class of the span's objects, 0 for a large object or none. pa_free pushes
 * with this class, not the record's: the push then waits for one load that
 * depends on p, not for the record behind the span pointer. */
static inline struct pa_span *pagemap_leaf_lookup(struct pa_span *const *leaf, uintptr_t p,
                                                  size_t *cls)
{
	size_t i = (p >> PA_PAGE_SHIFT) & (PA_PAGEMAP_LEAF_LEN - 1);
	*cls = __atomic_load_n(&pagemap_leaf_classes(leaf)[i], __ATOMIC_RELAXED);
	return __atomic_load_n(&leaf[i], __ATOMIC_RELAXED);
}

/* Map npages pages at base (page-aligned) to s, whose objects are of class
 * cls (NULL: unmap, cls 0). Committing a new leaf may fail, as does a page
 * above the map's 47 bits: -1 (ENOMEM), else 0. Unmapping never fails. */
int pagemap_set_class(uintptr_t base, size_t npages, struct pa_span *s, unsigned cls);

/* Commit the leaves that cover [base, base + bytes) ahead of any span there
 * (the page heap's growth hook, pages.h): 0, or -1 (ENOMEM). */
int pagemap_prepare(uintptr_t base, size_t bytes);

/* pagemap_set_class for a large object's page (class 0), or to unmap. */
static inline int pagemap_set(uintptr_t base, size_t npages, struct pa_span *s)
{
	return pagemap_set_class(base, npages, s, 0);
}

/* Bytes of committed leaves (address space; touched pages are fewer). */
size_t pagemap_committed_bytes(void);

#endif
