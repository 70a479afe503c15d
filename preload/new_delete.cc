/*
 * new_delete.cc — C++ operator new and delete for the preload library, every
 * replaceable form of [new.delete] (C++17): plain, array, nothrow, sized
 * delete, std::align_val_t, and their combinations.
 *
 * operator new has the standard's semantics: on failure it calls the
 * installed std::new_handler and tries again, for as long as there is one;
 * without one it throws std::bad_alloc. The nothrow forms return nullptr
 * instead of throwing (and where a new_handler throws). The fast path is
 * pa_malloc and one test; the loop is out of line.
 *
 * libstdc++ is referenced only weakly (std::get_new_handler,
 * std::__throw_bad_alloc), and this file is built without exception tables
 * (-fno-exceptions), so the preload library does not load libstdc++ (and
 * libm) into C programs: 1.2 MiB of resident memory in every small process.
 * A C++ program has libstdc++ loaded, the weak names resolve to it, and it
 * shares the one handler std::set_new_handler sets. The price: a new_handler
 * that throws out of a nothrow operator new reaches std::terminate instead
 * of making it return nullptr (the standard's rule), because catching needs
 * libstdc++'s personality routine. A C program has no new_handler.
 *
 * Every delete here is pa_free: the alignment argument is not needed to
 * find the block, and the pointer checks are pa_free's. The four sized
 * deletes, which also check their size (free_sized's rule), are ELF aliases
 * in preload/malloc_names.c: only there can they inline the allocator's
 * fast path.
 */
#include <cstddef>
#include <new>

#include "pagealloc.h"

/* GCC warns of an unsized delete whose sized partner this file does not
 * define: preload/malloc_names.c defines them. (Clang has no such warning.) */
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wsized-deallocation"
#endif

/* Weak references to libstdc++ (see above): null when it is not loaded. */
extern std::new_handler pa_get_new_handler() noexcept __asm__("_ZSt15get_new_handlerv")
    __attribute__((weak));
[[noreturn]] extern void pa_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv")
    __attribute__((weak));

namespace
{

/* The allocation failed: call new_handlers until one makes room or there is
 * none left. align 0 means malloc's alignment. */
__attribute__((noinline, cold)) void *new_retry(std::size_t n, std::size_t align, bool nothrow)
{
	for (;;) {
		std::new_handler handler = pa_get_new_handler ? pa_get_new_handler() : nullptr;
		if (handler == nullptr) {
			if (nothrow)
				return nullptr;
			if (pa_throw_bad_alloc)
				pa_throw_bad_alloc();
			__builtin_trap(); /* operator new without libstdc++: cannot happen */
		}
		handler();
		void *p = align != 0 ? pa_memalign(align, n) : pa_malloc(n);
		if (p != nullptr)
			return p;
	}
}

inline void *new_plain(std::size_t n, bool nothrow)
{
	void *p = pa_malloc(n);
	if (__builtin_expect(p != nullptr, 1))
		return p;
	return new_retry(n, 0, nothrow);
}

inline void *new_aligned(std::size_t n, std::align_val_t align, bool nothrow)
{
	void *p = pa_memalign(static_cast<std::size_t>(align), n);
	if (__builtin_expect(p != nullptr, 1))
		return p;
	return new_retry(n, static_cast<std::size_t>(align), nothrow);
}

} // namespace

void *operator new(std::size_t n)
{
	return new_plain(n, false);
}

void *operator new[](std::size_t n)
{
	return new_plain(n, false);
}

void *operator new(std::size_t n, const std::nothrow_t &) noexcept
{
	return new_plain(n, true);
}

void *operator new[](std::size_t n, const std::nothrow_t &) noexcept
{
	return new_plain(n, true);
}

void *operator new(std::size_t n, std::align_val_t align)
{
	return new_aligned(n, align, false);
}

void *operator new[](std::size_t n, std::align_val_t align)
{
	return new_aligned(n, align, false);
}

void *operator new(std::size_t n, std::align_val_t align, const std::nothrow_t &) noexcept
{
	return new_aligned(n, align, true);
}

void *operator new[](std::size_t n, std::align_val_t align, const std::nothrow_t &) noexcept
{
	return new_aligned(n, align, true);
}

void operator delete(void *p) noexcept
{
	pa_free(p);
}

void operator delete[](void *p) noexcept
{
	pa_free(p);
}

void operator delete(void *p, const std::nothrow_t &) noexcept
{
	pa_free(p);
}

void operator delete[](void *p, const std::nothrow_t &) noexcept
{
	pa_free(p);
}

void operator delete(void *p, std::align_val_t) noexcept
{
	pa_free(p);
}

void operator delete[](void *p, std::align_val_t) noexcept
{
	pa_free(p);
}

void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept
{
	pa_free(p);
}

void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept
{
	pa_free(p);
}

/* The operators a heap profile's stacks are trimmed at (src/prof.h): a
 * sample taken inside one of them starts at its caller. One pointer each,
 * as the section's C readers expect; typed, so the table is constant
 * (no constructor has to run before the first sample). */
namespace
{
using new_fn = void *(*)(std::size_t);
using new_nothrow_fn = void *(*)(std::size_t, const std::nothrow_t &) noexcept;
using new_aligned_fn = void *(*)(std::size_t, std::align_val_t);
using new_aligned_nothrow_fn = void *(*)(std::size_t, std::align_val_t,
                                         const std::nothrow_t &) noexcept;
struct prof_entry_table {
	new_fn plain, array;
	new_nothrow_fn plain_nothrow, array_nothrow;
	new_aligned_fn aligned, array_aligned;
	new_aligned_nothrow_fn aligned_nothrow, array_aligned_nothrow;
};
[[gnu::used, gnu::section("pa_prof_entry")]] constexpr prof_entry_table prof_entries = {
    &operator new, &operator new[], &operator new, &operator new[],
    &operator new, &operator new[], &operator new, &operator new[],
};
static_assert(sizeof(prof_entry_table) == 8 * sizeof(void (*)()), "one pointer per operator");

/* The deletes likewise: a guarded block's "freed at" stack (src/guard.h)
 * starts at their caller, also where a delete calls pa_free rather than
 * jumping to it (an unoptimised build). */
using delete_fn = void (*)(void *) noexcept;
using delete_nothrow_fn = void (*)(void *, const std::nothrow_t &) noexcept;
using delete_aligned_fn = void (*)(void *, std::align_val_t) noexcept;
using delete_aligned_nothrow_fn = void (*)(void *, std::align_val_t,
                                           const std::nothrow_t &) noexcept;
struct delete_entry_table {
	delete_fn plain, array;
	delete_nothrow_fn plain_nothrow, array_nothrow;
	delete_aligned_fn aligned, array_aligned;
	delete_aligned_nothrow_fn aligned_nothrow, array_aligned_nothrow;
};
[[gnu::used, gnu::section("pa_prof_entry")]] constexpr delete_entry_table delete_entries = {
    &operator delete, &operator delete[], &operator delete, &operator delete[],
    &operator delete, &operator delete[], &operator delete, &operator delete[],
};
static_assert(sizeof(delete_entry_table) == 8 * sizeof(void (*)()), "one pointer per operator");
} // namespace
