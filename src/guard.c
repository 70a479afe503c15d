/*
 * guard.c — the guarded pool, its records and the SIGSEGV handler (guard.h).
 */
#include "guard.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "config.h"
#include "msg.h"
#include "os.h"
#include "stack.h"
#include "vg.h"

enum guard_state { GUARD_NEVER, GUARD_LIVE, GUARD_FREED };

/* A slot's record; state under guard_lock, the rest written by the thread
 * that holds the slot (allocating or freeing it). */
struct guard_slot {
	uintptr_t ptr; /* the block (the last one, once freed) */
	size_t size;   /* bytes asked for */
	uintptr_t rw;  /* its readable and writable pages: [rw, rw + rw_len) */
	size_t rw_len;
	uintptr_t map; /* a big block's own reservation [map, map + map_len) */
	size_t map_len;
	uint8_t state;  /* enum guard_state */
	uint8_t nalloc; /* frames in alloc_pc */
	uint8_t nfree;  /* frames in free_pc */
	uintptr_t alloc_pc[GUARD_DEPTH];
	uintptr_t free_pc[GUARD_DEPTH];
};

uintptr_t guard_lo, guard_hi;

/* Slots never used, then freed ones oldest first (under guard_lock): slots
 * [fresh, n) were never used; freed ones wait in fifo[head .. head + queued)
 * (indexes mod n). */
struct guard_ring {
	unsigned n, fresh, head, queued;
	uint32_t *fifo;
};

static pa_lock guard_lock;
/* The pool's geometry, set once with it (under guard_lock). */
static size_t page;       /* the OS page */
static size_t slot_bytes; /* a slot: guard_max rounded up to pages */
static size_t stride;     /* a slot and the guard page before it */
static unsigned nslots;
static struct guard_slot *slots;
static struct guard_ring ring;
/* Big blocks (over a slot: with guard_sample=1 only, or aligned past the
 * OS page), each on a reservation of its own: their records, and the range
 * [big_lo, big_hi) every reservation made so far lies in. */
static struct guard_slot *bigs;
static struct guard_ring big_ring;
static uintptr_t big_lo = UINTPTR_MAX, big_hi;
static int pool_failed; /* the reservation was refused: guard nothing */
static unsigned placed; /* blocks placed: guard_underflow alternates on it */

int guard_active(void)
{
	return __atomic_load_n(&pa_conf.guard_sample, __ATOMIC_RELAXED) != 0 && !vg_active();
}

int64_t guard_next_count(struct prof_thread *pt)
{
	size_t every = __atomic_load_n(&pa_conf.guard_sample, __ATOMIC_RELAXED);
	if (every == 0 || vg_active())
		return INT64_MAX;
	if (every == 1)
		return -1;
	return prof_draw(pt, (double)every * GUARD_UNIT_BYTES);
}

/* ---- finding a block's record ------------------------------------------------ */

/* The record of the slot whose data pages hold a, or NULL (a guard page). */
static struct guard_slot *slot_of(uintptr_t a)
{
	size_t off = a - guard_lo;
	if (off % stride < page || off / stride >= nslots)
		return NULL;
	return &slots[off / stride];
}

/* The record of the big block whose reservation holds a, or NULL. */
static struct guard_slot *big_of(uintptr_t a)
{
	if (a < __atomic_load_n(&big_lo, __ATOMIC_ACQUIRE) ||
	    a >= __atomic_load_n(&big_hi, __ATOMIC_ACQUIRE))
		return NULL;
	unsigned n = __atomic_load_n(&big_ring.fresh, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++) {
		size_t len = __atomic_load_n(&bigs[i].map_len, __ATOMIC_ACQUIRE); /* then map */
		if (a - bigs[i].map < len)
			return &bigs[i];
	}
	return NULL;
}

/* The record a block pointer p would have: its slot's (p may be its slot's
 * end, a zero-size block's place), or its big reservation's; NULL outside. */
static struct guard_slot *record_of(uintptr_t p)
{
	size_t span = guard_hi - guard_lo, off = p - guard_lo;
	if (off < span) {
		off -= page;
		if (off >= span || off % stride > slot_bytes || off / stride >= nslots)
			return NULL;
		return &slots[off / stride];
	}
	return big_of(p);
}

int guard_owns(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	uintptr_t lo = __atomic_load_n(&guard_lo, __ATOMIC_ACQUIRE);
	return (lo != 0 && a - lo < __atomic_load_n(&guard_hi, __ATOMIC_RELAXED) - lo) ||
	       big_of(a) != NULL;
}

