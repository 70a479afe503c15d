/*
 * test_guard.c — guarded sampling (src/guard.h) through the pa_ API, with
 * guard_sample=1 (every block up to guard_max guarded).
 *
 * Fault cases: overflows (by one byte past a page, into the alignment gap
 * found by free and at exit, of a big block on a reservation of its own),
 * underflow, use after free (the first byte, inside; a big block), a
 * zero-size block read, double free, realloc after free, free_sized one
 * byte over and under.
 *
 * Every case runs in a forked child (tu_run_child) of a parent that never
 * touches the heap, so each child reads PAGEALLOC_CONF (set by main) and
 * makes the guarded pool and its SIGSEGV handler itself, after whatever
 * handler the case installs first. A fault case checks how the child died
 * (SIGSEGV for an access, SIGABRT for a bad free) and its one line on
 * stderr, word for word up to the stacks, which must name this program
 * (FILE+0xOFFSET frames); a case that checks values in the child exits 0
 * when they hold, else says what did not on stderr and exits 1.
 *
 * Under ASan the sanitizer owns SIGSEGV and under TSan the signal and the
 * forks are its: the fault cases are skipped there with a message.
 */
#include <signal.h>
#include <sys/mman.h>

#include "testutil.h"

#include "guard.h"
#include "pagealloc.h"

#define CONF "guard_sample=1,guard_max=256K,guard_underflow=on,scavenger=off"

/* Written by the child: the block and the address it touches. */
struct shared {
	uintptr_t ptr;
	uintptr_t addr;
};
static struct shared *shared;

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "failed: %s\n", what);
		_exit(1);
	}
}

/* A guarded block of n bytes: right-aligned (its end against the guard
 * page) or, with `left`, starting at its slot's start (guard_underflow
 * alternates). */
static char *guarded(size_t n, int left)
{
	for (int i = 0; i < 4; i++) {
		char *p = pa_malloc(n);
		check(guard_owns(p), "the block is guarded");
		int at_start = (uintptr_t)p % 4096 == 0 && (n % 4096 != 0 || left);
		if (left ? at_start : ((uintptr_t)p + n + 15) / 16 * 16 % 4096 == 0) {
			shared->ptr = (uintptr_t)p;
			return p;
		}
	}
	check(0, "a block placed as asked within four");
	return NULL;
}

/* Overflow into the alignment gap: change the guard byte at a, whatever it
 * holds. A fixed value would be the guard byte itself 1 write in 256 (a
 * write of 1 was, in 1 run in 6 of a Debug build under the first pattern:
 * docs/design/malloc.md, Guard bytes). */
static void spoil(char *a)
{
	volatile char *v = a;
	*v = (char)~*v;
}

static void touch_read(char *a)
{
	shared->addr = (uintptr_t)a;
	(void)*(volatile char *)a;
}

static void touch_write(char *a)
{
	shared->addr = (uintptr_t)a;
	*(volatile char *)a = 1;
}

/* ---- the fault cases --------------------------------------------------------- */

static void small_overflow_by_one(void)
{
	char *p = guarded(32, 0);
	touch_write(p + 32);
}

static void large_overflow_by_one(void)
{
	char *p = guarded(48 << 10, 0);
	touch_read(p + (48 << 10));
}

static void underflow_by_one(void)
{
	char *p = guarded(64, 1);
	touch_read(p - 1);
}

static void use_after_free_read(void)
{
	char *p = guarded(64, 0);
	pa_free(p);
	touch_read(p + 8);
}

static void use_after_free_write(void)
{
	char *p = guarded(100000, 0);
	pa_free(p);
	touch_write(p + 1000);
}

static void double_free(void)
{
	char *p = guarded(64, 0);
	pa_free(p);
	pa_free(p);
}

static void realloc_after_free(void)
{
	char *p = guarded(64, 0);
	pa_free(p);
	pa_realloc(p, 10);
}

static void free_sized_too_large(void)
{
	char *p = guarded(64, 0);
	pa_free_sized(p, 65);
}

