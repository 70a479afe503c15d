#!/usr/bin/env bash
# The defrag contract's shapes (docs/benchmarks.md §14, docs/defrag.md):
#
#   tools/bench-defrag.sh [--rounds R] [--build B]
#
# On the build B (default build/, built first): bench/defrag_compact.c's
# seed000 and kv shapes, each with the compaction (pa_defrag_move) and
# without it (--no-move), alternating, R rounds (default 5). Prints each
# run's key=value line, then per shape and mode the medians of RSS before
# and after, the small spans' MiB after, the objects moved and the
# compaction's seconds; and the small pair's instruction count with
# prof=off (callgrind --toggle-collect=pair_loop, 16 B, 200,000 pairs),
# which fullest first must leave as it was.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=5
build=build
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2 && shift ;;
	--build) build=$2 && shift ;;
	*) echo "bench-defrag.sh: unknown option '$1'" >&2 && exit 2 ;;
	esac
	shift
done

cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j "$(nproc)" --target defrag-compact malloc-pairs >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for r in $(seq "$rounds"); do
	for shape in seed000 kv; do
		for mode in move no-move; do
			flag=$([ $mode = no-move ] && echo --no-move || true)
			PAGEALLOC_CONF=prof=off "$build/defrag-compact" $shape $flag --seed "$r" |
				tail -n 1 | tee -a "$tmp/runs"
		done
	done
done

python3 - "$tmp/runs" <<'PY'
import statistics, sys
runs = [dict(kv.split("=") for kv in line.split()) for line in open(sys.argv[1])]
keys = ("rss_before_mib", "rss_after_mib", "live_after_mib", "small_after_mib", "moved",
        "min_moves", "seconds", "corrupt")
print("%-8s %-4s %s" % ("shape", "move", "  ".join("%s" % k for k in keys)))
for shape in ("seed000", "kv"):
    for move in ("1", "0"):
        rs = [r for r in runs if r["shape"] == shape and r["move"] == move]
        med = [statistics.median(float(r[k]) for r in rs) for k in keys]
        print("%-8s %-4s %s   (medians of %d)" % (shape, move, "  ".join(
            "%g" % v for v in med), len(rs)))
PY

PAGEALLOC_CONF=prof=off valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
	--toggle-collect=pair_loop "$build/malloc-pairs" --callgrind-pair 16 200000 >/dev/null 2>&1
echo "pair (16 B, prof=off): $(python3 tools/report.py callgrind-total "$tmp/cg.out") Ir for 200000 pairs"
