#!/usr/bin/env bash
# pa_malloc against the Debian peers, side by side, alternating round by round:
#
#   tools/bench-malloc.sh [--rounds R] [--quick] [--no-callgrind] [--build B] [--out DIR]
#
# Builds B (default build/; RelWithDebInfo: -O2 -g), then R rounds (default 5;
# --quick: 1) in which every allocator runs bench/malloc_pairs.c once with
# --reps 1, in turn: pagealloc (B/malloc-pairs), glibc (B/malloc-pairs-libc), and
# jemalloc, tcmalloc, mimalloc (the same program with the peer's .so in
# LD_PRELOAD). A peer whose .so is missing is installed when running as root
# (libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0), else skipped with a note.
# Per case and allocator the figure is the median over the rounds; the last
# column is the median over rounds of pagealloc / best peer taken inside each
# round (best peer: the lowest median).
#
# Then instructions per malloc+free pair under callgrind, which do not depend
# on the machine's load: N pairs in malloc_pairs.c's pair_loop, counted with
# --toggle-collect=pair_loop (callgrind does not replace malloc, so a preloaded
# peer is what runs). Valgrind does not implement rseq: libpagealloc's page
# caches run in their locked mode there.
#
# Last, B/seed000-frag: seed 000's fragmentation examples on pa_malloc.
#
# This script runs the programs and writes the raw files; tools/report.py
# computes the medians and ratios and writes the tables.
#
# Into DIR (default bench-results/, which .gitignore covers):
#   malloc.md             machine, versions, both tables (also printed)
#   malloc-pairs-raw.txt  every run's lines, prefixed with round= and alloc=
#   malloc-callgrind.txt  callgrind totals per allocator and size
#   seed000-frag.txt      seed000-frag's output
#   malloc-build.log      the build's output
# Takes about 3 minutes with the defaults on 2 cores (--quick: under 1).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=5
build=build
out=bench-results
do_callgrind=1
cg_pairs=100000
cg_sizes=(16 64 256 1024 4096)

usage() {
	sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--rounds)
		[ $# -ge 2 ] || usage
		rounds=$2
		shift
		;;
	--quick) rounds=1 ;;
	--no-callgrind) do_callgrind=0 ;;
	--build)
		[ $# -ge 2 ] || usage
		build=$2
		shift
		;;
	--out)
		[ $# -ge 2 ] || usage
		out=$2
		shift
		;;
	*) usage ;;
	esac
	shift
done
case $rounds in '' | *[!0-9]* | 0) usage ;; esac
command -v python3 >/dev/null || {
	echo "bench-malloc: python3 is missing (tools/report.py writes the report): apt-get install python3" >&2
	exit 1
}

mkdir -p "$out"
libdir=/usr/lib/x86_64-linux-gnu
peers=(jemalloc tcmalloc mimalloc)
declare -A peer_so=([jemalloc]=$libdir/libjemalloc.so.2
	[tcmalloc]=$libdir/libtcmalloc_minimal.so.4 [mimalloc]=$libdir/libmimalloc.so.2)
declare -A peer_pkg=([jemalloc]=libjemalloc2 [tcmalloc]=libtcmalloc-minimal4
	[mimalloc]=libmimalloc2.0)

installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

# ---- peers -------------------------------------------------------------------
missing=()
for p in "${peers[@]}"; do
	installed "${peer_pkg[$p]}" || missing+=("${peer_pkg[$p]}")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -eq 0 ]; then
		echo "bench-malloc: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
			{ apt-get update >/dev/null && apt-get install -y --no-install-recommends \
				"${missing[@]}" >/dev/null; } ||
			echo "bench-malloc: could not install ${missing[*]}" >&2
	else
		echo "bench-malloc: not root, not installing ${missing[*]}" >&2
	fi
fi

# ---- build -------------------------------------------------------------------
# A library that does not build yet (work in progress in src/) still leaves
# the glibc program and the peers to measure: build what builds, and use a
# program only if its target is up to date now (never a stale binary).
{
	cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
		cmake --build "$build" -j "$(nproc)"
} >"$out/malloc-build.log" 2>&1 ||
	echo "bench-malloc: the full build failed (see $out/malloc-build.log);" \
		"building the benchmark targets one by one" >&2
declare -A ok=()
for t in malloc-pairs-libc malloc-pairs seed000-frag; do
	if cmake --build "$build" -j "$(nproc)" --target "$t" >>"$out/malloc-build.log" 2>&1; then
		ok[$t]=1
	else
		echo "bench-malloc: $t did not build" >&2
	fi
done
if [ -z "${ok[malloc-pairs-libc]:-}" ]; then
	echo "bench-malloc: $build/malloc-pairs-libc did not build; see $out/malloc-build.log" >&2
	exit 1
fi

