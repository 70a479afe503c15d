#!/usr/bin/env bash
# Heaps of the program's own (docs/benchmarks.md §10, docs/design.md *Heaps*):
#
#   tools/bench-heaps.sh [--rounds R] [--build B]
#
# On the build B (default build-bench/, Release, built first):
#  1. instructions per small malloc+free pair with prof=off (callgrind
#     --toggle-collect=pair_loop, 16 B, 200,000 pairs): heaps must leave the
#     default heap's fast paths as they were;
#  2. B/heap-destroy 7: pa_heap_destroy against pa_free of each object,
#     10^6 small objects and 10^3 64 KiB blocks;
#  3. the arena workload on pagealloc's heaps, mimalloc's heaps and
#     jemalloc's arenas (B/heap-arenas*, bench/heap_arenas.c), alternating,
#     R rounds (default 3), each a median of 5 builds and destroys. A peer
#     whose program was not built (libmimalloc-dev, libjemalloc-dev missing)
#     is skipped with a note.
# Prints the lines; writes nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3
build=build-bench
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2 && shift ;;
	--build) build=$2 && shift ;;
	*) echo "bench-heaps.sh: unknown option '$1'" >&2 && exit 2 ;;
	esac
	shift
done

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

PAGEALLOC_CONF=prof=off valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
	--toggle-collect=pair_loop "$build/malloc-pairs" --callgrind-pair 16 200000 >/dev/null 2>&1
echo "pair (16 B, prof=off): $(python3 tools/report.py callgrind-total "$tmp/cg.out") Ir for 200000 pairs"

"$build/heap-destroy" 7

progs=(heap-arenas)
for peer in mimalloc jemalloc; do
	if [ -x "$build/heap-arenas-$peer" ]; then
		progs+=("heap-arenas-$peer")
	else
		echo "bench-heaps.sh: no $build/heap-arenas-$peer (install libmimalloc-dev/libjemalloc-dev)" >&2
	fi
done
for ((r = 0; r < rounds; r++)); do
	for p in "${progs[@]}"; do
		"$build/$p" 5
	done
done
