#!/usr/bin/env bash
# libpagealloc against glibc, jemalloc, tcmalloc and mimalloc on whole programs
# (bench/workloads/), side by side and alternating, ratios taken inside a run:
#
#   tools/compare.sh [--quick] [--reps N] [--cycle-reps N] [--build B] [--out DIR]
#                    [--only W,W...]
#
# Every workload program (B/wl-*, B = build/ by default: plain malloc/free/
# new/delete, nothing of ours linked) runs under each allocator: glibc as it
# is, the others through LD_PRELOAD (libpagealloc: B/libpagealloc-preload.so,
# no stats). In each of N repetitions (default 5; --cycle-reps for wl-cycle
# alone, default N), workload by workload, the allocators run one after the
# other, the order rotated each repetition. /usr/bin/time gives each run's
# wall time, CPU time (user+sys) and peak RSS; each program prints its own
# figures and checks its own result (a run that exits nonzero or prints no
# "ok" line is a failure).
# Reported: the median of each figure, and libpagealloc's ratio to each peer
# and to the best peer (lowest median) as the median of the ratios taken
# inside each repetition; then the targets, met or missed. This script runs
# the programs and writes raw.txt; tools/report.py computes and writes the
# report and the plots from it.
#
# --quick: 1 repetition at tiny sizes (each program's --quick), a smoke run of
# well under a minute that fails if any self-check fails or no table results.
# --only: those workloads alone (names as in the report: cycle, small-2t, ...),
# including the variants not in the default list (churn-4t, churn-32t).
#
# Output: DIR (default bench-results/compare, --quick: bench-results/compare-quick)
# gets raw.txt (one line per run), runs/ (each run's output), traces/ (RSS
# over time of wl-cycle and wl-service), compare.md and the plots. A full run
# without --out or --only also writes docs/compare.md and docs/compare-*.png.
# Peers are installed from Debian when missing and running as root
# (libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0), likewise time and
# gnuplot-nox; without gnuplot the plots are skipped with a note.
# Takes about 15 minutes with the defaults on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

command_line="tools/compare.sh${*:+ $*}"
reps=5
cycle_reps=
quick=0
build=build
out=
only=

usage() {
	sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--reps | --cycle-reps | --build | --out | --only)
		[ $# -ge 2 ] || usage
		case $1 in
		--reps) reps=$2 ;;
		--cycle-reps) cycle_reps=$2 ;;
		--build) build=$2 ;;
		--out) out=$2 ;;
		--only) only=$2 ;;
		esac
		shift
		;;
	*) usage ;;
	esac
	shift
done
[ $quick = 1 ] && reps=1 && cycle_reps=1
cycle_reps=${cycle_reps:-$reps}
for n in "$reps" "$cycle_reps"; do
	case $n in '' | *[!0-9]* | 0) usage ;; esac
done
write_docs=0
if [ -z "$out" ]; then
	if [ $quick = 1 ]; then
		out=bench-results/compare-quick
	elif [ -n "$only" ]; then
		out=bench-results/compare-only
	else
		out=bench-results/compare
		write_docs=1
	fi
fi
rm -rf "${out:?}/runs" "${out:?}/traces" "${out:?}/bin"
rm -f "$out"/compare-*.png "$out/ratios.dat"
mkdir -p "$out/runs" "$out/traces"

note() { echo "compare: $*" >&2; }

libdir=/usr/lib/x86_64-linux-gnu
declare -A so=([jemalloc]=$libdir/libjemalloc.so.2 [tcmalloc]=$libdir/libtcmalloc_minimal.so.4
	[mimalloc]=$libdir/libmimalloc.so.2 [pagealloc]=$build/libpagealloc-preload.so)
declare -A pkg=([glibc]=libc6 [jemalloc]=libjemalloc2 [tcmalloc]=libtcmalloc-minimal4
	[mimalloc]=libmimalloc2.0)

installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

