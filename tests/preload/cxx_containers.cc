/*
 * cxx_containers.cc — a C++ program that exercises the allocation paths a
 * C++ runtime takes: standard containers and strings (operator new/delete,
 * sized delete), exceptions (__cxa_allocate_exception takes malloc), array
 * new[]/delete[], over-aligned new for alignas(64) types (the align_val_t
 * operators), nothrow new, a failing nothrow new (nullptr) and a failing
 * throwing new (std::bad_alloc). Prints one checksum line; run with and
 * without the preloaded libpagealloc, the output must be the same.
 * Exits 1 if an over-aligned object is misaligned or a failure is not seen.
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
	impossible_allocations();
	std::printf("cxx_containers checksum=%016llx\n", static_cast<unsigned long long>(h));
	return failures == 0 ? 0 : 1;
}
