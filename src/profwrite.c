/*
 * profwrite.c — a heap profile as pprof reads it: profile.proto, gzipped,
 * written from inside the process without malloc.
 *
 * The writer may run inside the allocator's slow path, on any thread, so
 * it takes nothing from the allocator or from libc's heap: every buffer is
 * an os_alloc mapping sized up front and unmapped before returning, every
 * system call is an os.c helper, and it holds no lock (prof.c serialises
 * writers if it cares about their order). No stdio, no opendir, no
 * dl_iterate_phdr: each of those may call malloc.
 *
 * The steps, each over memory sized from the step before:
 *
 *   1. Mappings. /proc/self/maps, read whole (the buffer doubles until it
 *      fits), gives every executable file mapping (perms "..x.", path
 *      starting '/'): its range, file offset and path. Each distinct file
 *      is opened once to find its GNU build ID in a PT_NOTE segment, which
 *      is how pprof checks that the binary it finds on disk is the one
 *      that ran. The main executable (/proc/self/exe) gets the first ids:
 *      pprof takes mapping 1 for the main binary, and a command line's
 *      BINARY replaces it.
 *   2. Locations. One per distinct address of all stacks, numbered in order
 *      of first appearance through an open-addressing table (linear
 *      probing, at most half full); each names the mapping containing it
 *      (binary search over the address-ordered maps), or 0 for none
 *      (JIT code, an unmapped library).
 *   3. Encoding. The Profile message written field by field into a buffer
 *      whose size is bounded beforehand (every varint at its longest), so
 *      it never grows. Nested messages (Sample, Location, Mapping) are short
 *      and bounded too; each is encoded on the stack and then copied behind
 *      its length. String indexes are fixed before anything is written.
 *   4. gzip. A single DEFLATE block with the fixed Huffman codes (RFC 1951
 *      3.2.6) after greedy LZ77 matching on hash chains of 3-byte prefixes
 *      over a 32 KiB window. A profile repeats itself (tags, small ids,
 *      addresses sharing their high bytes), which matching catches; dynamic
 *      Huffman tables would gain a little more for much more code. The
 *      output is bounded by 9 bits per input byte (no symbol costs more per
 *      byte it covers than a 9-bit literal), so its buffer never grows.
 *   5. The file: PATH.tmp.PID written whole, closed (its error counts too),
 *      renamed onto PATH; a reader sees the old profile or the new one,
 *      never half of one. On any failure the temporary file is unlinked.
 */
#include "profwrite.h"

#include "os.h"

#include <elf.h>
#include <errno.h>
#include <string.h>

/* ---- memory --------------------------------------------------------------- */

/* One os_alloc mapping and its size, for os_unmap. */
struct region {
	void *p;
	size_t size;
};

static void *region_alloc(struct region *r, size_t size)
{
	r->size = size != 0 ? size : 1;
	r->p = os_alloc(r->size);
	if (r->p == NULL)
		errno = ENOMEM;
	return r->p;
}

static void region_free(struct region *r)
{
	os_unmap(r->p, r->size);
	r->p = NULL;
	r->size = 0;
}

