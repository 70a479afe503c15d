/*
 * test_profwrite.c — the heap-profile writer (src/profwrite.c): its gzip
 * encoder byte for byte, and the file it leaves (or does not leave).
 *
 * The encoder's output for short inputs is fixed by RFC 1951 once the
 * matcher's choices are (greedy: the longest match at each position), so
 * those cases compare whole members: header, block, CRC-32 and ISIZE. Each
 * case's name spells out its symbols; its bytes were decoded by hand and by
 * Python's zlib.decompress(raw, -15) back to the input (zlib's own encoder
 * picks differently: for "aaaaaaaaaa" two literals and a match of 8).
 * Longer and random inputs are round-tripped through gzip(1) by
 * tests/profwrite_check.sh, which also reads the profiles with the real
 * client, `go tool pprof`.
 *
 * The profiles' stacks are real code addresses: inside site_alpha and
 * site_beta below (not static, not inlined, so the binary's symbol table
 * names them) and inside the C library's getpid(), so pprof has a main
 * binary and a library to symbolize (getpid, because no sanitizer runtime
 * intercepts it: &write would be libasan's). profw_write must not call
 * malloc (it runs inside the allocator): this program defines malloc,
 * calloc, realloc and free, forwarding to glibc's, and counts the calls
 * made while a profile is being written (not under a sanitizer, whose
 * runtime owns malloc).
 *
 * Modes for profwrite_check.sh (besides the cmocka run with no argument):
 *   test_profwrite --write FILE         the three sites of accept_sites
 *   test_profwrite --write-many FILE N  N sites of 8 frames each
 *   test_profwrite --gzip               gzip stdin to stdout with profw_gzip
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "profwrite.h"
#include "testutil.h"

/* ---- counting malloc -------------------------------------------------------- */

static int counting;
static unsigned heap_calls;

/* A sanitizer's runtime owns malloc; there the calls go uncounted. */
#if !TU_UNDER_SANITIZER
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

void *malloc(size_t size)
{
	heap_calls += counting;
	return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	heap_calls += counting;
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	heap_calls += counting;
	return __libc_realloc(p, size);
}

void free(void *p)
{
	heap_calls += counting && p != NULL;
	__libc_free(p);
}
#endif

/* profw_write, with the heap calls it made in *calls. */
static int write_counted(const char *path, const struct profw_site *sites, size_t n,
                         const struct profw_info *info, unsigned *calls)
{
	heap_calls = 0;
	counting = 1;
	int rc = profw_write(path, sites, n, info);
	int saved = errno;
	counting = 0;
	*calls = heap_calls;
	errno = saved;
	return rc;
}

/* ---- the sites ---------------------------------------------------------------- */

__attribute__((noinline)) int site_alpha(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}

__attribute__((noinline)) int site_beta(int x)
{
	__asm__ volatile("" : "+r"(x));
	return site_alpha(x) + 7;
}

/* Filled by make_sites: function pointers are not constants a table can
 * hold as integers. */
static uintptr_t stack_a[2], stack_b[2], stack_c[1];

/* The acceptance profile; profwrite_check.sh asserts these numbers. */
static struct profw_site accept_sites[3] = {
    {stack_a, 2, 3, 3145728, 1, 1048576},
    {stack_b, 2, 5, 2621440, 2, 524288},
    {stack_c, 1, 7, 7340032, 0, 0},
};
static const struct profw_info accept_info = {
    .period = 524288, .time_ns = 1700000000000000000, .duration_ns = 1000000000};

static void make_sites(void)
{
	uintptr_t alpha = (uintptr_t)site_alpha + 1, beta = (uintptr_t)site_beta + 1;
	uintptr_t libc = (uintptr_t)getpid + 1;
	stack_a[0] = alpha;
	stack_a[1] = beta;
	stack_b[0] = beta;
	stack_b[1] = libc;
	stack_c[0] = libc;
}

