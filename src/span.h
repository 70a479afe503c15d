/*
 * span.h — spans: runs of heap pages that hold objects of one size class,
 * or one large object.
 *
 * A small-object span of class c is pa_sizeclasses[c].pages pages holding
 * `objects` objects of `size` bytes at base + i * size (the tail waste after
 * the last object belongs to no object). Its descriptor lives outside the
 * heap (meta.h) and is found from any address of its pages by the page map.
 *
 * Each object is in exactly one of three places:
 *   - in the span (free there, or never handed out: index >= bump); its bit
 *     in `alloc` is 0;
 *   - in a thread cache (tcache.h), or
 *   - in the program's hands; in these two its `alloc` bit is 1.
 * So nfree = objects - popcount(alloc), and a free of an object whose bit
 * is 0 is a double free (or a pointer that was never handed out), caught
 * wherever the bit is read: on every pa_free, and again when an object
 * returns to its span.
 *
 * The bitmap is the span's only free list: the central list hands out the
 * lowest free index (from `scan`, below which every bit is 1), so a span
 * fills from its first page and the memory of free objects is never
 * written by the span. That lets the scavenger release the OS pages of a
 * span that hold no object out of it (sweep_spans, sweep.h): `relmap` has a bit
 * per 4 KiB page released, cleared when an object on it is handed out
 * again (the kernel gives it back as a zero page on the first touch).
 *
 * A freed object's first word links it into a cache's free list; its second
 * word holds span_free_key(p) (a per-process secret mixed with its address)
 * until it is handed out again, when the allocator clears it. A pa_free
 * that finds the key in place has found a block already freed into some
 * cache: a double free, caught without looking at any other thread. Free
 * objects hold their key wherever they are below bump (in a list, a stash
 * or their span; central.c writes it into the objects a refill takes), except
 * on pages the sweep released: a batch going back to its spans and a refill
 * taking objects from a span check it (central.c), and a key found
 * overwritten there is a write after free.
 *
 * A large object (class 0) is one run of `npages` pages at `base`; the
 * page map maps its first page only. It looks to pa_free like a span of one
 * object (magic PA_SPAN_LARGE_MAGIC, as for objects of a page: in its first
 * page only p == base is exact, index 0) whose alloc
 * bit 0 is set while the object is live, so the small-object checks serve
 * it unchanged; a freed large object may wait in its thread's large slots
 * or the large stash (large.h) for reuse with bit 0 clear: a free of it
 * then is a double free.
 *
 * Locking: the fields below `next` change only under the central lock of
 * the span's class (central.h), or, for a large span, belong to the thread
 * that allocated or frees the object. `alloc` words are written with atomic
 * stores under that lock and read without it by pa_free's bit check.
 */
#ifndef PA_SPAN_H
#define PA_SPAN_H

#include <stddef.h>
#include <stdint.h>

#include "hidden.h"
#include "layout.h"
#include "lock.h"
#include "pagemap.h"
#include "sizeclass_table.h"

/* One bit per object. (A pointer just past the last object, into the tail
 * waste, has index `objects`: pa_free rejects it on the bump index first,
 * fbump <= bump <= objects, and never reads its bit.) */
/* The sweep's page: spans are at most 10 heap pages, 20 such pages. */
#define PA_SPAN_RELPAGE 4096u
_Static_assert(PA_SC_MAX_PAGES *PA_PAGE_SIZE / PA_SPAN_RELPAGE <= 32, "relmap has 32 bits");
#define PA_SPAN_ALLOC_WORDS ((PA_SC_MAX_OBJECTS + 63) / 64)

struct pa_span {
	uintptr_t neg_base; /* minus the first page's address (span_base): not a
	                     * pointer, so valgrind's leak check does not take a
	                     * span record for a reference to its first object */
	uint32_t npages;    /* pages of the span (large: at most LARGE_MAX_PAGES) */
	uint32_t magic;     /* pa_sizeclasses[cls].div_magic: index = off * magic >> 32
	                     * (the object size is the class table's: span_size) */
	uint8_t cls;        /* size class; 0 for a large object */
	/* Under the central lock of cls (a heap's span: its heap's lock). */
	uint8_t dirty;       /* an object came back since the last sweep;
	                      * PA_SPAN_HEAPS: the span is a heap's (heap.h),
	                      * for its life there. Relaxed atomic stores:
	                      * pa_free's slow path reads it without a lock */
	uint16_t fbump;      /* bump while relmap is 0, else 0: pa_free's fast path
	                      * checks this alone, in the page map's copy
	                      * (span_set_fbump) */
	uint16_t nfree;      /* objects in the span (alloc bit 0) */
	uint16_t bump;       /* objects at index >= bump were never handed out */
	uint16_t scan;       /* every object below this index is out of the span */
	uint16_t gave_epoch; /* heap epoch when an object last came back, in
	                      * units of 2^PA_SPAN_AGE_SHIFT ms modulo 2^16: 70
	                      * minutes, past scavenge_delay_ms's hour (read
	                      * only while dirty); a large span waiting in a
	                      * thread's slots: the slots' misses at its free
	                      * (large.h) */
	union {
		uint32_t relmap;  /* 4 KiB pages released by sweep_spans (bit j: page j) */
		uint32_t heap_id; /* a heap's span (never swept): its heap (heap.h) */
	};
	struct pa_span *next;      /* central partial list */
	struct pa_span **prevnext; /* where the pointer to this span is (NULL: not listed) */
	/* span_alloc_words(cls) words: the record ends after them (span_new) */
	uint64_t alloc[PA_SPAN_ALLOC_WORDS];
	/* Under valgrind only (vg.h), where every record is a long one:
	 * requested sizes, which memcheck knows the blocks by and
	 * malloc_usable_size then reports (large: vg_req; small: one per object,
	 * mapped when the span first hands one out). */
	union {
		size_t vg_req;      /* large */
		uint32_t *vg_sizes; /* small */
	};
};