/* a * b, or SIZE_MAX when it overflows (an allocation that then fails). */
static size_t mul_sat(size_t a, size_t b)
{
	size_t r;
	return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

static size_t add_sat(size_t a, size_t b)
{
	return a + b < a ? SIZE_MAX : a + b;
}

/* ---- step 1: mappings ------------------------------------------------------ */

/* The first size tried for /proc/self/maps; doubled until it fits. A
 * program with a few dozen libraries has ~20 KiB of maps. */
#define MAPS_FIRST_CAP ((size_t)64 << 10)
/* A GNU build ID is 20 bytes (SHA-1) by default; linkers allow up to 64. */
#define BUILD_ID_MAX 64u
/* Note segments are a few hundred bytes; a larger one is not read whole. */
#define NOTE_MAX ((size_t)64 << 10)
/* Linux's PATH_MAX, the longest /proc/self/exe can name. */
#define EXE_PATH_MAX 4096u

struct pmap {
	uint64_t start, limit, offset;
	const char *name; /* NUL-terminated, inside the maps buffer */
	uint64_t id;      /* Mapping.id: 1 for the main executable's first */
	uint32_t name_str, build_id_str;
};

/* Read /proc/self/maps whole into r: its length, or -1 with errno set. */
static long read_maps(struct region *r)
{
	for (size_t cap = MAPS_FIRST_CAP;; cap *= 2) {
		if (region_alloc(r, cap) == NULL)
			return -1;
		long n = os_read_file("/proc/self/maps", r->p, cap);
		if (n < 0)
			return -1;
		if ((size_t)n < cap - 1)
			return n;
		region_free(r); /* it may have been cut: read again, larger */
	}
}

static const char *parse_hex(const char *s, uint64_t *v)
{
	uint64_t x = 0;
	for (;; s++) {
		unsigned d;
		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (*s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else
			break;
		x = x << 4 | d;
	}
	*v = x;
	return s;
}

static const char *skip_field(const char *s)
{
	while (*s != ' ' && *s != '\0')
		s++;
	while (*s == ' ')
		s++;
	return s;
}

/* Parse one line of maps, "start-limit perms offset dev inode   path", NUL-
 * terminated: 1 and *m filled if it maps a file executable, else 0. */
static int parse_maps_line(char *line, struct pmap *m)
{
	const char *s = parse_hex(line, &m->start);
	if (*s != '-')
		return 0;
	s = parse_hex(s + 1, &m->limit);
	if (*s != ' ' || strlen(s) < 6 || s[3] != 'x')
		return 0;
	s = skip_field(s + 1); /* perms */
	s = parse_hex(s, &m->offset);
	s = skip_field(skip_field(skip_field(s))); /* offset, dev, inode */
	if (*s != '/')
		return 0;
	m->name = s;
	return 1;
}

/* The lowercase hex of the NT_GNU_BUILD_ID note of the ELF file at path
 * into hex (2 * BUILD_ID_MAX + 1 bytes): its length, 0 if there is none or
 * the file cannot be read. note is a scratch buffer of NOTE_MAX bytes. */
static size_t read_build_id(const char *path, char *hex, unsigned char *note)
{
	size_t len = 0;
	int fd = os_open_read(path);
	if (fd < 0)
		return 0;
	Elf64_Ehdr eh;
	if (os_pread(fd, &eh, sizeof(eh), 0) != (long)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr))
		goto out;
	for (unsigned i = 0; i < eh.e_phnum && len == 0; i++) {
		Elf64_Phdr ph;
		if (os_pread(fd, &ph, sizeof(ph), eh.e_phoff + (uint64_t)i * sizeof(ph)) !=
		    (long)sizeof(ph))
			goto out;
		if (ph.p_type != PT_NOTE)
			continue;
		size_t size = ph.p_filesz < NOTE_MAX ? (size_t)ph.p_filesz : NOTE_MAX;
		long got = os_pread(fd, note, size, ph.p_offset);
		if (got <= 0)
			continue;
		/* Notes are padded to the segment's alignment: 4, or 8 for the
		 * segment that holds .note.gnu.property. */
		size_t align = ph.p_align == 8 ? 8 : 4, off = 0;
		while (off + sizeof(Elf64_Nhdr) <= (size_t)got) {
			Elf64_Nhdr nh;
			memcpy(&nh, note + off, sizeof(nh));
			size_t name_at = off + sizeof(nh);
			size_t desc_at = name_at + ((nh.n_namesz + align - 1) & ~(align - 1));
			size_t next = desc_at + ((nh.n_descsz + align - 1) & ~(align - 1));
			if (desc_at + nh.n_descsz > (size_t)got || next <= off)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp(note + name_at, "GNU", 4) == 0 && nh.n_descsz > 0 &&
			    nh.n_descsz <= BUILD_ID_MAX) {
				for (size_t k = 0; k < nh.n_descsz; k++) {
					hex[len++] = "0123456789abcdef"[note[desc_at + k] >> 4];
					hex[len++] = "0123456789abcdef"[note[desc_at + k] & 15];
				}
				break;
			}
			off = next;
		}
	}
out:
	hex[len] = '\0';
	os_close(fd);
	return len;
}

/* ---- strings ---------------------------------------------------------------- */

struct pstr {
	const char *s;
	size_t len;
};

/* The string table's fixed entries, in their order (index 0 must be ""). */
enum {
	S_EMPTY,
	S_ALLOC_OBJECTS,
	S_COUNT,
	S_ALLOC_SPACE,
	S_BYTES,
	S_INUSE_OBJECTS,
	S_INUSE_SPACE,
	S_SPACE,
	S_FIXED
};
static const char *const fixed_strings[S_FIXED] = {
    "", "alloc_objects", "count", "alloc_space", "bytes", "inuse_objects", "inuse_space", "space",
};

