#!/usr/bin/env bash
# tools/bench-live.sh — what the live file (src/live.h, `pagealloc stat`)
# costs a process that nobody watches: docs/benchmarks.md §10.
#
#   tools/bench-live.sh [--rounds R] [--build B]
#
# On the build B (default build/, built first), preloaded:
#  1. wl-small and wl-service: callgrind's total instructions with live=on
#     against live=off (repeatable: the figure that does not move with the
#     machine's load);
#  2. idle: python3 allocates and frees ~100 MB, then sleeps 2 s or 12 s;
#     the scavenger's CPU time from the heap story (stats_print), R rounds
#     alternating live=on and live=off; the slope between the two sleeps is
#     what an idle process pays per second, with and without the file.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
build=build
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2 && shift ;;
	--build) build=$2 && shift ;;
	*) echo "usage: $0 [--rounds R] [--build B]" >&2 && exit 2 ;;
	esac
	shift
done
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
pre=$(cd "$build" && pwd)/libpagealloc-preload.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== 1. instructions (callgrind totals, preloaded)"
for wl in wl-small wl-service; do
	for live in on off; do
		LD_PRELOAD=$pre PAGEALLOC_CONF=live=$live valgrind --tool=callgrind \
			--callgrind-out-file="$tmp/cg" "$build/$wl" >/dev/null 2>&1
		n=$(callgrind_annotate "$tmp/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
		echo "  $wl live=$live: $n"
	done
done

echo "== 2. idle scavenger CPU (ms, medians of $rounds, alternating)"
idle_cpu() { # live, seconds: the scavenger's CPU in ms, from the story
	LD_PRELOAD=$pre PAGEALLOC_CONF=stats_print=on,live=$1 /usr/bin/python3 -c \
		"x = [bytes(1000) for _ in range(100000)]; del x; import time; time.sleep($2)" 2>&1 |
		awk '/^scavenger/ { s = 1 } s && $1 == "CPU" { print $2; exit }'
}
for live in on off; do
	for s in 2 12; do : >"$tmp/$live-$s"; done
done
for _ in $(seq "$rounds"); do
	for live in on off; do
		for s in 2 12; do idle_cpu "$live" "$s" >>"$tmp/$live-$s"; done
	done
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for live in on off; do
	a=$(median "$tmp/$live-2")
	b=$(median "$tmp/$live-12")
	echo "  live=$live: 2 s ${a} ms, 12 s ${b} ms, slope $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", (b - a) / 10 }') ms of CPU a second"
done
