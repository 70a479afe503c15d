/*
 * os.h — the operating-system boundary. Every mmap, mprotect, madvise,
 * futex and file access of the allocator goes through here; nothing else
 * makes syscalls. None of these functions allocate or touch libc's malloc.
 */
#ifndef PA_OS_H
#define PA_OS_H

#include <stddef.h>
#include <stdint.h>

/* The OS page size (4096 on x86-64), read once from the aux vector. */
size_t os_page_size(void);

/* Reserve size bytes of address space, PROT_NONE and not charged against
 * overcommit, aligned to align (a power of two >= the OS page). NULL on
 * failure. An alignment above the OS page is got by reserving size + align
 * and trimming, so it needs that much room for a moment. */
void *os_reserve(size_t size, size_t align);

/* Reserve exactly [addr, addr + size) if none of it is mapped, else NULL. */
void *os_reserve_at(uintptr_t addr, size_t size);

/* The address-space limit (RLIMIT_AS, `ulimit -v`) in bytes, SIZE_MAX when
 * there is none. Reserved PROT_NONE space counts against it. */
size_t os_addr_space_limit(void);

/* Make a reserved range readable and writable. 0 or -1. */
int os_commit(void *addr, size_t size);

/* Memory policies for os_mbind (the kernel's MPOL_* numbers). */
enum os_mpol {
	OS_MPOL_PREFERRED = 1,  /* this node first, others when it is full */
	OS_MPOL_INTERLEAVE = 3, /* page by page over the nodes */
};

/* Set the NUMA policy of a reserved range before its first touch (mbind(2)):
 * its pages come from the nodes of nodemask (bit n: node n). 0 or -1. */
int os_mbind(void *addr, size_t size, enum os_mpol mode, unsigned long nodemask);

/* Make a range inaccessible (PROT_NONE): any access faults. 0 or -1. */
int os_protect_none(void *addr, size_t size);

/* Allocate zeroed read-write memory for metadata (NULL on failure). */
void *os_alloc(size_t size);

/* What *slot points to, mapped now (os_alloc, size bytes) if *slot is NULL:
 * the first of racing threads puts its mapping there and the others unmap
 * theirs and return it. *made (if non-NULL) gets 1 when this call's mapping
 * went in. NULL (ENOMEM) when *slot was NULL and mapping failed. *slot is
 * read and written atomically (acquire, release). */
void *os_alloc_once(void **slot, size_t size, int *made);

/* Return a range to the OS entirely. */
void os_unmap(void *addr, size_t size);

/* Futex wait while *word == val; wake up to n waiters. */
void os_futex_wait(uint32_t *word, uint32_t val);
void os_futex_wake(uint32_t *word, int n);

/* The CPU the caller runs on (sched_getcpu; vDSO or rseq), or -1. */
int os_getcpu(void);

/* Number of possible CPU ids (from /sys/devices/system/cpu/possible), or 0. */
unsigned os_possible_cpus(void);

/* membarrier RSEQ fence: register once (0 or -1), then restart any rseq
 * critical section running on `cpu` (0 or -1). */
int os_rseq_fence_register(void);
int os_rseq_fence(int cpu);

void os_yield(void);

/* Give pages back to the OS: MADV_DONTNEED (they read as zero afterwards)
 * or, with lazy, MADV_FREE (the kernel takes them when it needs memory;
 * until then RSS does not drop and old contents may survive). 0 or -1. */
int os_release(void *addr, size_t size, int lazy);

/* os_release the pages of `mask` (bit j: the page of `page` bytes at base +
 * j * page), one call per run of set bits. Returns the bits of the pages
 * released (a refused run stays resident and unset). */
uint32_t os_release_mask(void *base, uint32_t mask, size_t page, int lazy);

/* The machine's transparent huge pages (/sys/kernel/mm/transparent_hugepage):
 * mode from `enabled`; fault_stalls: 1 when `defrag` makes a fault in a
 * MADV_HUGEPAGE region compact memory in the faulting thread (always,
 * madvise, defer+madvise); bytes: the huge page size (0 when mode is never). */
