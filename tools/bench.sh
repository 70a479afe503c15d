#!/usr/bin/env bash
# Run every benchmark of docs/benchmarks.md the way it was recorded, into
# bench-results/ (or the directory given as $1):
#
#   pageheap.txt    bench_pageheap     page heap alone, empty and 50%-fragmented
#                                      heaps of 1, 16 and 256 GiB (issue 2)
#   pagecache.txt   bench_pagecache    per-CPU caches vs none, 1-16 threads (issue 3)
#   scaling.txt     bench_pagecache's cached pair at 1, 2 and 16 threads, in 5
#                   separate runs, with each run's ratios (2 vs 1, 16 vs 2) and
#                   the medians of those ratios
#   scavenger.txt   scav-bench         release throughput and CPU share (issue 4)
#   callgrind.txt   instructions per operation of the page heap's and the
#                   caches' 1-page paths (repeatable, unlike the times)
#   machine.txt     date, nproc, CPU model, kernel, compiler, commit
#
# Builds build/ (RelWithDebInfo: -O2 -g) first. Takes about 11 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-bench-results}
mkdir -p "$out"
tools/setup-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null

{
	date -u +%Y-%m-%dT%H:%M:%SZ
	echo "nproc: $(nproc)"
	lscpu | grep -m1 'Model name' || true
	uname -r
	cc --version | head -1
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo none)"
	uptime
} >"$out/machine.txt"

gb=(--benchmark_repetitions=5 --benchmark_report_aggregates_only=true)

echo "bench: page heap -> $out/pageheap.txt"
build/bench_pageheap "${gb[@]}" >"$out/pageheap.txt" 2>&1

echo "bench: per-CPU caches -> $out/pagecache.txt"
build/bench_pagecache "${gb[@]}" >"$out/pagecache.txt" 2>&1

echo "bench: thread scaling -> $out/scaling.txt"
# The threads' shares of 2 cores move a lot from run to run on a shared
# machine, so the ratios are taken inside each run and their median kept.
for run in 1 2 3 4 5; do
	build/bench_pagecache --benchmark_filter='pair/rseq/real_time/threads:(1|2|16)$' "${gb[@]}" 2>&1 |
		awk -v run="$run" '/_median/ {
			for (i = 1; i <= NF; i++)
				if ($i ~ /^wall_items_per_second=/) {
					v = substr($i, 23); m = 1
					if (v ~ /M$/) m = 1e6; else if (v ~ /k$/) m = 1e3
					sub(/[Mk]$/, "", v); w[++n] = v * m
				}
		}
		END { printf "run %d: 1 thread %.1f M/s, 2 threads %.1f M/s, 16 threads %.1f M/s; 2/1 = %.2f, 16/2 = %.2f\n",
			run, w[1] / 1e6, w[2] / 1e6, w[3] / 1e6, w[2] / w[1], w[3] / w[2] }'
done >"$out/scaling.txt"
awk -F'[=,]' '{ a[NR] = $(NF - 2) + 0; b[NR] = $NF + 0 }
	function med(x, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
		return x[int((n + 1) / 2)] }
	END { printf "median of ratios: 2/1 = %.2f, 16/2 = %.2f\n", med(a, NR), med(b, NR) }' \
	"$out/scaling.txt" >>"$out/scaling.txt"
cat "$out/scaling.txt"

echo "bench: scavenger -> $out/scavenger.txt"
build/scav-bench --mib 1024 --reps 5 >"$out/scavenger.txt" 2>&1

echo "bench: instruction counts -> $out/callgrind.txt"
# Total Ir of the toggled functions over a whole run, from callgrind's summary.
ir() { # outfile, toggles..., --, program args...
	local f=$1
	shift
	local t=()
	while [ "$1" != -- ]; do
		t+=(--toggle-collect="$1")
		shift
	done
	shift
	valgrind --tool=callgrind --callgrind-out-file="$f" "${t[@]}" "$@" >/dev/null 2>&1
	callgrind_annotate "$f" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
tmp=$(mktemp -d)
{
	n=200000
	for mode in batch pair; do
		total=$(ir "$tmp/ph.$mode" pageheap_alloc pageheap_free -- build/callgrind-pageheap $mode $n)
		echo "pageheap $mode: $total Ir for $n allocs + $n frees of 1 page on the 1 GiB frag50 heap:" \
			"$((total / (2 * n))) per operation"
	done
	# The caches, rseq fast paths (emulated under valgrind, which lacks rseq):
	# two N cancel the one-off refill and heap growth.
	a=$(ir "$tmp/pc.1" pagecache_alloc pagecache_free -- build/callgrind-pagecache rseq 100000 --emulate-rseq)
	b=$(ir "$tmp/pc.2" pagecache_alloc pagecache_free -- build/callgrind-pagecache rseq 200000 --emulate-rseq)
	echo "pagecache rseq: $(((b - a) / 100000)) Ir per cached 1-page alloc+free pair"
	a=$(ir "$tmp/pl.1" pagecache_alloc pagecache_free -- build/callgrind-pagecache locked 100000)
	b=$(ir "$tmp/pl.2" pagecache_alloc pagecache_free -- build/callgrind-pagecache locked 200000)
	echo "pagecache locked: $(((b - a) / 100000)) Ir per cached 1-page alloc+free pair"
} >"$out/callgrind.txt"
rm -rf "$tmp"
cat "$out/callgrind.txt"
echo "bench: done ($out)"
