#!/usr/bin/env bash
# tests/profile/diff_base.sh PRELOAD_SO PROGRAM — `go tool pprof -top
# -diff_base A B` between the two pa_prof_dump files of diff_base.c
# (PROGRAM) shows exactly the site that grew between them: grow_here with
# 32 MiB (within 10%) of inuse_space and of alloc_space, and no other
# function with a nonzero flat value (before_both's and churn_before's
# samples are the same in both files, so they cancel to 0).
#
# grow_here's blocks are of 256 KiB: at prof_sample=64K each is sampled with
# probability p = 1 - e^-4 = 0.982 and the estimate of its 128 blocks has a
# relative standard error of sqrt((1-p) / (128 p)) = 1.2%: 10% is 8
# standard errors.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

profile_start 7 go "$@"

mapfile -t envs < <(prof_env "prof=on,prof_sample=64K")
env "${envs[@]}" "$prog" "$tmp/a.pb.gz" "$tmp/b.pb.gz" >/dev/null || fail "$prog failed"

truth=$((32 * 1048576))
bad=0
for index in inuse_space alloc_space; do
	pprof_top $index "$prog" "$tmp/b.pb.gz" -diff_base="$tmp/a.pb.gz" >"$tmp/$index"
	got=$(flat_of grow_here <"$tmp/$index")
	if within 10 "$got" $truth; then
		echo "grow_here: $index grew by $got bytes (32 MiB: $truth)"
	else
		echo "FAIL: grow_here: $index grew by $got bytes, not within 10% of 32 MiB" >&2
		bad=1
	fi
	others=$(awk '$1 != "grow_here" && $2 != 0' "$tmp/$index")
	if [ -n "$others" ]; then
		echo "FAIL: other functions with a nonzero flat $index in the difference:" >&2
		echo "$others" >&2
		bad=1
	fi
	# The listing must show the sites of A too (at 0), or nothing was
	# subtracted: before_both is in B alone with 16 MiB.
	base=$(flat_of before_both < <(pprof_top $index "$prog" "$tmp/b.pb.gz"))
	[ "$base" -gt 0 ] || {
		echo "FAIL: profile B holds nothing at before_both ($index)" >&2
		bad=1
	}
done
[ $bad = 0 ] || fail "-diff_base does not show exactly the site that grew"
echo "PASS: -diff_base A B shows grow_here alone"
