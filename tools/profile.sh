#!/usr/bin/env bash
# Profile a program running on libpagealloc (docs/profiling.md):
#
#   tools/profile.sh [--quick] [--callgrind] [--out DIR] [PROGRAM [ARGS...]]
#
# Builds build-prof/ (RelWithDebInfo: -O2 -g, plus -fno-omit-frame-pointer:
# PA_FRAME_POINTERS=ON) and runs PROGRAM (default: build-prof/wl-seed000, seed
# 000's example) with build-prof/libpagealloc-preload.so preloaded:
#
#  - perf, where it can sample: `perf stat` with software events (this VM has
#    no hardware counters), then `perf record -e cpu-clock --call-graph fp`
#    and the report by shared object and symbol, with call graphs;
#  - callgrind otherwise, or with --callgrind: instructions per function
#    (exact and repeatable; no counters needed).
#
# The report (DIR, default bench-results/profile) names libpagealloc's own
# functions (malloc, free under its alias cfree, central_take, ...), which
# the script checks: it fails if none appears. --quick runs the workload at
# its --quick size (the smoke run tools/test.sh makes).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
force_cg=0
out=bench-results/profile
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--callgrind) force_cg=1 ;;
	--out)
		[ $# -ge 2 ] || { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
		out=$2
		shift
		;;
	-h | --help)
		sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	--) shift; break ;;
	-*) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done

cmake -S . -B build-prof -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPA_FRAME_POINTERS=ON \
	-DPA_BUILD_TESTS=OFF >/dev/null
cmake --build build-prof -j"$(nproc)" --target pagealloc_preload wl-seed000 >/dev/null
so=$PWD/build-prof/libpagealloc-preload.so
if [ $# -eq 0 ]; then
	set -- build-prof/wl-seed000
	[ $quick = 0 ] || set -- build-prof/wl-seed000 --quick
fi
mkdir -p "$out"
report=$out/report.txt

perf_works() {
	command -v perf >/dev/null 2>&1 &&
		perf record -q -e cpu-clock -o "$out/probe.data" -- true >/dev/null 2>&1
}

if [ $force_cg = 0 ] && perf_works; then
	echo "profile: perf stat (software events), then perf record -e cpu-clock --call-graph fp"
	{
		echo "# perf stat -e task-clock,page-faults,context-switches,cpu-migrations"
		LD_PRELOAD=$so perf stat -e task-clock,page-faults,context-switches,cpu-migrations \
			-- "$@" 2>&1 >/dev/null
		echo
		echo "# perf report --no-children --sort dso,symbol (cpu-clock samples)"
	} >"$report"
	LD_PRELOAD=$so perf record -q -e cpu-clock -F 4999 --call-graph fp -o "$out/perf.data" \
		-- "$@" >/dev/null
	perf report -i "$out/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null |
		grep -v '^$' >>"$report"
	tool=perf
else
	if [ $force_cg = 1 ]; then
		echo "profile: callgrind (--callgrind)"
	else
		echo "profile: callgrind (perf is missing or cannot sample here)"
	fi
	LD_PRELOAD=$so valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
		-- "$@" >/dev/null 2>"$out/valgrind.log"
	callgrind_annotate "$out/callgrind.out" >"$report"
	tool=callgrind
fi

# The report must show our frames by name, from our library.
if ! grep -Eq 'libpagealloc-preload\.so.*(malloc|cfree|free|central_take|central_give)|(central_take|central_give|small_alloc_slow|tcache_alloc_slow).*libpagealloc-preload\.so' "$report"; then
	echo "profile: no libpagealloc frame in the $tool report ($report)" >&2
	exit 1
fi
head -40 "$report"
echo "profile: $tool report in $report"