/* ---- files --------------------------------------------------------------------- */

static char tmpdir[64];

static int dir_setup(void **state)
{
	(void)state;
	tu_case = "";
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/profwrite.XXXXXX");
	return mkdtemp(tmpdir) != NULL ? 0 : -1;
}

static int dir_teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* The names in dir, sorted and joined by spaces, into out. */
static void list_dir(const char *dir, char *out, size_t cap)
{
	char names[16][256];
	size_t n = 0;
	DIR *d = opendir(dir);
	assert_non_null(d);
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		if (e->d_name[0] != '.' && n < 16)
			snprintf(names[n++], sizeof(names[0]), "%s", e->d_name);
	closedir(d);
	qsort(names, n, sizeof(names[0]), (int (*)(const void *, const void *))strcmp);
	/* Joined by hand: gcc's -Wformat-truncation (Release) takes an
	 * snprintf of a name into what is left for a possible truncation. */
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(names[i]);
		assert_true(at + (i > 0) + len < cap);
		if (i > 0)
			out[at++] = ' ';
		memcpy(out + at, names[i], len);
		at += len;
	}
	out[at] = '\0';
}

/* The whole file at path into a malloc'd buffer, its size in *len. */
static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc((size_t)size + 1);
	assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	*len = (size_t)size;
	return buf;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The gzip member's fixed header: magic, deflate, no flags, no mtime, OS
 * Unix. */
static const uint8_t gzip_header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};

/* ---- gzip ------------------------------------------------------------------------ */

static const struct gzip_case {
	const char *name, *in;
	size_t n;
	const char *deflate; /* the raw DEFLATE stream, hex */
	uint32_t crc;
} gzip_cases[] = {
    {"empty input: the end-of-block code alone", "", 0, "0300", 0},
    {"one literal", "a", 1, "4b0400", 0xe8b7be43},
    {"a literal, then a match of 9 at distance 1", "aaaaaaaaaa", 10, "4b840300", 0x4c11cdf0},
    {"three literals, then a match of 6 at distance 3", "abcabcabc", 9, "4b4c4a862000", 0x462d4818},
};

/* n bytes of the same letter: one literal, then matches at distance 1. */
static const struct run_case {
	const char *name;
	size_t n;
	const char *deflate;
	uint32_t crc;
} run_cases[] = {
    {"259 equal bytes: a literal and a match of 258 (code 285, not 284 + 31)", 259, "4b1c0500",
     0x34c2fa56},
    {"300 equal bytes: a literal, 258, then 41", 300, "4b1c05440300", 0x89971909},
};

static void check_member(const uint8_t *in, size_t n, const char *deflate, uint32_t crc)
{
	uint8_t out[512];
	assert_true(profw_gzip_bound(n) <= sizeof(out));
	size_t len = profw_gzip(in, n, out);
	size_t dlen = strlen(deflate) / 2;
	TU_EQ(len, sizeof(gzip_header) + dlen + 8);
	assert_memory_equal(out, gzip_header, sizeof(gzip_header));
	for (size_t i = 0; i < dlen; i++) {
		unsigned byte;
		sscanf(deflate + 2 * i, "%2x", &byte);
		TU_EQ(out[sizeof(gzip_header) + i], byte);
	}
	TU_EQ(le32(out + len - 8), crc);
	TU_EQ(le32(out + len - 4), n);
}

static void gzip_of_short_inputs_is_the_greedy_fixed_code_stream(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(gzip_cases) / sizeof(gzip_cases[0]); c++) {
		tu_case = gzip_cases[c].name;
		check_member((const uint8_t *)gzip_cases[c].in, gzip_cases[c].n,
		             gzip_cases[c].deflate, gzip_cases[c].crc);
	}
	for (size_t c = 0; c < sizeof(run_cases) / sizeof(run_cases[0]); c++) {
		tu_case = run_cases[c].name;
		uint8_t in[512];
		memset(in, 'a', run_cases[c].n);
		check_member(in, run_cases[c].n, run_cases[c].deflate, run_cases[c].crc);
	}
}

