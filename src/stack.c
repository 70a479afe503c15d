/*
 * stack.c — stack capture from .eh_frame, with a cache of rules per return
 * address (stack.h for the design).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stack.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>

#include "os.h"

/* DWARF register numbers on x86-64. */
#define DW_RBP 6u
#define DW_RSP 7u
#define DW_RA 16u

/* How a frame finds its caller's: CFA = (rbp or rsp) + cfa_off; the return
 * address at CFA - 8; the caller's rbp at CFA + rbp_off, or unchanged when
 * rbp_off is 0. fn: the function's first address. */
struct rule {
	int cfa_rbp;
	int64_t cfa_off;
	int64_t rbp_off;
	uintptr_t fn;
};

/* ---- the cache --------------------------------------------------------------
 *
 * Entries indexed by a hash of the address, each under a sequence count (a
 * seqlock: odd while written; a reader that sees it move or odd misses).
 * Every field is read and written atomically. An address looks in
 * STACK_CACHE_PROBES slots from its hash's, and a new entry takes the first
 * free one of them or evicts the first.
 *
 * Two tables, each mapped when first needed: a process starts with the small
 * one (STACK_CACHE_SMALL entries, 2.5 KiB: one page) and moves to the full
 * one (STACK_CACHE_SIZE, 20 KiB) after STACK_CACHE_EVICTIONS evictions with
 * at least half its slots taken: a working set past the small table's. A
 * few addresses that share their slots evict each other without moving it
 * (seed 000's 16 addresses moved it in some runs before that second
 * condition): a miss or two a sample. A program whose samples see a few
 * dozen return addresses (most small ones: 10-20) keeps one page where the
 * full table's entries would land on all five, and one that sees more pays
 * the misses of about STACK_CACHE_EVICTIONS frames before the move. The
 * small table stays mapped after it (a reader may still hold it).
 *
 * An entry holds the unwind table it was read from, and a hit must name
 * the table _dl_find_object gives for the address now: after a dlclose,
 * another object mapped where the old one was would otherwise inherit its
 * rules, and a wrong CFA reads outside the stack. An address where the
 * walk ends (no rule this file follows: _start's undefined return address,
 * at the top of every main-thread stack) is cached too, as RULE_NONE, so
 * the last frame is not read from the table at every sample either.
 */
#define STACK_CACHE_BITS 9u
#define STACK_CACHE_SIZE (1u << STACK_CACHE_BITS)
#define STACK_CACHE_SMALL_BITS 6u
#define STACK_CACHE_SMALL (1u << STACK_CACHE_SMALL_BITS)
#define STACK_CACHE_PROBES 4u
#define STACK_CACHE_EVICTIONS 64u

struct cache_entry {
	uint64_t seq;
	uint64_t ip;   /* 0: free */
	uint64_t rule; /* packed: bit 0 cfa_rbp, bits 1-32 cfa_off, 33-48 rbp_off;
	                * or RULE_NONE */
	uint64_t fn;
	uint64_t table; /* the .eh_frame_hdr it was read from */
};

_Static_assert(STACK_CACHE_SMALL * sizeof(struct cache_entry) <= 4096,
               "the small table is one page");

static struct cache_entry *cache_small, *cache_full;
static uint32_t cache_used, cache_evictions; /* relaxed atomics */

/* A cached "no rule here": the walk ends at this address. */
#define RULE_NONE ((uint64_t)1 << 63)

/* Objects looked up and rules read from the tables, since the start
 * (stack_counts, for the tests). A walk adds its lookups once, with a load
 * and a store rather than a locked add (~20 cycles on the sample's path):
 * two threads' walks may lose one another's, which the tests, walking on
 * one thread, do not meet. Tables are read rarely: a locked add. */
static uint64_t objects_found, tables_read;

/* The slots an address may use: table t, from slot first, mask + 1 of them. */
struct cache_set {
	struct cache_entry *t;
	uint32_t first, mask;
};

static uint64_t pack(const struct rule *r)
{
	return (uint64_t)(r->cfa_rbp != 0) | ((uint64_t)(uint32_t)(int32_t)r->cfa_off << 1) |
	       ((uint64_t)(uint16_t)(int16_t)r->rbp_off << 33);
}

static void unpack(uint64_t w, struct rule *r)
{
	r->cfa_rbp = (int)(w & 1);
	r->cfa_off = (int32_t)(uint32_t)(w >> 1);
	r->rbp_off = (int16_t)(uint16_t)(w >> 33);
}

/* Table *t of n entries, mapped at its first use; NULL when it cannot be. */
static struct cache_entry *cache_table(struct cache_entry **t, size_t n)
{
	return os_alloc_once((void **)t, n * sizeof(**t), NULL);
}