/* ---- the guard bytes ---------------------------------------------------------- */

/* A random word drawn with the pool (pool_make), before any guard byte is
 * written. */
static uint64_t canary_secret;

/* What the byte at a holds while its block is live, from the block's end
 * to the end of its last readable page (the alignment gap, which does not
 * fault): 0x80 or more, so that an overflow writing a string's NUL or any
 * ASCII character always changes it, its low 7 bits the top of a
 * multiplicative hash of the address and the secret, so that every bit of
 * both moves them and any other value is the guard byte at a given place 1
 * time in 128, run by run. (The hash before took the address's low 16 bits
 * and the library's own address, any value: at a fixed distance from a
 * page's end only 4 bits of that changed from run to run, so a one-byte
 * overflow of 1 at that place went unseen in about 1 run in 6 of a Debug
 * build, whose layout happened to allow it.) */
static uint8_t canary_at(uintptr_t a)
{
	return (uint8_t)(((uint64_t)a ^ canary_secret) * 0x9e3779b97f4a7c15u >> 57) | 0x80u;
}

/* The guard bytes of block r: [from, to). */
static void canary_range(const struct guard_slot *r, uintptr_t *from, uintptr_t *to)
{
	*from = r->ptr + r->size;
	*to = r->rw + r->rw_len;
	if (*to < *from)
		*to = *from;
}

static void canary_fill(const struct guard_slot *r)
{
	uintptr_t a, end;
	canary_range(r, &a, &end);
	for (; a < end; a++)
		*(uint8_t *)a = canary_at(a);
}

/* The first guard byte of block r that was written, or 0. */
static uintptr_t canary_broken(const struct guard_slot *r)
{
	uintptr_t a, end;
	canary_range(r, &a, &end);
	for (; a < end; a++)
		if (*(const uint8_t *)a != canary_at(a))
			return a;
	return 0;
}

/* ---- the report ------------------------------------------------------------ */

static void msg_stack(struct pa_msg *m, const uintptr_t *pc, unsigned n)
{
	if (n == 0) {
		msg_str(m, "(no stack)");
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		if (i > 0)
			msg_str(m, " ");
		uintptr_t base;
		const char *file = stack_object(pc[i], &base);
		if (file == NULL) {
			msg_hex(m, pc[i]);
			continue;
		}
		const char *slash = strrchr(file, '/');
		msg_str(m, file[0] == '\0' ? program_invocation_short_name
		           : slash != NULL ? slash + 1
		                           : file);
		msg_str(m, "+");
		msg_hex(m, pc[i] - base);
	}
}

static void msg_stacks(struct pa_msg *m, const struct guard_slot *r)
{
	msg_str(m, "allocated at ");
	msg_stack(m, r->alloc_pc, r->nalloc);
	if (r->state == GUARD_FREED) {
		msg_str(m, ", freed at ");
		msg_stack(m, r->free_pc, r->nfree);
	}
}

/* func(p): p is guarded memory but not a live block's start. */
static _Noreturn void __attribute__((cold))
bad_pointer(const char *func, const void *p, const struct guard_slot *r)
{
	struct pa_msg m;
	msg_begin(&m);
	msg_str(&m, func);
	msg_str(&m, "(");
	msg_hex(&m, (uintptr_t)p);
	msg_str(&m, "): ");
	if (r == NULL || r->state == GUARD_NEVER) {
		msg_str(&m, "not a live block of this heap (a guarded slot never used)");
		msg_end(&m);
		os_abort();
	}
	int frees = strstr(func, "free") != NULL || strstr(func, "Free") != NULL ||
	            strncmp(func, "operator delete", 15) == 0;
	if (r->ptr != (uintptr_t)p)
		msg_str(&m, "points inside a guarded block, not at its start (interior pointer); ");
	else if (r->state == GUARD_FREED && frees)
		msg_str(&m, "guarded block is already free (double free); ");
	else
		msg_str(&m, "guarded block is already free (use after free); ");
	msg_stacks(&m, r);
	msg_end(&m);
	os_abort();
}

/* Where a is from block r: "N bytes past the end of a SIZE-byte block at P"
 * and the like ("a freed" with `freed`). */
static void msg_where(struct pa_msg *m, const struct guard_slot *r, uintptr_t a, int freed)
{
	uintptr_t end = r->ptr + r->size;
	if (a == r->ptr && a < end) {
		msg_str(m, "at the start of");
	} else {
		uint64_t n = a >= end ? a - end + 1 : a < r->ptr ? r->ptr - a : a - r->ptr;
		msg_uint(m, n);
		msg_str(m, n == 1 ? " byte " : " bytes ");
		msg_str(m, a >= end     ? "past the end of"
		           : a < r->ptr ? "before the start of"
		                        : "inside");
	}
	msg_str(m, freed ? " a freed " : " a ");
	msg_uint(m, r->size);
	msg_str(m, "-byte block at ");
	msg_hex(m, r->ptr);
}

