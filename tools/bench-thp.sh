#!/usr/bin/env bash
# Huge pages under a malloc'd heap: wl-chase (bench/workloads/wl_chase.c)
# on libpagealloc with thp=auto (the default) and thp=off (no collapses: the
# heap as before huge pages), glibc, jemalloc, tcmalloc and mimalloc,
# alternating round by round:
#
#   tools/bench-thp.sh [--rounds R] [--build B] [--out DIR] [-- wl-chase args]
#
# Per allocator, the median over R rounds (default 5) of: the time per step
# of a random pointer chase over the heap (step_ns, wall clock; step_cpu_ns,
# the chasing thread's CPU time, which leaves out the time it waited for a
# CPU on a shared machine), the share of the heap
# in huge pages when the chase starts (huge_ratio, the kernel's
# AnonHugePages), when it first reached 90% (huge90_s, -1: never), and the
# slowest 0.1% and 0.01% of the mallocs that take fresh memory while the
# heap fills (p999_ns, p9999_ns: malloc and the first write of the object).
# The ratio columns are the medians over rounds of this allocator's step_ns
# (step_cpu_ns) over the best peer's in that round (best peer: the fastest of glibc,
# jemalloc, tcmalloc, mimalloc). Needs B built with PA_BUILD_BENCH (wl-chase)
# and the Debian peers (tools/setup-deps.sh installs them).
#
# Into DIR (default bench-results/): thp-raw.txt (every run's line, prefixed
# with round= and alloc=) and thp.md (machine, versions, the table).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=5
build=build
out=bench-results
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift ;;
	--build) build=$2; shift ;;
	--out) out=$2; shift ;;
	--) shift; break ;;
	*) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
	shift
done
args=("$@")
libdir=/usr/lib/x86_64-linux-gnu
declare -A pre=(
	[pagealloc]="PAGEALLOC_CONF=thp=auto LD_PRELOAD=$PWD/$build/libpagealloc-preload.so"
	[pagealloc-thp-off]="PAGEALLOC_CONF=thp=off LD_PRELOAD=$PWD/$build/libpagealloc-preload.so"
	[glibc]=""
	[jemalloc]="LD_PRELOAD=$libdir/libjemalloc.so.2"
	[tcmalloc]="LD_PRELOAD=$libdir/libtcmalloc_minimal.so.4"
	[mimalloc]="LD_PRELOAD=$libdir/libmimalloc.so.2"
)
allocs=(pagealloc pagealloc-thp-off glibc jemalloc tcmalloc mimalloc)
mkdir -p "$out"
raw=$out/thp-raw.txt
: >"$raw"
for r in $(seq 1 "$rounds"); do
	for a in "${allocs[@]}"; do
		line=$(env ${pre[$a]} "$build/wl-chase" "${args[@]}")
		echo "round=$r alloc=$a $line" | tee -a "$raw"
	done
done

{
	echo "# wl-chase: $(date -u +%Y-%m-%d), $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'), $(uname -r)"
	echo "THP enabled: $(cat /sys/kernel/mm/transparent_hugepage/enabled); defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
	echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	for p in libc6 libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0; do
		echo "- $(dpkg-query -W -f='${Package} ${Version}' "$p" 2>/dev/null || echo "$p: not installed")"
	done
	echo "rounds: $rounds, wl-chase ${args[*]}"
	echo
	python3 - "$raw" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kv = dict(re.findall(r"(\w+)=(\S+)", line))
    rows.setdefault(kv["alloc"], []).append(kv)
peers = [a for a in ("glibc", "jemalloc", "tcmalloc", "mimalloc") if a in rows]
rounds = sorted({k["round"] for v in rows.values() for k in v})
def best_of(key):
    best = {}
    for r in rounds:
        vals = [float(k[key]) for a in peers for k in rows[a] if k["round"] == r]
        best[r] = min(vals) if vals else None
    return best
best, best_cpu = best_of("step_ns"), best_of("step_cpu_ns")
med = lambda xs: statistics.median(xs)
def ratio(ks, key, b):
    return med([float(k[key]) / b[k["round"]] for k in ks if b[k["round"]]])
print("| allocator | step_ns | / best peer | step_cpu_ns | / best peer | huge_ratio | huge90_s "
      "| p999_ns | p9999_ns | fill_s |")
print("|---|---|---|---|---|---|---|---|---|---|")
for a, ks in rows.items():
    print("| %s | %.1f | %.2f | %.1f | %.2f | %.3f | %.1f | %.0f | %.0f | %.2f |" % (
        a, med([float(k["step_ns"]) for k in ks]), ratio(ks, "step_ns", best),
        med([float(k["step_cpu_ns"]) for k in ks]), ratio(ks, "step_cpu_ns", best_cpu),
        med([float(k["huge_ratio"]) for k in ks]), med([float(k["huge90_s"]) for k in ks]),
        med([float(k["p999_ns"]) for k in ks]), med([float(k["p9999_ns"]) for k in ks]),
        med([float(k["fill_s"]) for k in ks])))
PY
} | tee "$out/thp.md"
