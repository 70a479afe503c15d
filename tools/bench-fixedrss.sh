#!/usr/bin/env bash
# The fixed resident cost of small programs: peak RSS of each program on
# glibc, libpagealloc (and, optionally, a second build of it) and the peers.
#
#   tools/bench-fixedrss.sh [--runs N] [--mb DIR] [--before SO] [--conf K=V,...] [--out FILE]
#
# Programs: sleep, ls, python3 -c pass, perl -e 1 and, with --mb DIR (a build
# directory of mimalloc-bench, not part of this tree), its cfrac, espresso,
# barnes, mstress and glibc-thread with the arguments its bench.sh gives
# them. Allocators: glibc (nothing preloaded), pagealloc (build/'s
# libpagealloc-preload.so, with PAGEALLOC_CONF=K=V,... if given), "before"
# (--before SO, another preload library), jemalloc, tcmalloc, mimalloc from
# /usr/lib/x86_64-linux-gnu. Every run is `setarch -R /usr/bin/time -f %M`:
# without address-space randomisation the kernel's 64 KiB fault-around
# windows fall on the same pages of libc in every run, so a program's RSS
# repeats to the page (with it, libc's resident pages move by up to ~150 KiB
# from run to run). N rounds (default 3), the allocators alternating inside
# each; the table (also printed) gives the median peak RSS in KiB and, for
# pagealloc, its ratio to the best of glibc, jemalloc, tcmalloc and mimalloc.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3
mb=""
before=""
conf=""
out=bench-results/fixedrss.md
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=${2:?}; shift ;;
	--mb) mb=${2:?}; shift ;;
	--before) before=${2:?}; shift ;;
	--conf) conf=${2:?}; shift ;;
	--out) out=${2:?}; shift ;;
	*) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
	shift
done
for tool in /usr/bin/time setarch python3; do
	command -v "$tool" >/dev/null || {
		echo "bench-fixedrss: $tool is missing (Debian packages time, util-linux, python3)" >&2
		exit 1
	}
done
pa=$PWD/build/libpagealloc-preload.so
[ -f "$pa" ] || { echo "bench-fixedrss: $pa is missing: build it first" >&2; exit 1; }

libdir=/usr/lib/x86_64-linux-gnu
names=(glibc pagealloc)
libs=("" "$pa")
if [ -n "$before" ]; then names+=(before); libs+=("$(readlink -f "$before")"); fi
for peer in jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4 mimalloc:libmimalloc.so.2; do
	[ -f "$libdir/${peer#*:}" ] && { names+=("${peer%%:*}"); libs+=("$libdir/${peer#*:}"); }
done

progs=("sleep|sleep 0.01" "ls|ls -l /usr/bin" "python3|python3 -c pass" "perl|perl -e 1")
if [ -n "$mb" ]; then
	mb=$(readlink -f "$mb")
	src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$mb/CMakeCache.txt")
	progs+=("cfrac|$mb/cfrac 17545186520507317056371138836327483792789528"
		"espresso|$mb/espresso $src/espresso/largest.espresso"
		"barnes|$mb/barnes < $src/barnes/input"
		"mstress|$mb/mstress 2 50 25"
		"glibc-thread|$mb/glibc-thread 2")
fi

mkdir -p "$(dirname "$out")"
raw=$(mktemp)
trap 'rm -f "$raw" "$raw.t"' EXIT
for ((r = 0; r < runs; r++)); do
	for p in "${progs[@]}"; do
		for ((i = 0; i < ${#names[@]}; i++)); do
			k=$(((i + r) % ${#names[@]}))
			env=()
			[ -n "${libs[k]}" ] && env+=("LD_PRELOAD=${libs[k]}")
			[ "${names[k]}" = pagealloc ] && [ -n "$conf" ] && env+=("PAGEALLOC_CONF=$conf")
			env "${env[@]}" setarch -R /usr/bin/time -o "$raw.t" -f %M \
				sh -c "exec ${p#*|}" >/dev/null 2>&1 </dev/null || true
			echo "${p%%|*} ${names[k]} $(tail -1 "$raw.t")" >>"$raw"
		done
	done
done
python3 - "$raw" "${names[*]}" >"$out" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    prog, lib, kib = line.split()
    rows.setdefault(prog, {}).setdefault(lib, []).append(int(kib))
names = sys.argv[2].split()
peers = [n for n in names if n in ("glibc", "jemalloc", "tcmalloc", "mimalloc")]
print("| program | " + " | ".join(names) + " | pagealloc / best peer |")
print("| --- |" + " ---: |" * (len(names) + 1))
for prog, libs in rows.items():
    med = {n: statistics.median(libs[n]) for n in names}
    best = min(med[n] for n in peers)
    cells = [f"{med[n]:,.0f}" for n in names]
    print(f"| {prog} | " + " | ".join(cells) + f" | {med['pagealloc'] / best:.2f} |")
PY
cat "$out"
