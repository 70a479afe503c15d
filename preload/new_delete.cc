/*
 * new_delete.cc — C++ operator new and delete for the preload library, every
 * replaceable form of [new.delete] (C++17): plain, array, nothrow, sized
 * delete, std::align_val_t, and their combinations.
 *
 * operator new has the standard's semantics: on failure it calls the
 * installed std::new_handler and tries again, for as long as there is one;
 * without one it throws std::bad_alloc. The nothrow forms return nullptr
 * instead of throwing (and where a new_handler throws). The fast path is
 * pa_malloc and one test; the loop is out of line. std::get_new_handler and
 * std::bad_alloc come from libstdc++, which the preload library therefore
 * needs (as jemalloc's and tcmalloc's do): a C++ program shares the one
 * handler that std::set_new_handler sets.
 *
 * Every delete is pa_free: the size and alignment arguments are not needed
 * to find the block, and the pointer checks are pa_free's.
 */
#include <cstddef>
#include <new>

#include "pagealloc.h"

namespace
{

/* The allocation failed: call new_handlers until one makes room or there is
 * none left. align 0 means malloc's alignment. */
__attribute__((noinline, cold)) void *new_retry(std::size_t n, std::size_t align, bool nothrow)
{
	for (;;) {
		std::new_handler handler = std::get_new_handler();
		if (handler == nullptr) {
			if (nothrow)
				return nullptr;
			throw std::bad_alloc();
		}
		if (nothrow) {
			try {
				handler();
			} catch (...) {
				return nullptr;
			}
		} else {
			handler();
		}
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

void operator delete(void *p, std::size_t) noexcept
{
	pa_free(p);
}

void operator delete[](void *p, std::size_t) noexcept
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

void operator delete(void *p, std::size_t, std::align_val_t) noexcept
{
	pa_free(p);
}

void operator delete[](void *p, std::size_t, std::align_val_t) noexcept
{
	pa_free(p);
}
