/*
 * os.c — every system call the allocator makes.
 *
 * Address space is reserved PROT_NONE with MAP_NORESERVE: it costs no memory
 * and no overcommit charge, so the summary tree's ~585 MiB reservation and
 * multi-GiB heap arenas are cheap. It does count against an address-space
 * limit (RLIMIT_AS), which the page heap reads (os_addr_space_limit) to size
 * what it reserves. Committing is an mprotect to read-write;
 * the kernel still supplies pages lazily on first touch. Where the kernel is
 * in strict overcommit mode (vm.overcommit_memory=2) MAP_NORESERVE is ignored
 * and the commit is charged, which is the correct outcome there.
 */
#include "os.h"

#include "bits.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h> /* rename */
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* Under memcheck (vg.h): set once by malloc's init, read by every layer. */
int vg_on;

size_t os_page_size(void)
{
	static size_t cached;
	size_t ps = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	if (ps == 0) {
		ps = (size_t)getauxval(AT_PAGESZ);
		if (ps == 0)
			ps = 4096;
		__atomic_store_n(&cached, ps, __ATOMIC_RELAXED);
	}
	return ps;
}

static void *reserve_exact(size_t size, uintptr_t hint, int flags)
{
	void *p = mmap((void *)hint, size, PROT_NONE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | flags, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void *os_reserve_at(uintptr_t addr, size_t size)
{
	int saved = errno; /* EEXIST from a taken address is no failure */
	void *p = reserve_exact(size, addr, MAP_FIXED_NOREPLACE);
	errno = saved;
	/* Kernels before 4.17 ignore the flag and may place it elsewhere. */
	if (p != NULL && (uintptr_t)p != addr) {
		os_unmap(p, size);
		p = NULL;
	}
	return p;
}

void *os_reserve(size_t size, size_t align)
{
	if (align <= os_page_size())
		return reserve_exact(size, 0, 0);
	/* Over-reserve by the alignment and trim both ends. */
	if (size + align < size)
		return NULL;
	uintptr_t raw = (uintptr_t)reserve_exact(size + align, 0, 0);
	if (raw == 0)
		return NULL;
	uintptr_t base = (raw + align - 1) & ~(uintptr_t)(align - 1);
	if (base > raw)
		os_unmap((void *)raw, base - raw);
	uintptr_t end = raw + size + align;
	if (end > base + size)
		os_unmap((void *)(base + size), end - (base + size));
	return (void *)base;
}

size_t os_addr_space_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= (rlim_t)SIZE_MAX)
		return SIZE_MAX;
	return (size_t)rl.rlim_cur;
}

int os_commit(void *addr, size_t size)
{
	return mprotect(addr, size, PROT_READ | PROT_WRITE) == 0 ? 0 : -1;
}

int os_mbind(void *addr, size_t size, enum os_mpol mode, unsigned long nodemask)
{
	/* maxnode counts bits and the kernel reads one fewer. errno stays: a
	 * policy the kernel refuses (a container's seccomp filter) is no
	 * failure of the allocation that grew the heap. */
	int saved = errno;
	long r = syscall(SYS_mbind, addr, size, (int)mode, &nodemask, sizeof(nodemask) * 8 + 1, 0u);
	errno = saved;
	return r == 0 ? 0 : -1;
}

int os_protect_none(void *addr, size_t size)
{
	return mprotect(addr, size, PROT_NONE) == 0 ? 0 : -1;
}