allocs=()
notes=()
if [ -n "${ok[malloc-pairs]:-}" ]; then
	allocs+=(pagealloc)
else
	notes+=("pagealloc: $build/malloc-pairs did not build (src/ not ready?), not measured")
fi
allocs+=(glibc)
for p in "${peers[@]}"; do
	if [ -e "${peer_so[$p]}" ]; then
		allocs+=("$p")
	else
		notes+=("$p: ${peer_so[$p]} missing (${peer_pkg[$p]}), not measured")
	fi
done

# run_alloc NAME ARGS...: the benchmark program on allocator NAME.
run_alloc() {
	local name=$1
	shift
	case $name in
	pagealloc) "$build/malloc-pairs" "$@" ;;
	glibc) "$build/malloc-pairs-libc" "$@" ;;
	*) LD_PRELOAD=${peer_so[$name]} "$build/malloc-pairs-libc" "$@" ;;
	esac
}

version_of() {
	case $1 in
	pagealloc) echo "$(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD -- src include 2>/dev/null || echo ' + uncommitted changes')" ;;
	glibc) dpkg-query -W -f='libc6 ${Version}' libc6 ;;
	*) dpkg-query -W -f="${peer_pkg[$1]} \${Version}" "${peer_pkg[$1]}" 2>/dev/null || echo unknown ;;
	esac
}

# ---- timed rounds ------------------------------------------------------------
# Other work on the machine moves every figure: its load goes into the report.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
raw=$out/malloc-pairs-raw.txt
: >"$raw"
for ((r = 1; r <= rounds; r++)); do
	for a in "${allocs[@]}"; do
		echo "bench-malloc: round $r/$rounds: $a" >&2
		run_alloc "$a" --reps 1 | sed "s/^/round=$r alloc=$a /" >>"$raw"
	done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- callgrind -----------------------------------------------------------------
# One line per allocator and size in malloc-callgrind.txt: the instructions
# counted in pair_loop ("Ir="), or why the run failed.
run_alloc_valgrind() {
	local a=$1 size=$2 file=$3
	local vg=(valgrind --tool=callgrind --callgrind-out-file="$file" --toggle-collect=pair_loop)
	case $a in
	pagealloc) "${vg[@]}" "$build/malloc-pairs" --callgrind-pair "$size" "$cg_pairs" ;;
	glibc) "${vg[@]}" "$build/malloc-pairs-libc" --callgrind-pair "$size" "$cg_pairs" ;;
	*) LD_PRELOAD=${peer_so[$a]} "${vg[@]}" "$build/malloc-pairs-libc" --callgrind-pair "$size" "$cg_pairs" ;;
	esac
}

cg_raw=$out/malloc-callgrind.txt
: >"$cg_raw"
if [ $do_callgrind = 1 ]; then
	tmp=$(mktemp -d)
	for s in "${cg_sizes[@]}"; do
		for a in "${allocs[@]}"; do
			echo "bench-malloc: callgrind $a $s B" >&2
			rm -f "$tmp/cg.out"
			if run_alloc_valgrind "$a" "$s" "$tmp/cg.out" >"$tmp/log" 2>&1 && [ -s "$tmp/cg.out" ]; then
				echo "alloc=$a size=$s pairs=$cg_pairs Ir=$(python3 tools/report.py callgrind-total "$tmp/cg.out")" >>"$cg_raw"
			else
				echo "alloc=$a size=$s failed: $(tail -1 "$tmp/log")" >>"$cg_raw"
			fi
		done
	done
	rm -rf "$tmp"
fi

# ---- report --------------------------------------------------------------------
# What this script saw of the run; tools/report.py adds the tables.
about() {
	echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "- machine: nproc $(nproc), $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2; exit }'), kernel $(uname -r)"
	echo "- compiler: $(cc --version | head -1)"
	echo "- load average (1, 5, 15 min) before the timed rounds: $load_before; after: $load_after"
	for a in "${allocs[@]}"; do echo "- $a: $(version_of "$a")"; done
	for n in "${notes[@]}"; do echo "- note: $n"; done
}
cg_args=()
[ $do_callgrind = 1 ] && cg_args=(--callgrind "$cg_raw" --pairs "$cg_pairs")
about | python3 tools/report.py malloc --raw "$raw" --allocs "${allocs[*]}" --rounds "$rounds" \
	"${cg_args[@]}" >"$out/malloc.md"
cat "$out/malloc.md"

if [ -n "${ok[seed000-frag]:-}" ]; then
	echo "bench-malloc: seed000-frag -> $out/seed000-frag.txt" >&2
	"$build/seed000-frag" >"$out/seed000-frag.txt" 2>&1 || echo "bench-malloc: seed000-frag failed" >&2
	cat "$out/seed000-frag.txt"
else
	echo "bench-malloc: $build/seed000-frag not built; seed 000 not run" >&2
fi