/* ---- writing --------------------------------------------------------------------- */

static void profile_lands_under_its_final_name_and_no_temporary_remains(void **state)
{
	(void)state;
	char path[128], names[512];
	snprintf(path, sizeof(path), "%s/heap.pb.gz", tmpdir);
	unsigned calls;
	TU_EQ(write_counted(path, accept_sites, 3, &accept_info, &calls), 0);
	TU_EQ(calls, 0);
	list_dir(tmpdir, names, sizeof(names));
	assert_string_equal(names, "heap.pb.gz");

	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	mode_t mask = umask(0);
	umask(mask);
	TU_EQ(st.st_mode & 0777, 0644 & ~mask);

	size_t len;
	uint8_t *gz = slurp(path, &len);
	assert_true(len > sizeof(gzip_header) + 8);
	assert_memory_equal(gz, gzip_header, sizeof(gzip_header));
	/* The profile's fixed parts alone (types, string table, mappings)
	 * come to more than the compressed file. */
	assert_true(le32(gz + len - 4) > len);
	free(gz);
}

static void empty_profile_is_written(void **state)
{
	(void)state;
	char path[128], names[512];
	snprintf(path, sizeof(path), "%s/empty.pb.gz", tmpdir);
	unsigned calls;
	TU_EQ(write_counted(path, NULL, 0, &accept_info, &calls), 0);
	TU_EQ(calls, 0);
	list_dir(tmpdir, names, sizeof(names));
	assert_string_equal(names, "empty.pb.gz");
}

static void second_write_replaces_the_first(void **state)
{
	(void)state;
	char path[128], names[512];
	snprintf(path, sizeof(path), "%s/heap.pb.gz", tmpdir);
	unsigned calls;
	TU_EQ(write_counted(path, accept_sites, 3, &accept_info, &calls), 0);
	size_t big_len, small_len;
	free(slurp(path, &big_len));
	TU_EQ(write_counted(path, accept_sites, 1, &accept_info, &calls), 0);
	uint8_t *gz = slurp(path, &small_len);
	assert_true(small_len < big_len);
	assert_memory_equal(gz, gzip_header, sizeof(gzip_header));
	free(gz);
	list_dir(tmpdir, names, sizeof(names));
	assert_string_equal(names, "heap.pb.gz");
}

static void unwritable_directory_fails_and_leaves_nothing(void **state)
{
	(void)state;
	unsigned calls;
	errno = 0;
	TU_EQ(write_counted("/proc/nonexistent/x", accept_sites, 3, &accept_info, &calls), -1);
	TU_EQ(errno, ENOENT);
	TU_EQ(calls, 0);
	assert_int_equal(access("/proc/nonexistent/x.tmp", F_OK), -1);
}

/* The temporary file is written, then the rename fails: the writer must
 * unlink what it wrote and report the rename's error. */
static void rename_onto_a_directory_fails_and_unlinks_the_temporary(void **state)
{
	(void)state;
	char path[128], inner[160], names[512];
	snprintf(path, sizeof(path), "%s/taken", tmpdir);
	snprintf(inner, sizeof(inner), "%s/file", path);
	assert_int_equal(mkdir(path, 0755), 0);
	FILE *f = fopen(inner, "w");
	assert_non_null(f);
	fclose(f);
	unsigned calls;
	errno = 0;
	TU_EQ(write_counted(path, accept_sites, 3, &accept_info, &calls), -1);
	TU_EQ(errno, EISDIR);
	TU_EQ(calls, 0);
	list_dir(tmpdir, names, sizeof(names));
	assert_string_equal(names, "taken");
}

/* The sites' addresses are where the test means them to be: the libc
 * frame inside a mapping of libc (not a PLT stub of this binary). */
