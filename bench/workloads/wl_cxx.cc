/*
 * wl_cxx.cc — what C++ programs allocate: strings, maps, growing vectors.
 *
 * One thread runs `ops` operations on a std::map<std::string,
 * std::vector<int>> of up to `keys` keys: most append a value to a key's
 * vector (building the key with std::string appends and std::to_string, so
 * short strings, SSO and heap ones, come and go); one in 16 erases the first
 * key at or after a random one (a whole vector freed); one in 64 replaces a
 * vector with a copy of itself (a burst of one size). operator new/delete
 * underneath, so a preloaded allocator's C++ operators are what is measured.
 *
 * Self-check: the number of values and their sum are kept apart from the map
 * as they are added and erased; at the end the map is walked, keys must be in
 * order, and both must agree. Usage: wl-cxx [--quick] [ops=2000000] [keys=100000]
 */
#include <map>
#include <string>
#include <vector>

#include "wl_common.h"

int main(int argc, char **argv)
{
	struct wl_param params[] = {
	    {"ops", 2000000, 150000}, {"keys", 100000, 20000}, {"seed", 8, 8}};
	wl_parse(argc, argv, "wl-cxx", params, 3);
	uint64_t ops = (uint64_t)params[0].value;
	uint64_t keys = (uint64_t)params[1].value;
	wl_rng rng = wl_rng_seed((uint64_t)params[2].value);
	if (keys < 1)
		wl_die("keys must be >= 1");

	std::map<std::string, std::vector<int>> m;
	uint64_t count = 0, sum = 0, erased = 0;
	auto key_of = [&](uint64_t k) {
		std::string s = "key/";
		s += std::to_string(k % 97);
		s += '/';
		s += std::to_string(k);
		if (k % 3 == 0)
			s += "/a-longer-suffix-past-the-small-string-buffer";
		return s;
	};
	for (uint64_t op = 0; op < ops; op++) {
		uint64_t r = wl_rand(&rng);
		std::string k = key_of(wl_below(&rng, keys));
		if (r % 16 == 0) {
			auto it = m.lower_bound(k);
			if (it == m.end())
				continue;
			count -= it->second.size();
			for (int v : it->second)
				sum -= (uint64_t)v;
			m.erase(it);
			erased++;
		} else if (r % 64 == 1) {
			auto it = m.find(k);
			if (it != m.end()) {
				std::vector<int> copy(it->second);
				it->second.swap(copy);
			}
		} else {
			int v = (int)(r >> 40);
			m[k].push_back(v);
			count++;
			sum += (uint64_t)v;
		}
	}
	uint64_t seen = 0, seen_sum = 0;
	const std::string *prev = nullptr;
	for (const auto &kv : m) {
		if (prev != nullptr && !(*prev < kv.first))
			wl_die("map keys out of order");
		prev = &kv.first;
		seen += kv.second.size();
		for (int v : kv.second)
			seen_sum += (uint64_t)v;
	}
	if (seen != count || seen_sum != sum)
		wl_die("map holds %llu values (sum %llx), expected %llu (sum %llx)",
		       (unsigned long long)seen, (unsigned long long)seen_sum,
		       (unsigned long long)count, (unsigned long long)sum);
	printf("wl-cxx ok keys_left=%zu values=%llu erased=%llu checksum=%llx\n", m.size(),
	       (unsigned long long)count, (unsigned long long)erased, (unsigned long long)sum);
	return 0;
}
