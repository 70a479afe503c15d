/*
 * rseq.h — one restartable sequence, on the rseq area glibc registered.
 *
 * We never register a second area: glibc (2.35+) registers one per thread and
 * exports its offset from the thread pointer (__rseq_offset) and size
 * (__rseq_size, 0 when registration is off or failed, e.g. under
 * GLIBC_TUNABLES=glibc.pthread.rseq=0).
 *
 * rseq_commit checks, then stores twice: if the thread still runs on `cpu`,
 * *gen == egen, *word == eword and *pre == epre, it stores *pre = pre_value
 * and then *word = new_word (the commit). If the thread is preempted,
 * migrated or signalled before the commit, the kernel moves it to the abort
 * handler and nothing was committed (the pre store may have happened; callers
 * make it harmless). Returns 0 when committed, -1 otherwise: the caller
 * retries. Checking *pre too matters: another thread on this CPU may change
 * `word` and change it back in between (ABA) while changing *pre for good.
 */
#ifndef PA_RSEQ_H
#define PA_RSEQ_H

#include <stdint.h>
#include <sys/rseq.h>

/* ThreadSanitizer cannot see an rseq commit as synchronisation (it would
 * report the hand-over of a page as a race), so TSan builds leave it out and
 * the caches run in locked mode. GCC and clang announce TSan differently. */
#if defined(__SANITIZE_THREAD__)
#define PA_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PA_TSAN 1
#endif
#endif

#if defined(__x86_64__) && !defined(PA_TSAN)
#define PA_HAVE_RSEQ_COMMIT 1
#else
#define PA_HAVE_RSEQ_COMMIT 0
#endif

/* glibc registers its area with this signature on x86. */
#define PA_RSEQ_SIG 0x53053053

static inline struct rseq *rseq_area(void)
{
	return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

/* The CPU this thread runs on per the kernel, or negative if unknown. */
static inline int32_t rseq_cpu(const struct rseq *rs)
{
	return (int32_t)__atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);
}

/* The asm below is laid out by hand, one instruction a line. */
/* clang-format off */
#if PA_HAVE_RSEQ_COMMIT
/*
 * The pieces every sequence below shares. Labels: 1 = start, 2 = end (one
 * past the commit), 3 = the descriptor, 4 = the abort handler.
 *
 * RSEQ_DESCRIBE: the critical-section descriptor (version, flags, start,
 *   length, abort address), in its own section, 32-byte aligned as the
 *   kernel requires.
 * RSEQ_ARM: point rs->rseq_cs (offset 8) at it; clobbers rax. From here to
 *   label 2 a preemption, migration or signal sends the thread to 4.
 * RSEQ_ABORT(code): the abort handler, in its own section, preceded by ud1
 *   with the signature as displacement (the kernel checks the four bytes
 *   before the abort address); `code` runs there and must leave.
 */
#define RSEQ_DESCRIBE \
	".pushsection __rseq_cs, \"aw\"\n\t" \
	".balign 32\n\t" \
	"3:\n\t" \
	".long 0x0, 0x0\n\t" \
	".quad 1f, (2f - 1f), 4f\n\t" \
	".popsection\n\t"
#define RSEQ_ARM \
	"leaq 3b(%%rip), %%rax\n\t" \
	"movq %%rax, 8(%[rs])\n\t"
#define RSEQ_ABORT(code) \
	".pushsection __rseq_failure, \"ax\"\n\t" \
	".byte 0x0f, 0xb9, 0x3d\n\t" \
	".long 0x53053053\n\t" \
	"4:\n\t" code ".popsection\n\t"

static inline int rseq_commit(struct rseq *rs, uint32_t cpu, uint64_t *gen, uint64_t egen,
			      uint64_t *word, uint64_t eword, uint64_t *pre, uint64_t epre,
			      uint64_t pre_value, uint64_t new_word)
{
	__asm__ goto(
	    RSEQ_DESCRIBE
	    RSEQ_ARM
	    "1:\n\t"
	    "cmpl %[cpu], 4(%[rs])\n\t" /* rs->cpu_id */
	    "jnz %l[aborted]\n\t"
	    "cmpq %[egen], (%[gen])\n\t"
	    "jnz %l[aborted]\n\t"
	    "cmpq %[eword], (%[word])\n\t"
	    "jnz %l[aborted]\n\t"
	    "cmpq %[epre], (%[pre])\n\t"
	    "jnz %l[aborted]\n\t"
	    "movq %[prev], (%[pre])\n\t"
	    "movq %[nw], (%[word])\n\t" /* commit */
	    "2:\n\t"
	    RSEQ_ABORT("jmp %l[aborted]\n\t")
	    :
	    : [rs] "r"(rs), [cpu] "r"(cpu), [gen] "r"(gen), [egen] "r"(egen), [word] "r"(word),
	      [eword] "r"(eword), [pre] "r"(pre), [epre] "r"(epre), [prev] "r"(pre_value),
	      [nw] "r"(new_word)
	    : "memory", "cc", "rax"
	    : aborted);
	return 0;
aborted:
	return -1;
}

/*
 * The 1-page allocation, the hottest path, done wholly inside one sequence
 * (the way tcmalloc's per-CPU caches pop): the CPU id, the slot, its gen,
 * free and scav words are all read after the sequence began, so a
 * preemption, a migration or a membarrier fence from a remote slow path
 * restarts it and nothing needs re-checking; the one store that clears the
 * lowest free bit is the commit.
 *
 * Slots form an array of `stride`-byte records, one per CPU, with this
 * layout (pagecache.c asserts it): gen at RSEQ_SLOT_GEN (odd: owned, do not
 * touch), base at RSEQ_SLOT_BASE, free at RSEQ_SLOT_FREE, scav at
 * RSEQ_SLOT_SCAV. Returns 0 with *index (the page taken: lowest set bit of
 * free), *base and *scav (the slot's scav word as read) on success; 1 when
 * the slot cannot serve (CPU id >= nslots or unknown, gen odd, free empty);
 * -1 when the sequence was aborted (retry).
 */
