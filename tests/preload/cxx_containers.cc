/*
 * cxx_containers.cc — a C++ program that exercises the allocation paths a
 * C++ runtime takes: standard containers and strings (operator new/delete,
 * sized delete), exceptions (__cxa_allocate_exception takes malloc), array
 * new[]/delete[], over-aligned new for alignas(64) types (the align_val_t
 * operators), nothrow new, a failing nothrow new (nullptr) and a failing
 * throwing new (std::bad_alloc), and sized delete with the size new was
 * given, which libpagealloc checks (a wrong size aborts): every size up to
 * 32 KiB, so every size class's last size and the next class's first,
 * large ones, 0 and a null pointer, through each sized form; delete and delete[] expressions of
 * objects with and without destructors, over-aligned too. Prints one
 * checksum line; run with and without the preloaded libpagealloc, the
 * output must be the same. Exits 1 if an over-aligned object is misaligned
 * or a failure is not seen.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "preload_check.h"

namespace
{

struct alignas(64) Line {
	std::uint64_t words[8];
};

std::uint64_t mix(std::uint64_t h, std::uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h;
}

std::uint64_t hash_string(const std::string &s)
{
	std::uint64_t h = 1469598103934665603ull;
	for (unsigned char c : s)
		h = (h ^ c) * 1099511628211ull;
	return h;
}

int failures;

void fail(const char *what)
{
	std::fprintf(stderr, "cxx_containers: %s\n", what);
	failures++;
}

std::uint64_t containers()
{
	std::map<std::string, std::vector<int>> m;
	std::unordered_map<std::uint64_t, std::string> u;
	std::list<std::string> l;
	std::deque<std::uint64_t> d;
	std::uint64_t h = 0;
	for (int i = 0; i < 20000; i++) {
		std::string key =
		    "key-" + std::to_string(i * 7919 % 20011) + std::string(i % 40, 'x');
		m[key].push_back(i);
		m[key.substr(0, 6)].push_back(-i);
		u.emplace(static_cast<std::uint64_t>(i) * 2654435761u, key);
		l.push_back(key);
		if (l.size() > 500)
			l.pop_front();
		d.push_back(hash_string(key));
		if (d.size() > 1000)
			d.pop_front();
	}
	for (const auto &kv : m) {
		h = mix(h, hash_string(kv.first));
		for (int v : kv.second)
			h = mix(h, static_cast<std::uint64_t>(v));
	}
	for (const auto &s : l)
		h = mix(h, hash_string(s));
	for (auto v : d)
		h = mix(h, v);
	h = mix(h, u.size());
	auto shared = std::make_shared<std::vector<std::string>>(100, std::string(300, 'y'));
	std::weak_ptr<std::vector<std::string>> weak = shared;
	h = mix(h, weak.lock()->size());
	return h;
}

std::uint64_t exceptions()
{
	std::uint64_t h = 0;
	for (int i = 0; i < 2000; i++) {
		try {
			std::vector<std::string> v(i % 17, std::string(i % 300, 'e'));
			if (i % 3 == 0)
				throw std::runtime_error("failure number " + std::to_string(i) +
				                         std::string(i % 200, '!'));
			if (i % 3 == 1)
				throw i;
			v.at(v.size() + 1); // std::out_of_range
		} catch (const std::runtime_error &e) {
			h = mix(h, hash_string(e.what()));
		} catch (const std::out_of_range &) {
			h = mix(h, 3);
		} catch (int n) {
			h = mix(h, static_cast<std::uint64_t>(n));
		}
	}
	return h;
}

std::uint64_t arrays_and_alignment()
{
	std::uint64_t h = 0;
	for (int i = 1; i < 3000; i++) {
		int *a = new int[i];
		for (int j = 0; j < i; j++)
			a[j] = i ^ j;
		h = mix(h, static_cast<std::uint64_t>(a[i / 2]));
		delete[] a;

		Line *one = new Line{};
		Line *many = new Line[i % 37 + 1];
		if (reinterpret_cast<std::uintptr_t>(one) % 64 != 0 ||
		    reinterpret_cast<std::uintptr_t>(many) % 64 != 0)
			fail("an alignas(64) object is not 64-byte aligned");
		one->words[0] = static_cast<std::uint64_t>(i);
		many[i % 37].words[7] = one->words[0];
		h = mix(h, many[i % 37].words[7]);
		delete one;
		delete[] many;

		char *nt = new (std::nothrow) char[i * 13];
		if (nt == nullptr)
			fail("nothrow new of a small array failed");
		nt[0] = 'a';
		delete[] nt;
		Line *ntl = new (std::nothrow) Line[3];
		if (ntl == nullptr || reinterpret_cast<std::uintptr_t>(ntl) % 64 != 0)
			fail("nothrow aligned new failed or is misaligned");
		delete[] ntl;
	}
	return h;
}

// Objects whose delete and delete[] expressions call the sized forms: a
// complete type's delete passes its size, and new[] of a type with a
// destructor stores the count before the elements (delete[] passes the
// whole block's size). Without a destructor, delete[] is unsized.
struct WithDtor {
	std::uint64_t words[3];
	~WithDtor() { words[0] = 0; }
};
struct alignas(64) AlignedWithDtor {
	std::uint64_t words[5];
	~AlignedWithDtor() { words[0] = 0; }
};
struct Plain {
	std::uint64_t words[5];
};

std::uint64_t sized_deletes()
{
	constexpr std::align_val_t align{64};
	std::uint64_t h = 0;
	// Every size of a small object, then large ones either side of a page
	// and of the 32 KiB bound.
	static const std::size_t large[] = {32769, 40000, 65536, 65537, 1 << 20, (1 << 20) + 1};
	for (std::size_t i = 1; i <= 32768 + sizeof(large) / sizeof(large[0]); i++) {
		std::size_t n = i <= 32768 ? i : large[i - 32769];
		char *p = static_cast<char *>(::operator new(n));
		p[n - 1] = 1;
		::operator delete(p, n);
		p = static_cast<char *>(::operator new[](n));
		p[n - 1] = 2;
		::operator delete[](p, n);
		p = static_cast<char *>(::operator new(n, align));
		if (reinterpret_cast<std::uintptr_t>(p) % 64 != 0)
			fail("operator new(n, 64) is not 64-byte aligned");
		p[n - 1] = 3;
		::operator delete(p, n, align);
		p = static_cast<char *>(::operator new[](n, align));
		p[n - 1] = 4;
		::operator delete[](p, n, align);
		h = mix(h, n);
	}
	// Size 0, and a null pointer (nothing to free).
	const std::size_t none = 0;
	void *zero = ::operator new(none);
	::operator delete(zero, none);
	zero = ::operator new[](none);
	::operator delete[](zero, none);
	::operator delete(nullptr, 16);
	::operator delete[](nullptr, 16, align);
	for (int k = 0; k < 3000; k += 7) {
		WithDtor *one = new WithDtor{};
		WithDtor *many = new WithDtor[k + 1];
		AlignedWithDtor *aligned = new AlignedWithDtor[k % 97 + 1];
		Plain *plain = new Plain[k + 1];
		many[k].words[1] = static_cast<std::uint64_t>(k);
		aligned[k % 97].words[1] = many[k].words[1];
		plain[k].words[1] = aligned[k % 97].words[1];
		h = mix(h, plain[k].words[1] + one->words[2]);
		delete one;
		delete[] many;
		delete[] aligned;
		delete[] plain;
	}
	return h;
}

// Where the results of the impossible allocations go, so that the compiler
// cannot elide a new/delete pair (C++14 allows it).
char *volatile escape;

void impossible_allocations()
{
	volatile std::size_t huge = ~static_cast<std::size_t>(0) / 4;
	escape = new (std::nothrow) char[huge];
	if (escape != nullptr)
		fail("nothrow new of 2^62 bytes did not return nullptr");
	delete[] escape;
	bool caught = false;
	try {
		escape = new char[huge];
		delete[] escape;
	} catch (const std::bad_alloc &) {
		caught = true;
	}
	if (!caught)
		fail("new of 2^62 bytes did not throw std::bad_alloc");
}

} // namespace

int main()
{
	PRELOAD_CHECK_MALLOC();
	preload_check_symbol(
	    "operator new",
	    reinterpret_cast<void *>(static_cast<void *(*)(std::size_t)>(&operator new)));
	std::uint64_t h = containers();
	h = mix(h, exceptions());
	h = mix(h, arrays_and_alignment());
	h = mix(h, sized_deletes());
	impossible_allocations();
	std::printf("cxx_containers checksum=%016llx\n", static_cast<unsigned long long>(h));
	return failures == 0 ? 0 : 1;
}