/* ---- step 3: protobuf encoding -------------------------------------------------- */

enum { WIRE_VARINT = 0, WIRE_BYTES = 2 };

/* A buffer sized beforehand for everything written to it. */
struct pb {
	uint8_t *p;
	size_t len;
};

static void pb_varint(struct pb *b, uint64_t v)
{
	b->len += profw_varint(b->p + b->len, v);
}

static void pb_uint(struct pb *b, unsigned field, uint64_t v)
{
	pb_varint(b, (uint64_t)field << 3 | WIRE_VARINT);
	pb_varint(b, v);
}

static void pb_bytes(struct pb *b, unsigned field, const void *p, size_t len)
{
	pb_varint(b, (uint64_t)field << 3 | WIRE_BYTES);
	pb_varint(b, len);
	memcpy(b->p + b->len, p, len);
	b->len += len;
}

/* Profile's fields (profile.proto). */
enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE = 2,
	PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4,
	PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11,
	PROFILE_PERIOD = 12,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	VALUETYPE_TYPE = 1,
	VALUETYPE_UNIT = 2,
	SAMPLE_LOCATION_ID = 1,
	SAMPLE_VALUE = 2,
	MAPPING_ID = 1,
	MAPPING_MEMORY_START = 2,
	MAPPING_MEMORY_LIMIT = 3,
	MAPPING_FILE_OFFSET = 4,
	MAPPING_FILENAME = 5,
	MAPPING_BUILD_ID = 6,
	LOCATION_ID = 1,
	LOCATION_MAPPING_ID = 2,
	LOCATION_ADDRESS = 3,
};

/* A Sample: PROF_MAX_DEPTH packed ids and 4 packed values, each at most a
 * varint, with two tags and two lengths. */
#define SAMPLE_MAX ((PROF_MAX_DEPTH + 4) * PROFW_VARINT_MAX + 2 * (1 + PROFW_VARINT_MAX))
/* A Location or Mapping: at most 6 varint fields with 1-byte tags. */
#define SMALL_MSG_MAX (6 * (1 + PROFW_VARINT_MAX))
/* A field holding a nested message: its tag, its length, the message. */
#define NESTED(max) (1 + PROFW_VARINT_MAX + (max))

static void pb_value_type(struct pb *b, unsigned field, uint32_t type, uint32_t unit)
{
	uint8_t buf[SMALL_MSG_MAX];
	struct pb m = {buf, 0};
	pb_uint(&m, VALUETYPE_TYPE, type);
	pb_uint(&m, VALUETYPE_UNIT, unit);
	pb_bytes(b, field, m.p, m.len);
}

/* ---- step 2: locations ------------------------------------------------------- */

/* Address -> Location id, open addressing with linear probing; a slot with
 * id 0 is empty. Sized to a power of two at least twice the frames, so it
 * is at most half full and every probe sequence ends soon. */
struct loc_slot {
	uintptr_t addr;
	uint64_t id;
};

struct locs {
	struct loc_slot *slots;
	size_t mask;
	uintptr_t *addr; /* addr[id - 1]: the Locations in id order */
	size_t n;
};

static uint64_t loc_id(struct locs *t, uintptr_t addr)
{
	size_t i = (size_t)((addr * 0x9e3779b97f4a7c15ull) >> 17) & t->mask;
	for (;; i = (i + 1) & t->mask) {
		if (t->slots[i].id == 0) {
			t->addr[t->n++] = addr;
			t->slots[i].addr = addr;
			t->slots[i].id = t->n;
			return t->n;
		}
		if (t->slots[i].addr == addr)
			return t->slots[i].id;
	}
}

/* The id of the mapping holding addr (maps sorted by address), or 0. */
static uint64_t mapping_of(const struct pmap *maps, size_t n, uintptr_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < maps[mid].start)
			hi = mid;
		else if (addr >= maps[mid].limit)
			lo = mid + 1;
		else
			return maps[mid].id;
	}
	return 0;
}

/* ---- step 4: gzip ------------------------------------------------------------ */

#define WINDOW_BITS 15u
#define WINDOW ((size_t)1 << WINDOW_BITS) /* DEFLATE's farthest distance */
#define HASH_BITS 15u
#define MIN_MATCH 3u
#define MAX_MATCH 258u
/* Candidates tried per position: enough for a profile's repeats, bounded
 * so a run of equal bytes cannot make matching quadratic. */
