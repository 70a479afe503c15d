#!/usr/bin/env bash
# What heap-profile sampling costs (docs/benchmarks.md §9, docs/heap-profiles.md):
#
#   tools/bench-prof.sh [--rounds R] [--quick] [--build B]
#
# On the build B (default build/, built first):
#  1. instructions per small malloc+free pair (bench/malloc_pairs.c, 16 B,
#     200,000 pairs, callgrind --toggle-collect=pair_loop) with prof=off and
#     with prof on at the default rate;
#  2. ns per sample (B/prof-cost DEPTH: prof_sample=1 against prof off) at 4,
#     16 and 64 frames;
#  3. wl-small, wl-service and wl-cxx preloaded, prof=off against prof=on,
#     alternating, R rounds (default 11; --quick: 3): median wall seconds and
#     peak RSS, and the ratio of the medians; then each workload's total
#     instructions under callgrind, off and on (repeatable);
#  4. wl-service at prof_sample 512K, 256K, 128K, 64K against off, alternating,
#     R rounds: the largest rate that keeps it within 10%.
# Prints the tables; writes nothing else. About 6 minutes with the defaults on
# 2 cores (--quick: 2).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=11
build=build
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2 && shift ;;
	--quick) rounds=3 ;;
	--build) build=$2 && shift ;;
	*) echo "bench-prof.sh: unknown option '$1'" >&2 && exit 2 ;;
	esac
	shift
done

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
pre=$build/libpagealloc-preload.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ir() { # conf, program args...: callgrind's total (or pair_loop's) instructions
	local conf=$1
	shift
	PAGEALLOC_CONF=$conf valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$@" 2>&1 |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

echo "== 1. small malloc+free pair, instructions (16 B, 200000 pairs)"
for conf in prof=off prof=on; do
	n=$(ir "$conf" --toggle-collect=pair_loop "$build/malloc-pairs" --callgrind-pair 16 200000)
	python3 -c "print('  %-9s %12d Ir  %.2f per pair' % ('$conf', $n, $n / 200000))"
done

echo "== 2. one sample (pa_malloc(64)+pa_free, prof_sample=1 against prof off)"
for depth in 4 16 64; do
	"$build/prof-cost" "$depth" 100000 | sed 's/^/  /'
done

times() { # file, rounds, workload, confs...
	local f=$1 r=$2 wl=$3
	shift 3
	for _ in $(seq "$r"); do
		for conf in "$@"; do
			LD_PRELOAD=$pre PAGEALLOC_CONF=$conf /usr/bin/time -o "$tmp/t" -f "%e %M" \
				"$build/$wl" >/dev/null 2>&1
			echo "$wl $conf $(tail -1 "$tmp/t")" >>"$f"
		done
	done
}

summary() { # file, baseline conf
	python3 - "$1" "$2" <<'PY'
import collections, statistics as st, sys
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    wl, conf, t, m = line.split()
    rows[wl][conf].append((float(t), int(m)))
base = sys.argv[2]
for wl, confs in rows.items():
    t0 = st.median(x[0] for x in confs[base])
    for conf, v in confs.items():
        t = st.median(x[0] for x in v)
        m = st.median(x[1] for x in v) / 1024
        print("  %-11s %-17s %6.3f s  x%.3f  peak RSS %6.1f MiB  (n=%d)"
              % (wl, conf, t, t / t0, m, len(v)))
PY
}

echo "== 3. workloads, prof=off against prof=on (medians of $rounds, alternating)"
: >"$tmp/wl"
for wl in wl-small wl-service wl-cxx; do
	times "$tmp/wl" "$rounds" "$wl" prof=off prof=on
done
summary "$tmp/wl" prof=off
for wl in wl-small wl-service wl-cxx; do
	off=$(LD_PRELOAD=$pre ir prof=off "$build/$wl")
	on=$(LD_PRELOAD=$pre ir prof=on "$build/$wl")
	python3 -c "print('  %-11s instructions off %d, on %d: x%.4f' % ('$wl', $off, $on, $on / $off))"
done

echo "== 4. wl-service by sampling rate (medians of $rounds, alternating)"
: >"$tmp/rate"
times "$tmp/rate" "$rounds" wl-service prof=off prof_sample=512K prof_sample=256K \
	prof_sample=128K prof_sample=64K
summary "$tmp/rate" prof=off