/* The guard bytes of block r were written (first at a), seen by `func`
 * (free, realloc) or at exit (func NULL): the overflow, reported with the
 * block's stacks. */
static _Noreturn void __attribute__((cold))
overflow_found(const char *func, const struct guard_slot *r, uintptr_t a)
{
	struct pa_msg m;
	msg_begin(&m);
	msg_str(&m, "heap-buffer-overflow at ");
	msg_hex(&m, a);
	msg_str(&m, ": ");
	msg_where(&m, r, a, 0);
	msg_str(&m, ", written in the alignment gap before the guard page, found ");
	if (func != NULL) {
		msg_str(&m, "by ");
		msg_str(&m, func);
	} else {
		msg_str(&m, "at exit");
	}
	msg_str(&m, "; ");
	msg_stacks(&m, r);
	msg_end(&m);
	os_abort();
}

/* The record of the block the fault at a (guarded memory) hit: its slot's,
 * in a guard page the nearer of the blocks either side of it, or its big
 * reservation's. */
static const struct guard_slot *fault_slot(uintptr_t a)
{
	if (a - guard_lo >= guard_hi - guard_lo) {
		const struct guard_slot *b = big_of(a);
		return b != NULL && b->state != GUARD_NEVER ? b : NULL;
	}
	const struct guard_slot *r = slot_of(a);
	if (r != NULL)
		return r->state != GUARD_NEVER ? r : NULL;
	size_t i = (a - guard_lo) / stride; /* the guard page before slot i */
	const struct guard_slot *before = i > 0 ? &slots[i - 1] : NULL;
	const struct guard_slot *after = i < nslots ? &slots[i] : NULL;
	if (before != NULL && before->state == GUARD_NEVER)
		before = NULL;
	if (after != NULL && after->state == GUARD_NEVER)
		after = NULL;
	if (before == NULL || after == NULL)
		return before != NULL ? before : after;
	return a - (before->ptr + before->size) <= after->ptr - a ? before : after;
}

static void guard_on_fault(int sig, void *info, void *ctx)
{
	uintptr_t a = os_fault_addr(info);
	uintptr_t lo = __atomic_load_n(&guard_lo, __ATOMIC_ACQUIRE);
	if (a - lo >= guard_hi - lo && big_of(a) == NULL) {
		os_fault_chain(sig, info, ctx);
		return;
	}
	const struct guard_slot *r = fault_slot(a);
	struct pa_msg m;
	msg_begin(&m);
	if (r == NULL) {
		msg_str(&m, "wild access at ");
		msg_hex(&m, a);
		msg_str(&m, ", in the guarded pool but near no block");
	} else {
		msg_str(&m, r->state == GUARD_FREED                 ? "use-after-free"
		            : a >= r->ptr + r->size || r->size == 0 ? "heap-buffer-overflow"
		                                                    : "heap-buffer-underflow");
		msg_str(&m, " at ");
		msg_hex(&m, a);
		msg_str(&m, ": ");
		msg_where(&m, r, a, r->state == GUARD_FREED);
		msg_str(&m, ", ");
		msg_stacks(&m, r);
	}
	msg_end(&m);
	/* Die of it as without us: the default action when the handler returns. */
	os_signal_default_and_raise(SIGSEGV);
}

/* ---- the pool ---------------------------------------------------------------- */

/* Under guard_lock: reserve the pool and catch SIGSEGV. 0 or -1. */
static int pool_make(void)
{
	page = os_page_size();
	size_t max = __atomic_load_n(&pa_conf.guard_max, __ATOMIC_RELAXED);
	if (max > GUARD_POOL_MAX / 4)
		max = GUARD_POOL_MAX / 4;
	slot_bytes = (max + page - 1) & ~(page - 1);
	stride = slot_bytes + page;
	size_t n = (GUARD_POOL_MAX - page) / stride;
	nslots = n < GUARD_SLOTS_MAX ? (unsigned)n : GUARD_SLOTS_MAX;
	size_t bytes = (size_t)nslots * stride + page;
	slots = os_alloc((size_t)nslots * sizeof(*slots));
	ring.fifo = os_alloc((size_t)nslots * sizeof(*ring.fifo));
	ring.n = nslots;
	bigs = os_alloc((size_t)GUARD_BIG_MAX * sizeof(*bigs));
	big_ring.fifo = os_alloc((size_t)GUARD_BIG_MAX * sizeof(*big_ring.fifo));
	big_ring.n = GUARD_BIG_MAX;
	void *pool = os_reserve(bytes, page);
	if (slots == NULL || ring.fifo == NULL || bigs == NULL || big_ring.fifo == NULL ||
	    pool == NULL || os_fault_catch(guard_on_fault) != 0) {
		if (pool != NULL)
			os_unmap(pool, bytes);
		return -1;
	}
	canary_secret = os_random_seed();
	__atomic_store_n(&guard_hi, (uintptr_t)pool + bytes, __ATOMIC_RELEASE);
	__atomic_store_n(&guard_lo, (uintptr_t)pool, __ATOMIC_RELEASE);
	return 0;
}

