/*
 * pagemap.h — which span owns an address, in O(1), for any pointer.
 *
 * Three levels over the 47 bits of user address space (x86-64's and
 * arm64's with 4-level paging; the kernel never places a mapping above 2^47
 * unless asked to, and the heap never asks): a root of 2^5 entries (one per
 * 4 TiB, a static array of 256 bytes), each pointing to a middle array of
 * 2^12 entries (one per GiB, 32 KiB), each pointing to a leaf of 2^17 span
 * pointers, one per 8 KiB page (1 MiB of address space). A leaf is
 * reserved and committed when the page heap grows into its GiB
 * (pagemap_prepare; else at the first span placed there), with its middle
 * array if that is new, without a lock: racing threads each map one and
 * the loser unmaps its own. Its pages materialise when first written, so a
 * leaf costs memory only where spans are (8 bytes per 8 KiB page: 1/1024
 * of the heap). Untouched entries read as zero: a pointer the heap never
 * owned maps to NULL, whatever it is. The geometry keeps what a small
 * process reserves small because reserved space counts against an
 * address-space limit (ulimit -v): root, middle array and leaf are
 * 1.16 MiB, where two levels (a root of one entry per GiB: 1 MiB of bss,
 * whatever the limit) took 2.1 MiB and cost ulimit -v 64M a block of 1 MiB
 * in 58, and 16 GiB leaves, 16 MiB each, took a quarter of a 64 MiB limit.
 *
 * The home range: the middle array of the 4 TiB where the heap's first leaf
 * lies is static (pagemap_home_mid) and pagemap_home names that range, so a
 * lookup there compares its root index with pagemap_home and loads no root
 * entry: from the address to the leaf is one load, as with two levels. A
 * process's mappings lie in one 4 TiB range (the kernel's mmap base is
 * randomised within 1 TiB below the stack), so the root is read only for
 * an address elsewhere, and other middle arrays are mapped only if the
 * heap goes there.
 *
 * Entries: every page of a small-object span maps to the span; a large
 * object maps only its first page (interior pages read NULL, see
 * span_find_owner for the slow search used to name a fault). After its
 * span pointers a leaf holds one byte per page, the class of the span's
 * objects (0: a large object, or none), written with the pointer: pa_free
 * pushes with it, so its push does not wait for the span record (a leaf
 * is then 1.125 MiB of address space; the bytes cost 1/8192 of the heap).
 * A span pointer's word also holds, in bits the pointer leaves free, what
 * the rest of pa_free's fast checks need, so that they read no span record
 * (its line was a second miss in a free of a block that left the cache):
 * the page's index in its span (bits 0-3; records are 16-byte aligned) and
 * the span's fbump (span.h; bits 48-63, above every user address), 0 for a
 * large object. pagemap_lookup masks them off.
 * A thread's cache holds the leaf its last pa_free used and its leaf index
 * (p >> 30, tcache.h), which takes the middle array's load off that path
 * (docs/design.md, *Page map*).
 *
 * Concurrency: entries are written by the thread that owns the span's pages
 * (creating or retiring the span) before any object of it is handed out or
 * after every object came back, and read with relaxed atomics: a pointer
 * passed between threads carries the happens-before that makes its entry
 * visible. Root and middle entries go from NULL to the committed (zeroed)
 * array they point to once, by compare-and-exchange (release), and are read
 * with acquire loads; pagemap_home likewise, before its root entry, read
 * relaxed (an old value sends a lookup to the root, which then reads NULL
 * or the home array).
 */
#ifndef PA_PAGEMAP_H
#define PA_PAGEMAP_H

#include <stddef.h>
#include <stdint.h>

#include "hidden.h"
#include "layout.h"
#include "sizeclass_table.h"

struct pa_span;

