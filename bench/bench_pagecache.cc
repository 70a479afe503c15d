// bench_pagecache.cc — per-CPU page caches (issue 3), google-benchmark.
//
// One real page heap (pageheap_init(h, NULL)) is shared by every benchmark
// and thread; over it sit three cache sets, one per mode, all built once in
// main() before any benchmark runs:
//
//   rseq    pagecache_init(PA_CACHE_RSEQ): restartable-sequence fast paths.
//           The mode really selected is printed and put in the label: where
//           rseq is unavailable the set falls back to locked and says so.
//   locked  pagecache_init(PA_CACHE_LOCKED): per-CPU CAS lock, sched_getcpu.
//   off     pagecache_init(PA_CACHE_OFF): every call goes to the heap under
//           the heap lock (pageheap_alloc; checked free).
//
// Benchmarks (all 1-page requests, scav == NULL as pa_pages_alloc passes):
//
//   alloc1/<mode>  allocation alone. Each iteration times kBatch (48)
//                  back-to-back pagecache_alloc calls with steady_clock
//                  (manual time), then frees them untimed, so every timed
//                  allocation finds the CPU's 64-page group non-empty.
//                  Time/iteration is per batch; ns_per_op is per allocation.
//   free1/<mode>   free alone, the mirror image: 48 timed frees of pages
//                  allocated untimed just before.
//   free_elsewhere/<mode>
//                  48 timed frees of pages taken straight from the heap,
//                  so outside every cache's group: the per-CPU free queue
//                  (drained to the heap 15 at a time) against one locked
//                  heap free each (off).
//   pair/<mode>/threads:N/real_time
//                  alloc + immediate free of one page, N threads sharing
//                  the set. items_per_second and Time are google-benchmark's
//                  (mean of the threads' own run times); wall_items_per_second
//                  and wall_ns_per_op use the elapsed time of the whole
//                  parallel region (see WallClock): quote those when threads
//                  outnumber cores.
//   spin_control/threads:N/real_time
//                  pure register work in the same harness: the scaling
//                  ceiling of the machine (e.g. vCPUs that share a core).
//   clock_now      the cost of one steady_clock::now(), the bias of the
//                  manual timing (two reads per 48 operations).
//
// Counters: ns_per_op (alloc1/free1), refills_per_Mop and drains_per_Mop (how
// often the slow paths ran: ~0 means the fast path was measured).
//
// Run:  bench_pagecache --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "bench_pagecache_shim.h"