/* Under guard_lock: is there a pool (made now if not yet)? */
static int pool_ready(void)
{
	if (guard_lo == 0 && !pool_failed)
		pool_failed = pool_make() != 0;
	return guard_lo != 0;
}

/* Under guard_lock: an index of ring for a new block, or -1. */
static long ring_take(struct guard_ring *q)
{
	if (q->fresh < q->n) {
		/* released: big_of reads bigs[0 .. fresh) without the lock */
		__atomic_store_n(&q->fresh, q->fresh + 1, __ATOMIC_RELEASE);
		return q->fresh - 1;
	}
	if (q->queued == 0)
		return -1;
	long i = q->fifo[q->head];
	q->head = (q->head + 1) % q->n;
	q->queued--;
	return i;
}

static void ring_put(struct guard_ring *q, long i)
{
	lock_acquire(&guard_lock);
	q->fifo[(q->head + q->queued++) % q->n] = (uint32_t)i;
	lock_release(&guard_lock);
}

/* A big block's record, its reservation of `bytes` made: the oldest freed
 * big block's reservation unmapped for it. NULL when none is to be had. */
static struct guard_slot *big_take(size_t bytes)
{
	lock_acquire(&guard_lock);
	long i = ring_take(&big_ring);
	lock_release(&guard_lock);
	if (i < 0)
		return NULL;
	struct guard_slot *r = &bigs[i];
	if (r->map_len != 0) {
		__atomic_store_n(&r->state, GUARD_NEVER, __ATOMIC_RELEASE);
		os_unmap((void *)r->map, r->map_len);
		r->map_len = 0;
	}
	void *map = os_reserve(bytes, page);
	if (map == NULL) {
		ring_put(&big_ring, i);
		return NULL;
	}
	r->map = (uintptr_t)map;
	__atomic_store_n(&r->map_len, bytes, __ATOMIC_RELEASE);
	lock_acquire(&guard_lock);
	if (r->map < big_lo)
		__atomic_store_n(&big_lo, r->map, __ATOMIC_RELEASE);
	if (r->map + bytes > big_hi)
		__atomic_store_n(&big_hi, r->map + bytes, __ATOMIC_RELEASE);
	lock_release(&guard_lock);
	return r;
}

void *guard_alloc(size_t n, size_t align)
{
	int every = __atomic_load_n(&pa_conf.guard_sample, __ATOMIC_RELAXED) == 1;
	if ((!every && n > __atomic_load_n(&pa_conf.guard_max, __ATOMIC_RELAXED)) ||
	    align > GUARD_ALIGN_MAX || n > GUARD_BIG_BYTES_MAX)
		return NULL;
	int saved = errno;
	uintptr_t pc[GUARD_DEPTH];
	unsigned depth = prof_stack(pc, GUARD_DEPTH);
	lock_acquire(&guard_lock);
	int ready = pool_ready(); /* slot_bytes and page set */
	int big = n > slot_bytes || align > page;
	long i = !ready ? -1 : big ? 0 : ring_take(&ring);
	int left = pa_conf.guard_underflow && (placed++ & 1);
	lock_release(&guard_lock);
	if (i < 0) {
		errno = saved;
		return NULL;
	}

	/* The block's room: a slot of the pool, or a reservation of its own
	 * (a guard page, the block's pages, room to align it, a guard page). */
	size_t a = align < 16 ? 16 : align;
	struct guard_slot *r;
	uintptr_t start, end;
	if (big) {
		size_t data = ((n + page - 1) & ~(page - 1)) + (a > page ? a : 0);
		r = big_take(data + 2 * page);
		if (r == NULL) {
			errno = saved;
			return NULL;
		}
		start = r->map + page;
		end = start + data;
	} else {
		r = &slots[i];
		start = guard_lo + page + (uintptr_t)i * stride;
		end = start + slot_bytes;
	}
	/* A zero-size block is its slot's end (or start): its first byte is on
	 * a page left inaccessible, so any access to it faults. */
	uintptr_t p =
	    left ? (start + a - 1) & ~(uintptr_t)(a - 1) : (end - n) & ~(uintptr_t)(a - 1);
	uintptr_t rw = p & ~(uintptr_t)(page - 1);
	size_t rw_len = n == 0 ? 0 : ((p + n + page - 1) & ~(uintptr_t)(page - 1)) - rw;
	if (rw_len != 0 && os_commit((void *)rw, rw_len) != 0) {
		/* Out of mappings: the room goes back, the block is an ordinary one. */
		if (big)
			ring_put(&big_ring, r - bigs);
		else
			ring_put(&ring, i);
		errno = saved;
		return NULL;
	}
	r->ptr = p;
	r->size = n;
	r->rw = rw;
	r->rw_len = rw_len;
	r->nalloc = (uint8_t)depth;
	memcpy(r->alloc_pc, pc, depth * sizeof(pc[0]));
	r->nfree = 0;
	canary_fill(r);
	__atomic_store_n(&r->state, GUARD_LIVE, __ATOMIC_RELEASE);
	errno = saved;
	return (void *)p;
}