/* The slots of ip in the table now in use; t NULL when there is none. */
static struct cache_set cache_set_of(uintptr_t ip)
{
	uint64_t h = (uint64_t)ip * 0x9E3779B97F4A7C15ULL;
	struct cache_entry *c = __atomic_load_n(&cache_full, __ATOMIC_ACQUIRE);
	if (c == NULL &&
	    __atomic_load_n(&cache_evictions, __ATOMIC_RELAXED) >= STACK_CACHE_EVICTIONS &&
	    __atomic_load_n(&cache_used, __ATOMIC_RELAXED) >= STACK_CACHE_SMALL / 2)
		c = cache_table(&cache_full, STACK_CACHE_SIZE);
	if (c != NULL)
		return (struct cache_set){c, (uint32_t)(h >> (64 - STACK_CACHE_BITS)),
		                          STACK_CACHE_SIZE - 1};
	c = cache_table(&cache_small, STACK_CACHE_SMALL);
	return (struct cache_set){c, (uint32_t)(h >> (64 - STACK_CACHE_SMALL_BITS)),
	                          STACK_CACHE_SMALL - 1};
}

/* 1 with e's packed rule in *w and its function in *fn when e holds ip's
 * rule read from table. */
static inline __attribute__((always_inline)) int
cache_get(struct cache_entry *e, uintptr_t ip, uintptr_t table, uint64_t *w, uintptr_t *fn)
{
	uint64_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	if (s1 & 1)
		return 0;
	/* Acquire loads, release stores (plain moves on x86), no fences: a
	 * field written after the count went odd brings that count with it
	 * (and ThreadSanitizer does not take fences). */
	uint64_t key = __atomic_load_n(&e->ip, __ATOMIC_ACQUIRE);
	uint64_t rule = __atomic_load_n(&e->rule, __ATOMIC_ACQUIRE);
	uint64_t f = __atomic_load_n(&e->fn, __ATOMIC_ACQUIRE);
	uint64_t tab = __atomic_load_n(&e->table, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s1 || key != ip || tab != table)
		return 0;
	*w = rule;
	*fn = (uintptr_t)f;
	return 1;
}

