// bench_pageheap.cc — the page heap alone (issue 2), google-benchmark.
//
// No per-CPU cache: every operation is pageheap_alloc / pageheap_free, which
// take the heap lock (uncontended here) around the locked functions. The
// heaps are metadata-only (bench_pageheap_shim.h): one range of 1, 16 or
// 256 GiB of address space at 0x100000000000 whose pages are never touched.
//
// Heap states, each built once per size (untimed, on first use) and restored
// exactly by every benchmark that changes it (checked: a hash of all alloc
// bitmaps, the hint and the page count is compared after each run, and a
// mismatch fails the benchmark):
//
//   empty    every page free
//   frag50   every page independently allocated with probability 1/2
//            (splitmix64, seed kSeed)
//
// In both states every free page is resident (scav bit clear).
//
// Benchmarks. One iteration is one operation, so the Time column is ns per
// operation, and items_per_second counts operations:
//
//   Alloc1/<state>/GiB:g        one pageheap_alloc(h, 1). After kBatch
//                               allocations (or if one fails) the timer is
//                               paused and they are freed again.
//   Free1/<state>/GiB:g         one pageheap_free(h, p, 1) of an allocated
//                               page: kBatch pages are allocated with the
//                               timer paused, then freed timed, in address
//                               order.
//   AllocFree1/<state>/GiB:g    one pageheap_alloc(h, 1) + pageheap_free of
//                               that page (op = the pair).
//   AllocFreeN/<state>/GiB:g/pages:n
//                               the pair for n pages; n in {4, 16} on frag50,
//                               {16, 64, 512, 2048} on empty.
//
// Counter fail_frac: the fraction of allocations that found no run (0 except
// where a heap holds no free run of n pages; then the op is a failed search).
//
// Run: bench_pageheap --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench_pageheap_shim.h"

