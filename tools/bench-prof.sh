#!/usr/bin/env bash
# What heap-profile sampling costs (docs/benchmarks.md §9, docs/heap-profiles.md):
#
#   tools/bench-prof.sh [--rounds R] [--quick] [--build B]
#
# On the build B (default build/, built first):
#  1. instructions per small malloc+free pair (bench/malloc_pairs.c, 16 B,
#     200,000 pairs, callgrind --toggle-collect=pair_loop) with prof=off and
#     with prof on at the default rate;
#  2. ns per sample (B/prof-cost DEPTH: prof_sample=1 against prof off) at 4,
#     16 and 64 frames;
#  3. wl-small, wl-service and wl-cxx preloaded, prof=off against prof=on,
#     alternating, R rounds (default 11; --quick: 3): median wall seconds and
#     peak RSS, and the ratio of the medians; then each workload's total
#     instructions under callgrind, off and on (repeatable);
#  4. wl-service at prof_sample 512K, 256K, 128K, 64K against off, alternating,
#     R rounds: the largest rate that keeps it within 10%.
# Prints the tables; writes nothing else. About 6 minutes with the defaults on
# 2 cores (--quick: 2).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=11
build=build
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2 && shift ;;
	--quick) rounds=3 ;;
	--build) build=$2 && shift ;;
	*) echo "bench-prof.sh: unknown option '$1'" >&2 && exit 2 ;;
	esac
	shift
done

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
pre=$build/libpagealloc-preload.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ir() { # conf, program args...: callgrind's total (or pair_loop's) instructions
	local conf=$1
	shift
	PAGEALLOC_CONF=$conf valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$@" 2>&1 |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

echo "== 1. small malloc+free pair, instructions (16 B, 200000 pairs)"
for conf in prof=off prof=on; do
	n=$(ir "$conf" --toggle-collect=pair_loop "$build/malloc-pairs" --callgrind-pair 16 200000)
	python3 -c "print('  %-9s %12d Ir  %.2f per pair' % ('$conf', $n, $n / 200000))"
done

echo "== 2. one sample (pa_malloc(64)+pa_free, prof_sample=1 against prof off)"
for depth in 4 16 64; do
	"$build/prof-cost" "$depth" 100000 | sed 's/^/  /'
done

alternate() { # rounds, baseline conf, "workload conf conf..." ...:
	# each workload under each conf, alternating, timed to the microsecond
	# (wall) with its peak RSS; medians and ratios to the baseline
	python3 - "$pre" "$build" "$@" <<'PY'
import collections, os, statistics as st, sys, time
pre, build, rounds, base = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
jobs = [job.split() for job in sys.argv[5:]]
res = collections.defaultdict(list)
for _ in range(rounds):
    for wl, *confs in jobs:
        for conf in confs:
            env = dict(os.environ, LD_PRELOAD=pre, PAGEALLOC_CONF=conf)
            # /usr/bin/time for the peak RSS: wait4's ru_maxrss would count
            # this Python process's memory from before the exec.
            rss_file = os.path.join(os.environ.get("TMPDIR", "/tmp"), "bench-prof.%d" % os.getpid())
            argv = ["/usr/bin/time", "-o", rss_file, "-f", "%M", os.path.join(build, wl)]
            t0 = time.perf_counter()
            pid = os.posix_spawn(argv[0], argv, env,
                                 file_actions=[(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)])
            _, status, _ = os.wait4(pid, 0)
            t = time.perf_counter() - t0
            if status != 0:
                sys.exit("%s %s: status %d" % (wl, conf, status))
            with open(rss_file) as f:
                rss = int(f.read().split()[-1]) / 1024
            os.unlink(rss_file)
            res[(wl, conf)].append((t, rss))
for wl, *confs in jobs:
    t0 = st.median(x[0] for x in res[(wl, base)])
    for conf in confs:
        v = res[(wl, conf)]
        t = st.median(x[0] for x in v)
        print("  %-11s %-17s %7.4f s  x%.3f  peak RSS %6.1f MiB  (n=%d)"
              % (wl, conf, t, t / t0, st.median(x[1] for x in v), len(v)))
PY
}

echo "== 3. workloads, prof=off against prof=on (medians of $rounds, alternating)"
alternate "$rounds" prof=off "wl-small prof=off prof=on" "wl-service prof=off prof=on" \
	"wl-cxx prof=off prof=on"
for wl in wl-small wl-service wl-cxx; do
	off=$(LD_PRELOAD=$pre ir prof=off "$build/$wl")
	on=$(LD_PRELOAD=$pre ir prof=on "$build/$wl")
	python3 -c "print('  %-11s instructions off %d, on %d: x%.4f' % ('$wl', $off, $on, $on / $off))"
done

echo "== 4. wl-service by sampling rate (medians of $rounds, alternating)"
alternate "$rounds" prof=off \
	"wl-service prof=off prof_sample=512K prof_sample=256K prof_sample=128K prof_sample=64K"