/* Write ip's packed rule w (function fn, from table) into e. */
static void cache_put(struct cache_entry *e, uintptr_t ip, uintptr_t table, uint64_t w,
                      uintptr_t fn)
{
	uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
	if ((s & 1) ||
	    !__atomic_compare_exchange_n(&e->seq, &s, s + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return; /* another thread writes it */
	__atomic_store_n(&e->ip, ip, __ATOMIC_RELEASE);
	__atomic_store_n(&e->rule, w, __ATOMIC_RELEASE);
	__atomic_store_n(&e->fn, (uint64_t)fn, __ATOMIC_RELEASE);
	__atomic_store_n(&e->table, (uint64_t)table, __ATOMIC_RELEASE);
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

/* 1 with ip's packed rule in *w and its function in *fn when set holds it. */
static int cache_find(const struct cache_set *set, uintptr_t ip, uintptr_t table, uint64_t *w,
                      uintptr_t *fn)
{
	for (uint32_t k = 0; k < STACK_CACHE_PROBES; k++)
		if (cache_get(&set->t[(set->first + k) & set->mask], ip, table, w, fn))
			return 1;
	return 0;
}

/* Into ip's own entry (one whose object was unloaded), else the first free
 * slot, else over the first slot's: an eviction. */
static void cache_insert(const struct cache_set *set, uintptr_t ip, uintptr_t table, uint64_t w,
                         uintptr_t fn)
{
	struct cache_entry *free_slot = NULL;
	for (uint32_t k = 0; k < STACK_CACHE_PROBES; k++) {
		struct cache_entry *e = &set->t[(set->first + k) & set->mask];
		uint64_t key = __atomic_load_n(&e->ip, __ATOMIC_RELAXED);
		if (key == ip) {
			cache_put(e, ip, table, w, fn);
			return;
		}
		if (key == 0 && free_slot == NULL)
			free_slot = e;
	}
	if (free_slot == NULL) {
		/* The victim turns round the probes: two hot addresses with one
		 * home slot would otherwise evict each other at every walk. */
		uint64_t n = __atomic_fetch_add(&cache_evictions, 1, __ATOMIC_RELAXED);
		free_slot = &set->t[(set->first + (uint32_t)(n % STACK_CACHE_PROBES)) & set->mask];
	} else {
		__atomic_fetch_add(&cache_used, 1, __ATOMIC_RELAXED);
	}
	cache_put(free_slot, ip, table, w, fn);
}

size_t stack_cache_entries(void)
{
	if (__atomic_load_n(&cache_full, __ATOMIC_ACQUIRE) != NULL)
		return STACK_CACHE_SIZE;
	return __atomic_load_n(&cache_small, __ATOMIC_ACQUIRE) != NULL ? STACK_CACHE_SMALL : 0;
}

/* ---- reading .eh_frame ------------------------------------------------------ */

/* Bytes [p, end) of a copy of the table: the byte at p is at address
 * p + delta in the object (pc-relative pointers are taken from there). */
struct reader {
	const uint8_t *p, *end;
	int bad;
	intptr_t delta;
};

static uint64_t get_u(struct reader *rd, size_t n)
{
	if (rd->bad || (size_t)(rd->end - rd->p) < n) {
		rd->bad = 1;
		return 0;
	}
	uint64_t v = 0;
	memcpy(&v, rd->p, n); /* little-endian */
	rd->p += n;
	return v;
}

static uint64_t get_uleb(struct reader *rd)
{
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		uint8_t b = (uint8_t)get_u(rd, 1);
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	rd->bad = 1;
	return 0;
}

static int64_t get_sleb(struct reader *rd)
{
	int64_t v = 0;
	unsigned shift = 0;
	uint8_t b;
	do {
		b = (uint8_t)get_u(rd, 1);
		v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
		shift += 7;
	} while ((b & 0x80) && shift < 64 && !rd->bad);
	if (shift < 64 && (b & 0x40))
		v |= -((int64_t)1 << shift);
	return v;
}

/* A pointer in DW_EH_PE encoding enc; datarel relative to `data`. */
static uintptr_t get_encoded(struct reader *rd, uint8_t enc, uintptr_t data)
{
	uintptr_t at = (uintptr_t)rd->p + (uintptr_t)rd->delta, v;
	switch (enc & 0x0f) {
	case 0x00:
		v = (uintptr_t)get_u(rd, 8);
		break;
	case 0x01:
		v = (uintptr_t)get_uleb(rd);
		break;
	case 0x02:
		v = (uintptr_t)get_u(rd, 2);
		break;
	case 0x03:
		v = (uintptr_t)get_u(rd, 4);
		break;
	case 0x04:
		v = (uintptr_t)get_u(rd, 8);
		break;
	case 0x09:
		v = (uintptr_t)get_sleb(rd);
		break;
	case 0x0a:
		v = (uintptr_t)(int64_t)(int16_t)get_u(rd, 2);
		break;
	case 0x0b:
		v = (uintptr_t)(int64_t)(int32_t)get_u(rd, 4);
		break;
	case 0x0c:
		v = (uintptr_t)get_u(rd, 8);
		break;
	default:
		rd->bad = 1;
		return 0;
	}
	switch (enc & 0x70) {
	case 0x00:
		break;
	case 0x10:
		v += at;
		break;
	case 0x30:
		v += data;
		break;
	default:
		rd->bad = 1;
		return 0;
	}
	if (enc & 0x80) /* indirect: only for personality routines, skipped */
		v = 0;
	return v;
}

/* The registers' rules while the instructions run. */
struct state {
	uint32_t cfa_reg;
	int64_t cfa_off;
	uint8_t rbp_kind, ra_kind; /* 0 unchanged, 1 saved at CFA + off, 2 other */
	int64_t rbp_off, ra_off;
};

#define STATE_STACK 8

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	uint8_t has_aug_data; /* 'z': FDEs carry augmentation data */
	const uint8_t *insns, *end;
};

/* Run instructions [p, end) from location loc until it passes ip; the
 * state starts as *st (initial: the CIE's, for DW_CFA_restore). 0 on an
 * instruction this file does not follow where it matters. */
static int __attribute__((cold))
run(const struct cie *c, const uint8_t *p, const uint8_t *end, uintptr_t loc, uintptr_t ip,
    struct state *st, const struct state *initial)
{
	struct state stack[STATE_STACK];
	unsigned depth = 0;
	struct reader rd = {p, end, 0, 0};
	while (rd.p < rd.end && !rd.bad) {
		uint8_t op = (uint8_t)get_u(&rd, 1);
		uint64_t reg, delta = 0;
		int64_t off;
		switch (op >> 6) {
		case 1:
			delta = (op & 0x3f) * c->code_align;
			goto advance;
		case 2:
			reg = op & 0x3f;
			off = (int64_t)get_uleb(&rd) * c->data_align;
			goto set_offset;
		case 3:
			reg = op & 0x3f;
			goto restore;
		}
		switch (op) {
		case 0x00:
			break; /* nop */
		case 0x02:
			delta = get_u(&rd, 1) * c->code_align;
			goto advance;
		case 0x03:
			delta = get_u(&rd, 2) * c->code_align;
			goto advance;
		case 0x04:
			delta = get_u(&rd, 4) * c->code_align;
			goto advance;
		case 0x05:
			reg = get_uleb(&rd);
			off = (int64_t)get_uleb(&rd) * c->data_align;
			goto set_offset;
		case 0x11:
			reg = get_uleb(&rd);
			off = get_sleb(&rd) * c->data_align;
			goto set_offset;
		case 0x06:
			reg = get_uleb(&rd);
			goto restore;
		case 0x07: /* undefined */
		case 0x08: /* same value */
			reg = get_uleb(&rd);
			if (reg == DW_RBP)
				st->rbp_kind = op == 0x08 ? 0 : 2;
			if (reg == c->ra_reg)
				st->ra_kind = 2;
			break;
		case 0x09: /* register */
			reg = get_uleb(&rd);
			get_uleb(&rd);
			if (reg == DW_RBP)
				st->rbp_kind = 2;
			if (reg == c->ra_reg)
				st->ra_kind = 2;
			break;
		case 0x0a:
			if (depth == STATE_STACK)
				return 0;
			stack[depth++] = *st;
			break;
		case 0x0b:
			if (depth == 0)
				return 0;
			*st = stack[--depth];
			break;
		case 0x0c:
			st->cfa_reg = (uint32_t)get_uleb(&rd);
			st->cfa_off = (int64_t)get_uleb(&rd);
			break;
		case 0x12:
			st->cfa_reg = (uint32_t)get_uleb(&rd);
			st->cfa_off = get_sleb(&rd) * c->data_align;
			break;
		case 0x0d:
			st->cfa_reg = (uint32_t)get_uleb(&rd);
			break;
		case 0x0e:
			st->cfa_off = (int64_t)get_uleb(&rd);
			break;
		case 0x13:
			st->cfa_off = get_sleb(&rd) * c->data_align;
			break;
		case 0x0f:
			return 0; /* CFA from an expression: signal frames, PLT */
		case 0x10:        /* expression */
		case 0x16:        /* val_expression */
			reg = get_uleb(&rd);
			rd.p += get_uleb(&rd);
			if (reg == DW_RBP)
				st->rbp_kind = 2;
			if (reg == c->ra_reg)
				st->ra_kind = 2;
			break;
		case 0x14: /* val_offset */
		case 0x15: /* val_offset_sf */
			reg = get_uleb(&rd);
			if (op == 0x14)
				get_uleb(&rd);
			else
				get_sleb(&rd);
			if (reg == DW_RBP)
				st->rbp_kind = 2;
			if (reg == c->ra_reg)
				st->ra_kind = 2;
			break;
		case 0x2e:
			get_uleb(&rd);
			break; /* GNU_args_size */
		case 0x2f:     /* GNU_negative_offset_extended */
			reg = get_uleb(&rd);
			off = -(int64_t)get_uleb(&rd) * c->data_align;
			goto set_offset;
		default:
			return 0;
		}
		continue;
	advance:
		loc += delta;
		if (loc > ip)
			return 1;
		continue;
	set_offset:
		if (reg == DW_RBP) {
			st->rbp_kind = 1;
			st->rbp_off = off;
		}
		if (reg == c->ra_reg) {
			st->ra_kind = 1;
			st->ra_off = off;
		}
		continue;
	restore:
		if (initial == NULL)
			return 0;
		if (reg == DW_RBP) {
			st->rbp_kind = initial->rbp_kind;
			st->rbp_off = initial->rbp_off;
		}
		if (reg == c->ra_reg) {
			st->ra_kind = initial->ra_kind;
			st->ra_off = initial->ra_off;
		}
	}
	return !rd.bad;
}

/* ---- where a table's bytes come from -------------------------------------
 *
 * Reading an FDE through the object's mapping makes the kernel map the
 * 64 KiB around each page the binary search and the FDE touch
 * (fault-around): the samples of `python3 -c pass` made 256 KiB of
 * libpython's .eh_frame_hdr and .eh_frame resident and 64 KiB of libc's,
 * a program that never asks for a profile paying for one
 * (docs/log/2026-11-27-fixed-rss.md). So a table is read from the object's
 * file with pread, which maps nothing. The file is opened for the one
 * read and closed (a descriptor kept open could be closed, or reused, by
 * the program), and trusted only when its notes (the GNU build-id among
 * them) equal the bytes mapped: the file may have been replaced since it
 * was loaded. An object with no build-id, no file (the vDSO), or a file
 * that cannot be opened or read is read through its mapping. Reads happen
 * only when the cache misses (a return address seen for the first time),
 * so the reader and the CFA program's interpreter are `cold` (compiled for
 * size, and every page of .text is resident in every process).
 */
#define SRC_SEGS 8u
#define SRC_PHDRS 16u
#define SRC_NOTES 512u
#define FDE_BYTES 2048u
#define CIE_BYTES 512u
/* Table entries (8 bytes each) a search reads at once at its end. */
#define TABLE_RUN 32u

struct src {
	int fd;           /* -1: read the mapping */
	uintptr_t l_addr; /* the object's load bias */
	unsigned nseg;
	struct {
		uintptr_t vaddr, filesz;
		uint64_t off;
	} seg[SRC_SEGS]; /* PT_LOAD segments' file bytes */
};

/* Tests turn file reads off to compare with the mapping's. */
static int file_reads = 1;
static uint64_t tables_from_file;

void stack_read_files(int on)
{
	__atomic_store_n(&file_reads, on, __ATOMIC_RELAXED);
}

/* The segment of s whose file bytes hold [v, v + n) (v: an address less
 * the load bias), or s->nseg where none does. */
static unsigned seg_of(const struct src *s, uintptr_t v, size_t n)
{
	for (unsigned i = 0; i < s->nseg; i++)
		if (v >= s->seg[i].vaddr && v - s->seg[i].vaddr <= s->seg[i].filesz &&
		    n <= s->seg[i].filesz - (v - s->seg[i].vaddr))
			return i;
	return s->nseg;
}

/* n bytes at the object's address addr into buf: 1, or 0 where they are
 * not all in one segment of the file or cannot be read. */
static int src_read(const struct src *s, uintptr_t addr, void *buf, size_t n)
{
	if (s->fd < 0) {
		memcpy(buf, (const void *)addr, n);
		return 1;
	}
	const unsigned i = seg_of(s, addr - s->l_addr, n);
	return i < s->nseg &&
	       os_pread(s->fd, buf, n, s->seg[i].off + (addr - s->l_addr - s->seg[i].vaddr)) ==
	           (long)n;
}

/* Is there an NT_GNU_BUILD_ID note among the notes [p, p + n)? */
static int __attribute__((cold)) has_build_id(const uint8_t *p, size_t n)
{
	size_t at = 0;
	while (n - at >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr h;
		memcpy(&h, p + at, sizeof(h));
		size_t body = sizeof(h) + ((h.n_namesz + 3u) & ~3u) + ((h.n_descsz + 3u) & ~3u);
		if (body > n - at)
			return 0;
		if (h.n_type == NT_GNU_BUILD_ID && h.n_namesz == 4 && h.n_descsz != 0 &&
		    memcmp(p + at + sizeof(h), "GNU", 4) == 0)
			return 1;
		at += body;
	}
	return 0;
}

/* Open the file of the object m names, mapped from start, if it is the
 * mapped one (its ELF header is the bytes at start, its first segment maps
 * them, and its notes are the mapped ones): s->fd >= 0 then (src_close
 * closes it); else s reads the mapping. */
static void __attribute__((cold)) src_open(struct src *s, const struct link_map *m, uintptr_t start)
{
	s->fd = -1;
	s->nseg = 0;
	if (m == NULL || !__atomic_load_n(&file_reads, __ATOMIC_RELAXED))
		return;
	const char *path = m->l_name != NULL && m->l_name[0] != '\0' ? m->l_name : "/proc/self/exe";
	int fd = os_open_read(path);
	if (fd < 0)
		return;
	Elf64_Ehdr eh;
	Elf64_Phdr ph[SRC_PHDRS];
	int ok = os_pread(fd, &eh, sizeof(eh), 0) == (long)sizeof(eh) &&
	         memcmp(&eh, (const void *)start, sizeof(eh)) == 0 &&
	         memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
	         eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum <= SRC_PHDRS &&
	         os_pread(fd, ph, eh.e_phnum * sizeof(Elf64_Phdr), eh.e_phoff) ==
	             (long)(eh.e_phnum * sizeof(Elf64_Phdr));
	for (unsigned i = 0; ok && i < eh.e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		if (s->nseg == SRC_SEGS) {
			ok = 0;
			break;
		}
		s->seg[s->nseg].vaddr = ph[i].p_vaddr;
		s->seg[s->nseg].filesz = ph[i].p_filesz;
		s->seg[s->nseg].off = ph[i].p_offset;
		s->nseg++;
	}
	/* The header read at start is this file's only if its first segment
	 * maps it there. Notes are compared only where a loaded segment holds
	 * them (mapped). */
	if (ok && (s->nseg == 0 || s->seg[0].off != 0 ||
	           m->l_addr + (s->seg[0].vaddr & ~(uintptr_t)4095) != start))
		ok = 0;
	int id = 0;
	for (unsigned i = 0; ok && i < eh.e_phnum; i++) {
		if (ph[i].p_type != PT_NOTE)
			continue;
		uint8_t notes[SRC_NOTES];
		size_t n = ph[i].p_filesz;
		if (n > sizeof(notes) || seg_of(s, ph[i].p_vaddr, n) == s->nseg ||
		    os_pread(fd, notes, n, ph[i].p_offset) != (long)n ||
		    memcmp(notes, (const void *)(m->l_addr + ph[i].p_vaddr), n) != 0)
			ok = 0;
		else
			id |= has_build_id(notes, n);
	}
	if (!ok || !id) {
		os_close(fd);
		s->nseg = 0;
		return;
	}
	s->fd = fd;
	s->l_addr = m->l_addr;
}

static void src_close(struct src *s)
{
	if (s->fd >= 0)
		os_close(s->fd);
	s->fd = -1;
}

/* Copy the record (CIE or FDE) at addr, its length word included, into
 * buf[cap]: its length; 0 for a record this file does not read (a
 * terminator, 64-bit DWARF); -1 when it does not fit or cannot be read. */
static long __attribute__((cold))
src_record(const struct src *s, uintptr_t addr, uint8_t *buf, size_t cap)
{
	uint32_t len;
	if (!src_read(s, addr, &len, 4))
		return -1;
	if (len < 4 || len == 0xffffffffu)
		return 0;
	if (len > cap - 4)
		return -1;
	memcpy(buf, &len, 4);
	return src_read(s, addr + 4, buf + 4, len) ? (long)len + 4 : -1;
}

/* The bytes of a pointer in DW_EH_PE encoding enc: at most 8 (uleb and
 * sleb counted as 8: .eh_frame_hdr does not use them). */
static size_t enc_size(uint8_t enc)
{
	switch (enc & 0x07) {
	case 0x02:
		return 2;
	case 0x03:
		return 4;
	default:
		return 8;
	}
}

/* Parse the CIE copied to p (at address p + delta); 0 if it is not one
 * this file reads. */
static int __attribute__((cold))
read_cie(const uint8_t *p, size_t size, intptr_t delta, struct cie *c)
{
	struct reader rd = {p, p + size, 0, delta};
	get_u(&rd, 4); /* the length, checked by src_record */
	if (get_u(&rd, 4) != 0)
		return 0; /* not a CIE */
	uint8_t version = (uint8_t)get_u(&rd, 1);
	const char *aug = (const char *)rd.p;
	size_t alen = strnlen(aug, (size_t)(rd.end - rd.p));
	rd.p += alen + 1;
	c->code_align = get_uleb(&rd);
	c->data_align = get_sleb(&rd);
	c->ra_reg = version == 1 ? get_u(&rd, 1) : get_uleb(&rd);
	c->fde_enc = 0; /* absptr */
	c->has_aug_data = alen > 0 && aug[0] == 'z';
	if (c->has_aug_data) {
		uint64_t n = get_uleb(&rd);
		const uint8_t *after = rd.p + n;
		for (size_t i = 1; i < alen && !rd.bad; i++) {
			if (aug[i] == 'R')
				c->fde_enc = (uint8_t)get_u(&rd, 1);
			else if (aug[i] == 'P')
				get_encoded(&rd, (uint8_t)get_u(&rd, 1), 0);
			else if (aug[i] == 'L')
				get_u(&rd, 1);
			else if (aug[i] == 'S')
				return 0; /* a signal frame: the stack ends here for us */
			else
				return 0;
		}
		rd.p = after;
	} else if (alen > 0) {
		return 0;
	}
	if (rd.bad || rd.p > rd.end)
		return 0;
	c->insns = rd.p;
	c->end = rd.end;
	return 1;
}

/* The rule at ip from the unwind table at address hdr (an
 * .eh_frame_hdr), its bytes read from s: 1; 0 where there is none this
 * file follows; -1 where s could not give the bytes. */
static int __attribute__((cold))
rule_from_table(uintptr_t ip, uintptr_t hdr, const struct src *s, struct rule *r)
{
	uint8_t h[4 + 16];
	if (!src_read(s, hdr, h, 4))
		return -1;
	if (h[0] != 1 || h[3] != 0x3b) /* version 1, table of datarel sdata4 pairs */
		return 0;
	/* The two encoded pointers before the table. */
	size_t need = enc_size(h[1]) + enc_size(h[2]);
	if (!src_read(s, hdr + 4, h + 4, need))
		return -1;
	struct reader rd = {h + 4, h + 4 + need, 0, (intptr_t)(hdr - (uintptr_t)h)};
	get_encoded(&rd, h[1], hdr);
	uint64_t count = (uint64_t)get_encoded(&rd, h[2], hdr);
	if (rd.bad || count == 0)
		return 0;
	uintptr_t table = hdr + (uintptr_t)(rd.p - h);
	/* The last entry whose start is at most ip: one read per halving down
	 * to TABLE_RUN entries, then one read of those. */
	int32_t e[2 * TABLE_RUN];
	uint64_t lo = 0, hi = count;
	while (hi - lo > TABLE_RUN) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (!src_read(s, table + 8 * mid, e, 4))
			return -1;
		if (hdr + (uintptr_t)(intptr_t)e[0] <= ip)
			lo = mid;
		else
			hi = mid;
	}
	if (!src_read(s, table + 8 * lo, e, 8 * (size_t)(hi - lo)))
		return -1;
	unsigned k = 0;
	while (lo + k + 1 < hi && hdr + (uintptr_t)(intptr_t)e[2 * (k + 1)] <= ip)
		k++;
	if (hdr + (uintptr_t)(intptr_t)e[2 * k] > ip)
		return 0;
	uintptr_t fde_at = hdr + (uintptr_t)(intptr_t)e[2 * k + 1];
	uint8_t fde[FDE_BYTES];
	long fde_len = src_record(s, fde_at, fde, sizeof(fde));
	if (fde_len < 8)
		return fde_len < 0 ? -1 : 0;
	struct reader fr = {fde + 4, fde + fde_len, 0, (intptr_t)(fde_at - (uintptr_t)fde)};
	uint32_t cie_off = (uint32_t)get_u(&fr, 4);
	uintptr_t cie_at = fde_at + 4 - cie_off;
	uint8_t cie_buf[CIE_BYTES];
	long cie_len = cie_off == 0 ? 0 : src_record(s, cie_at, cie_buf, sizeof(cie_buf));
	if (cie_len < 0)
		return -1;
	struct cie c;
	if (cie_len < 8 ||
	    !read_cie(cie_buf, (size_t)cie_len, (intptr_t)(cie_at - (uintptr_t)cie_buf), &c))
		return 0;
	uintptr_t begin = get_encoded(&fr, c.fde_enc, 0);
	uintptr_t range = get_encoded(&fr, c.fde_enc & 0x0f, 0);
	if (fr.bad || ip < begin || ip >= begin + range)
		return 0;
	if (c.has_aug_data)
		fr.p += get_uleb(&fr);
	if (fr.bad || fr.p > fr.end)
		return 0;
	struct state st = {DW_RSP, 8, 0, 1, 0, -8};
	if (!run(&c, c.insns, c.end, begin, (uintptr_t)-1, &st, NULL))
		return 0;
	struct state initial = st;
	if (!run(&c, fr.p, fr.end, begin, ip, &st, &initial))
		return 0;
	if ((st.cfa_reg != DW_RSP && st.cfa_reg != DW_RBP) || st.ra_kind != 1 || st.ra_off != -8 ||
	    st.rbp_kind == 2)
		return 0;
	r->cfa_rbp = st.cfa_reg == DW_RBP;
	r->cfa_off = st.cfa_off;
	r->rbp_off = st.rbp_kind == 1 ? st.rbp_off : 0;
	r->fn = begin;
	return 1;
}

/* What a walk keeps of an object: its mapping and its unwind table. */
struct object {
	uintptr_t start, end;
	const uint8_t *eh_frame;
	const struct link_map *map;
};

/* The object holding this file's code, where every walk starts: found at
 * the first walk (self_state 0 none, 1 being written, 2 ready), and not
 * unloaded while its code runs. */
static struct object self_obj;
static int self_state;

/* The rule at ip; 0 where the walk ends. obj is the object this walk found
 * last (*found: there is one): an address inside its mapping is in it, as
 * _dl_find_object would say again (the object's code is on this stack), so
 * a walk looks up each object it passes through once, not each frame
 * (counted in *looked). */
static int rule_at(uintptr_t ip, struct object *obj, int *found, unsigned *looked, struct rule *r)
{
	if (!*found || ip < obj->start || ip >= obj->end) {
		struct dl_find_object o;
		(*looked)++;
		*found = _dl_find_object((void *)ip, &o) == 0;
		if (!*found)
			return 0;
		obj->start = (uintptr_t)o.dlfo_map_start;
		obj->end = (uintptr_t)o.dlfo_map_end;
		obj->eh_frame = o.dlfo_eh_frame;
		obj->map = o.dlfo_link_map;
	}
	if (obj->eh_frame == NULL)
		return 0;
	uintptr_t table = (uintptr_t)obj->eh_frame;
	struct cache_set set = cache_set_of(ip);
	uint64_t w;
	uintptr_t fn;
	if (set.t != NULL && cache_find(&set, ip, table, &w, &fn)) {
		if (w == RULE_NONE)
			return 0;
		unpack(w, r);
		r->fn = fn;
		return 1;
	}
	__atomic_add_fetch(&tables_read, 1, __ATOMIC_RELAXED);
	struct src s;
	src_open(&s, obj->map, obj->start);
	int ok = rule_from_table(ip, table, &s, r);
	if (s.fd >= 0) {
		src_close(&s);
		if (ok >= 0)
			__atomic_add_fetch(&tables_from_file, 1, __ATOMIC_RELAXED);
		else /* past what the file reader copies: the mapping's bytes */
			ok = rule_from_table(ip, table, &s, r);
	}
	if (ok <= 0) {
		if (set.t != NULL)
			cache_insert(&set, ip, table, RULE_NONE, 0);
		return 0;
	}
	/* Rules that do not fit the packing are not cached. */
	if (set.t != NULL && r->cfa_off == (int32_t)r->cfa_off && r->rbp_off == (int16_t)r->rbp_off)
		cache_insert(&set, ip, table, pack(r), r->fn);
	return 1;
}

void stack_counts(uint64_t *objects, uint64_t *tables, uint64_t *from_file)
{
	*objects = __atomic_load_n(&objects_found, __ATOMIC_RELAXED);
	*tables = __atomic_load_n(&tables_read, __ATOMIC_RELAXED);
	*from_file = __atomic_load_n(&tables_from_file, __ATOMIC_RELAXED);
}

/* ---- across cgo: the Go frames that called C ---------------------------------
 *
 * Go's code has no .eh_frame, so a walk from C code that Go called (cgo)
 * ends at the return address inside runtime.asmcgocall, which switched from
 * the goroutine's stack to the thread's (g0) before calling C. That frame
 * is known exactly (Go 1.17 on, amd64; asm_amd64.s): the C function's CFA
 * is asmcgocall's stack pointer at its `CALL AX`, with the goroutine (g) at
 * CFA + 48 and the depth of the goroutine's stack pointer below its top
 * (g.stack.hi) at CFA + 40; asmcgocall saved that stack pointer and the
 * caller's frame pointer in g.sched. Go keeps frame pointers on amd64, so
 * from there the Go frames are a chain: [bp] the caller's bp, [bp + 8] the
 * return address. The walk goes on into them only when the return address
 * is followed by asmcgocall's own instructions and g.sched.sp agrees with
 * the depth, and reads only inside the goroutine's stack, each frame above
 * the last: anything else ends it, as before. */

/* What follows asmcgocall's `CALL AX` (ff d0): MOVQ 48(SP), DI (g);
 * MOVQ 8(DI), SI (g.stack.hi); SUBQ 40(SP), SI (the depth). */
static const uint8_t go_cgo_return[] = {0x48, 0x8b, 0x7c, 0x24, 0x30, 0x48, 0x8b,
                                        0x77, 0x08, 0x48, 0x2b, 0x74, 0x24, 0x28};

/* runtime.g's fields (runtime2.go: stack{lo, hi}, stackguard0, stackguard1,
 * _panic, _defer, m, then sched, a gobuf{sp, pc, g, ctxt, ret, lr, bp}). */
#define GO_G_STACK_LO 0u
#define GO_G_STACK_HI 8u
#define GO_G_SCHED 56u
#define GO_G_SCHED_SP (GO_G_SCHED + 0u)
#define GO_G_SCHED_BP (GO_G_SCHED + 48u)
/* A goroutine's stack is at most 1 GiB (runtime.maxstacksize on 64 bits). */
#define GO_STACK_MAX ((uintptr_t)1 << 30)

static uintptr_t word_at(uintptr_t a)
{
	return *(const uintptr_t *)a;
}

/* ip: the return address where the walk ended, in obj; cfa: its frame's
 * CFA. Appends the Go frames to pc[], fn[] (0: Go's functions have no FDE)
 * from pc[n] on; returns the new depth. */
static unsigned go_frames(uintptr_t ip, uintptr_t cfa, const struct object *obj, uintptr_t *pc,
                          uintptr_t *fn, unsigned n, unsigned max)
{
	if (ip < obj->start + 2 || ip + sizeof go_cgo_return > obj->end)
		return n;
	const uint8_t *code = (const uint8_t *)ip;
	if (code[-2] != 0xff || code[-1] != 0xd0)
		return n;
	for (size_t i = 0; i < sizeof go_cgo_return; i++)
		if (code[i] != go_cgo_return[i])
			return n;
	uintptr_t g = word_at(cfa + 48), depth = word_at(cfa + 40);
	if (g == 0 || (g & 7) != 0)
		return n;
	uintptr_t lo = word_at(g + GO_G_STACK_LO), hi = word_at(g + GO_G_STACK_HI);
	if (lo >= hi || hi - lo > GO_STACK_MAX || depth == 0 || depth >= hi - lo)
		return n;
	uintptr_t sp = hi - depth, bp = word_at(g + GO_G_SCHED_BP);
	if ((sp & 7) != 0 || word_at(g + GO_G_SCHED_SP) != sp)
		return n;
	/* asmcgocall's return address (in runtime.cgocall), then the chain. */
	uintptr_t ra = word_at(sp);
	while (ra != 0 && n < max) {
		pc[n] = ra - 1;
		fn[n] = 0;
		n++;
		if (bp <= sp || bp > hi - 16 || (bp & 7) != 0)
			break;
		ra = word_at(bp + 8);
		sp = bp;
		bp = word_at(bp);
	}
	return n;
}

/* ---- the walk --------------------------------------------------------------- */

/* A CFA this far above the stack pointer is taken for a broken rule. */
#define STACK_FRAME_MAX ((uintptr_t)1 << 26)

__attribute__((noinline)) unsigned stack_capture(uintptr_t *pc, uintptr_t *fn, unsigned max)
{
	uintptr_t ip, sp, bp;
	/* This function's own registers, at an address inside it whose rule
	 * the tables give. */
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
	                 : "=r"(ip), "=r"(sp), "=r"(bp));
	unsigned n = 0;
	int exact = 1, found = 0;
	unsigned looked = 0; /* objects looked up */
	struct object obj;
	int self = __atomic_load_n(&self_state, __ATOMIC_ACQUIRE) == 2;
	if (self) {
		obj = self_obj;
		found = 1;
	}
	for (;;) {
		struct rule r;
		if (!rule_at(exact ? ip : ip - 1, &obj, &found, &looked, &r)) {
			if (!exact && found && n < max)
				n = go_frames(ip, sp, &obj, pc, fn, n, max);
			break;
		}
		int none = 0;
		if (!self && __atomic_compare_exchange_n(&self_state, &none, 1, 0, __ATOMIC_ACQUIRE,
		                                         __ATOMIC_RELAXED)) {
			self_obj = obj; /* found: this walk's first rule came from it */
			__atomic_store_n(&self_state, 2, __ATOMIC_RELEASE);
		}
		self = 1;
		if (n > 0)
			fn[n - 1] = r.fn;
		uintptr_t cfa = (r.cfa_rbp ? bp : sp) + (uintptr_t)r.cfa_off;
		if (cfa <= sp || cfa - sp > STACK_FRAME_MAX || (cfa & 7) != 0)
			break;
		uintptr_t ra = *(const uintptr_t *)(cfa - 8);
		if (r.rbp_off != 0)
			bp = *(const uintptr_t *)(cfa + (uintptr_t)r.rbp_off);
		sp = cfa;
		if (ra == 0 || n == max)
			break;
		pc[n] = ra - 1;
		fn[n] = 0;
		n++;
		ip = ra;
		exact = 0;
	}
	if (looked != 0)
		__atomic_store_n(&objects_found,
		                 __atomic_load_n(&objects_found, __ATOMIC_RELAXED) + looked,
		                 __ATOMIC_RELAXED);
	return n;
}

const char *stack_object(uintptr_t pc, uintptr_t *base)
{
	struct dl_find_object obj;
	if (_dl_find_object((void *)pc, &obj) != 0 || obj.dlfo_link_map == NULL)
		return NULL;
	*base = (uintptr_t)obj.dlfo_link_map->l_addr;
	return obj.dlfo_link_map->l_name != NULL ? obj.dlfo_link_map->l_name : "";
}
