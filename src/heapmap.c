/*
 * heapmap.c — the heap map's walk and its file (heapmap.h has the kinds of
 * page, the format and why the walk's locks make a consistent picture).
 *
 * The walk runs on request (the scavenger thread, for `pagealloc map`) and
 * at exit (map_prefix), never on a malloc path, and allocates nothing: a
 * chunk's records are built in a static buffer and written with one
 * os_write_all, the header last with os_pwrite_all. walk_lock serialises
 * walks (a request served while the process exits), and so guards the
 * buffer.
 */
#include "heapmap.h"

#include <errno.h>
#include <string.h>

#include "central.h"
#include "config.h"
#include "lock.h"
#include "msg.h"
#include "os.h"
#include "pagemap.h"
#include "pages.h"
#include "span.h"

/* One chunk as written: its base and its pages. */
struct chunk_out {
	uint64_t base;
	struct heapmap_page page[PA_CHUNK_PAGES];
};

static pa_lock walk_lock = PA_LOCK_INIT;
/* The pid of walk_lock's holder (atomic; 0 for a moment after it is taken
 * and before it is let go). A forked child whose parent was walking finds
 * the lock held by a pid other than its own, by a thread it does not have:
 * it takes the lock anew rather than wait for ever at exit. */
static int walk_pid;
/* Under walk_lock. */
static struct chunk_out out;
static struct pages_chunk_view view;

static int bit(const uint64_t *words, unsigned p)
{
	return (int)((words[p / 64] >> (p % 64)) & 1);
}

/* A large object that runs on past the chunk it starts in. */
struct carry {
	uintptr_t end; /* first page after it (0: none) */
	uint8_t kind;  /* HEAPMAP_LARGE or HEAPMAP_LARGE_FREE */
	uint8_t flags;
};

/* The words of a span record the walk reads before it knows whose the
 * record is. */
struct span_words {
	uint8_t cls;
	uintptr_t neg_base;
	uint32_t npages;
	uint64_t alloc0, alloc1;
};

/*
 * Read s's words without synchronisation, on purpose. A small span's record
 * is stable (its class's lock is held); a large span's belongs to the
 * thread that allocates or frees its object, which may be rewriting it
 * now, or recycling the record for another object (span_new zeroes it with
 * vector stores that no reader could pair with). Records stay mapped (meta.h),
 * so the read cannot fault; the caller believes a large record only when
 * its base is the page it was found at, and follows it only over pages the
 * page map leaves unmapped. What it draws then is the object as it was
 * during the walk, or a moment before. ThreadSanitizer would see the race
 * it is meant to find in these reads, so they are kept out of its view.
 */
__attribute__((no_sanitize("thread"))) static void span_read(const struct pa_span *s,
                                                             struct span_words *w)
{
	const volatile struct pa_span *v = s;
	w->cls = v->cls;
	w->neg_base = v->neg_base;
	w->npages = v->npages;
	w->alloc0 = v->alloc[0];
	w->alloc1 = v->alloc[1];
}

/* What the allocated page at a is, from its span (central locks held). */
static void classify_span(uintptr_t a, struct heapmap_page *pg, struct carry *carry,
                          struct heapmap_header *h)
{
	struct pa_span *s = pagemap_lookup(a);
	if (s == NULL)
		return; /* HEAPMAP_OTHER */
	struct span_words w;
	span_read(s, &w);
	unsigned cls = w.cls;
	if (cls != 0) {
		/* A small span: stable, its class's lock is held. */
		const struct pa_sizeclass *sc = &pa_sizeclasses[cls];
		pg->kind = HEAPMAP_SMALL;
		pg->cls = (uint8_t)cls;
		pg->objects = sc->objects;
		pg->inuse = (uint16_t)(sc->objects - s->nfree);
		if (span_base(s) == a) {
			pg->flags = HEAPMAP_FIRST;
			h->small_objects += pg->inuse;
			h->small_bytes += (uint64_t)pg->inuse * sc->size;
		}
		return;
	}
	/* A large span: its owner's; read as a snapshot and checked. */
	if (pa_addr_show(w.neg_base) != a || w.npages == 0)
		return;
	int live = (int)(w.alloc0 & 1);
	pg->kind = live ? HEAPMAP_LARGE : HEAPMAP_LARGE_FREE;
	pg->flags = HEAPMAP_FIRST;
	if (live && w.alloc1 != 0)
		pg->flags |= HEAPMAP_SAMPLED;
	if (live)
		h->large_objects++;
	else
		h->large_free_objects++;
	carry->end = a + (uintptr_t)w.npages * PA_PAGE_SIZE;
	carry->kind = pg->kind;
	carry->flags = pg->flags & HEAPMAP_SAMPLED;
}