/* The record of live block p, or the report (abort). */
static struct guard_slot *live_slot(const char *func, const void *p)
{
	struct guard_slot *r = record_of((uintptr_t)p);
	if (r == NULL || r->ptr != (uintptr_t)p ||
	    __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != GUARD_LIVE)
		bad_pointer(func, p, r);
	return r;
}

size_t guard_size(const char *func, const void *p)
{
	return live_slot(func, p)->size;
}

void guard_msg_alloc_stack(struct pa_msg *m, const void *p)
{
	const struct guard_slot *r = record_of((uintptr_t)p);
	if (r == NULL || r->ptr != (uintptr_t)p)
		return;
	msg_str(m, "; allocated at ");
	msg_stack(m, r->alloc_pc, r->nalloc);
}

void guard_free(const char *func, void *p)
{
	int saved = errno;
	uintptr_t pc[GUARD_DEPTH];
	unsigned depth = prof_stack(pc, GUARD_DEPTH);
	lock_acquire(&guard_lock);
	struct guard_slot *r = record_of((uintptr_t)p);
	if (r == NULL || r->ptr != (uintptr_t)p || r->state != GUARD_LIVE) {
		lock_release(&guard_lock);
		bad_pointer(func, p, r);
	}
	memcpy(r->free_pc, pc, depth * sizeof(pc[0]));
	r->nfree = (uint8_t)depth;
	r->state = GUARD_FREED;
	lock_release(&guard_lock);
	uintptr_t broken = canary_broken(r);
	if (broken != 0)
		overflow_found(func, r, broken);
	if (r->rw_len != 0) {
		os_release((void *)r->rw, r->rw_len, 0);
		os_protect_none((void *)r->rw, r->rw_len);
	}
	/* Only now may another block take the slot. */
	if (r->map_len != 0)
		ring_put(&big_ring, r - bigs);
	else
		ring_put(&ring, r - slots);
	errno = saved;
}

void guard_check_live(void)
{
	if (__atomic_load_n(&guard_lo, __ATOMIC_ACQUIRE) == 0)
		return;
	/* Under guard_lock: a block another thread frees meanwhile is either
	 * freed already (skipped) or still readable (guard_free protects its
	 * pages only after marking it freed under the lock). */
	lock_acquire(&guard_lock);
	const struct guard_slot *tables[2] = {slots, bigs};
	unsigned counts[2] = {ring.fresh, big_ring.fresh};
	for (int t = 0; t < 2; t++) {
		for (unsigned i = 0; i < counts[t]; i++) {
			const struct guard_slot *r = &tables[t][i];
			if (r->state != GUARD_LIVE)
				continue;
			uintptr_t broken = canary_broken(r);
			if (broken != 0)
				overflow_found(NULL, r, broken);
		}
	}
	lock_release(&guard_lock);
}

__attribute__((destructor)) static void guard_fini(void)
{
	guard_check_live();
}

void guard_fork(enum pa_fork_phase phase)
{
	if (phase == PA_FORK_PREPARE)
		lock_acquire(&guard_lock);
	else if (phase == PA_FORK_PARENT)
		lock_release(&guard_lock);
	else
		lock_init(&guard_lock);
}
