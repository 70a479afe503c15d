#!/usr/bin/env bash
# tests/profile/first_large.sh PRELOAD_SO PROGRAM — a thread's first
# allocations are sampled like any other, large blocks included: the
# profile first_large.c (PROGRAM) dumps at prof_sample=64K holds exactly
# (within 1 KiB) 8 MiB live at first_blocks (the main thread's first eight
# allocations, 1 MiB each) and at thread_first_blocks (a new thread's),
# read back through `go tool pprof -top`. A block of 1 MiB is sampled with
# probability 1 - e^-16 at that rate: one missing is a bug, not chance.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

profile_start 5 go "$@"

mapfile -t envs < <(prof_env "prof=on,prof_sample=64K")
env "${envs[@]}" "$prog" "$tmp/first.pb.gz" >/dev/null || fail "$prog failed"
pprof_top inuse_space "$prog" "$tmp/first.pb.gz" >"$tmp/inuse"
bad=0
for site in first_blocks thread_first_blocks; do
	got=$(flat_of $site <"$tmp/inuse")
	d=$((got - 8 * 1048576))
	if [ ${d#-} -gt 1024 ]; then
		echo "FAIL: $site holds $got bytes in the profile, not 8 MiB (8388608)" >&2
		bad=1
	else
		echo "$site: $got bytes live (8 MiB)"
	fi
done
[ $bad = 0 ] || fail "large blocks allocated before the thread had a cache are missing from the profile"
echo "PASS: a thread's first large blocks are sampled"