/* The records of the chunk in view, into out; central locks held. */
static void classify_chunk(struct carry *carry, struct heapmap_header *h)
{
	memset(&out, 0, sizeof(out));
	out.base = view.base;
	for (unsigned p = 0; p < PA_CHUNK_PAGES; p++) {
		uintptr_t a = view.base + (uintptr_t)p * PA_PAGE_SIZE;
		struct heapmap_page *pg = &out.page[p];
		if (!bit(view.alloc, p)) {
			pg->kind = bit(view.scav, p) ? HEAPMAP_RELEASED : HEAPMAP_FREE;
		} else if (bit(view.cached, p)) {
			pg->kind = HEAPMAP_CACHED;
		} else if (a < carry->end && pagemap_lookup(a) == NULL) {
			pg->kind = carry->kind; /* a large object's later page */
			pg->flags = carry->flags;
		} else {
			carry->end = 0;
			pg->kind = HEAPMAP_OTHER;
			classify_span(a, pg, carry, h);
		}
		if (bit(view.huge, p)) {
			pg->flags |= HEAPMAP_HUGE;
			h->pages[HEAPMAP_KINDS]++;
		}
		h->pages[pg->kind]++;
	}
}

/* The header's fixed part and the class table, as written first (magic
 * zero) and again last. */
static void header_init(struct heapmap_header *h)
{
	memset(h, 0, sizeof(*h));
	h->version = HEAPMAP_VERSION;
	h->header_bytes = (uint32_t)sizeof(*h);
	h->page_size = PA_PAGE_SIZE;
	h->chunk_pages = PA_CHUNK_PAGES;
	h->nclasses = PA_SC_NUM_CLASSES;
	h->pid = (uint64_t)os_getpid();
}

#define CLASS_BYTES PA_ALIGN_UP(PA_SC_NUM_CLASSES * sizeof(uint32_t), 8)

static int walk(int fd)
{
	struct heapmap_header h;
	uint32_t sizes[CLASS_BYTES / sizeof(uint32_t)] = {0};
	header_init(&h);
	for (unsigned c = 0; c < PA_SC_NUM_CLASSES; c++)
		sizes[c] = pa_sizeclasses[c].size;
	if (os_write_all(fd, &h, sizeof(h)) != 0 || os_write_all(fd, sizes, CLASS_BYTES) != 0)
		return -1;
	struct carry carry = {0, 0, 0};
	uintptr_t from = 0;
	for (;;) {
		/* Central locks first (central.h's order), then the heap's. */
		central_lock_all();
		int more = pages_chunk_view(from, &view);
		if (more)
			classify_chunk(&carry, &h);
		central_unlock_all();
		if (!more)
			break;
		if (os_write_all(fd, &out, sizeof(out)) != 0)
			return -1;
		h.nchunks++;
		from = view.base + PA_CHUNK_SIZE;
		if (from == 0)
			break; /* the top of the address space */
	}
	h.time_ns = os_realtime_ns();
	memcpy(h.magic, HEAPMAP_MAGIC, sizeof(h.magic));
	return os_pwrite_all(fd, &h, sizeof(h), 0);
}

static void walk_begin(void)
{
	int me = os_getpid();
	if (!lock_try(&walk_lock)) {
		int holder = __atomic_load_n(&walk_pid, __ATOMIC_RELAXED);
		if (holder != 0 && holder != me)
			lock_init(&walk_lock);
		lock_acquire(&walk_lock);
	}
	__atomic_store_n(&walk_pid, me, __ATOMIC_RELAXED);
}

static void walk_end(void)
{
	__atomic_store_n(&walk_pid, 0, __ATOMIC_RELAXED);
	lock_release(&walk_lock);
}

int heapmap_write(const char *path)
{
	walk_begin();
	int fd = os_open_write(path), rc = -1;
	if (fd >= 0) {
		rc = walk(fd);
		int err = errno;
		if (os_close(fd) != 0 && rc == 0)
			rc = -1;
		else
			errno = err;
		if (rc != 0)
			os_unlink(path);
	}
	walk_end();
	return rc;
}

/* Has the heap a chunk? (A process that never allocated has no heap.) */
static int heap_exists(void)
{
	walk_begin();
	int yes = pages_chunk_view(0, &view);
	walk_end();
	return yes;
}

/* map_prefix: the heap's map at exit, PREFIX.PID.map, if the process has a
 * heap. A warning line when it cannot be written; the exit goes on. */
__attribute__((destructor)) static void heapmap_fini(void)
{
	if (pa_conf.map_prefix[0] == '\0' || !heap_exists())
		return;
	char path[PA_CONF_PATH_MAX + 32];
	size_t n = strlen(pa_conf.map_prefix);
	memcpy(path, pa_conf.map_prefix, n);
	path[n++] = '.';
	n += msg_format_uint(path + n, (uint64_t)os_getpid());
	memcpy(path + n, ".map", 5);
	if (heapmap_write(path) == 0)
		return;
	struct pa_msg m;
	int err = errno;
	msg_begin(&m);
	msg_str(&m, "heap map ");
	msg_str(&m, path);
	msg_str(&m, ": cannot be written (");
	msg_errno(&m, err);
	msg_str(&m, ")");
	msg_end(&m);
}
