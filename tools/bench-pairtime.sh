#!/usr/bin/env bash
# Small malloc/free pairs in time, through LD_PRELOAD, against tcmalloc and
# mimalloc, alternating round by round:
#
#   tools/bench-pairtime.sh --mb DIR [--rounds R] [--build B] [--lib NAME=SO]... [--out FILE]
#                           [--shapes S1,S2,...]
#
# DIR is a build of mimalloc-bench's programs (glibc-simple, alloc-test,
# cache-scratch; not part of this repository). Seven shapes, each the user CPU
# seconds of one run (/usr/bin/time -f %U, so time the machine's other
# processes take is not counted):
#   simple16/32/64  glibc-simple 16|32|64 (glibc's bench-malloc-simple: 25..1600
#                   blocks allocated then freed, main-arena st/mt and a thread)
#   alloc-test      alloc-test 1
#   scratch         cache-scratch 1 1000 1 2000000 2
#   pair16/pair64   B/malloc-pairs-libc --case pair --size 16|64 --iters 20000000
# --shapes runs only those (by name), e.g. on a loaded machine
# simple16,alloc-test,scratch,pair16,pair64 (a round is then about half as long).
# Allocators: pagealloc (B/libpagealloc-preload.so with the default
# configuration: heap profile and guard sampling on), tcmalloc and mimalloc
# (Debian's), and any --lib NAME=SO (another build of ours, for an A/B in the
# same run). In each round every allocator runs every shape once, in turn.
# Printed: per shape and allocator the median over rounds, and per allocator
# the geometric mean over shapes of (its median / the faster peer's median).
# Raw lines go to FILE (default bench-results/pairtime-raw.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=7
build=build
mb=
out=bench-results/pairtime-raw.txt
libdir=/usr/lib/x86_64-linux-gnu
libs=()
only=

usage() {
	sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=${2:?}; shift ;;
	--build) build=${2:?}; shift ;;
	--mb) mb=${2:?}; shift ;;
	--lib) libs+=("${2:?}"); shift ;;
	--out) out=${2:?}; shift ;;
	--shapes) only=,${2:?},; shift ;;
	*) usage ;;
	esac
	shift
done
[ -n "$mb" ] && [ -x "$mb/glibc-simple" ] || usage

allocs=("pagealloc=$PWD/$build/libpagealloc-preload.so"
	"tcmalloc=$libdir/libtcmalloc_minimal.so.4"
	"mimalloc=$libdir/libmimalloc.so.2" "${libs[@]}")
pairs=$PWD/$build/malloc-pairs-libc
shapes=("simple16|$mb/glibc-simple 16" "simple32|$mb/glibc-simple 32"
	"simple64|$mb/glibc-simple 64" "alloc-test|$mb/alloc-test 1"
	"scratch|$mb/cache-scratch 1 1000 1 2000000 2"
	"pair16|$pairs --case pair --size 16 --reps 1 --iters 20000000"
	"pair64|$pairs --case pair --size 64 --reps 1 --iters 20000000")

mkdir -p "$(dirname "$out")"
tfile=$(mktemp)
trap 'rm -f "$tfile"' EXIT
: >"$out"
echo "# $(date -u +%FT%TZ) nproc=$(nproc) $(lscpu | sed -n 's/^Model name: *//p')" | tee -a "$out"
for r in $(seq 1 "$rounds"); do
	echo "# round $r load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out"
	for a in "${allocs[@]}"; do
		name=${a%%=*}
		so=${a#*=}
		for s in "${shapes[@]}"; do
			shape=${s%%|*}
			cmd=${s#*|}
			[ -z "$only" ] || [[ $only == *",$shape,"* ]] || continue
			# shellcheck disable=SC2086
			LD_PRELOAD=$so /usr/bin/time -o "$tfile" -f %U $cmd >/dev/null 2>&1
			u=$(tail -1 "$tfile")
			echo "round=$r alloc=$name shape=$shape user=$u" >>"$out"
		done
	done
done

python3 - "$out" <<'EOF'
import math, re, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
allocs, shapes = [], []
for line in open(sys.argv[1]):
    m = re.match(r'round=\d+ alloc=(\S+) shape=(\S+) user=([\d.]+)', line)
    if not m:
        continue
    a, s, u = m.group(1), m.group(2), float(m.group(3))
    runs[a, s].append(u)
    if a not in allocs: allocs.append(a)
    if s not in shapes: shapes.append(s)
med = {k: statistics.median(v) for k, v in runs.items()}
print('| shape | ' + ' | '.join(allocs) + ' |')
print('|---|' + '---:|' * len(allocs))
for s in shapes:
    print(f'| {s} | ' + ' | '.join(f'{med[a, s]:.2f}' for a in allocs) + ' |')
ratios = {}
for a in allocs:
    logs = [math.log(med[a, s] / min(med['tcmalloc', s], med['mimalloc', s])) for s in shapes]
    ratios[a] = math.exp(sum(logs) / len(logs))
print('| geomean / faster of tcmalloc, mimalloc | ' +
      ' | '.join(f'{ratios[a]:.3f}' for a in allocs) + ' |')
EOF