# apt_install PKG...: install what is missing, as root; 1 if something still is.
apt_install() {
	local missing=() p
	for p in "$@"; do installed "$p" || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		note "not root, not installing ${missing[*]}"
		return 1
	fi
	note "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		{ apt-get update >/dev/null 2>&1 &&
			apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; } ||
		{ note "could not install ${missing[*]}" && return 1; }
}

notes=()
apt_install libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 || true
[ -x /usr/bin/time ] || apt_install time || true
if [ ! -x /usr/bin/time ]; then
	note "/usr/bin/time is missing (Debian package time) and could not be installed"
	exit 1
fi
command -v gnuplot >/dev/null || apt_install gnuplot-nox || true
command -v gnuplot >/dev/null || notes+=("gnuplot could not be installed: no plots")
command -v python3 >/dev/null || apt_install python3 || true
if ! command -v python3 >/dev/null; then
	note "python3 is missing (Debian package python3) and could not be installed"
	exit 1
fi

# ---- build ---------------------------------------------------------------------
# src/ may be mid-change: build what builds, and use a program or the preload
# library only if its target is up to date now (never a stale binary).
buildlog=$out/build.log
{
	cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
		cmake --build "$build" -j "$(nproc)"
} >"$buildlog" 2>&1 || note "the full build failed (see $buildlog); building targets one by one"
workloads=(cycle seed000 service larson prodcons large small-1t small-2t cxx threads churn turnover)
declare -A wl_exe=([small-1t]=wl-small [small-2t]=wl-small [churn-4t]=wl-churn [churn-32t]=wl-churn)
declare -A wl_args=([small-1t]=threads=1 [small-2t]=threads=2 [churn-4t]="threads=4 slots=32 ops=6000"
	[churn-32t]="threads=32 slots=8 ops=1500")
if [ -n "$only" ]; then
	IFS=, read -ra workloads <<<"$only" # a name with no program fails to build, below
fi
declare -A built=()
for w in "${workloads[@]}"; do
	exe=${wl_exe[$w]:-wl-$w}
	[ -n "${built[$exe]:-}" ] && continue
	if cmake --build "$build" -j "$(nproc)" --target "$exe" >>"$buildlog" 2>&1; then
		built[$exe]=1
	else
		note "$build/$exe did not build (see $buildlog)"
		exit 1
	fi
done
allocs=(glibc)
for p in jemalloc tcmalloc mimalloc; do
	if [ -e "${so[$p]}" ]; then
		allocs+=("$p")
	else
		notes+=("$p: ${so[$p]} missing (${pkg[$p]}): not measured")
	fi
done
# Others may rebuild $build/ while this runs: run copies taken now.
mkdir -p "$out/bin"
for exe in "${!built[@]}"; do cp "$build/$exe" "$out/bin/"; done
if cmake --build "$build" -j "$(nproc)" --target pagealloc_preload >>"$buildlog" 2>&1; then
	cp "$build/libpagealloc-preload.so" "$out/bin/"
	so[pagealloc]=$out/bin/libpagealloc-preload.so
	allocs+=(pagealloc)
else
	notes+=("pagealloc: $build/libpagealloc-preload.so did not build (src/ mid-change?): not measured")
fi

version_of() {
	case $1 in
	pagealloc)
		echo "libpagealloc-preload.so, $build/ of $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src include preload 2>/dev/null || echo ' + uncommitted changes in src/ include/ preload/')"
		;;
	*) dpkg-query -W -f="${pkg[$1]} \${Version}" "${pkg[$1]}" 2>/dev/null || echo unknown ;;
	esac
}
for a in "${allocs[@]}"; do note "$a: $(version_of "$a")"; done

# ---- runs -------------------------------------------------------------------------
raw=$out/raw.txt
: >"$raw"
failures=0
timeout_s=$([ $quick = 1 ] && echo 30 || echo 600)