void *os_alloc(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void *os_alloc_once(void **slot, size_t size, int *made)
{
	if (made != NULL)
		*made = 0;
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (p != NULL)
		return p;
	void *fresh = os_alloc(size);
	if (fresh == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	if (!__atomic_compare_exchange_n(slot, &p, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		os_unmap(fresh, size); /* another thread's is in place: p */
		return p;
	}
	if (made != NULL)
		*made = 1;
	return fresh;
}

void os_unmap(void *addr, size_t size)
{
	if (addr != NULL && size != 0)
		munmap(addr, size);
}

void os_futex_wait(uint32_t *word, uint32_t val)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

void os_futex_wake(uint32_t *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

void os_write_fd(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		buf += w;
		len -= (size_t)w;
	}
}

void os_write_stderr(const char *buf, size_t len)
{
	os_write_fd(2, buf, len);
}

int os_open_append(const char *path)
{
	int fd;
	do
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	while (fd < 0 && errno == EINTR);
	return fd;
}

int os_close(int fd)
{
	/* Linux releases the descriptor even when close is interrupted; a retry
	 * could close one another thread has just opened. */
	if (close(fd) == 0)
		return 0;
	return errno == EINTR ? 0 : -1;
}

static int open_retry(const char *path, int flags, int mode)
{
	int fd;
	do
		fd = open(path, flags, mode);
	while (fd < 0 && errno == EINTR);
	return fd;
}

int os_open_write(const char *path)
{
	return open_retry(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

int os_open_read(const char *path)
{
	return open_retry(path, O_RDONLY | O_CLOEXEC, 0);
}

int os_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		if (w == 0) { /* no progress and no error: a full device */
			errno = ENOSPC;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int os_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t w = pwrite(fd, p, len, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		if (w == 0) {
			errno = ENOSPC;
			return -1;
		}
		p += w;
		off += (uint64_t)w;
		len -= (size_t)w;
	}
	return 0;
}

long os_pread(int fd, void *buf, size_t len, uint64_t off)
{
	size_t n = 0;
	while (n < len) {
		ssize_t r = pread(fd, (char *)buf + n, len - n, (off_t)(off + n));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	return (long)n;
}

long os_readlink(const char *path, char *buf, size_t cap)
{
	if (cap == 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	ssize_t n = readlink(path, buf, cap);
	if (n < 0)
		return -1;
	/* readlink truncates silently: a result that fills buf may be cut. */
	if ((size_t)n >= cap) {
		errno = ENAMETOOLONG;
		return -1;
	}
	buf[n] = '\0';
	return (long)n;
}

int os_rename(const char *from, const char *to)
{
	return rename(from, to) == 0 ? 0 : -1;
}

int os_unlink(const char *path)
{
	return unlink(path) == 0 ? 0 : -1;
}

int os_getpid(void)
{
	return (int)getpid();
}

int os_getuid(void)
{
	return (int)getuid();
}

int os_gettid(void)
{
	return (int)syscall(SYS_gettid);
}

void os_thread_name(char name[16])
{
	name[0] = 0;
	if (prctl(PR_GET_NAME, (unsigned long)name, 0, 0, 0) != 0)
		name[0] = 0;
	name[15] = 0;
}

int os_thread_name_of(int tid, char name[16])
{
	/* "/proc/self/task/" and up to 10 digits and "/comm" */
	char path[40] = "/proc/self/task/", digits[12];
	size_t n = 16, k = 0;
	unsigned v = (unsigned)tid;
	do
		digits[k++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (k > 0)
		path[n++] = digits[--k];
	memcpy(path + n, "/comm", 6);
	char buf[32];
	long len = os_read_file(path, buf, sizeof(buf));
	if (len <= 0)
		return -1;
	if (buf[len - 1] == '\n')
		len--;
	if (len > 15)
		len = 15;
	memcpy(name, buf, (size_t)len);
	name[len] = 0;
	return 0;
}

int os_pid_alive(int pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

int os_dir_each(const char *path, void (*fn)(const char *name, void *arg), void *arg)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* getdents64 into a buffer on the stack: opendir would malloc. */
	char buf[4096] __attribute__((aligned(8)));
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (long at = 0; at < n;) {
			/* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name */
			unsigned short reclen;
			memcpy(&reclen, buf + at + 16, sizeof(reclen));
			fn(buf + at + 19, arg);
			at += reclen;
		}
	}
	close(fd);
	return 0;
}

int os_dir_private(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
	       (st.st_mode & 077) == 0;
}

int os_mkdir_private(const char *path)
{
	return mkdir(path, 0700) == 0 ? 0 : -1;
}

int os_create_private(const char *path)
{
	return open_retry(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

void *os_map_file_shared(int fd, size_t size)
{
	if (ftruncate(fd, (off_t)size) != 0)
		return NULL;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

_Noreturn void os_abort(void)
{
	/* raise() may be blocked or handled; fall back to the default action. */
	signal(SIGABRT, SIG_DFL);
	raise(SIGABRT);
	_exit(134);
}

int os_getcpu(void)
{
	return sched_getcpu();
}

long os_read_file(const char *path, char *buf, size_t cap)
{
	if (cap == 0)
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* /proc files may come in pieces: read until EOF or the buffer is full. */
	size_t n = 0;
	while (n < cap - 1) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	return (long)n;
}

unsigned os_possible_cpus(void)
{
	/* Format "0-3,8-11": the highest id + 1 is what matters. */
	char buf[256];
	long n = os_read_file("/sys/devices/system/cpu/possible", buf, sizeof(buf));
	if (n <= 0)
		return 0;
	unsigned max = 0, cur = 0;
	int have = 0;
	for (long i = 0; i < n; i++) {
		if (buf[i] >= '0' && buf[i] <= '9') {
			cur = cur * 10 + (unsigned)(buf[i] - '0');
			have = 1;
		} else {
			if (have && cur > max)
				max = cur;
			cur = 0;
			have = 0;
		}
	}
	if (have && cur > max)
		max = cur;
	return max + 1;
}

int os_rseq_fence_register(void)
{
	return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0
	           ? 0
	           : -1;
}

int os_rseq_fence(int cpu)
{
	return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
	               MEMBARRIER_CMD_FLAG_CPU, cpu) == 0
	           ? 0
	           : -1;
}

void os_yield(void)
{
	sched_yield();
}

int os_release(void *addr, size_t size, int lazy)
{
	return madvise(addr, size, lazy ? MADV_FREE : MADV_DONTNEED) == 0 ? 0 : -1;
}

/* fn(addr, size, arg) on each run of set bits of mask (bit j: the page
 * base + j * page); the runs where it returned 0. */
static uint32_t each_run(void *base, uint32_t mask, size_t page, int (*fn)(void *, size_t, int),
                         int arg)
{
	uint32_t done = 0;
	while (mask != 0) {
		unsigned lo = bits_ctz(mask), len = bits_ctz(~(uint64_t)(mask >> lo));
		uint32_t run = (uint32_t)bits_mask(lo, len);
		mask &= ~run;
		if (fn((char *)base + (size_t)lo * page, (size_t)len * page, arg) == 0)
			done |= run;
	}
	return done;
}

uint32_t os_release_mask(void *base, uint32_t mask, size_t page, int lazy)
{
	return each_run(base, mask, page, os_release, lazy);
}

static int populate_run(void *addr, size_t size, int unused)
{
	(void)unused;
	return os_populate(addr, size);
}

uint32_t os_populate_mask(void *base, uint32_t mask, size_t page)
{
	return each_run(base, mask, page, populate_run, 0);
}

/* The bracketed word of a sysfs choice file ("always [madvise] never"):
 * its index in words, or -1. */
static int thp_choice(const char *path, const char *const *words, int n)
{
	char buf[128];
	if (os_read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	const char *open = strchr(buf, '['), *close = open != NULL ? strchr(open, ']') : NULL;
	if (close == NULL)
		return -1;
	size_t len = (size_t)(close - open - 1);
	for (int i = 0; i < n; i++)
		if (strlen(words[i]) == len && memcmp(open + 1, words[i], len) == 0)
			return i;
	return -1;
}

void os_thp_read(struct os_thp *out)
{
	static const char *const modes[] = {"never", "madvise", "always"};
	static const char *const defrag[] = {"never", "defer", "madvise", "defer+madvise",
	                                     "always"};
	int m = thp_choice("/sys/kernel/mm/transparent_hugepage/enabled", modes, 3);
	int d = thp_choice("/sys/kernel/mm/transparent_hugepage/defrag", defrag, 5);
	out->mode = m < 0 ? OS_THP_NEVER : (enum os_thp_mode)m;
	/* "never" and "defer" never compact in the faulting thread. */
	out->fault_stalls = d != 0 && d != 1;
	out->bytes = 0;
	if (out->mode == OS_THP_NEVER)
		return;
	char buf[64];
	if (os_read_file("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", buf, sizeof(buf)) <=
	    0) {
		out->bytes = (size_t)2 << 20;
		return;
	}
	for (const char *p = buf; *p >= '0' && *p <= '9'; p++)
		out->bytes = out->bytes * 10 + (size_t)(*p - '0');
}

int os_cpu_prefetchw(void)
{
	static int known = -1; /* relaxed atomics: every thread computes the same */
	int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
	if (v < 0) {
		v = 0;
#if defined(__x86_64__)
		unsigned a, b, c, d;
		if (__get_cpuid(0x80000001u, &a, &b, &c, &d))
			v = (c >> 8) & 1u;
#endif
		__atomic_store_n(&known, v, __ATOMIC_RELAXED);
	}
	return v;
}

size_t os_thp_bytes(void)
{
	struct os_thp t;
	os_thp_read(&t);
	return t.mode == OS_THP_ALWAYS ? t.bytes : 0;
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older headers lack it */
#endif

int os_collapse(void *addr, size_t size)
{
	return madvise(addr, size, MADV_COLLAPSE) == 0 ? 0 : -1;
}

int os_thp_disabled(void)
{
	return prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older headers lack it */
#endif

int os_populate(void *addr, size_t size)
{
	static int unsupported; /* relaxed atomics: every thread learns the same */
	if (__atomic_load_n(&unsupported, __ATOMIC_RELAXED))
		return -1;
	int saved = errno;
	if (madvise(addr, size, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (errno == EINVAL)
		__atomic_store_n(&unsupported, 1, __ATOMIC_RELAXED);
	errno = saved;
	return -1;
}

int os_hugepage(void *addr, size_t size)
{
	return madvise(addr, size, MADV_HUGEPAGE) == 0 ? 0 : -1;
}

long os_resident_pages(void *addr, size_t size)
{
	/* One byte per OS page: a 2 MiB huge page's 512 fit on the stack. */
	unsigned char vec[1024];
	size_t n = size / os_page_size();
	if (n > sizeof(vec))
		return -1;
	if (mincore(addr, size, vec) != 0)
		return -1;
	long r = 0;
	for (size_t i = 0; i < n; i++)
		r += vec[i] & 1;
	return r;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t os_now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

uint64_t os_realtime_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

uint64_t os_boot_ns(void)
{
	return clock_ns(CLOCK_BOOTTIME);
}

uint64_t os_start_ticks(void)
{
	char buf[1024];
	if (os_read_file("/proc/self/stat", buf, sizeof(buf)) <= 0)
		return 0;
	/* The command name in field 2 may hold spaces and ')': fields 3, 4, ...
	 * come after its last ')'. */
	const char *p = NULL;
	for (const char *q = buf; *q != '\0'; q++)
		if (*q == ')')
			p = q;
	if (p == NULL)
		return 0;
	p++;
	for (int field = 3; field < 22; field++) {
		while (*p == ' ')
			p++;
		while (*p != ' ' && *p != '\0')
			p++;
	}
	while (*p == ' ')
		p++;
	uint64_t ticks = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		ticks = ticks * 10 + (uint64_t)(*p - '0');
	return ticks;
}

unsigned long os_clock_ticks(void)
{
	unsigned long hz = getauxval(AT_CLKTCK);
	return hz != 0 ? hz : 100;
}

uint64_t os_thread_cpu_ns(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

int os_process_usage(uint64_t *cpu_ns, uint64_t *faults)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	*cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	*faults = (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
	return 0;
}

unsigned os_usable_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	return (unsigned)CPU_COUNT(&set);
}

void os_futex_wait_shared_ns(uint32_t *word, uint32_t val, uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
	                      .tv_nsec = (long)(ns % 1000000000u)};
	syscall(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0);
}

void os_futex_wake_shared(uint32_t *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}

int os_signal_catch_if_default(int sig, void (*handler)(int))
{
	struct sigaction cur;
	if (sigaction(sig, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) != 0 ||
	    cur.sa_handler != SIG_DFL)
		return 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	return sigaction(sig, &sa, NULL) == 0;
}

void os_signal_default_and_raise(int sig)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
	raise(sig);
}

/* The SIGSEGV disposition os_fault_catch replaced: written once, before the
 * new handler can run, and read only by os_fault_chain. */
static struct sigaction fault_prev;

int os_fault_catch(void (*handler)(int, void *, void *))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = (void (*)(int, siginfo_t *, void *))handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	return sigaction(SIGSEGV, &sa, &fault_prev) == 0 ? 0 : -1;
}

void os_fault_chain(int sig, void *info, void *ctx)
{
	if (fault_prev.sa_flags & SA_SIGINFO) {
		fault_prev.sa_sigaction(sig, info, ctx);
		return;
	}
	if (fault_prev.sa_handler == SIG_IGN)
		return;
	if (fault_prev.sa_handler == SIG_DFL) {
		os_signal_default_and_raise(sig);
		return;
	}
	fault_prev.sa_handler(sig);
}

uintptr_t os_fault_addr(const void *info)
{
	return (uintptr_t)((const siginfo_t *)info)->si_addr;
}

void os_block_signals(void)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
}

uint64_t os_random_seed(void)
{
	/* AT_RANDOM: 16 random bytes the kernel put on the initial stack. */
	const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
	uint64_t v = 0;
	if (r != NULL)
		memcpy(&v, r + 8, sizeof(v));
	v ^= os_now_ns() * 0x9e3779b97f4a7c15ull;
	return v;
}