#define CHAIN_MAX 64u
#define GZIP_HEADER 10u
#define GZIP_TRAILER 8u

/* The LZ77 tables: head[hash] and prev[pos % WINDOW], each a position + 1
 * (0: none), so the zeroed memory of os_alloc is an empty table. */
#define GZIP_WORK (((size_t)1 << HASH_BITS) * 4 + WINDOW * 4)

struct bitw {
	uint8_t *p;
	size_t len;
	uint64_t acc;
	unsigned nacc;
};

static void put_bits(struct bitw *w, uint32_t v, unsigned n)
{
	w->acc |= (uint64_t)v << w->nacc;
	w->nacc += n;
	while (w->nacc >= 8) {
		w->p[w->len++] = (uint8_t)w->acc;
		w->acc >>= 8;
		w->nacc -= 8;
	}
}

/* Huffman codes go out most significant bit first, in a stream that is
 * otherwise least significant bit first: reversed. */
static void put_code(struct bitw *w, uint32_t code, unsigned n)
{
	uint32_t r = 0;
	for (unsigned i = 0; i < n; i++)
		r |= ((code >> i) & 1u) << (n - 1 - i);
	put_bits(w, r, n);
}

/* The fixed literal/length code (RFC 1951 3.2.6). */
static void put_litlen(struct bitw *w, unsigned sym)
{
	if (sym < 144)
		put_code(w, 0x30 + sym, 8);
	else if (sym < 256)
		put_code(w, 0x190 + sym - 144, 9);
	else if (sym < 280)
		put_code(w, sym - 256, 7);
	else
		put_code(w, 0xc0 + sym - 280, 8);
}

static const uint16_t len_base[29] = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                      15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                      67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t dist_base[30] = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static void put_match(struct bitw *w, unsigned len, unsigned dist)
{
	/* The last code whose base fits: 258 is code 285, not 284 + 31. */
	unsigned l = 28;
	while (len_base[l] > len)
		l--;
	put_litlen(w, 257 + l);
	put_bits(w, len - len_base[l], len_extra[l]);
	unsigned d = 29;
	while (dist_base[d] > dist)
		d--;
	put_code(w, d, 5);
	put_bits(w, dist - dist_base[d], dist_extra[d]);
}

static uint32_t hash3(const uint8_t *p)
{
	uint32_t v = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
	return (v * 2654435761u) >> (32 - HASH_BITS);
}

static uint32_t crc32(const uint8_t *p, size_t n)
{
	/* A table on the stack: no global state to initialise. */
	uint32_t table[256];
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
		table[i] = c;
	}
	uint32_t crc = 0xffffffffu;
	for (size_t i = 0; i < n; i++)
		crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return crc ^ 0xffffffffu;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

size_t profw_gzip_bound(size_t n)
{
	/* 9 bits a byte, the block header and end code (10 bits), a partial
	 * byte, the gzip header and trailer. */
	return add_sat(add_sat(n, n / 8), 2 + 1 + GZIP_HEADER + GZIP_TRAILER);
}

