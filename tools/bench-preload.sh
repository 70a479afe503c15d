#!/usr/bin/env bash
# Real programs on each malloc, preloaded: wall time, CPU time and peak RSS
# of the jobs of tests/preload/matrix.sh (docs: /work/shared/BENCHMARKING.md).
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
# preload-raw.txt (every program's line, with round, job and allocator).
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
			awk -v r="$r" -v j="$job" -v a="$name" -v s="$status" \
				'/^[0-9]/ { print "round=" r, "job=" j, "alloc=" a, "status=" s, $0 }' \
				"$work/time" >>"$raw"
		done
	done
	echo "bench-preload: round $r of $runs done" >&2
done

# Per (job, alloc, round): sum wall, sum CPU, max RSS; then medians.
table=$(awk -v names="${names[*]}" -v jobs="$jobs" '
	function median(list,   m, v, i, j, t) {
		m = split(list, v, " ")
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
			if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
		return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
	}
	{
		split($1, R, "="); split($2, J, "="); split($3, A, "="); split($4, S, "=")
		k = J[2] SUBSEP A[2] SUBSEP R[2]
		wall[k] += $5; cpu[k] += $6 + $7; if ($8 > rss[k]) rss[k] = $8
		if (S[2] != "ok") bad[J[2] SUBSEP A[2]] = 1
		seen[k] = 1
	}
	END {
		na = split(names, N, " "); nj = split(jobs, JB, " ")
		printf "| program |"; for (i = 1; i <= na; i++) printf " %s |", N[i]; print ""
		printf "| --- |"; for (i = 1; i <= na; i++) printf " ---: |"; print ""
		for (j = 1; j <= nj; j++) {
			printf "| %s |", JB[j]
			for (i = 1; i <= na; i++) {
				w = c = m = ""
				for (k in seen) {
					split(k, P, SUBSEP)
					if (P[1] == JB[j] && P[2] == N[i]) { w = w " " wall[k]; c = c " " cpu[k]; m = m " " rss[k] }
				}
				if ((JB[j] SUBSEP N[i]) in bad) printf " fails |"
				else if (w == "") printf " - |"
				else printf " %.2f / %.2f / %.1f |", median(w), median(c), median(m) / 1024
			}
			print ""
		}
	}' "$raw")

{
	echo "# Real programs on each malloc (tools/bench-preload.sh)"
	echo
	echo "$(date -u +%Y-%m-%d), $(nproc) CPUs ($(sed -n 's/^model name\t: //p' /proc/cpuinfo | head -n 1)),"
	echo "$(uname -sr), glibc $(ldd --version | sed -n '1s/.* //p'); $runs rounds, median;"
	echo "each cell: wall s / CPU s (user + system) / peak RSS MiB, summed over the job's programs"
	echo "(RSS: the largest). Jobs: tests/preload/matrix.sh."
	echo
	echo "$table"
} >"$out/preload.md"
cat "$out/preload.md"
