#!/usr/bin/env bash
# Threads that hand objects to each other, in three programs none of us
# wrote (mimalloc-bench's xmalloc-test, rptest and larson), on libpagealloc,
# mimalloc, tcmalloc, jemalloc and glibc, alternating run by run:
#
#   tools/bench-xthread.sh --suite DIR [--rounds R] [--preload SO] [--baseline SO]
#                          [--out FILE] [--only xmalloc,rptest,larson]
#
# DIR: a built mimalloc-bench (github.com/daanx/mimalloc-bench, its
# out/bench or build directory holding xmalloc-test, rptest and larson);
# nothing of it is in this repository. --baseline: another build of the
# preload library (an earlier commit's), run as "before" in the same rounds. The commands are the suite's own
# (bench.sh, with 2 for the machine's cores):
#   xmalloc-test -w 2 -t 5 -s 64          rtime, seconds per 100M frees (lower is better)
#   rptest 2 0 1 2 500 1000 100 8 16000   memory ops per CPU second; the suite's
#                                         score is 2,000,000 / that (lower is better)
#   larson 5 8 1000 5000 100 4141 2       operations per second
# Each round starts with the next allocator in turn. Each run also gets /usr/bin/time's wall, user+sys CPU and peak RSS, and
# the load average when it ended (the machine is shared). For xmalloc-test
# the CPU time per free, ns (user+sys over the frees it counted), leaves out
# the time its threads waited for a CPU. One line per run into FILE (default
# bench-results/xthread-raw.txt):
#   round test alloc score wall_s cpu_s maxrss_kb load1 [cpu_ns_per_free]
# then, per test and allocator, the medians, and libpagealloc's ratio to
# the best peer as the median of the per-round ratios.
set -euo pipefail
cd "$(dirname "$0")/.."

suite=
rounds=5
preload=build/libpagealloc-preload.so
out=bench-results/xthread-raw.txt
only=xmalloc,rptest,larson
baseline=
while [ $# -gt 0 ]; do
	case $1 in
	--suite) suite=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--preload) preload=$2; shift 2 ;;
	--baseline) baseline=$(realpath "$2"); shift 2 ;;
	--out) out=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	*) echo "usage: $0 --suite DIR [--rounds R] [--preload SO] [--out FILE] [--only T,T]" >&2; exit 2 ;;
	esac
done
[ -n "$suite" ] && [ -x "$suite/xmalloc-test" ] || {
	echo "$0: --suite DIR must hold mimalloc-bench's built xmalloc-test, rptest and larson" >&2
	exit 2
}
preload=$(realpath "$preload")
mkdir -p "$(dirname "$out")"
out=$(realpath "$out")
lib=/usr/lib/x86_64-linux-gnu
declare -A so=([pagealloc]=$preload [mimalloc]=$lib/libmimalloc.so.2
	[tcmalloc]=$lib/libtcmalloc_minimal.so.4 [jemalloc]=$lib/libjemalloc.so.2 [glibc]=)
allocs=(pagealloc mimalloc tcmalloc jemalloc glibc)
if [ -n "$baseline" ]; then
	so[before]=$baseline
	allocs+=(before)
fi
IFS=, read -ra tests <<<"$only"

: >"$out"
cd "$suite"
for r in $(seq "$rounds"); do
	# Round r starts at allocator r - 1 (in turn): with one fixed order the
	# first allocator of each test always ran right after the last test's
	# two busy threads, and rptest's rate, read from so little CPU, ran
	# ~1.2x lower there (2026-11-28: the same code as "before", last, 1.23x
	# faster in 5 of 5 rounds).
	order=("${allocs[@]:$(((r - 1) % ${#allocs[@]}))}" "${allocs[@]:0:$(((r - 1) % ${#allocs[@]}))}")
	for t in "${tests[@]}"; do
		for a in "${order[@]}"; do
			case $t in
			xmalloc) cmd=(./xmalloc-test -w 2 -t 5 -s 64) ;;
			rptest) cmd=(./rptest 2 0 1 2 500 1000 100 8 16000) ;;
			larson) cmd=(./larson 5 8 1000 5000 100 4141 2) ;;
			*) echo "$0: no test $t" >&2; exit 2 ;;
			esac
			pre=()
			[ -n "${so[$a]}" ] && pre=(env "LD_PRELOAD=${so[$a]}")
			res=$({ /usr/bin/time -f "TIME %e %U %S %M" "${pre[@]}" "${cmd[@]}"; } 2>&1 || true)
			read -r wall user sys rss < <(sed -n 's/^TIME //p' <<<"$res")
			cpu=$(echo "$user + $sys" | bc)
			extra=
			case $t in
			xmalloc)
				score=$(sed -n 's/^rtime: \([0-9.]*\),.*/\1/p' <<<"$res")
				mps=$(sed -n 's/.*free\/sec: \([0-9.]*\) M.*/\1/p' <<<"$res")
				extra=$(echo "scale=1; $cpu * 1000 / ($mps * $wall)" | bc)
				;;
			rptest) score=$(sed -n 's/.*\.\.\.\([0-9]*\) memory ops.*/\1/p' <<<"$res") ;;
			larson) score=$(sed -n 's/^Throughput = *\([0-9]*\) .*/\1/p' <<<"$res") ;;
			esac
			echo "$r $t $a ${score:-FAILED} $wall $cpu $rss $(cut -d' ' -f1 /proc/loadavg) $extra" | tee -a "$out"
		done
	done
done

# Medians; ratio to the best peer per round (lower-is-better scores: xmalloc's
# rtime; the others are rates, so their ratio is best / ours).
python3 - "$out" <<'EOF'
import sys, statistics as st, collections
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(list)
for r in rows:
    if r[3] != 'FAILED':
        by[(r[1], r[2])].append(r)
tests = sorted({r[1] for r in rows})
print()
print('test     alloc      score(median)  cpu_s  maxrss_MiB  load  ns/free(xmalloc)')
for t in tests:
    for a in ['pagealloc', 'before', 'mimalloc', 'tcmalloc', 'jemalloc', 'glibc']:
        v = by.get((t, a), [])
        if not v:
            continue
        med = lambda i: st.median(float(x[i]) for x in v)
        nsf = '%.1f' % med(8) if t == 'xmalloc' else ''
        print('%-8s %-10s %13.3f  %5.2f  %10.1f  %4.1f  %s' % (t, a, med(3), med(5), med(6) / 1024, med(7), nsf))
    ratios, before = [], []
    for rnd in sorted({r[0] for r in rows}):
        cur = {r[2]: float(r[3]) for r in rows if r[0] == rnd and r[1] == t and r[3] != 'FAILED'}
        if 'pagealloc' not in cur:
            continue
        peers = [v for k, v in cur.items() if k not in ('pagealloc', 'before')]
        if t == 'xmalloc':
            ratios.append(cur['pagealloc'] / min(peers))
        else:
            ratios.append(max(peers) / cur['pagealloc'])
        if 'before' in cur:
            before.append(cur['pagealloc'] / cur['before'] if t == 'xmalloc' else cur['before'] / cur['pagealloc'])
    if ratios:
        print('%-8s pagealloc / best peer (time ratio, median of %d rounds): %.2f' % (t, len(ratios), st.median(ratios)))
    if before:
        print('%-8s pagealloc / before (time ratio, median of %d rounds): %.2f' % (t, len(before), st.median(before)))
EOF