#define RSEQ_SLOT_GEN 0
#define RSEQ_SLOT_BASE 8
#define RSEQ_SLOT_FREE 16
#define RSEQ_SLOT_SCAV 24

/*
 * The opening of a slot sequence (rseq_take_lowest, rseq_give_back): status
 * 1 (cannot serve) unless the body clears it, arm, then inside the sequence
 * index this CPU's slot into rax and leave (to 2, status 1) if the CPU id is
 * out of range (an unregistered -1 compares above any count) or the slot is
 * owned (gen odd). Operands it names: st, rs, n, stride, slots, gen.
 */
#define RSEQ_SLOT_ENTER \
	RSEQ_DESCRIBE \
	"movl $1, %[st]\n\t" \
	RSEQ_ARM \
	"1:\n\t" \
	"movl 4(%[rs]), %%eax\n\t" \
	"cmpl %[n], %%eax\n\t" \
	"jae 2f\n\t" \
	"imulq %[stride], %%rax\n\t" \
	"addq %[slots], %%rax\n\t" \
	"testb $1, %c[gen](%%rax)\n\t" \
	"jnz 2f\n\t"

static inline int rseq_take_lowest(struct rseq *rs, void *slots, uint64_t stride,
				   uint32_t nslots, uint64_t *index, uint64_t *base, uint64_t *scav)
{
	int status;
	uint64_t idx, b, sc;
	__asm__ volatile(
	    RSEQ_SLOT_ENTER
	    "movq %c[free](%%rax), %%rdx\n\t"
	    "testq %%rdx, %%rdx\n\t"
	    "jz 2f\n\t"
	    "bsfq %%rdx, %[idx]\n\t"
	    "movq %c[base](%%rax), %[b]\n\t"
	    "movq %c[scav](%%rax), %[sc]\n\t"
	    "leaq -1(%%rdx), %%rcx\n\t"
	    "andq %%rdx, %%rcx\n\t"
	    "xorl %[st], %[st]\n\t"
	    "movq %%rcx, %c[free](%%rax)\n\t" /* commit */
	    "2:\n\t"
	    RSEQ_ABORT("movl $-1, %[st]\n\t"
		       "jmp 2b\n\t")
	    : [st] "=&r"(status), [idx] "=&r"(idx), [b] "=&r"(b), [sc] "=&r"(sc)
	    : [rs] "r"(rs), [slots] "r"(slots), [n] "r"(nslots), [stride] "r"(stride),
	      [gen] "i"(RSEQ_SLOT_GEN), [base] "i"(RSEQ_SLOT_BASE), [free] "i"(RSEQ_SLOT_FREE),
	      [scav] "i"(RSEQ_SLOT_SCAV)
	    : "memory", "cc", "rax", "rcx", "rdx");
	*index = idx;
	*base = b;
	*scav = sc;
	return status;
}

/*
 * The mirror image, for a free into the CPU's own group: if the current
 * CPU's slot is idle (gen even) and holds the group at `group`, and none of
 * the pages `mask` is free in it already, clear them in scav and set them in
 * free (the commit). Returns 0 when committed; 1 when the slot is not usable
 * or holds another group (the caller queues the free instead); 2 when some
 * page of mask is already free there (a double free, or a race: the caller
 * decides on a stable snapshot); -1 when aborted. The scav store before the
 * commit is harmless if the sequence aborts: scav bits of pages that are not
 * free in the slot mean nothing.
 */
static inline int rseq_give_back(struct rseq *rs, void *slots, uint64_t stride, uint32_t nslots,
				 uint64_t group, uint64_t mask)
{
	int status;
	__asm__ volatile(
	    RSEQ_SLOT_ENTER
	    "cmpq %[group], %c[base](%%rax)\n\t"
	    "jne 2f\n\t"
	    "movq %c[free](%%rax), %%rdx\n\t"
	    "movl $2, %[st]\n\t"
	    "testq %[mask], %%rdx\n\t"
	    "jnz 2f\n\t"
	    "orq %[mask], %%rdx\n\t"
	    "movq %[mask], %%rcx\n\t"
	    "notq %%rcx\n\t"
	    "andq %c[scav](%%rax), %%rcx\n\t"
	    "movq %%rcx, %c[scav](%%rax)\n\t"
	    "xorl %[st], %[st]\n\t"
	    "movq %%rdx, %c[free](%%rax)\n\t" /* commit */
	    "2:\n\t"
	    RSEQ_ABORT("movl $-1, %[st]\n\t"
		       "jmp 2b\n\t")
	    : [st] "=&r"(status)
	    : [rs] "r"(rs), [slots] "r"(slots), [n] "r"(nslots), [stride] "r"(stride),
	      [group] "r"(group), [mask] "r"(mask), [gen] "i"(RSEQ_SLOT_GEN),
	      [base] "i"(RSEQ_SLOT_BASE), [free] "i"(RSEQ_SLOT_FREE), [scav] "i"(RSEQ_SLOT_SCAV)
	    : "memory", "cc", "rax", "rcx", "rdx");
	return status;
}
#endif
/* clang-format on */

#endif