# run_one REP WORKLOAD ALLOC: one timed run, one line in raw.txt.
run_one() {
	local rep=$1 w=$2 a=$3 exe=${wl_exe[$2]:-wl-$2} base=$out/runs/$2-$3-$1
	local cmd=("$out/bin/$exe")
	[ $quick = 1 ] && cmd+=(--quick)
	case $w in cycle | service) cmd+=(--trace "$out/traces/$w-$a-$rep.txt") ;; esac
	local extra=()
	read -ra extra <<<"${wl_args[$w]:-}"
	cmd+=("${extra[@]}")
	local pre=()
	[ "$a" != glibc ] && pre=(env "LD_PRELOAD=${so[$a]}")
	local rc=0
	timeout "$timeout_s" /usr/bin/time -f '%e %U %S %M' -o "$base.time" \
		"${pre[@]}" "${cmd[@]}" >"$base.out" 2>"$base.err" || rc=$?
	local line t
	line=$(grep -m1 "^$exe ok" "$base.out" | sed "s/^$exe ok//") || true
	t=$(tail -1 "$base.time" 2>/dev/null) || true
	if [ $rc -ne 0 ] || [ -z "$line" ] || ! [[ $t =~ ^[0-9.]+\ [0-9.]+\ [0-9.]+\ [0-9]+$ ]]; then
		failures=$((failures + 1))
		note "FAILED: $w on $a (rep $rep, exit $rc): $(tail -1 "$base.err" 2>/dev/null)"
		echo "rep=$rep wl=$w alloc=$a fail=1 rc=$rc" >>"$raw"
		return
	fi
	read -r wall user sys maxrss <<<"$t"
	echo "rep=$rep wl=$w alloc=$a wall_s=$wall cpu_s=$(awk -v u="$user" -v s="$sys" \
		'BEGIN { printf "%.2f", u + s }') maxrss_mib=$(awk -v k="$maxrss" \
		'BEGIN { printf "%.1f", k / 1024 }')$line" >>"$raw"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
for ((r = 1; r <= reps; r++)); do
	for w in "${workloads[@]}"; do
		[ "$w" = cycle ] && [ "$r" -gt "$cycle_reps" ] && continue
		n=${#allocs[@]}
		for ((i = 0; i < n; i++)); do
			a=${allocs[$(((i + r - 1) % n))]}
			note "rep $r/$reps: wl-$w on $a"
			run_one "$r" "$w" "$a"
		done
	done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed=$(($(date +%s) - start))

# ---- report -------------------------------------------------------------------------
# What this script saw of the run; tools/report.py adds the figures: medians,
# ratios, targets, tables (compare.md) and the plots (ratios.dat, *.png).
about() {
	echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "- machine: nproc $(nproc), $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2; exit }'), $(awk '/MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r)"
	echo "- compiler: $(cc --version | head -1)"
	echo "- repetitions: $reps$([ "$cycle_reps" != "$reps" ] && echo " (wl-cycle: $cycle_reps)")$([ $quick = 1 ] && echo ', --quick sizes')"
	echo "- load average (1, 5, 15 min) before: $load_before; after: $load_after"
	for a in "${allocs[@]}"; do echo "- $a: $(version_of "$a")$([ "$a" != glibc ] && echo " (LD_PRELOAD=${so[$a]})")"; done
	for n in "${notes[@]}"; do echo "- note: $n"; done
}
report=$out/compare.md
about | python3 tools/report.py compare --out "$out" --allocs "${allocs[*]}" \
	--workloads "${workloads[*]}" --command "$command_line" --elapsed "$elapsed" >"$report"
cat "$report"

if [ $write_docs = 1 ]; then
	cp "$report" docs/compare.md
	plots=("$out"/compare-*.png)
	[ -e "${plots[0]}" ] || plots=()
	for p in "${plots[@]}"; do cp "$p" docs/; done
	note "wrote docs/compare.md$([ ${#plots[@]} -gt 0 ] && echo " and ${#plots[@]} plot(s) in docs/")"
fi

# The smoke run's checks: every self-check passed and there is a table.
if [ $failures -gt 0 ]; then
	note "$failures run(s) failed"
	exit 1
fi
if ! grep -q '^| wl-' "$report"; then
	note "no table in $report"
	exit 1
fi
