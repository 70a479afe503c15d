#!/usr/bin/env bash
# tests/preload/bad_pointer.sh — a bad pointer through the real entry points
# (LD_PRELOAD): bad_pointer.c's CASE must end with exactly one line on
# stderr, "pagealloc: FUNC(PTR): ...", PTR the pointer the program announced,
# and death by SIGABRT.
#
#   bad_pointer.sh PRELOAD_SO BAD_POINTER_PROGRAM CASE FUNC
#
# FUNC is the name the line must give (a regular expression: free, realloc).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

[ $# = 4 ] || {
	sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
PA_PRELOAD=$1 program=$2 case=$3 func=$4
[ -f "$PA_PRELOAD" ] || fail "no preload library at $PA_PRELOAD"
make_tmp
ulimit -c 0

status=0
env LD_PRELOAD="$PA_PRELOAD" PA_EXPECT_MALLOC=libpagealloc-preload.so \
	"$program" "$case" >"$tmp/out" 2>"$tmp/err" || status=$?

show() {
	echo "stdout:" >&2
	sed 's/^/  /' "$tmp/out" >&2
	echo "stderr:" >&2
	sed 's/^/  /' "$tmp/err" >&2
}

ptr=$(sed -n 's/^pointer \(0x[0-9a-f]*\)$/\1/p' "$tmp/out")
if [ -z "$ptr" ]; then
	show
	fail "$case: the program did not announce its pointer (exit status $status)"
fi
if [ $status != $((128 + 6)) ]; then
	show
	fail "$case: exit status $status, not 134 (SIGABRT)"
fi
lines=$(wc -l <"$tmp/err")
if [ "$lines" != 1 ]; then
	show
	fail "$case: $lines lines on stderr, not exactly one"
fi
want="^pagealloc: ($func)\\($ptr\\): [^ ].*\$"
if ! grep -Eq "$want" "$tmp/err"; then
	show
	fail "$case: stderr does not match $want"
fi
echo "PASS: $case: $(cat "$tmp/err")"