static void libc_frame_is_in_libc(void **state)
{
	(void)state;
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	char line[512];
	int found = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		uintptr_t lo, hi;
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 && stack_c[0] >= lo &&
		    stack_c[0] < hi)
			found = strstr(line, "/libc.so") != NULL;
	}
	fclose(f);
	assert_true(found);
}

/* ---- modes for profwrite_check.sh ----------------------------------------------- */

/* An address below any mapping (vm.mmap_min_addr keeps the first 64 KiB
 * unmapped). */
#define UNMAPPED_PC ((uintptr_t)0x1000)

static int write_many(const char *path, size_t n)
{
	enum { DEPTH = 8 };
	struct profw_site *sites = calloc(n, sizeof(*sites));
	uintptr_t *pcs = calloc(n * DEPTH, sizeof(uintptr_t));
	uintptr_t alpha = (uintptr_t)site_alpha, beta = (uintptr_t)site_beta;
	for (size_t i = 0; i < n; i++) {
		/* Distinct stacks for i < 7 * 13 * 31, with frames that repeat
		 * across sites as a real program's callers do. */
		uintptr_t *pc = pcs + i * DEPTH;
		pc[0] = alpha + 1 + i % 7;
		pc[1] = beta + 1 + i % 13;
		pc[2] = beta + 1 + i % 31;
		for (int k = 3; k < DEPTH - 2; k++)
			pc[k] = beta + 1 + (uintptr_t)k;
		pc[DEPTH - 2] = UNMAPPED_PC; /* in no mapping: Location.mapping_id 0 */
		pc[DEPTH - 1] = (uintptr_t)getpid + 1;
		sites[i] = (struct profw_site){pc,
		                               DEPTH,
		                               (int64_t)i + 1,
		                               4096 * ((int64_t)i + 1),
		                               (int64_t)i / 2,
		                               4096 * ((int64_t)i / 2)};
	}
	int rc = profw_write(path, sites, n, &accept_info);
	free(pcs);
	free(sites);
	return rc;
}

static int gzip_stdin(void)
{
	size_t cap = 1 << 20, n = 0;
	uint8_t *in = malloc(cap);
	for (size_t r; (r = fread(in + n, 1, cap - n, stdin)) > 0;) {
		n += r;
		if (n == cap)
			in = realloc(in, cap *= 2);
	}
	uint8_t *out = malloc(profw_gzip_bound(n));
	size_t len = profw_gzip(in, n, out);
	int ok = len != 0 && fwrite(out, 1, len, stdout) == len;
	free(in);
	free(out);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	make_sites();
	if (argc == 3 && strcmp(argv[1], "--write") == 0)
		return profw_write(argv[2], accept_sites, 3, &accept_info) == 0 ? 0 : 1;
	if (argc == 4 && strcmp(argv[1], "--write-many") == 0)
		return write_many(argv[2], strtoul(argv[3], NULL, 10)) == 0 ? 0 : 1;
	if (argc == 2 && strcmp(argv[1], "--gzip") == 0)
		return gzip_stdin();

	const struct CMUnitTest tests[] = {
	    TU_TEST(gzip_of_short_inputs_is_the_greedy_fixed_code_stream),
	    TU_TEST(libc_frame_is_in_libc),
	    cmocka_unit_test_setup_teardown(
	        profile_lands_under_its_final_name_and_no_temporary_remains, dir_setup,
	        dir_teardown),
	    cmocka_unit_test_setup_teardown(empty_profile_is_written, dir_setup, dir_teardown),
	    cmocka_unit_test_setup_teardown(second_write_replaces_the_first, dir_setup,
	                                    dir_teardown),
	    TU_TEST(unwritable_directory_fails_and_leaves_nothing),
	    cmocka_unit_test_setup_teardown(rename_onto_a_directory_fails_and_unlinks_the_temporary,
	                                    dir_setup, dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