namespace
{

using Clock = std::chrono::steady_clock;

constexpr size_t kBatch = 48; // < 64: a batch never empties a full group

struct ModeSet {
	int want;
	pa_pagecache_set *set;
	std::string label; // "mode=rseq", or "mode=locked (rseq unavailable)"
};

pa_pageheap *g_heap;
ModeSet g_modes[] = {{BPC_RSEQ, nullptr, {}}, {BPC_LOCKED, nullptr, {}}, {BPC_OFF, nullptr, {}}};

// The heap's per-group owner marks (chunk->cached_by) name a CPU of "the"
// cache set over the heap; a second set reading them would look into the
// wrong caches (and a PA_CACHE_OFF set, which has none, dereferences NULL in
// free_in_a_cache). So before each run, give every other set's pages back:
// while one benchmark runs, only its set holds groups.
void isolate(const ModeSet *m)
{
	for (ModeSet &o : g_modes)
		if (&o != m)
			bpc_set_flush(o.set);
}

// Slow-path activity across a benchmark run, reported by thread 0 only
// (per-thread counters are summed).
struct SlowPaths {
	uint64_t refills = 0, drains = 0;
	void start(const pa_pagecache_set *pc) { bpc_set_counts(pc, &refills, &drains); }
	void report(benchmark::State &st, const pa_pagecache_set *pc, double ops)
	{
		uint64_t r, d;
		bpc_set_counts(pc, &r, &d);
		if (ops > 0) {
			st.counters["refills_per_Mop"] = 1e6 * double(r - refills) / ops;
			st.counters["drains_per_Mop"] = 1e6 * double(d - drains) / ops;
		}
	}
};

// The bookkeeping of a benchmark that times batches of kBatch operations by
// hand: isolates the mode's set, sums the timed spans, reports ns_per_op,
// items and slow-path counts.
struct BatchTimer {
	const ModeSet *m;
	double ns = 0;
	SlowPaths sp;
	explicit BatchTimer(const ModeSet *mode) : m(mode)
	{
		isolate(m);
		sp.start(m->set);
	}
	void record(benchmark::State &st, Clock::time_point t0, Clock::time_point t1)
	{
		double s = std::chrono::duration<double>(t1 - t0).count();
		ns += s * 1e9;
		st.SetIterationTime(s);
	}
	void finish(benchmark::State &st)
	{
		double ops = double(st.iterations()) * kBatch;
		st.SetItemsProcessed(int64_t(ops));
		st.counters["ns_per_op"] = ns / ops;
		sp.report(st, m->set, ops);
		st.SetLabel(m->label);
	}
};

void BM_Alloc1(benchmark::State &st, const ModeSet *m)
{
	pa_pagecache_set *pc = m->set;
	uintptr_t a[kBatch];
	BatchTimer bt(m);
	for (auto _ : st) {
		auto t0 = Clock::now();
		for (size_t i = 0; i < kBatch; i++)
			a[i] = pagecache_alloc(pc, 1, nullptr);
		bt.record(st, t0, Clock::now());
		for (size_t i = 0; i < kBatch; i++) {
			if (a[i] == 0 || pagecache_free(pc, a[i], 1) != 0) {
				st.SkipWithError("pagecache_alloc/free failed");
				return;
			}
		}
	}
	bt.finish(st);
}

// 48 timed frees of pages allocated untimed just before: through the set
// (free1: they sit in the CPU's group) or straight from the heap
// (free_elsewhere: in no cache's group; with caches they go to the CPU's free
// queue and reach the heap 15 at a time under one lock acquisition, with
// caches off each free takes the heap lock itself).
void timed_frees(benchmark::State &st, const ModeSet *m, bool from_heap)
{
	pa_pagecache_set *pc = m->set;
	uintptr_t a[kBatch];
	BatchTimer bt(m);
	for (auto _ : st) {
		for (size_t i = 0; i < kBatch; i++) {
			a[i] =
			    from_heap ? bpc_heap_alloc(g_heap, 1) : pagecache_alloc(pc, 1, nullptr);
			if (a[i] == 0) {
				st.SkipWithError("allocation failed");
				return;
			}
		}
		int bad = 0;
		auto t0 = Clock::now();
		for (size_t i = 0; i < kBatch; i++)
			bad |= pagecache_free(pc, a[i], 1);
		bt.record(st, t0, Clock::now());
		if (bad) {
			st.SkipWithError("pagecache_free failed");
			return;
		}
	}
	bt.finish(st);
}

void BM_Free1(benchmark::State &st, const ModeSet *m)
{
	timed_frees(st, m, false);
}
void BM_FreeElsewhere(benchmark::State &st, const ModeSet *m)
{
	timed_frees(st, m, true);
}

// Aggregate throughput over the wall clock of the whole parallel region.
// google-benchmark's real_time with threads is the mean of the threads' own
// run times; when threads outnumber cores they do not finish together and
// that mean understates the elapsed time (and inflates items_per_second).
// Here thread 0 stamps the first iteration (all threads leave the start
// barrier together) and reads the clock again after the loop, which returns
// only once every thread has passed the end barrier.
struct WallClock {
	Clock::time_point t0;
	bool first = true;
	void tick()
	{
		if (__builtin_expect(first, 0)) {
			t0 = Clock::now();
			first = false;
		}
	}
	void report(benchmark::State &st)
	{
		if (st.thread_index() != 0 || first)
			return;
		double s = std::chrono::duration<double>(Clock::now() - t0).count();
		double ops = double(st.iterations()) * st.threads(); // same count per thread
		st.counters["wall_items_per_second"] = ops / s;
		st.counters["wall_ns_per_op"] = s * 1e9 / ops;
	}
};

void BM_Pair(benchmark::State &st, const ModeSet *m)
{
	pa_pagecache_set *pc = m->set;
	SlowPaths sp;
	WallClock wc;
	if (st.thread_index() == 0) { // the others wait at the start barrier
		isolate(m);
		sp.start(pc);
	}
	for (auto _ : st) {
		wc.tick();
		uintptr_t a = pagecache_alloc(pc, 1, nullptr);
		if (a == 0 || pagecache_free(pc, a, 1) != 0) {
			st.SkipWithError("pagecache_alloc/free failed");
			break;
		}
	}
	st.SetItemsProcessed(st.iterations());
	wc.report(st);
	if (st.thread_index() == 0) {
		sp.report(st, pc, double(st.iterations()) * st.threads());
		st.SetLabel(m->label);
	}
}

// Control: the same harness around pure register work (no memory shared),
// i.e. the scaling this VM allows at all.
void BM_Spin(benchmark::State &st)
{
	WallClock wc;
	uint64_t x = uint64_t(st.thread_index()) + 1;
	for (auto _ : st) {
		wc.tick();
		for (int i = 0; i < 8; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		benchmark::DoNotOptimize(x);
	}
	st.SetItemsProcessed(st.iterations());
	wc.report(st);
}

void BM_ClockNow(benchmark::State &st)
{
	for (auto _ : st)
		benchmark::DoNotOptimize(Clock::now());
}

} // namespace

int main(int argc, char **argv)
{
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;

	g_heap = bpc_heap_create();
	if (g_heap == nullptr) {
		std::fprintf(stderr, "bench_pagecache: pageheap_init failed\n");
		return 1;
	}
	for (ModeSet &m : g_modes) {
		m.set = bpc_set_create(g_heap, m.want);
		if (m.set == nullptr) {
			std::fprintf(stderr, "bench_pagecache: pagecache_init(%s) failed\n",
			             bpc_mode_name(m.want));
			return 1;
		}
		int got = bpc_set_mode(m.set);
		m.label = std::string("mode=") + bpc_mode_name(got);
		if (got != m.want)
			m.label += std::string(" (") + bpc_mode_name(m.want) + " unavailable)";
		std::fprintf(stderr,
		             "bench_pagecache: wanted %s, selected %s (%u per-CPU caches)\n",
		             bpc_mode_name(m.want), bpc_mode_name(got), bpc_set_ncpus(m.set));
		benchmark::AddCustomContext(std::string("pagecache_") + bpc_mode_name(m.want),
		                            m.label.substr(5));
	}
	benchmark::AddCustomContext("glibc___rseq_size", std::to_string(bpc_rseq_size()));
	benchmark::AddCustomContext("hardware_concurrency",
	                            std::to_string(std::thread::hardware_concurrency()));

	for (ModeSet &m : g_modes)
		benchmark::RegisterBenchmark(
		    (std::string("alloc1/") + bpc_mode_name(m.want)).c_str(), BM_Alloc1, &m)
		    ->UseManualTime();
	for (ModeSet &m : g_modes)
		benchmark::RegisterBenchmark(
		    (std::string("free1/") + bpc_mode_name(m.want)).c_str(), BM_Free1, &m)
		    ->UseManualTime();
	for (ModeSet &m : g_modes)
		benchmark::RegisterBenchmark(
		    (std::string("free_elsewhere/") + bpc_mode_name(m.want)).c_str(),
		    BM_FreeElsewhere, &m)
		    ->UseManualTime();
	// 1, 2, 4, 8 and 16 threads, on the wall clock.
	auto threaded = [](benchmark::internal::Benchmark *b) {
		for (int t = 1; t <= 16; t *= 2)
			b->Threads(t);
		b->UseRealTime();
	};
	for (ModeSet &m : g_modes)
		threaded(benchmark::RegisterBenchmark(
		    (std::string("pair/") + bpc_mode_name(m.want)).c_str(), BM_Pair, &m));
	threaded(benchmark::RegisterBenchmark("spin_control", BM_Spin));
	benchmark::RegisterBenchmark("clock_now", BM_ClockNow);

	benchmark::RunSpecifiedBenchmarks();

	int rc = 0;
	for (ModeSet &m : g_modes) {
		bpc_set_destroy(m.set); // flushes every cache back to the heap
		m.set = nullptr;
	}
	if (size_t bad = bpc_heap_verify(g_heap)) {
		std::fprintf(stderr, "bench_pagecache: heap inconsistent after the run (%zu)\n",
		             bad);
		rc = 1;
	}
	bpc_heap_destroy(g_heap);
	benchmark::Shutdown();
	return rc;
}