namespace
{

constexpr uint64_t kSeed = 0x2019;
constexpr size_t kBatch = 4096; // 16 chunks' worth of free pages at 50% occupancy
constexpr const char *kStateName[] = {"empty", "frag50"};

struct Heap {
	pa_pageheap *h;
	uint64_t fingerprint; // of the state as built
};

std::map<std::pair<int64_t, int>, Heap> g_heaps;

// The heap of `gib` GiB in `state`, built on first use.
Heap &heap(int64_t gib, int state)
{
	auto key = std::make_pair(gib, state);
	auto it = g_heaps.find(key);
	if (it != g_heaps.end())
		return it->second;
	pa_pageheap *h = bph_heap_create(uint64_t(gib) << 30, state, kSeed);
	if (h == nullptr)
		std::exit(1);
	size_t bad = bph_heap_verify(h);
	std::fprintf(stderr,
	             "# built %s heap of %lld GiB: %zu of %llu pages in use, hint +%#llx, "
	             "verify: %zu errors\n",
	             kStateName[state], (long long)gib, bph_inuse_pages(h),
	             (unsigned long long)(uint64_t(gib) << 30) / BPH_PAGE_SIZE,
	             (unsigned long long)(bph_hint(h) - BPH_BASE), bad);
	if (bad != 0)
		std::exit(1);
	return g_heaps.emplace(key, Heap{h, bph_fingerprint(h)}).first->second;
}

// Free buf[from, n) (npages each).
void release(pa_pageheap *h, const std::vector<uintptr_t> &buf, size_t from, size_t n,
             size_t npages)
{
	for (size_t i = from; i < n; i++)
		pageheap_free(h, buf[i], npages);
}

void finish(benchmark::State &st, const Heap &hp, uint64_t failed)
{
	st.SetItemsProcessed(int64_t(st.iterations()));
	st.counters["fail_frac"] = st.iterations() ? double(failed) / double(st.iterations()) : 0;
	if (bph_fingerprint(hp.h) != hp.fingerprint)
		st.SkipWithError("the heap state was not restored");
}

void BM_Alloc1(benchmark::State &st, int state)
{
	Heap &hp = heap(st.range(0), state);
	std::vector<uintptr_t> buf(kBatch);
	size_t n = 0;
	uint64_t failed = 0;
	for (auto _ : st) {
		uintptr_t a = pageheap_alloc(hp.h, 1, nullptr);
		if (a != 0)
			buf[n++] = a;
		else
			failed++;
		if (n == kBatch || a == 0) {
			st.PauseTiming();
			release(hp.h, buf, 0, n, 1);
			n = 0;
			st.ResumeTiming();
		}
	}
	release(hp.h, buf, 0, n, 1);
	finish(st, hp, failed);
}

void BM_Free1(benchmark::State &st, int state)
{
	Heap &hp = heap(st.range(0), state);
	std::vector<uintptr_t> buf(kBatch);
	size_t i = 0, n = 0;
	for (auto _ : st) {
		if (i == n) {
			st.PauseTiming();
			for (n = 0; n < kBatch; n++)
				if ((buf[n] = pageheap_alloc(hp.h, 1, nullptr)) == 0)
					break;
			i = 0;
			st.ResumeTiming();
			if (n == 0) {
				st.SkipWithError("no page to free: the heap is full");
				break;
			}
		}
		pageheap_free(hp.h, buf[i++], 1);
	}
	release(hp.h, buf, i, n, 1);
	finish(st, hp, 0);
}

void BM_AllocFree(benchmark::State &st, int state, size_t npages)
{
	Heap &hp = heap(st.range(0), state);
	uint64_t failed = 0;
	for (auto _ : st) {
		uintptr_t a = pageheap_alloc(hp.h, npages, nullptr);
		if (a != 0)
			pageheap_free(hp.h, a, npages);
		else
			failed++;
	}
	finish(st, hp, failed);
}

void BM_AllocFree1(benchmark::State &st, int state)
{
	BM_AllocFree(st, state, 1);
}
void BM_AllocFreeN(benchmark::State &st, int state)
{
	BM_AllocFree(st, state, size_t(st.range(1)));
}

constexpr int64_t kSizesGiB[] = {1, 16, 256};

void register_sized(const char *name, void (*fn)(benchmark::State &, int), int state)
{
	std::string full = std::string(name) + "/" + kStateName[state];
	auto *b = benchmark::RegisterBenchmark(full.c_str(), fn, state)->ArgName("GiB");
	for (int64_t gib : kSizesGiB)
		b->Arg(gib);
}

void register_n(int state, std::initializer_list<int64_t> pages)
{
	std::string full = std::string("AllocFreeN/") + kStateName[state];
	auto *b = benchmark::RegisterBenchmark(full.c_str(), BM_AllocFreeN, state)
	              ->ArgNames({"GiB", "pages"});
	for (int64_t n : pages)
		for (int64_t gib : kSizesGiB)
			b->Args({gib, n});
}

} // namespace

int main(int argc, char **argv)
{
	for (int state : {BPH_FRAG50, BPH_EMPTY}) {
		register_sized("Alloc1", BM_Alloc1, state);
		register_sized("Free1", BM_Free1, state);
		register_sized("AllocFree1", BM_AllocFree1, state);
	}
	register_n(BPH_FRAG50, {4, 16});
	register_n(BPH_EMPTY, {16, 64, 512, 2048});

	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();

	int status = 0;
	for (auto &kv : g_heaps) {
		size_t bad = bph_heap_verify(kv.second.h);
		if (bad != 0 || bph_fingerprint(kv.second.h) != kv.second.fingerprint) {
			std::fprintf(stderr,
			             "# %s heap of %lld GiB: %zu verify errors or changed state\n",
			             kStateName[kv.first.second], (long long)kv.first.first, bad);
			status = 1;
		}
		bph_heap_destroy(kv.second.h);
	}
	return status;
}