/* A guarded block's size is its own exactly: one byte short is wrong too. */
static void free_sized_too_small(void)
{
	char *p = guarded(64, 0);
	pa_free_sized(p, 63);
}

static void use_after_free_at_the_start(void)
{
	char *p = guarded(64, 0);
	pa_free(p);
	touch_read(p);
}

/* 20 bytes end 12 bytes before the guard page (16-byte alignment): the
 * write lands in the gap, and free finds the guard byte changed. */
static void overflow_in_the_alignment_gap(void)
{
	char *p = guarded(20, 0);
	shared->addr = (uintptr_t)p + 20;
	spoil(p + 20);
	pa_free(p);
}

/* The same, the block still live at exit: the destructor finds it. */
static void overflow_in_the_alignment_gap_found_at_exit(void)
{
	char *p = guarded(20, 0);
	shared->addr = (uintptr_t)p + 27;
	spoil(p + 27);
	exit(0);
}

/* With guard_sample=1 a block larger than guard_max is guarded too, on a
 * reservation of its own. */
static void big_block_overflow_by_one(void)
{
	char *p = guarded(300 << 10, 0);
	touch_write(p + (300 << 10));
}

static void big_block_use_after_free(void)
{
	char *p = guarded(1 << 20, 0);
	pa_free(p);
	touch_read(p + 4096);
}

/* A zero-size block: its first byte is on the guard page. */
static void zero_size_read(void)
{
	char *p = pa_malloc(0);
	check(guard_owns(p), "the block is guarded");
	shared->ptr = (uintptr_t)p;
	touch_read(p);
}

struct fault_case {
	const char *name;
	void (*run)(void);
	int sig;
	const char *kind;  /* a format with the address and the block's pointer */
	size_t size;       /* the block's (the line's "N-byte block") */
	long off;          /* addr - ptr */
	int freed;         /* the line has a free stack */
	const char *found; /* an overflow found in the guard bytes: by what */
};

static const struct fault_case faults[] = {
    {"small overflow by one", small_overflow_by_one, SIGSEGV, "heap-buffer-overflow", 32, 32, 0,
     NULL},
    {"large overflow by one", large_overflow_by_one, SIGSEGV, "heap-buffer-overflow", 48 << 10,
     48 << 10, 0, NULL},
    {"underflow by one", underflow_by_one, SIGSEGV, "heap-buffer-underflow", 64, -1, 0, NULL},
    {"use after free, read", use_after_free_read, SIGSEGV, "use-after-free", 64, 8, 1, NULL},
    {"use after free, write", use_after_free_write, SIGSEGV, "use-after-free", 100000, 1000, 1,
     NULL},
    {"double free", double_free, SIGABRT, "free", 64, 0, 1, NULL},
    {"realloc after free", realloc_after_free, SIGABRT, "realloc", 64, 0, 1, NULL},
    {"free_sized too large", free_sized_too_large, SIGABRT, "free_sized", 64, 65, 0, NULL},
    {"free_sized too small", free_sized_too_small, SIGABRT, "free_sized", 64, 63, 0, NULL},
    {"use after free, first byte", use_after_free_at_the_start, SIGSEGV, "use-after-free", 64, 0, 1,
     NULL},
    {"overflow in the alignment gap", overflow_in_the_alignment_gap, SIGABRT,
     "heap-buffer-overflow", 20, 20, 1, "by free"},
    {"overflow in the alignment gap, at exit", overflow_in_the_alignment_gap_found_at_exit, SIGABRT,
     "heap-buffer-overflow", 20, 27, 0, "at exit"},
    {"big block overflow by one", big_block_overflow_by_one, SIGSEGV, "heap-buffer-overflow",
     300 << 10, 300 << 10, 0, NULL},
    {"big block use after free", big_block_use_after_free, SIGSEGV, "use-after-free", 1 << 20, 4096,
     1, NULL},
    {"zero-size block read", zero_size_read, SIGSEGV, "heap-buffer-overflow", 0, 0, 0, NULL},
};

static void run_fault(void *arg)
{
	((const struct fault_case *)arg)->run();
}