#define PA_PAGEMAP_ADDR_BITS 47u
#define PA_PAGEMAP_MID_SHIFT 42u  /* 4 TiB per middle array */
#define PA_PAGEMAP_LEAF_SHIFT 30u /* 1 GiB per leaf */
#define PA_PAGEMAP_ROOT_LEN ((size_t)1 << (PA_PAGEMAP_ADDR_BITS - PA_PAGEMAP_MID_SHIFT))
#define PA_PAGEMAP_MID_LEN ((size_t)1 << (PA_PAGEMAP_MID_SHIFT - PA_PAGEMAP_LEAF_SHIFT))
#define PA_PAGEMAP_LEAF_LEN ((size_t)1 << (PA_PAGEMAP_LEAF_SHIFT - PA_PAGE_SHIFT))
/* Leaf indexes (p >> PA_PAGEMAP_LEAF_SHIFT) below 2^47: one per GiB. */
#define PA_PAGEMAP_LEAVES (PA_PAGEMAP_ROOT_LEN * PA_PAGEMAP_MID_LEN)

/* Each entry: NULL, or a middle array of PA_PAGEMAP_MID_LEN leaf pointers. */
extern struct pa_span ***pagemap_root[PA_PAGEMAP_ROOT_LEN] PA_HIDDEN;
/* The middle array of the 4 TiB range of the heap's first leaf, static
 * (its address a constant: a lookup there loads no root entry), and that
 * range's root index: PA_PAGEMAP_ROOT_LEN (no range) until the first leaf,
 * then set once. */
extern struct pa_span **pagemap_home_mid[PA_PAGEMAP_MID_LEN] PA_HIDDEN;
extern uintptr_t pagemap_home PA_HIDDEN;

/* The leaf of leaf index r (an address's p >> PA_PAGEMAP_LEAF_SHIFT), or
 * NULL. An r past the map (an address above the 47-bit space) is masked to
 * it, without a bound check: the result is some leaf or NULL, so only for
 * callers that then check p against the span exactly (an address past 2^47
 * is at least 2^47 bytes from any span base, so it never passes an exact
 * object-start check: a large span's base, or off == i * size with
 * i < 2^32 and size <= 2^15, so off < 2^47). */
static inline struct pa_span **pagemap_leaf(uintptr_t r)
{
	uintptr_t t =
	    (r >> (PA_PAGEMAP_MID_SHIFT - PA_PAGEMAP_LEAF_SHIFT)) & (PA_PAGEMAP_ROOT_LEN - 1);
	struct pa_span ***mid = pagemap_home_mid;
	if (__builtin_expect(t != __atomic_load_n(&pagemap_home, __ATOMIC_RELAXED), 0)) {
		mid = __atomic_load_n(&pagemap_root[t], __ATOMIC_ACQUIRE);
		if (mid == NULL)
			return NULL;
	}
	return __atomic_load_n(&mid[r & (PA_PAGEMAP_MID_LEN - 1)], __ATOMIC_ACQUIRE);
}

/* A leaf entry's word: the span pointer, the page's index in the span in
 * its low bits, the span's fbump in its top 16 (see the top of this file).
 * The entries are written and read as words (uintptr_t) only; pa_free's
 * fast path reads the index's byte and fbump's half on their own, through
 * these types, which may alias the word. */
#define PA_PAGEMAP_PAGE_BITS 0xfu
#define PA_PAGEMAP_FBUMP_SHIFT 48u
#define PA_PAGEMAP_SPAN_MASK ((((uintptr_t)1 << PA_PAGEMAP_FBUMP_SHIFT) - 1) & ~(uintptr_t)0xf)
typedef uint8_t __attribute__((may_alias)) pa_pagemap_byte;
typedef uint16_t __attribute__((may_alias)) pa_pagemap_half;
_Static_assert(PA_SC_MAX_PAGES <= PA_PAGEMAP_PAGE_BITS + 1, "a page index fits its bits");
_Static_assert(PA_PAGEMAP_ADDR_BITS <= PA_PAGEMAP_FBUMP_SHIFT, "fbump is above every pointer");