/*
 * Two record lengths: a short record (PA_SPAN_SHORT bytes: the fields and
 * two bitmap words) for a span of at most 128 objects, which is every class
 * of 64 bytes and more and every large object, and a long one (128 bytes)
 * for the 16, 32 and 48-byte classes and, under valgrind, for every span.
 * A span costs its pages 0.8% in records, not 1.6%.
 */
#define PA_SPAN_AGE_SHIFT 6u /* gave_epoch's unit: 64 ms */
#define PA_SPAN_SHORT 64u
#define PA_SPAN_LARGE_MAGIC ((uint32_t)1 << (32 - PA_PAGE_SHIFT))
#define PA_SPAN_LONG 128u
_Static_assert(offsetof(struct pa_span, alloc) + 2 * sizeof(uint64_t) == PA_SPAN_SHORT,
               "a short record is the fields and two bitmap words");
_Static_assert(sizeof(struct pa_span) <= PA_SPAN_LONG, "a long record is 128 bytes at most");
_Static_assert(PA_SC_NUM_CLASSES <= 256, "a class fits cls");

/* dirty's mark of a span that a heap owns (heap.h): its fbump is 0, so
 * pa_free's fast path sends each of its objects to the slow path, which
 * reads the mark and hands the object to the heap. */
#define PA_SPAN_HEAPS ((uint8_t)2)

/* Is s a heap's span? Read without a lock (dirty's atomic stores). */
static inline int span_heaps(const struct pa_span *s)
{
	return __atomic_load_n(&s->dirty, __ATOMIC_RELAXED) == PA_SPAN_HEAPS;
}

/* Bitmap words of a span of class cls (a large span: one). */
static inline unsigned span_alloc_words(unsigned cls)
{
	return cls != 0 ? (pa_sizeclasses[cls].objects + 63u) / 64u : 1u;
}

/* Bytes per object of s (the class table's; 0 for a large span). */
static inline uint32_t span_size(const struct pa_span *s)
{
	return pa_sizeclasses[s->cls].size;
}

/* Objects in s: its class's, or the one of a large span. */
static inline unsigned span_objects(const struct pa_span *s)
{
	return s->cls != 0 ? pa_sizeclasses[s->cls].objects : 1u;
}

/* Set s's fbump: in its record and, for a small span, in its pages' page-map
 * entries (pagemap.h), which pa_free's fast path reads in place of the
 * record; those are written only when it changes. Lock held (or s large,
 * and its thread's). */
static inline void span_set_fbump(struct pa_span *s, unsigned fbump)
{
	if (s->fbump == fbump)
		return;
	__atomic_store_n(&s->fbump, (uint16_t)fbump, __ATOMIC_RELAXED);
	if (s->cls != 0)
		pagemap_set_fbump(pa_addr_show(s->neg_base), s->npages, (uint16_t)fbump);
}

/* After bump or relmap changed; lock held (or s large, and its thread's). */
static inline void span_fbump_update(struct pa_span *s)
{
	span_set_fbump(s, s->relmap != 0 ? 0 : s->bump);
}

static inline uintptr_t span_base(const struct pa_span *s)
{
	return pa_addr_show(s->neg_base);
}

static inline void span_set_base(struct pa_span *s, uintptr_t base)
{
	s->neg_base = pa_addr_hide(base);
}

/* The per-process secret of the free-key (set once at malloc init). */
extern uintptr_t span_key_secret PA_HIDDEN;

static inline uintptr_t span_free_key(const void *p)
{
	return span_key_secret ^ (uintptr_t)p;
}

/* Index of the object at p in span s (p in its pages, as the page map
 * sees them); *exact is 0 when p is not the start of an object: an interior
 * pointer. One multiply gives both: the product's high half is the index
 * (Go's divMagic) and its low half is below the magic exactly at an
 * object's start, for every offset in a span of any class
 * (tools/mksizeclasses.c and tests/test_sizeclass.c prove it offset by
 * offset). The page map reads 48 bits of an address: a pointer with higher
 * bits set (a tagged one) is 2^48 or more past the span and never exact. A
 * pointer into the tail waste may still give exact with index `objects` (an
 * object that does not exist, so its alloc bit is always 0: the bit check
 * rejects it, and span_index_valid names the fault). */