/* "N bytes past the end of" and the like: where addr is from the block. */
static void where_of(const struct fault_case *c, char *where, size_t cap)
{
	if (c->off >= (long)c->size)
		snprintf(where, cap, "%lu byte%s past the end of",
		         (unsigned long)(c->off - (long)c->size + 1),
		         c->off - (long)c->size == 0 ? "" : "s");
	else if (c->off < 0)
		snprintf(where, cap, "%ld byte%s before the start of", -c->off,
		         c->off == -1 ? "" : "s");
	else if (c->off == 0)
		snprintf(where, cap, "at the start of");
	else
		snprintf(where, cap, "%ld bytes inside", c->off);
}

/* The line expected up to the stacks. */
static void expected(const struct fault_case *c, char *want, size_t cap)
{
	uintptr_t p = shared->ptr, a = shared->addr;
	char where[64];
	where_of(c, where, sizeof(where));
	if (c->found != NULL) {
		snprintf(
		    want, cap,
		    "pagealloc: %s at %#" PRIxPTR ": %s a %zu-byte block at %#" PRIxPTR
		    ", written in the alignment gap before the guard page, found %s; allocated "
		    "at ",
		    c->kind, a, where, c->size, p, c->found);
	} else if (c->sig == SIGSEGV) {
		if (c->size == 0)
			a = p; /* the zero-size block's own first byte */
		snprintf(want, cap,
		         "pagealloc: %s at %#" PRIxPTR ": %s a %s%zu-byte block at %#" PRIxPTR
		         ", allocated at ",
		         c->kind, a, where, c->freed ? "freed " : "", c->size, p);
	} else if (strcmp(c->kind, "free_sized") == 0) {
		snprintf(want, cap,
		         "pagealloc: free_sized(%#" PRIxPTR "): wrong size: %ld bytes passed for a "
		         "%zu-byte guarded block (its size exactly); allocated at ",
		         p, c->off, c->size);
	} else {
		snprintf(want, cap,
		         "pagealloc: %s(%#" PRIxPTR "): guarded block is already free (%s); "
		         "allocated at ",
		         c->kind, p,
		         strcmp(c->kind, "free") == 0 ? "double free" : "use after free");
	}
}

static void every_fault_dies_with_one_line_naming_the_block(void **state)
{
	(void)state;
	if (TU_UNDER_SANITIZER) {
		print_message("skipped: the sanitizer owns SIGSEGV\n");
		return;
	}
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		const struct fault_case *c = &faults[i];
		tu_case = c->name;
		memset(shared, 0, sizeof(*shared));
		char err[4096], want[512];
		int status = tu_run_child(run_fault, (void *)c, err, sizeof(err));
		if (!WIFSIGNALED(status) || WTERMSIG(status) != c->sig)
			fail_msg("%s: child %s %d, want signal %d; stderr: \"%s\"", c->name,
			         WIFSIGNALED(status) ? "killed by signal" : "exited with",
			         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
			         c->sig, err);
		expected(c, want, sizeof(want));
		if (strncmp(err, want, strlen(want)) != 0)
			fail_msg("%s: stderr is\n\"%s\"\nwant it to start\n\"%s\"", c->name, err,
			         want);
		TU_EQ(tu_count_lines(err), 1);
		{
			/* The stacks name this program's frames: the test's own. */
			const char *alloc = err + strlen(want);
			if (strncmp(alloc, "test_guard+0x", 13) != 0)
				fail_msg("%s: allocation stack \"%s\"", c->name, alloc);
			const char *freed = strstr(err, ", freed at ");
			if (c->freed != (freed != NULL))
				fail_msg("%s: free stack %s: \"%s\"", c->name,
				         c->freed ? "missing" : "unexpected", err);
			if (freed != NULL && strncmp(freed + 11, "test_guard+0x", 13) != 0)
				fail_msg("%s: free stack \"%s\"", c->name, freed);
		}
	}
}

/* ---- a one-byte overflow of every size ----------------------------------------- */

