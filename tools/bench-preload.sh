#!/usr/bin/env bash
# Real programs on each malloc, preloaded: wall time, CPU time and peak RSS
# of the jobs of tests/preload/matrix.sh, the allocators side by side.
#
#   tools/bench-preload.sh [--runs N] [--jobs "JOB ..."] [--build DIR] [--out DIR]
#
# Allocators: glibc (nothing preloaded), pagealloc (DIR/libpagealloc-preload.so,
# default build/, built first), and jemalloc, tcmalloc, mimalloc preloaded
# from /usr/lib/x86_64-linux-gnu (libjemalloc.so.2, libtcmalloc_minimal.so.4,
# libmimalloc.so.2; a missing one is skipped with a note). N rounds (default
# 5); in each, every job runs once on every allocator, the allocators in a
# rotated order, so drift hits them alike. Every program a job starts runs
# under /usr/bin/time -f '%e %U %S %M' (Debian package `time`): a job's
# wall and CPU (user + system) are the sums over its programs, its RSS the
# largest peak among them. The table gives the median over the rounds,
# "wall s / CPU s / peak RSS MiB"; a job that failed on an allocator in any
# round (matrix.sh --run exited nonzero) shows "fails". Inputs are made once, before the first round.
# Into DIR (default bench-results/): preload.md (also printed) and
# preload-raw.txt (every program's line, with round, job and allocator); this
# script runs the jobs and writes the raw file, tools/report.py the table.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=5
jobs=""
build=build
out=bench-results
usage() {
	sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=${2:?}; shift ;;
	--jobs) jobs=${2:?}; shift ;;
	--build) build=${2:?}; shift ;;
	--out) out=${2:?}; shift ;;
	*) usage ;;
	esac
	shift
done
[ -x /usr/bin/time ] || {
	echo "bench-preload: /usr/bin/time is missing: apt-get install time" >&2
	exit 1
}
command -v python3 >/dev/null || {
	echo "bench-preload: python3 is missing (tools/report.py writes the report): apt-get install python3" >&2
	exit 1
}

cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
matrix=tests/preload/matrix.sh
[ -n "$jobs" ] || jobs=$(bash "$matrix" --list | tr '\n' ' ')

libdir=/usr/lib/x86_64-linux-gnu
names=(glibc pagealloc)
libs=("" "$PWD/$build/libpagealloc-preload.so")
for peer in jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4 mimalloc:libmimalloc.so.2; do
	if [ -f "$libdir/${peer#*:}" ]; then
		names+=("${peer%%:*}")
		libs+=("$libdir/${peer#*:}")
	else
		echo "bench-preload: $libdir/${peer#*:} missing, ${peer%%:*} skipped" >&2
	fi
done

program_for() { # job: our program's path, if the job is one of ours
	case $1 in
	threads | cxx_containers) echo "$PWD/$build/preload-tests/$1" ;;
	*) echo - ;;
	esac
}

mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/pa-bench-preload.XXXXXX")
trap 'rm -rf "$work"' EXIT
raw=$out/preload-raw.txt
: >"$raw"
n=${#names[@]}
for ((r = 1; r <= runs; r++)); do
	for job in $jobs; do
		for ((k = 0; k < n; k++)); do
			a=$(((k + r) % n))
			name=${names[$a]}
			env=()
			[ -n "${libs[$a]}" ] && env=(LD_PRELOAD="${libs[$a]}")
			: >"$work/time"
			status=ok
			PA_TIME_FILE=$work/time bash "$matrix" --run "$job" "$work/$job" \
				"$(program_for "$job")" "${env[@]}" >/dev/null 2>"$work/err" || status=fail
			# /usr/bin/time's lines only (not its "Command exited with ..." notes)
			sed -n "/^[0-9]/s/^/round=$r job=$job alloc=$name status=$status /p" \
				"$work/time" >>"$raw"
		done
	done
	echo "bench-preload: round $r of $runs done" >&2
done

# What this script saw of the run; tools/report.py adds the table: per job and
# allocator the medians over the rounds of the summed times and the peak RSS.
about() {
	echo "$(date -u +%Y-%m-%d), $(nproc) CPUs ($(sed -n 's/^model name\t: //p' /proc/cpuinfo | head -n 1)),"
	echo "$(uname -sr), glibc $(ldd --version | sed -n '1s/.* //p'); $runs rounds, median;"
}
about | python3 tools/report.py preload --raw "$raw" --allocs "${names[*]}" --jobs "$jobs" \
	>"$out/preload.md"
cat "$out/preload.md"
