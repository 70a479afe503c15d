/*
 * malloc_names.c — the C library's malloc names for the preload library:
 * src/malloc.c compiled once more, with every standard name an ELF alias of
 * its pa_ function.
 *
 * An alias is a second name for the same code, so `malloc` costs exactly
 * what `pa_malloc` costs: no wrapper frame, no jump. GCC can alias only a
 * function defined in the same translation unit, hence the #include of the
 * source file; libpagealloc-preload.so links this object instead of
 * malloc.c's (CMakeLists.txt). Unlike a linker --defsym, the aliases carry
 * the size and type of their target, which valgrind needs to recognise and
 * replace them.
 *
 * All the names live in this one object, so a static link that takes any of
 * them takes them all and never pulls the C library's malloc.o in beside
 * them (the __libc_* names: gperftools#856, jemalloc PR#481).
 * cfree is the old alias of free that glibc still exports for old binaries.
 *
 * Which names the library exports is decided by preload/preload.map; the
 * pa_ names stay internal there. The rest of the glibc API (mallinfo,
 * mallopt, malloc_stats) is in preload/malloc_extras.c, C++ operator new
 * and delete in preload/new_delete.cc, except the four sized deletes below.
 *
 * C++'s sized operator delete(void *, size_t) and delete[] (and their
 * std::align_val_t forms) hold the size to the block's own class: a size
 * of another class, smaller or larger (for a large block, another page
 * count), is a fault, reported as "operator delete" or "operator delete[]"
 * with the size passed and the block's (then abort). They are defined here,
 * under their mangled names (size_t is unsigned long, "m"), because only
 * here can they inline pa_free's fast path: a wrapper in new_delete.cc
 * would add a jump. The fast path's check is one unsigned compare against
 * the class's range (pa_sc_sizes), as many instructions as the compare with
 * the class size it replaced (docs/benchmarks.md).
 */
#include "../src/malloc.c"
#include "live.h"

#define PA_ALIAS(name, target)                                                                     \
	extern __typeof(target) name __attribute__((alias(#target), visibility("default")))

PA_ALIAS(malloc, pa_malloc);
PA_ALIAS(free, pa_free);
PA_ALIAS(cfree, pa_free);
PA_ALIAS(calloc, pa_calloc);
PA_ALIAS(realloc, pa_realloc);
PA_ALIAS(reallocarray, pa_reallocarray);
PA_ALIAS(posix_memalign, pa_posix_memalign);
PA_ALIAS(aligned_alloc, pa_aligned_alloc);
PA_ALIAS(memalign, pa_memalign);
PA_ALIAS(valloc, pa_valloc);
PA_ALIAS(pvalloc, pa_pvalloc);
PA_ALIAS(malloc_usable_size, pa_malloc_usable_size);
PA_ALIAS(free_sized, pa_free_sized);
PA_ALIAS(free_aligned_sized, pa_free_aligned_sized);
PA_ALIAS(malloc_trim, pa_malloc_trim);

PA_ALIAS(__libc_malloc, pa_malloc);
PA_ALIAS(__libc_free, pa_free);
PA_ALIAS(__libc_calloc, pa_calloc);
PA_ALIAS(__libc_realloc, pa_realloc);
PA_ALIAS(__libc_memalign, pa_memalign);
PA_ALIAS(__libc_valloc, pa_valloc);
PA_ALIAS(__libc_pvalloc, pa_pvalloc);

_Static_assert(_Generic((size_t)0, unsigned long : 1, default : 0),
               "the sized deletes' mangled names say size_t is unsigned long");

/* pa_free_sized's rule at pa_free's cost and one compare: pa_free's fast
 * checks, then free_block_as holds the size to the block's class size;
 * free_sized_other frees or names whatever they do not pass. */
static inline __attribute__((always_inline)) void delete_sized_as(void *p, size_t size,
                                                                  const char *func)
{
	struct pa_tcache *tc = tcache_self;
	struct pa_span *s;
	size_t cls;
	if (__builtin_expect(block_check_as(p, &s, tc, &cls, 1) >= 0, 0)) {
		free_sized_other(p, size, func);
		return;
	}
	free_block_as(tc, s, cls, p, size, func);
}

static void delete_sized(void *p, size_t size)
{
	delete_sized_as(p, size, "operator delete");
}

static void delete_array_sized(void *p, size_t size)
{
	delete_sized_as(p, size, "operator delete[]");
}

/* The std::align_val_t forms (an enum of size_t: passed as one) hold the
 * alignment too: the size's class for that alignment (block_class, as
 * aligned_alloc_pow2 chose it) must be the block's, and the block that
 * aligned. pa_free's fast checks first; free_sized_checked takes anything
 * they do not pass, and names the fault. */
static inline __attribute__((always_inline)) void
delete_aligned_sized_as(void *p, size_t size, size_t align, const char *func)
{
	struct pa_tcache *tc = tcache_self;
	struct pa_span *s;
	size_t cls;
	if (__builtin_expect(block_check_as(p, &s, tc, &cls, 1) >= 0 || cls == 0 ||
	                         block_class(align, size) != cls ||
	                         ((uintptr_t)p & (align - 1)) != 0 ||
	                         tc->freed[cls] == tc->limit[cls],
	                     0)) {
		free_sized_checked(p, size, align, func, 1);
		return;
	}
	free_block_as(tc, s, cls, p, 0, NULL);
}

static void delete_aligned_sized(void *p, size_t size, size_t align)
{
	delete_aligned_sized_as(p, size, align, "operator delete");
}

static void delete_array_aligned_sized(void *p, size_t size, size_t align)
{
	delete_aligned_sized_as(p, size, align, "operator delete[]");
}

/* operator delete(void *, size_t), delete[](void *, size_t), and both with
 * std::align_val_t */
PA_ALIAS(_ZdlPvm, delete_sized);
PA_ALIAS(_ZdaPvm, delete_array_sized);
PA_ALIAS(_ZdlPvmSt11align_val_t, delete_aligned_sized);
PA_ALIAS(_ZdaPvmSt11align_val_t, delete_array_aligned_sized);

/* A static link (cc -static app.c -lpagealloc-preload) takes this object for
 * malloc, and with this reference live.o too, whose constructor hands the
 * live file's writer to the scavenger (`pagealloc stat`, `pagealloc map`):
 * nothing else names live.o, and a linker leaves an archive's unnamed
 * objects out. (The shared library has every object.) */
__attribute__((used)) static void (*const pull_live)(void) = live_init;

/* The sized deletes, where a guarded block's "freed at" stack is trimmed
 * (src/prof.h), as malloc.c's frees are. */
static const prof_entry_fn delete_entries[] __attribute__((used, section("pa_prof_entry"))) = {
    (prof_entry_fn)delete_sized,
    (prof_entry_fn)delete_array_sized,
    (prof_entry_fn)delete_aligned_sized,
    (prof_entry_fn)delete_array_aligned_sized,
};