static inline uintptr_t *pagemap_words(struct pa_span *const *leaf)
{
	return (uintptr_t *)(uintptr_t)leaf;
}

static inline struct pa_span *pagemap_word_span(uintptr_t w)
{
	return (struct pa_span *)(w & PA_PAGEMAP_SPAN_MASK);
}

/* The leaf of any leaf index r, or NULL, also for an r past the map (an
 * address with bits above the 47th set). */
static inline struct pa_span **pagemap_leaf_bounded(uintptr_t r)
{
	if (__builtin_expect(r >= PA_PAGEMAP_LEAVES, 0))
		return NULL;
	return pagemap_leaf(r);
}

/* The span owning the page of p, or NULL. Never faults, for any p. */
static inline struct pa_span *pagemap_lookup(uintptr_t p)
{
	struct pa_span **leaf = pagemap_leaf_bounded(p >> PA_PAGEMAP_LEAF_SHIFT);
	if (__builtin_expect(leaf == NULL, 0))
		return NULL;
	return pagemap_word_span(
	    __atomic_load_n(&pagemap_words(leaf)[(p >> PA_PAGE_SHIFT) & (PA_PAGEMAP_LEAF_LEN - 1)],
	                    __ATOMIC_RELAXED));
}

/* A leaf's class bytes: PA_PAGEMAP_LEAF_LEN of them after its pointers. */
static inline const uint8_t *pagemap_leaf_classes(struct pa_span *const *leaf)
{
	return (const uint8_t *)(leaf + PA_PAGEMAP_LEAF_LEN);
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
	return pagemap_word_span(__atomic_load_n(&pagemap_words(leaf)[i], __ATOMIC_RELAXED));
}

/* What pa_free's fast path reads of the entry of p's page in leaf, the leaf
 * of p, besides its class: the page's index in its span (0 where no span
 * is) and the span's fbump (0 for a large object, or where no span is). */
static inline unsigned pagemap_leaf_page(struct pa_span *const *leaf, uintptr_t p)
{
	const uintptr_t *w = &pagemap_words(leaf)[(p >> PA_PAGE_SHIFT) & (PA_PAGEMAP_LEAF_LEN - 1)];
	return __atomic_load_n((const pa_pagemap_byte *)w, __ATOMIC_RELAXED) & PA_PAGEMAP_PAGE_BITS;
}

static inline uint16_t pagemap_leaf_fbump(struct pa_span *const *leaf, uintptr_t p)
{
	size_t i = (p >> PA_PAGE_SHIFT) & (PA_PAGEMAP_LEAF_LEN - 1);
	const pa_pagemap_half *h = (const pa_pagemap_half *)(uintptr_t)leaf;
	return __atomic_load_n(&h[i * 4 + PA_PAGEMAP_FBUMP_SHIFT / 16], __ATOMIC_RELAXED);
}

/* fbump of the npages pages of the small span at base (mapped), in their
 * entries: span_set_fbump's, with the record's. */
void pagemap_set_fbump(uintptr_t base, size_t npages, uint16_t fbump);

/* Map npages pages at base (page-aligned) to s, whose objects are of class
 * cls (NULL: unmap, cls 0). Committing a new leaf may fail, as does a page
 * above the map's 47 bits: -1 (ENOMEM), else 0. Unmapping never fails. */
int pagemap_set_class(uintptr_t base, size_t npages, struct pa_span *s, unsigned cls);

/* Commit the leaves that cover [base, base + bytes) ahead of any span there,
 * and their middle arrays (the page heap's growth hook, pages.h): 0, or -1
 * (ENOMEM). */
int pagemap_prepare(uintptr_t base, size_t bytes);

/* pagemap_set_class for a large object's page (class 0), or to unmap. */
static inline int pagemap_set(uintptr_t base, size_t npages, struct pa_span *s)
{
	return pagemap_set_class(base, npages, s, 0);
}

/* Bytes of committed middle arrays and leaves (address space; touched
 * pages are fewer). */
size_t pagemap_committed_bytes(void);

#endif
