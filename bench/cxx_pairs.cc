/*
 * cxx_pairs.cc — instructions per C++ operator new + operator delete pair,
 * for callgrind, with each form of delete that a new-expression's partner
 * calls:
 *
 *   cxx-pairs FORM SIZE N
 *
 * FORM is one of
 *   unsized        operator new(SIZE), operator delete(p)
 *   sized          operator new(SIZE), operator delete(p, SIZE)
 *   array-sized    operator new[](SIZE), operator delete[](p, SIZE)
 *   aligned-sized  operator new(SIZE, 64), operator delete(p, SIZE, 64)
 *
 * It warms up with 1000 pairs, then does N pairs in the loop function of the
 * form, pair_loop_FORM (with '-' as '_'), and nothing else, for
 *
 *   LD_PRELOAD=build/libpagealloc-preload.so valgrind --tool=callgrind \
 *       --toggle-collect=pair_loop_sized build/cxx-pairs sized 16 200000
 *
 * whose total divided by N is instructions per pair, the loop's own
 * included. The program calls the operators through the PLT, so without
 * LD_PRELOAD it measures libstdc++'s (on the C library's malloc). Each pair
 * writes the block's first byte through a volatile pointer: the allocation
 * is observable and cannot be elided.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace
{

constexpr std::align_val_t pair_align{64};

inline void touch(void *p, unsigned long i)
{
	*static_cast<volatile unsigned char *>(p) = static_cast<unsigned char>(i);
}

struct unsized {
	static void *alloc(std::size_t n) { return ::operator new(n); }
	static void release(void *p, std::size_t) { ::operator delete(p); }
};
struct sized {
	static void *alloc(std::size_t n) { return ::operator new(n); }
	static void release(void *p, std::size_t n) { ::operator delete(p, n); }
};
struct array_sized {
	static void *alloc(std::size_t n) { return ::operator new[](n); }
	static void release(void *p, std::size_t n) { ::operator delete[](p, n); }
};
struct aligned_sized {
	static void *alloc(std::size_t n) { return ::operator new(n, pair_align); }
	static void release(void *p, std::size_t n) { ::operator delete(p, n, pair_align); }
};

template <class Form> inline void pairs(std::size_t size, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		void *p = Form::alloc(size);
		touch(p, i);
		Form::release(p, size);
	}
}

} // namespace

/* Extern "C", never inlined nor cloned: callgrind toggles collection on
 * these names. */
extern "C" {
#if defined(__clang__)
#define PAIR_LOOP __attribute__((noinline))
#else
#define PAIR_LOOP __attribute__((noinline, noclone))
#endif
PAIR_LOOP void pair_loop_unsized(std::size_t size, unsigned long n)
{
	pairs<unsized>(size, n);
}
PAIR_LOOP void pair_loop_sized(std::size_t size, unsigned long n)
{
	pairs<sized>(size, n);
}
PAIR_LOOP void pair_loop_array_sized(std::size_t size, unsigned long n)
{
	pairs<array_sized>(size, n);
}
PAIR_LOOP void pair_loop_aligned_sized(std::size_t size, unsigned long n)
{
	pairs<aligned_sized>(size, n);
}
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*loop)(std::size_t, unsigned long);
		void *(*alloc)(std::size_t);
		void (*release)(void *, std::size_t);
	} forms[] = {
	    {"unsized", pair_loop_unsized, unsized::alloc, unsized::release},
	    {"sized", pair_loop_sized, sized::alloc, sized::release},
	    {"array-sized", pair_loop_array_sized, array_sized::alloc, array_sized::release},
	    {"aligned-sized", pair_loop_aligned_sized, aligned_sized::alloc,
	     aligned_sized::release},
	};
	char *end1 = nullptr, *end2 = nullptr;
	std::size_t size = argc == 4 ? std::strtoul(argv[2], &end1, 10) : 0;
	unsigned long n = argc == 4 ? std::strtoul(argv[3], &end2, 10) : 0;
	if (argc == 4 && *end1 == '\0' && *end2 == '\0' && size > 0) {
		for (const auto &f : forms) {
			if (std::strcmp(argv[1], f.name) != 0)
				continue;
			/* Warm up outside the loop function: symbol binding, the
			 * thread cache. */
			for (unsigned long i = 0; i < 1000; i++) {
				void *p = f.alloc(size);
				touch(p, i);
				f.release(p, size);
			}
			f.loop(size, n);
			std::printf("cxx-pairs %s size=%zu pairs=%lu\n", f.name, size, n);
			return 0;
		}
	}
	std::fprintf(stderr, "usage: cxx-pairs unsized|sized|array-sized|aligned-sized SIZE N\n");
	return 2;
}