enum os_thp_mode { OS_THP_NEVER, OS_THP_MADVISE, OS_THP_ALWAYS };
struct os_thp {
	enum os_thp_mode mode;
	int fault_stalls;
	size_t bytes;
};
void os_thp_read(struct os_thp *out);

/* Transparent huge page size in bytes when THP backs anonymous memory
 * unasked (mode "always"), else 0. */
size_t os_thp_bytes(void);

/* MADV_COLLAPSE (Linux 6.1): back [addr, addr + size), huge-page-aligned,
 * with huge pages now, in the calling thread (it may compact and reclaim:
 * never call it holding a lock). 0, or -1 with errno (EINVAL: the kernel
 * has no MADV_COLLAPSE; EAGAIN, ENOMEM: not this time). */
int os_collapse(void *addr, size_t size);

/* Whether the process turned transparent huge pages off for itself
 * (prctl PR_SET_THP_DISABLE, as redis-server does where THP is "always"): 1 or 0. */
int os_thp_disabled(void);

/* MADV_HUGEPAGE: faults and khugepaged may back the range with huge pages. */
int os_hugepage(void *addr, size_t size);

/* Fault [addr, addr + size) in for writing in one call (MADV_POPULATE_WRITE):
 * 0, or -1 (a kernel before 5.14, from then on without a call; or memory
 * short: the first writes fault it in as before). */
int os_populate(void *addr, size_t size);
/* os_populate on each run of set bits of mask (bit j: the page base + j *
 * page); the pages it faulted in. */
uint32_t os_populate_mask(void *base, uint32_t mask, size_t page);

/* Whether the CPU has PREFETCHW (a prefetch for writing, which takes the
 * line's ownership: x86-64's CPUID 0x80000001 ECX bit 8): 1 or 0, the same
 * in every call (the first call asks the CPU; no system call). */
int os_cpu_prefetchw(void);

/* How many OS pages of [addr, addr + size) are resident (mincore), or -1;
 * size at most 1024 OS pages. */
long os_resident_pages(void *addr, size_t size);

uint64_t os_now_ns(void);        /* CLOCK_MONOTONIC */
uint64_t os_realtime_ns(void);   /* CLOCK_REALTIME: ns since the Unix epoch */
uint64_t os_thread_cpu_ns(void); /* CPU time of the calling thread */
/* The process's CPU time (all its threads, ns) and page faults (minor and
 * major, its trapped faults and the pages madvise populated) so far: 0, or
 * -1. */
int os_process_usage(uint64_t *cpu_ns, uint64_t *faults);
/* CPUs the calling thread may run on (its affinity), or 0. */
unsigned os_usable_cpus(void);

/* Futex wait while *word == val, at most ns nanoseconds, and wake, both
 * process-shared: a word in a shared file mapping is woken by any process
 * that maps the file (the live file's readers). Waits and wakes of one
 * word must all be of one kind, these or the private ones above. */
void os_futex_wait_shared_ns(uint32_t *word, uint32_t val, uint64_t ns);
void os_futex_wake_shared(uint32_t *word, int n);

/* Block all signals in the calling thread (background threads). */
void os_block_signals(void);

/* Write all of buf to fd, retrying short and interrupted writes; gives up
 * silently on an error. os_write_stderr writes to fd 2. */
void os_write_fd(int fd, const char *buf, size_t len);
void os_write_stderr(const char *buf, size_t len);

/* Open path for appending (created 0644, close-on-exec): fd, or -1 with
 * errno set. */
int os_open_append(const char *path);

/* Close fd: 0, or -1 with errno set (a delayed write error, EIO or ENOSPC on
 * some file systems). The descriptor is gone either way: an interrupted
 * close is not retried, since Linux has already released it. */
int os_close(int fd);

/* Open path to write it from the start (created 0644, truncated,
 * close-on-exec), or to read it (close-on-exec): fd, or -1 with errno set. */
int os_open_write(const char *path);
int os_open_read(const char *path);

/* Write all of buf to fd, retrying short and interrupted writes: 0, or -1
 * with errno set (ENOSPC, EIO, ...) at the first real error. */
int os_write_all(int fd, const void *buf, size_t len);
/* The same at file offset off (the file offset stays where it was). */
int os_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);

/* Read up to len bytes at file offset off, retrying short and interrupted
 * reads until len or EOF: the bytes read, or -1 with errno set. */