size_t profw_gzip(const uint8_t *in, size_t n, uint8_t *out)
{
	struct region work;
	uint32_t *head = region_alloc(&work, GZIP_WORK);
	if (head == NULL)
		return 0;
	uint32_t *prev = head + ((size_t)1 << HASH_BITS);

	/* RFC 1952: magic, CM=8 (deflate), no flags, no mtime, XFL 0, OS=3
	 * (Unix). */
	static const uint8_t header[GZIP_HEADER] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
	memcpy(out, header, sizeof(header));
	struct bitw w = {out, GZIP_HEADER, 0, 0};
	put_bits(&w, 1, 1); /* BFINAL: the only block */
	put_bits(&w, 1, 2); /* BTYPE 01: fixed Huffman codes */

	for (size_t i = 0; i < n;) {
		size_t best = 0, best_dist = 0;
		uint32_t h = 0;
		if (n - i >= MIN_MATCH) {
			h = hash3(in + i);
			size_t max = n - i < MAX_MATCH ? n - i : MAX_MATCH;
			uint32_t cand = head[h];
			for (unsigned chain = 0; cand != 0 && chain < CHAIN_MAX; chain++) {
				size_t c = cand - 1;
				if (i - c > WINDOW)
					break;
				size_t len = 0;
				while (len < max && in[c + len] == in[i + len])
					len++;
				if (len > best) {
					best = len;
					best_dist = i - c;
					if (len == max)
						break;
				}
				cand = prev[c & (WINDOW - 1)];
				if (cand == 0 || cand - 1 >= c) /* chains only go back */
					break;
			}
			prev[i & (WINDOW - 1)] = head[h];
			head[h] = (uint32_t)(i + 1);
		}
		if (best < MIN_MATCH) {
			put_litlen(&w, in[i]);
			i++;
			continue;
		}
		put_match(&w, (unsigned)best, (unsigned)best_dist);
		/* The positions inside the match start chains too: later text may
		 * repeat from any of them. */
		for (size_t k = i + 1; k < i + best && n - k >= MIN_MATCH; k++) {
			uint32_t hk = hash3(in + k);
			prev[k & (WINDOW - 1)] = head[hk];
			head[hk] = (uint32_t)(k + 1);
		}
		i += best;
	}
	put_litlen(&w, 256); /* end of block */
	if (w.nacc > 0)
		put_bits(&w, 0, 8 - w.nacc);

	put_le32(out + w.len, crc32(in, n));
	put_le32(out + w.len + 4, (uint32_t)n); /* ISIZE: the length mod 2^32 */
	region_free(&work);
	return w.len + GZIP_TRAILER;
}

/* ---- step 5: the file ------------------------------------------------------------ */

/* path + ".tmp." + the pid, into tmp (strlen(path) + 32 bytes). */
static void temp_name(char *tmp, const char *path)
{
	size_t len = strlen(path);
	memcpy(tmp, path, len);
	memcpy(tmp + len, ".tmp.", 5);
	len += 5;
	char digits[20];
	size_t nd = 0;
	unsigned long pid = (unsigned long)os_getpid();
	do {
		digits[nd++] = (char)('0' + pid % 10);
		pid /= 10;
	} while (pid != 0);
	while (nd > 0)
		tmp[len++] = digits[--nd];
	tmp[len] = '\0';
}

static int write_file(const char *path, const uint8_t *data, size_t len)
{
	struct region name;
	char *tmp = region_alloc(&name, strlen(path) + 32);
	if (tmp == NULL)
		return -1;
	temp_name(tmp, path);
	int rc = -1;
	int fd = os_open_write(tmp);
	if (fd >= 0) {
		int wrote = os_write_all(fd, data, len);
		int saved = errno;
		if (os_close(fd) == 0 && wrote == 0)
			rc = os_rename(tmp, path);
		else if (wrote != 0)
			errno = saved; /* the write's error, not close's */
		if (rc != 0) {
			saved = errno;
			os_unlink(tmp);
			errno = saved;
		}
	}
	int saved = errno;
	region_free(&name);
	errno = saved;
	return rc;
}

/* ---- profw_write ----------------------------------------------------------------- */

struct writer {
	struct region maps_text, maps_r, strs_r, hex_r, note_r, exe_r, slots_r, addr_r, pb_r, gz_r;
	struct pmap *maps;
	size_t nmaps;
	struct pstr *strs;
	size_t nstrs;
	struct locs locs;
};

static void writer_free(struct writer *w)
{
	int saved = errno;
	struct region *all[] = {&w->maps_text, &w->maps_r,  &w->strs_r, &w->hex_r, &w->note_r,
	                        &w->exe_r,     &w->slots_r, &w->addr_r, &w->pb_r,  &w->gz_r};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		region_free(all[i]);
	errno = saved;
}

static uint32_t add_string(struct writer *w, const char *s, size_t len)
{
	w->strs[w->nstrs].s = s;
	w->strs[w->nstrs].len = len;
	return (uint32_t)w->nstrs++;
}

/* Step 1: the executable file mappings, in address order, with ids (the
 * main executable's first) and their strings. 0 or -1. */
