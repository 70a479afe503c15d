#!/usr/bin/env bash
# The Go package's benchmarks (docs/benchmarks.md, "The Go package"):
#  1. Dgraph's cycle from Go (bench/go/cycle): 1 GiB live of random sizes,
#     freed to 64 MiB, a 5 s pause, twice; Go's make, cgo to glibc's calloc
#     and the same under LD_PRELOAD of jemalloc, tcmalloc and mimalloc, and
#     this package's Calloc; make with debug.FreeOSMemory and Calloc with
#     pagealloc.Scavenge after each free phase, and Calloc with Move of
#     what ShouldMove names then Scavenge; RUNS runs of each, alternating.
#     A variant named with -slices after it (pagealloc-slices,
#     make-free-slices, ...; not run unless named) holds the live set as a
#     [][]byte grown by append instead of the cycle's compact table.
#     VARIANTS="make pagealloc ..." picks some; CYCLE_ARGS="-live .. -keep .."
#     passes flags on.
#  Set ARENA=0 to skip part 2.
#  2. 64-byte objects: Heap.Calloc against make (go/bench_test.go), RUNS
#     alternating runs of each.
# Prints each variant's medians; logs go to OUT (default bench-results/go).
#   tools/bench-go.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
out=${OUT:-bench-results/go}
mkdir -p "$out"
export GOFLAGS=-mod=mod GOPROXY=off
unset GOTOOLCHAIN

go build -o "$out/cycle" ./bench/go/cycle
go test -c -o "$out/pagealloc.test" ./go
lib=/usr/lib/x86_64-linux-gnu
variants=(${VARIANTS:-make make-free libc jemalloc tcmalloc mimalloc pagealloc pagealloc-scavenge pagealloc-defrag})
: >"$out/cycle.log"
for r in $(seq "$runs"); do
	for v in "${variants[@]}"; do
		table=
		case $v in
		*-slices) table=-table=slices ;;
		esac
		case ${v%-slices} in
		jemalloc) pre=$lib/libjemalloc.so.2 a=libc ;;
		tcmalloc) pre=$lib/libtcmalloc_minimal.so.4 a=libc ;;
		mimalloc) pre=$lib/libmimalloc.so.2 a=libc ;;
		make-free) pre= a="make -scavenge" ;;
		pagealloc-scavenge) pre= a="pagealloc -scavenge" ;;
		pagealloc-defrag) pre= a="pagealloc -defrag -scavenge" ;;
		*) pre= a=$v ;;
		esac
		echo "== run $r $v" >>"$out/cycle.log"
		LD_PRELOAD=$pre "$out/cycle" -alloc=$a $table -rounds 2 -pause 5s -seed "$r" ${CYCLE_ARGS:-} |
			sed "s/^summary\talloc=[a-z]*/summary\tvariant=$v/" >>"$out/cycle.log"
	done
done
: >"$out/arena.log"
for r in $(seq "$([ "${ARENA:-1}" = 0 ] && echo 0 || echo "$runs")"); do
	for b in Make64 HeapCalloc64 CallocFree64; do
		"$out/pagealloc.test" -test.run '^$' -test.bench "^Benchmark$b\$" -test.benchtime 2000000x |
			grep '^Benchmark' >>"$out/arena.log"
	done
done
python3 - "$out" <<'PY'
import re, statistics, sys
out = sys.argv[1]
rows = {}
for line in open(out + "/cycle.log"):
    if line.startswith("summary"):
        kv = dict(f.split("=", 1) for f in line.split()[1:])
        rows.setdefault(kv["variant"], []).append(kv)
print("cycle: variant, runs, median ns/alloc, median (max) worst RSS/live after 5 s, runs within 1.25x")
for v, rs in rows.items():
    ns = statistics.median(float(r["ns_per_alloc"]) for r in rs)
    ratio = [float(r["worst_rss_per_live"]) for r in rs]
    ok = sum(float(r["slowest_within_1.25x_s"]) >= 0 for r in rs)
    print(f"  {v:10} {len(rs)}  {ns:8.0f}  {statistics.median(ratio):6.2f} ({max(ratio):.2f})  {ok}/{len(rs)}")
bench = {}
for line in open(out + "/arena.log"):
    m = re.match(r"Benchmark(\w+?)-\d+\s+\d+\s+([\d.]+) ns/op", line)
    if m:
        bench.setdefault(m.group(1), []).append(float(m.group(2)))
print("64-byte objects: benchmark, runs, median ns per object")
for b, xs in bench.items():
    print(f"  {b:14} {len(xs)}  {statistics.median(xs):7.1f}")
if "Make64" in bench and "HeapCalloc64" in bench:
    r = statistics.median(bench["HeapCalloc64"]) / statistics.median(bench["Make64"])
    print(f"  Heap.Calloc / make: {r:.2f}")
PY