long os_pread(int fd, void *buf, size_t len, uint64_t off);

/* The target of the symbolic link path, NUL-terminated in buf: its length,
 * or -1 with errno set (ENAMETOOLONG when it does not fit in cap - 1). */
long os_readlink(const char *path, char *buf, size_t cap);

/* rename(2) and unlink(2): 0, or -1 with errno set. */
int os_rename(const char *from, const char *to);
int os_unlink(const char *path);

/* Read a small file (sysfs, /proc) into buf, NUL-terminated, at most cap - 1
 * bytes: its length, or -1. Reads until EOF, so /proc files come whole. */
long os_read_file(const char *path, char *buf, size_t cap);

int os_getpid(void);
int os_getuid(void);
/* The calling thread's id (gettid), and its name (prctl PR_GET_NAME: at
 * most 15 bytes and a NUL, into name[16]; "" when it cannot be read). */
int os_gettid(void);
void os_thread_name(char name[16]);
/* The name of thread tid of this process (/proc/self/task/TID/comm), into
 * name[16]: 0, or -1 when the thread is gone. */
int os_thread_name_of(int tid, char name[16]);
/* Does process pid exist (kill(pid, 0); another user's counts)? */
int os_pid_alive(int pid);
/* fn(name, arg) for each entry of directory path ("." and ".." included),
 * read with getdents64 into a stack buffer (opendir would malloc). 0, or
 * -1 when it cannot be opened. */
int os_dir_each(const char *path, void (*fn)(const char *name, void *arg), void *arg);

/* The live file's pieces (live.c). os_dir_private: 1 when path is a
 * directory (not a symbolic link) that the calling user owns and no one
 * else may enter (mode & 077 == 0), else 0. os_mkdir_private: mkdir path
 * 0700: 0, or -1 with errno set (EEXIST when it is there). os_create_private:
 * create path 0600, read-write, close-on-exec, failing (EEXIST) when it
 * exists and never following a symbolic link: fd, or -1 with errno set.
 * os_map_file_shared: size the file to size bytes and map it shared,
 * read-write (the mapping outlives fd): its address, or NULL. */
int os_dir_private(const char *path);
int os_mkdir_private(const char *path);
int os_create_private(const char *path);
void *os_map_file_shared(int fd, size_t size);

/* CLOCK_BOOTTIME, the clock of /proc/PID/stat's starttime, and the ticks per
 * second that starttime counts (AT_CLKTCK). */
uint64_t os_boot_ns(void);
unsigned long os_clock_ticks(void);

/* The process's start time, /proc/self/stat's field 22 (clock ticks after
 * boot): with the pid, it names this process among all that ever ran (a
 * reused pid starts later). 0 when it cannot be read. */
uint64_t os_start_ticks(void);

/* Install handler for sig only if sig's disposition is SIG_DFL now (the
 * program's own handlers and ignored signals stay): 1 if installed, else 0. */
int os_signal_catch_if_default(int sig, void (*handler)(int));

/* Restore SIG_DFL for sig and raise it in the calling thread. From a handler
 * the signal stays blocked until the handler returns, then kills as usual.
 * Async-signal-safe. */
void os_signal_default_and_raise(int sig);

/* Catch SIGSEGV with handler(sig, siginfo, ucontext) (SA_SIGINFO, on the
 * thread's alternate stack if it has one), keeping the disposition it
 * replaces for os_fault_chain. 0 or -1. */
int os_fault_catch(void (*handler)(int, void *, void *));

/* From the handler, a fault that is not ours: hand it to the disposition
 * os_fault_catch replaced (its handler called; SIG_DFL restored and the
 * signal raised, so the process dies of it when the handler returns;
 * SIG_IGN: nothing). Async-signal-safe. */
void os_fault_chain(int sig, void *info, void *ctx);

/* The faulting address a siginfo_t names (si_addr). */
uintptr_t os_fault_addr(const void *info);

/* 64 unpredictable bits (the kernel's AT_RANDOM bytes mixed with the clock). */
uint64_t os_random_seed(void);

/* Abort the process (raise SIGABRT, no atexit handlers, no stdio). */
_Noreturn void os_abort(void);

#endif