static int collect_mappings(struct writer *w)
{
	long len = read_maps(&w->maps_text);
	if (len < 0)
		return -1;
	char *text = w->maps_text.p;
	size_t lines = 1;
	for (long i = 0; i < len; i++)
		lines += text[i] == '\n';
	if (region_alloc(&w->maps_r, mul_sat(lines, sizeof(struct pmap))) == NULL ||
	    region_alloc(&w->strs_r, mul_sat(add_sat(S_FIXED, 2 * lines), sizeof(struct pstr))) ==
	        NULL ||
	    region_alloc(&w->hex_r, mul_sat(lines, 2 * BUILD_ID_MAX + 1)) == NULL ||
	    region_alloc(&w->note_r, NOTE_MAX) == NULL ||
	    region_alloc(&w->exe_r, EXE_PATH_MAX) == NULL)
		return -1;
	w->maps = w->maps_r.p;
	w->strs = w->strs_r.p;
	for (unsigned i = 0; i < S_FIXED; i++)
		add_string(w, fixed_strings[i], strlen(fixed_strings[i]));

	for (char *line = text; *line != '\0';) {
		char *end = strchr(line, '\n');
		char *next = end != NULL ? end + 1 : line + strlen(line);
		if (end != NULL)
			*end = '\0';
		if (parse_maps_line(line, &w->maps[w->nmaps]))
			w->nmaps++;
		line = next;
	}

	/* Ids: the main executable's mappings first, then the rest, each in
	 * address order. Without /proc/self/exe every mapping is "the rest". */
	char *exe = w->exe_r.p;
	if (os_readlink("/proc/self/exe", exe, EXE_PATH_MAX) < 0)
		exe[0] = '\0';
	uint64_t id = 1;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < w->nmaps; i++)
			if ((strcmp(w->maps[i].name, exe) == 0) == (pass == 0))
				w->maps[i].id = id++;

	/* Strings, and one build ID read per file: an earlier mapping of the
	 * same file lends its indexes. */
	char *hex = w->hex_r.p;
	for (size_t i = 0; i < w->nmaps; i++) {
		struct pmap *m = &w->maps[i];
		size_t j = 0;
		while (j < i && strcmp(w->maps[j].name, m->name) != 0)
			j++;
		if (j < i) {
			m->name_str = w->maps[j].name_str;
			m->build_id_str = w->maps[j].build_id_str;
			continue;
		}
		m->name_str = add_string(w, m->name, strlen(m->name));
		char *h = hex + i * (2 * BUILD_ID_MAX + 1);
		size_t hlen = read_build_id(m->name, h, w->note_r.p);
		m->build_id_str = hlen > 0 ? add_string(w, h, hlen) : S_EMPTY;
	}
	return 0;
}

/* Step 2: every address of every stack gets its Location id. 0 or -1. */
static int collect_locations(struct writer *w, const struct profw_site *sites, size_t n,
                             size_t frames)
{
	size_t cap = 16;
	while (cap < 2 * frames)
		cap *= 2;
	w->locs.slots = region_alloc(&w->slots_r, mul_sat(cap, sizeof(struct loc_slot)));
	w->locs.addr = region_alloc(&w->addr_r, mul_sat(frames, sizeof(uintptr_t)));
	if (w->locs.slots == NULL || w->locs.addr == NULL)
		return -1;
	w->locs.mask = cap - 1;
	for (size_t s = 0; s < n; s++)
		for (uint32_t k = 0; k < sites[s].depth && k < PROF_MAX_DEPTH; k++)
			loc_id(&w->locs, sites[s].pc[k]);
	return 0;
}