/* arg: the size times 2, plus 1 to write a NUL (a string's terminator one
 * past the end, the commonest overflow) rather than to flip the byte. */
static void write_one_past(void *arg)
{
	size_t n = (size_t)(uintptr_t)arg / 2;
	int nul = (int)((uintptr_t)arg % 2);
	char *p = guarded(n, 0);
	shared->addr = (uintptr_t)p + n;
	if (n % 16 == 0)
		p[n] = 0; /* a fault at the page's end */
	else if (nul)
		p[n] = 0; /* in the alignment gap: guard bytes are never ASCII */
	else
		spoil(p + n);
	pa_free(p);
}

/* Whatever the size, a write one byte past the end is caught: by the guard
 * page (a size whose end is 16-aligned: SIGSEGV) or by the guard bytes when
 * the block is freed (SIGABRT), each with one line naming the byte. Each
 * size twice: a write that changes the byte, and a NUL, which the guard
 * bytes (0x80 and up) never hold. */
static void a_one_byte_overflow_of_every_size_is_caught(void **state)
{
	(void)state;
	if (TU_UNDER_SANITIZER) {
		print_message("skipped: the sanitizer owns SIGSEGV\n");
		return;
	}
	static const size_t more[] = {100, 1000, 4095, 4096, 4097, 65535, 100001, 300 << 10};
	for (size_t k = 2; k < 2 * (65 + sizeof(more) / sizeof(more[0])); k++) {
		size_t n = k / 2 <= 64 ? k / 2 : more[k / 2 - 65];
		char name[48], err[4096], want[256];
		snprintf(name, sizeof(name), "%zu bytes, %s", n, k % 2 ? "a NUL" : "changed");
		tu_case = name;
		memset(shared, 0, sizeof(*shared));
		int status = tu_run_child(write_one_past, (void *)(uintptr_t)(n * 2 + k % 2), err,
		                          sizeof(err));
		int sig = n % 16 == 0 ? SIGSEGV : SIGABRT;
		TU_EQ(WIFSIGNALED(status) ? WTERMSIG(status) : -1, sig);
		snprintf(want, sizeof(want),
		         "pagealloc: heap-buffer-overflow at %#" PRIxPTR
		         ": 1 byte past the end of a %zu-byte block at %#" PRIxPTR "%s",
		         shared->addr, n, shared->ptr,
		         sig == SIGSEGV ? ", allocated at "
		                        : ", written in the alignment gap before the guard page, "
		                          "found by free; allocated at ");
		if (strncmp(err, want, strlen(want)) != 0)
			fail_msg("%s: stderr is\n\"%s\"\nwant it to start\n\"%s\"", name, err,
			         want);
		TU_EQ(tu_count_lines(err), 1);
	}
	tu_case = "";
}

/* ---- the program's own SIGSEGV handler --------------------------------------- */

static void own_handler(int sig, siginfo_t *info, void *ctx)
{
	(void)sig;
	(void)ctx;
	static const char line[] = "own handler\n";
	if (info->si_addr == (void *)shared->addr)
		if (write(2, line, sizeof(line) - 1) < 0)
			_exit(43);
	_exit(42);
}

static void install_own(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = own_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	check(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction");
}

/* A fault outside the pool: a PROT_NONE page of the program's own. */
static void fault_outside_the_pool(void)
{
	char *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	check(page != MAP_FAILED, "mmap");
	touch_write(page + 10);
}

static void handler_before_the_pool(void *arg)
{
	(void)arg;
	install_own();
	pa_free(guarded(32, 0)); /* makes the pool: our handler chains to own_handler */
	fault_outside_the_pool();
}

static void handler_after_the_pool(void *arg)
{
	(void)arg;
	pa_free(guarded(32, 0));
	install_own();
	fault_outside_the_pool();
}

/* With no handler of the program's, a fault outside the pool dies of
 * SIGSEGV with nothing said. */
static void no_handler(void *arg)
{
	(void)arg;
	signal(SIGSEGV, SIG_DFL); /* cmocka's, inherited */
	pa_free(guarded(32, 0));
	fault_outside_the_pool();
}

static void faults_outside_the_pool_reach_the_programs_handler(void **state)
{
	(void)state;
	if (TU_UNDER_SANITIZER) {
		print_message("skipped: the sanitizer owns SIGSEGV\n");
		return;
	}
	char err[1024];
	int status = tu_run_child(handler_before_the_pool, NULL, err, sizeof(err));
	TU_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 42);
	assert_string_equal(err, "own handler\n");
	status = tu_run_child(handler_after_the_pool, NULL, err, sizeof(err));
	TU_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 42);
	assert_string_equal(err, "own handler\n");
	status = tu_run_child(no_handler, NULL, err, sizeof(err));
	TU_EQ(WIFSIGNALED(status) ? WTERMSIG(status) : -1, SIGSEGV);
	assert_string_equal(err, "");
}

