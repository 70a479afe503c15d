#!/usr/bin/env bash
# tests/preload/bad_pointer.sh — a bad pointer through the real entry points
# (LD_PRELOAD): bad_pointer.c's CASE must end with exactly one line on
# stderr, "pagealloc: FUNC(PTR): FAULT", PTR the pointer the program
# announced and FAULT the case's text (the table below), and death by
# SIGABRT.
#
#   bad_pointer.sh PRELOAD_SO BAD_POINTER_PROGRAM CASE FUNC [FAULT]
#
# FUNC is the name the line must give (a regular expression: free, realloc).
# FAULT, when given, replaces the table's text for CASE; a case with neither
# fails, naming this table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

# What libpagealloc says of each case's pointer: src/span.c's fault texts
# (span_report; a freed block passed to anything but a free is a use after
# free).
foreign="not a live block of this heap (foreign pointer, or freed already)"
# A sized delete's: the size passed, the block's, what its class (or its
# page count) holds.
wrong_size() { echo "wrong size: $1 bytes passed for a $2-byte block ($3)"; }
declare -A fault_of=(
	[free_stack]=$foreign
	[free_mmap]=$foreign
	[free_static]=$foreign
	[delete_static]=$foreign
	[double_free]="block is already free (double free)"
	[double_free_large]="block is already free (double free)"
	[realloc_freed]="block is already free (use after free)"
	[free_interior]="points inside a block, not at its start (interior pointer)"
	[delete_sized_wrong]=$(wrong_size 17 16 "size class 1, which holds 0 to 16 bytes")
	[delete_array_sized_wrong]=$(wrong_size 113 112 "size class 7, which holds 97 to 112 bytes")
	[delete_aligned_sized_wrong]=$(wrong_size 129 128 "size class 8, which holds 65 to 128 bytes")
	[delete_sized_large_wrong]=$(wrong_size 40961 40960 "5 pages, which hold 32769 to 40960 bytes")
	[delete_sized_smaller]=$(wrong_size 8 112 "size class 7, which holds 97 to 112 bytes")
	[delete_sized_large_smaller]=$(wrong_size 1000 262144 "32 pages, which hold 253953 to 262144 bytes")
	[delete_sized_twice]="block is already free (double free)"
	[write_after_free]="write after free"
)

[ $# = 4 ] || [ $# = 5 ] || {
	sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
PA_PRELOAD=$1 program=$2 case=$3 func=$4
fault=${5:-${fault_of[$case]:-}}
[ -n "$fault" ] || fail "$case: no fault text: add the case to fault_of in $0 (or pass it as FAULT)"
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
line=$(cat "$tmp/err")
form='^pagealloc: (.*)\((0x[0-9a-f]+)\): (.*)$'
if ! [[ $line =~ $form ]]; then
	show
	fail "$case: stderr is not one \"pagealloc: FUNC(PTR): FAULT\" line"
fi
said_func=${BASH_REMATCH[1]} said_ptr=${BASH_REMATCH[2]} said_fault=${BASH_REMATCH[3]}
if ! [[ $said_func =~ ^($func)$ ]]; then
	show
	fail "$case: the line names $said_func, not $func"
fi
if [ "$said_ptr" != "$ptr" ]; then
	show
	fail "$case: the line names pointer $said_ptr, the program passed $ptr"
fi
if [ "$said_fault" != "$fault" ]; then
	show
	fail "$case: the fault is \"$said_fault\", want \"$fault\""
fi
echo "PASS: $case: $line"