/* Step 3: the Profile message into b. */
static void encode(struct writer *w, struct pb *b, const struct profw_site *sites, size_t n,
                   const struct profw_info *info)
{
	pb_value_type(b, PROFILE_SAMPLE_TYPE, S_ALLOC_OBJECTS, S_COUNT);
	pb_value_type(b, PROFILE_SAMPLE_TYPE, S_ALLOC_SPACE, S_BYTES);
	pb_value_type(b, PROFILE_SAMPLE_TYPE, S_INUSE_OBJECTS, S_COUNT);
	pb_value_type(b, PROFILE_SAMPLE_TYPE, S_INUSE_SPACE, S_BYTES);

	for (size_t s = 0; s < n; s++) {
		const struct profw_site *site = &sites[s];
		uint32_t depth = site->depth < PROF_MAX_DEPTH ? site->depth : PROF_MAX_DEPTH;
		uint8_t packed_buf[(PROF_MAX_DEPTH + 4) * PROFW_VARINT_MAX], msg_buf[SAMPLE_MAX];
		struct pb msg = {msg_buf, 0}, packed = {packed_buf, 0};
		for (uint32_t k = 0; k < depth; k++)
			pb_varint(&packed, loc_id(&w->locs, site->pc[k]));
		pb_bytes(&msg, SAMPLE_LOCATION_ID, packed.p, packed.len);
		packed.len = 0;
		pb_varint(&packed, (uint64_t)site->alloc_objects);
		pb_varint(&packed, (uint64_t)site->alloc_space);
		pb_varint(&packed, (uint64_t)site->inuse_objects);
		pb_varint(&packed, (uint64_t)site->inuse_space);
		pb_bytes(&msg, SAMPLE_VALUE, packed.p, packed.len);
		pb_bytes(b, PROFILE_SAMPLE, msg.p, msg.len);
	}

	for (uint64_t id = 1; id <= w->nmaps; id++) {
		size_t i = 0;
		while (w->maps[i].id != id)
			i++;
		const struct pmap *m = &w->maps[i];
		uint8_t buf[SMALL_MSG_MAX];
		struct pb msg = {buf, 0};
		pb_uint(&msg, MAPPING_ID, m->id);
		pb_uint(&msg, MAPPING_MEMORY_START, m->start);
		pb_uint(&msg, MAPPING_MEMORY_LIMIT, m->limit);
		pb_uint(&msg, MAPPING_FILE_OFFSET, m->offset);
		pb_uint(&msg, MAPPING_FILENAME, m->name_str);
		pb_uint(&msg, MAPPING_BUILD_ID, m->build_id_str);
		pb_bytes(b, PROFILE_MAPPING, msg.p, msg.len);
	}

	for (size_t i = 0; i < w->locs.n; i++) {
		uint8_t buf[SMALL_MSG_MAX];
		struct pb msg = {buf, 0};
		pb_uint(&msg, LOCATION_ID, i + 1);
		pb_uint(&msg, LOCATION_MAPPING_ID, mapping_of(w->maps, w->nmaps, w->locs.addr[i]));
		pb_uint(&msg, LOCATION_ADDRESS, w->locs.addr[i]);
		pb_bytes(b, PROFILE_LOCATION, msg.p, msg.len);
	}

	for (size_t i = 0; i < w->nstrs; i++)
		pb_bytes(b, PROFILE_STRING_TABLE, w->strs[i].s, w->strs[i].len);

	pb_uint(b, PROFILE_TIME_NANOS, (uint64_t)info->time_ns);
	pb_uint(b, PROFILE_DURATION_NANOS, (uint64_t)info->duration_ns);
	pb_value_type(b, PROFILE_PERIOD_TYPE, S_SPACE, S_BYTES);
	pb_uint(b, PROFILE_PERIOD, (uint64_t)info->period);
	pb_uint(b, PROFILE_DEFAULT_SAMPLE_TYPE, S_INUSE_SPACE);
}

/* The most bytes encode writes. */
static size_t encoded_bound(const struct writer *w, size_t n)
{
	size_t size =
	    4 * NESTED(SMALL_MSG_MAX) + NESTED(SMALL_MSG_MAX) + 4 * (1 + PROFW_VARINT_MAX);
	size = add_sat(size, mul_sat(n, NESTED(SAMPLE_MAX)));
	size = add_sat(size, mul_sat(w->nmaps + w->locs.n, NESTED(SMALL_MSG_MAX)));
	for (size_t i = 0; i < w->nstrs; i++)
		size = add_sat(size, NESTED(w->strs[i].len));
	return size;
}

int profw_write(const char *path, const struct profw_site *sites, size_t n,
                const struct profw_info *info)
{
	struct writer w;
	memset(&w, 0, sizeof(w));
	size_t frames = 0;
	for (size_t s = 0; s < n; s++)
		frames += sites[s].depth < PROF_MAX_DEPTH ? sites[s].depth : PROF_MAX_DEPTH;

	int rc = -1;
	struct pb b = {NULL, 0};
	uint8_t *gz = NULL;
	size_t gz_len = 0;
	if (collect_mappings(&w) == 0 && collect_locations(&w, sites, n, frames) == 0 &&
	    (b.p = region_alloc(&w.pb_r, encoded_bound(&w, n))) != NULL) {
		encode(&w, &b, sites, n, info);
		gz = region_alloc(&w.gz_r, profw_gzip_bound(b.len));
	}
	if (gz != NULL && (gz_len = profw_gzip(b.p, b.len, gz)) != 0)
		rc = write_file(path, gz, gz_len);
	writer_free(&w);
	return rc;
}
