#!/usr/bin/env bash
# tests/profile/accuracy.sh PRELOAD_SO PROGRAM — each allocation site of
# accuracy.c (PROGRAM: it prints the truth of each) is estimated within 10%
# by the heap profile it writes at prof_sample=64K, read back through
# `go tool pprof -top` (the flat column: the site is the first frame, the
# caller of malloc, calloc, realloc or operator new):
#   inuse_space, alloc_space, inuse_objects, alloc_objects of keep_small,
#     keep_large, keep_calloc and new_nodes (C++: new, so its first frame is
#     new_nodes, not operator new) within 10%;
#   churn: alloc_space and alloc_objects within 10%, inuse_space below 1%
#     of its alloc_space;
#   grow_by_realloc: inuse_space, inuse_objects and alloc_space within 10%
#     (not alloc_objects: see below);
#   no first frame is the allocator's (its frames are all trimmed), and
#     first frames other than the sites (the libraries' own allocations)
#     hold under 1% of the bytes allocated.
#
# The statistics. A block of s bytes is sampled with probability
# p = 1 - e^(-s/m) (m = 64 KiB, the mean of the exponential count-down: a
# Poisson process over each thread's allocated bytes, so blocks are
# sampled independently) and counts 1/p blocks when it is. For a site of N
# blocks (B = N s bytes) the estimate's relative variance is (1-p)/(pN),
# about m/B for s << m: the relative standard error is sqrt(m/B). For 10%
# to be 4 standard errors, sqrt(m/B) <= 2.5%, B >= 1600 m = 100 MiB: each
# kept site holds 128 MiB (the issue's 64 MiB of calloc'd blocks would be
# 3.1%, 3.2 standard errors, a spurious failure in 700 runs).
#   keep_small, keep_calloc, new_nodes, grow_by_realloc's inuse: 2.2%
#     (10% = 4.5 standard errors; two-sided normal tail 6e-6)
#   keep_large (100,000-byte blocks, p = 0.78): 1.4% (7 s.e.)
#   grow_by_realloc's alloc_space (254 MiB): 1.6%; churn (512 MiB): 1.1%
# An object count has its site's relative error (one size a site); the
# bytes and objects of a site move together, so the chance of a spurious
# failure is about that of four 4.5-standard-error sites: 2.5e-5 a run.
# grow_by_realloc's alloc_objects is left out: its 32,768 mallocs of 64
# bytes are 2 MiB and give 32 samples, and the 7 sizes together give a
# relative error of 3.6% (10% = 2.8 s.e.). Its truth, and why every one
# of its reallocs moves, is in accuracy.c.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

profile_start 6 go "$@"

mapfile -t envs < <(prof_env "prof=on,prof_sample=64K")
env "${envs[@]}" "$prog" "$tmp/acc.pb.gz" >"$tmp/truth" || fail "$prog failed"
[ -s "$tmp/acc.pb.gz" ] || fail "$prog wrote no profile"
if grep '^grow_by_realloc resized in place' "$tmp/truth"; then
	echo "(the truth of grow_by_realloc counts only the reallocs that moved)"
fi

for index in inuse_space inuse_objects alloc_space alloc_objects; do
	pprof_top "$index" "$prog" "$tmp/acc.pb.gz" >"$tmp/$index"
done

truth() { # site index
	awk -v s="$1" -v k="$2" '$1 == "site" && $2 == s {
		for (i = 3; i < NF; i += 2) if ($i == k) print $(i + 1) }' "$tmp/truth"
}

bad=0
check() { # site index
	local t e pct
	t=$(truth "$1" "$2")
	e=$(flat_of "$1" <"$tmp/$2")
	[ -n "$t" ] || fail "$prog printed no truth for $1 $2"
	pct=$(awk -v e="$e" -v t="$t" 'BEGIN { printf "%+.2f%%", 100 * (e - t) / t }')
	if within 10 "$e" "$t"; then
		printf '%-16s %-13s estimate %11d truth %11d (%s)\n' "$1" "$2" "$e" "$t" "$pct"
	else
		printf 'FAIL: %-16s %-13s estimate %11d truth %11d (%s): not within 10%%\n' \
			"$1" "$2" "$e" "$t" "$pct" >&2
		bad=1
	fi
}

for site in keep_small keep_large keep_calloc new_nodes; do
	for index in inuse_space alloc_space inuse_objects alloc_objects; do
		check $site $index
	done
done
check churn alloc_space
check churn alloc_objects
churn_alloc=$(flat_of churn <"$tmp/alloc_space")
churn_inuse=$(flat_of churn <"$tmp/inuse_space")
if [ $((churn_inuse * 100)) -ge "$churn_alloc" ]; then
	echo "FAIL: churn holds $churn_inuse bytes, 1% of its $churn_alloc allocated or more" >&2
	bad=1
else
	echo "churn            inuse_space   estimate $churn_inuse (below 1% of its alloc_space)"
fi
for index in inuse_space inuse_objects alloc_space; do
	check grow_by_realloc $index
done

# No first frame is the allocator's (a function of libpagealloc-preload.so,
# named or not). Other first frames are the libraries' own allocations
# (libstdc++ keeps a 71 KiB emergency exception pool from its start-up:
# one sample stands for ~106 KiB): together under 1% of what was allocated.
awk '$2 != 0 && $1 !~ /^(keep_small|keep_large|keep_calloc|new_nodes|churn|grow_by_realloc)$/' \
	"$tmp/alloc_space" >"$tmp/others"
if grep -E '^(\[libpagealloc|pa_|malloc |calloc |realloc |operator new)' "$tmp/others" >&2; then
	echo "FAIL: the allocator's own functions above are first frames (flat alloc_space)" >&2
	bad=1
fi
other_bytes=$(awk '{ s += $2 } END { printf "%d", s }' "$tmp/others")
total=$(pprof_total alloc_space "$prog" "$tmp/acc.pb.gz")
if [ $((other_bytes * 100)) -ge "$total" ]; then
	echo "FAIL: first frames other than the sites hold $other_bytes of $total bytes allocated:" >&2
	cat "$tmp/others" >&2
	bad=1
elif [ -s "$tmp/others" ]; then
	echo "other first frames (libraries' own allocations, $other_bytes bytes):"
	cat "$tmp/others"
fi
[ $bad = 0 ] || fail "site estimates off (profile: $tmp/acc.pb.gz with PA_KEEP_TMP=1)"
echo "PASS: every site's estimates are within 10% of the truth at prof_sample=64K"