/* ---- the API on guarded blocks ----------------------------------------------- */

static void api_on_guarded_blocks(void *arg)
{
	(void)arg;
	char *p = guarded(100, 0);
	check(pa_malloc_usable_size(p) == 100, "usable size is the size asked for");
	memset(p, 'x', 100);
	char *q = pa_realloc(p, 300);
	check(guard_owns(q) && q != p, "realloc moves to a new guarded block");
	check(q[0] == 'x' && q[99] == 'x', "realloc keeps the contents");
	check(pa_malloc_usable_size(q) == 300, "usable size after realloc");
	pa_free_sized(q, 300);
	char *r = guarded(48, 0);
	pa_free_sized(r, 48);
	char *big = pa_malloc(300 << 10); /* over guard_max, guarded with guard_sample=1 */
	check(guard_owns(big), "a block over guard_max is guarded with guard_sample=1");
	check(pa_malloc_usable_size(big) == 300 << 10, "a big block's usable size");
	memset(big, 'y', 300 << 10);
	pa_free_sized(big, 300 << 10);
	void *huge_aligned = NULL;
	check(pa_posix_memalign(&huge_aligned, 1 << 16, 100) == 0 &&
	          (uintptr_t)huge_aligned % (1 << 16) == 0 && guard_owns(huge_aligned),
	      "an alignment past the page: guarded, aligned");
	pa_free_aligned_sized(huge_aligned, 1 << 16, 100);
	char *z = pa_malloc(0);
	check(guard_owns(z) && pa_malloc_usable_size(z) == 0, "a zero-size block is guarded");
	pa_free_sized(z, 0);
	void *a = NULL;
	check(pa_posix_memalign(&a, 256, 40) == 0 && (uintptr_t)a % 256 == 0,
	      "an aligned block keeps its alignment");
	check(guard_owns(a), "an aligned block is guarded");
	pa_free_aligned_sized(a, 256, 40);
	/* Every slot used and freed once, then calloc: a reused slot reads zero. */
	for (int i = 0; i < 2100; i++) {
		char *b = pa_malloc(64);
		memset(b, 0xff, 64);
		pa_free(b);
	}
	unsigned char *c = pa_calloc(8, 8);
	check(guard_owns(c), "calloc guarded");
	for (int i = 0; i < 64; i++)
		check(c[i] == 0, "a reused slot reads zero");
	pa_free(c);
	_exit(0);
}

static void free_sized_realloc_usable_size_work_on_guarded_blocks(void **state)
{
	(void)state;
	char err[1024];
	int status = tu_run_child(api_on_guarded_blocks, NULL, err, sizeof(err));
	assert_string_equal(err, "");
	TU_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
}

int main(void)
{
	/* Read by each child's first allocation: this process allocates nothing. */
	setenv("PAGEALLOC_CONF", CONF, 1);
	shared =
	    mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return 1;
	const struct CMUnitTest tests[] = {
	    TU_TEST(every_fault_dies_with_one_line_naming_the_block),
	    TU_TEST(a_one_byte_overflow_of_every_size_is_caught),
	    TU_TEST(faults_outside_the_pool_reach_the_programs_handler),
	    TU_TEST(free_sized_realloc_usable_size_work_on_guarded_blocks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
