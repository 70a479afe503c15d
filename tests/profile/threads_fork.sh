#!/usr/bin/env bash
# tests/profile/threads_fork.sh PRELOAD_SO PROGRAM — sampling survives
# threads, dlopen in another thread, and fork: threads_fork.c (PROGRAM; its
# comment has the steps), run with prof_sample=64K and prof_prefix=DIR/t,
# finishes (a deadlock is the test's timeout), and its final profiles, read
# back through `go tool pprof -top`, hold:
#   - the parent's (DIR/t.PID.SEQ.final.pb.gz, PID the one it prints):
#     thread_work within 10% of its 128 MiB (four threads, 512-byte blocks:
#     relative standard error sqrt(64K / 128 MiB) = 2.2%, 10% is 4.5 of
#     them), and nothing at child_only;
#   - each child's (its own pid, one final profile each): child_only within
#     10% of 32 MiB (256 KiB blocks: 1.3%), and thread_work with exactly the
#     parent's figure. The child holds copies of every block the parent
#     held when it forked, whichever thread allocated them: thread_work's
#     blocks are the four worker threads' (which do not exist in the child;
#     only the forking main thread does), and they stay live in the child
#     until it frees them, so its profile keeps their samples as they were.
#     The parent frees none of them before its exit: the same estimate.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

profile_start 6 go "$@"

mkdir "$tmp/prof"
mapfile -t envs < <(prof_env "prof=on,prof_sample=64K,prof_prefix=$tmp/prof/t")
env "${envs[@]}" "$prog" >"$tmp/out" || fail "$prog failed"
cat "$tmp/out"
parent=$(awk '$1 == "parent" { print $2 }' "$tmp/out")
mapfile -t children < <(awk '$1 == "child" { print $2 }' "$tmp/out")
if [ -z "$parent" ] || [ ${#children[@]} = 0 ]; then
	fail "$prog did not print its pids"
fi

bad=0
complain() {
	echo "FAIL: $*" >&2
	bad=1
}

final_of() { # pid
	local f
	f=$(cd "$tmp/prof" && ls -- t."$1".*.final.pb.gz 2>/dev/null) || true
	if [ -z "$f" ] || [ "$(wc -l <<<"$f")" != 1 ]; then
		complain "process $1 left $(wc -w <<<"$f") final profiles, not one"
		return 1
	fi
	echo "$tmp/prof/$f"
}

MiB=1048576
f=$(final_of "$parent") || fail "no final profile of the parent"
pprof_top inuse_space "$prog" "$f" >"$tmp/parent"
parent_work=$(flat_of thread_work <"$tmp/parent")
within 10 "$parent_work" $((128 * MiB)) ||
	complain "parent: thread_work holds $parent_work bytes, not within 10% of 128 MiB"
[ "$(flat_of child_only <"$tmp/parent")" = 0 ] ||
	complain "parent: child_only is in the parent's profile"
echo "parent $parent: thread_work $parent_work bytes (128 MiB: $((128 * MiB)))"

for child in "${children[@]}"; do
	f=$(final_of "$child") || continue
	pprof_top inuse_space "$prog" "$f" >"$tmp/child"
	only=$(flat_of child_only <"$tmp/child")
	work=$(flat_of thread_work <"$tmp/child")
	within 10 "$only" $((32 * MiB)) ||
		complain "child $child: child_only holds $only bytes, not within 10% of 32 MiB"
	[ "$work" = "$parent_work" ] ||
		complain "child $child: thread_work holds $work bytes, not the parent's $parent_work"
	echo "child $child: child_only $only bytes (32 MiB: $((32 * MiB))), thread_work $work"
done
[ $bad = 0 ] || fail "the profiles of the parent and its children are not what they hold"
echo "PASS: threads, dlopen and fork: each process's final profile holds what it holds"
