#!/usr/bin/env bash
# tests/profile/unwritable.sh PRELOAD_SO PROGRAM — a prefix where no profile
# can be written: peaks.c (PROGRAM; 24 peak profiles and a final one are
# due, peaks.sh says why) run with prof_prefix=/proc/nonexistent/x, then
# with prof_prefix=DIR/notadir/x (notadir a regular file), goes on and
# exits 0, and its stderr is exactly one line per attempted file, in order:
#   pagealloc: heap profile 'PREFIX.PID.SEQ.KIND.pb.gz' not written: WHY
# (prof.c, write_profile) for SEQ 0001 to 0024 peak and 0025 final; and no
# file is left (DIR holds notadir alone; nothing under /proc/nonexistent).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

profile_start 8 nogo "$@"

mkdir "$tmp/dir"
: >"$tmp/dir/notadir"
for prefix in /proc/nonexistent/x "$tmp/dir/notadir/x"; do
	why="no such file or directory"
	[ "$prefix" = /proc/nonexistent/x ] || why="not a directory"
	mapfile -t envs < <(prof_env "prof=on,prof_sample=64K,prof_prefix=$prefix")
	env "${envs[@]}" "$prog" 2>"$tmp/err" &
	pid=$!
	status=0
	wait $pid || status=$?
	[ $status = 0 ] || fail "prefix $prefix: $prog exited with status $status"
	for seq in $(seq 1 25); do
		kind=peak
		[ "$seq" != 25 ] || kind=final
		printf "pagealloc: heap profile '%s.%d.%04d.%s.pb.gz' not written: %s\n" \
			"$prefix" $pid "$seq" $kind "$why"
	done >"$tmp/want"
	if ! cmp -s "$tmp/want" "$tmp/err"; then
		echo "FAIL: prefix $prefix: stderr is not one warning per attempted file (--- expected, +++ seen):" >&2
		diff -u "$tmp/want" "$tmp/err" | head -n 40 >&2 || true
		exit 1
	fi
	echo "prefix $prefix: exit 0, 25 warnings, one per attempted file"
done
left=$(cd "$tmp/dir" && ls -A)
[ "$left" = notadir ] || fail "files left in $tmp/dir: $left"
[ ! -e /proc/nonexistent ] || fail "/proc/nonexistent exists"
echo "PASS: an unwritable prefix gives one warning a file, and the program goes on"
