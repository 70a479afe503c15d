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
	uint8_t state;  /* enum guard_state */
	uint8_t nalloc; /* frames in alloc_pc */
	uint8_t nfree;  /* frames in free_pc */
	uintptr_t alloc_pc[GUARD_DEPTH];
	uintptr_t free_pc[GUARD_DEPTH];
};

uintptr_t guard_lo, guard_hi;

static pa_lock guard_lock;
/* The pool's geometry, set once with it (under guard_lock). */
static size_t page;       /* the OS page */
static size_t slot_bytes; /* a slot: guard_max rounded up to pages */
static size_t stride;     /* a slot and the guard page before it */
static unsigned nslots;
static struct guard_slot *slots;
static int pool_failed; /* the reservation was refused: guard nothing */
/* Under guard_lock: slots never used start at fresh; freed slots wait in
 * the ring fifo[head .. head + queued) (indexes mod nslots). */
static unsigned fresh;
static uint32_t *fifo;
static unsigned head, queued;
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

/* func(p): p is in the pool but not a live block's start. */
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
	int frees = strncmp(func, "free", 4) == 0 || strncmp(func, "operator delete", 15) == 0;
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

/* The record of the slot whose data pages hold a, or NULL (a guard page). */
static struct guard_slot *slot_of(uintptr_t a)
{
	size_t off = a - guard_lo;
	if (off % stride < page || off / stride >= nslots)
		return NULL;
	return &slots[off / stride];
}

/* The record of the block the fault at a (in the pool) hit: its slot's, or,
 * in a guard page, the nearer of the blocks either side of it. */
static const struct guard_slot *fault_slot(uintptr_t a)
{
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
	if (a - lo >= guard_hi - lo) {
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
		uintptr_t end = r->ptr + r->size;
		msg_str(&m, r->state == GUARD_FREED ? "use-after-free"
		            : a >= end              ? "heap-buffer-overflow"
		                                    : "heap-buffer-underflow");
		msg_str(&m, " at ");
		msg_hex(&m, a);
		msg_str(&m, ": ");
		uint64_t n = a >= end ? a - end + 1 : a < r->ptr ? r->ptr - a : a - r->ptr;
		msg_uint(&m, n);
		msg_str(&m, n == 1 ? " byte " : " bytes ");
		msg_str(&m, a >= end     ? "past the end of"
		            : a < r->ptr ? "before the start of"
		                         : "inside");
		msg_str(&m, r->state == GUARD_FREED ? " a freed " : " a ");
		msg_uint(&m, r->size);
		msg_str(&m, "-byte block at ");
		msg_hex(&m, r->ptr);
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
	fifo = os_alloc((size_t)nslots * sizeof(*fifo));
	void *pool = os_reserve(bytes, page);
	if (slots == NULL || fifo == NULL || pool == NULL || os_fault_catch(guard_on_fault) != 0) {
		if (pool != NULL)
			os_unmap(pool, bytes);
		return -1;
	}
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

/* Under guard_lock: a slot for a new block, or -1. */
static long slot_take(void)
{
	if (fresh < nslots)
		return fresh++;
	if (queued == 0)
		return -1;
	long i = fifo[head];
	head = (head + 1) % nslots;
	queued--;
	return i;
}

void *guard_alloc(size_t n, size_t align)
{
	if (n > __atomic_load_n(&pa_conf.guard_max, __ATOMIC_RELAXED) || align > os_page_size())
		return NULL;
	int saved = errno;
	uintptr_t pc[GUARD_DEPTH];
	unsigned depth = prof_stack(pc, GUARD_DEPTH);
	lock_acquire(&guard_lock);
	long i = pool_ready() && n <= slot_bytes ? slot_take() : -1;
	if (i < 0) {
		lock_release(&guard_lock);
		errno = saved;
		return NULL;
	}
	int left = pa_conf.guard_underflow && (placed++ & 1);
	lock_release(&guard_lock);

	uintptr_t start = guard_lo + page + (uintptr_t)i * stride, end = start + slot_bytes;
	size_t a = align < 16 ? 16 : align, len = n > 0 ? n : 1;
	uintptr_t p = left ? start : (end - len) & ~(uintptr_t)(a - 1);
	uintptr_t rw = p & ~(uintptr_t)(page - 1);
	size_t rw_len = ((p + len + page - 1) & ~(uintptr_t)(page - 1)) - rw;
	struct guard_slot *r = &slots[i];
	if (os_commit((void *)rw, rw_len) != 0) {
		/* Out of mappings: the slot goes back, the block is an ordinary one. */
		lock_acquire(&guard_lock);
		fifo[(head + queued++) % nslots] = (uint32_t)i;
		lock_release(&guard_lock);
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
	__atomic_store_n(&r->state, GUARD_LIVE, __ATOMIC_RELEASE);
	errno = saved;
	return (void *)p;
}

/* The record of live block p, or the report (abort). */
static struct guard_slot *live_slot(const char *func, const void *p)
{
	struct guard_slot *r = slot_of((uintptr_t)p);
	if (r == NULL || r->ptr != (uintptr_t)p ||
	    __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != GUARD_LIVE)
		bad_pointer(func, p, r);
	return r;
}

size_t guard_size(const char *func, const void *p)
{
	return live_slot(func, p)->size;
}

void guard_free(const char *func, void *p)
{
	int saved = errno;
	uintptr_t pc[GUARD_DEPTH];
	unsigned depth = prof_stack(pc, GUARD_DEPTH);
	lock_acquire(&guard_lock);
	struct guard_slot *r = slot_of((uintptr_t)p);
	if (r == NULL || r->ptr != (uintptr_t)p || r->state != GUARD_LIVE) {
		lock_release(&guard_lock);
		bad_pointer(func, p, r);
	}
	memcpy(r->free_pc, pc, depth * sizeof(pc[0]));
	r->nfree = (uint8_t)depth;
	r->state = GUARD_FREED;
	lock_release(&guard_lock);
	os_release((void *)r->rw, r->rw_len, 0);
	os_protect_none((void *)r->rw, r->rw_len);
	/* Only now may another block take the slot. */
	lock_acquire(&guard_lock);
	fifo[(head + queued++) % nslots] = (uint32_t)(r - slots);
	lock_release(&guard_lock);
	errno = saved;
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