static inline unsigned span_index(const struct pa_span *s, uintptr_t p, int *exact)
{
	uintptr_t off = p + s->neg_base;
	uint64_t x = (uint64_t)off * s->magic;
	*exact = (uint32_t)x < s->magic && off >> 32 == 0;
	return (unsigned)(x >> 32);
}

/* A large span's second bitmap word (a short record has two; its one
 * object uses the first): the heap profile's record of the sampled block it
 * holds (prof.h), NULL when its block was not sampled. Written by the thread
 * that allocates or frees the block. */
struct prof_sample;
static inline struct prof_sample *span_sample(const struct pa_span *s)
{
	return (struct prof_sample *)(uintptr_t)s->alloc[1];
}

static inline void span_set_sample(struct pa_span *s, struct prof_sample *r)
{
	s->alloc[1] = (uintptr_t)r;
}

static inline int span_bit(const struct pa_span *s, unsigned i)
{
	return (int)((__atomic_load_n(&s->alloc[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1);
}

/* Set or clear one alloc bit; central lock held (a plain store suffices for
 * writers, the atomic one keeps lock-free readers well-defined). */
static inline void span_bit_set(struct pa_span *s, unsigned i, int v)
{
	uint64_t w = s->alloc[i / 64], m = (uint64_t)1 << (i % 64);
	__atomic_store_n(&s->alloc[i / 64], v ? w | m : w & ~m, __ATOMIC_RELAXED);
}

/*
 * Spare records: short records a thread cache keeps for reuse, moved to and
 * from the record pool half of them at a time: span_new and span_delete
 * take the pool's lock, which every thread that makes or retires spans
 * shares, once per 4 records (wl-prodcons, whose producers make the spans
 * its consumers retire: 7.6% of its CPU in meta_alloc, most of it on that
 * lock). They count as live records of the pool. Whoever makes or retires a
 * span hands in the calling thread's spares (its thread cache's, tcache.h),
 * or NULL when the thread has no cache: each record then comes from the
 * pool and goes back to it. Only their thread touches them.
 */
#define PA_SPAN_SPARES 8u

struct pa_span_spares {
	uint32_t n; /* rec[0, n): free short records */
	struct pa_span *rec[PA_SPAN_SPARES];
};

/* A new, zeroed span descriptor for a span of class cls (0: large), its
 * cls set: a short one from sp when it is not NULL (refilled from the pool
 * half full when empty), else from the metadata pool of its length; or NULL
 * (ENOMEM). */
struct pa_span *span_new(unsigned cls, struct pa_span_spares *sp);
/* The length of that record: PA_SPAN_SHORT or PA_SPAN_LONG. */
size_t span_record_bytes(unsigned cls);
/* Give s's record back: a short one into sp when it is not NULL (the older
 * half of a full sp goes to the pool first), else to its pool. */
void span_delete(struct pa_span *s, struct pa_span_spares *sp);
/* Give n records back to their pools at once (one lock taken per pool, not
 * per record: a heap's destroy, heap.h); n at most PA_SPAN_DELETE_MAX. */
#define PA_SPAN_DELETE_MAX 64u
void span_delete_n(struct pa_span *const *recs, unsigned n);
/* Return every record of sp to the pool itself (sp is empty after). */
void span_spares_free(struct pa_span_spares *sp);

/* Prepare s as an empty small-object span of class cls over pages at base,
 * and map its pages. 0, or -1 (ENOMEM from the page map). */
int span_init_small(struct pa_span *s, unsigned cls, uintptr_t base);

/* Release the pages of span descriptor blocks that hold only free records
 * (meta_trim): of blocks quiet since the last call, or all when force.
 * Returns bytes released. */
size_t span_meta_trim(int force);

/* Span descriptors: bytes mapped, bytes of them released, live descriptors. */
void span_meta_stats(size_t *mapped, size_t *released, size_t *live);

/* The record pools' and the page map's locks around fork. */
void span_fork(enum pa_fork_phase phase);

/* Fault names for span_report. */
enum pa_obj_fault {
	PA_OBJ_FOREIGN,     /* not an address this heap handed out */
	PA_OBJ_INTERIOR,    /* inside a block, not at its start */
	PA_OBJ_DOUBLE_FREE, /* the block is already free */
	PA_OBJ_BAD_SIZE,    /* free_sized or a sized delete: more than the block holds */
	PA_OBJ_BAD_ALIGN,   /* free_aligned_sized: the block is not that aligned */
	PA_OBJ_WRITTEN,     /* a free block's free-key was overwritten (central.c) */
};

/* The one-line message "pagealloc: FUNC(0x...): FAULT ..." and abort. For
 * PA_OBJ_FOREIGN the message says, when it can tell, that the address is
 * inside a large block or a span (an interior pointer) instead. */
_Noreturn void span_report(const char *func, const void *p, enum pa_obj_fault f);

#endif
