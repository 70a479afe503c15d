#!/usr/bin/env bash
# tests/preload/guard_freed.sh — guard_freed.cc's CASE preloaded with
# guard_sample=1 must die (SIGSEGV for a read after free, SIGABRT for a
# wrong size) after exactly one line on stderr, word for word up to its
# stacks, PTR the pointer the program announced:
#
#   free, delete  "pagealloc: use-after-free at PTR: at the start of a freed
#                 16-byte block at PTR, allocated at STACK, freed at STACK"
#   sized         "pagealloc: operator delete(PTR): wrong size: 8 bytes passed
#                 for a 1-byte guarded block (its size exactly); allocated
#                 at STACK"
#
# and every stack starting at the program's own frame (NAME+0xOFFSET): the
# allocator's frames trimmed, the free's as the allocation's.
#
#   guard_freed.sh PRELOAD_SO PROGRAM CASE
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

[ $# = 3 ] || {
	sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
PA_PRELOAD=$1 program=$2 case=$3
[ -f "$PA_PRELOAD" ] || fail "no preload library at $PA_PRELOAD"
make_tmp
ulimit -c 0

status=0
env LD_PRELOAD="$PA_PRELOAD" PAGEALLOC_CONF=guard_sample=1 \
	"$program" "$case" >"$tmp/out" 2>"$tmp/err" || status=$?

show() {
	echo "stdout:" >&2
	sed 's/^/  /' "$tmp/out" >&2
	echo "stderr:" >&2
	sed 's/^/  /' "$tmp/err" >&2
}

ptr=$(sed -n 's/^pointer \(0x[0-9a-f]*\)$/\1/p' "$tmp/out")
[ -n "$ptr" ] || { show; fail "the program did not announce its pointer (exit status $status)"; }
name=$(basename "$program")
case $case in
free | delete)
	want_status=$((128 + 11))
	want="pagealloc: use-after-free at $ptr: at the start of a freed 16-byte block at $ptr, allocated at "
	;;
sized)
	want_status=$((128 + 6))
	want="pagealloc: operator delete($ptr): wrong size: 8 bytes passed for a 1-byte guarded block (its size exactly); allocated at "
	;;
*) fail "no case $case" ;;
esac
[ $status = $want_status ] || { show; fail "exit status $status, not $want_status"; }
lines=$(wc -l <"$tmp/err")
[ "$lines" = 1 ] || { show; fail "$lines lines on stderr, not exactly one"; }
line=$(cat "$tmp/err")
case $line in
"$want"*) ;;
*) show; fail "the line does not start \"$want\"" ;;
esac
case ${line#"$want"} in
"$name+0x"*) ;;
*) show; fail "the allocation stack does not start at $name's frame" ;;
esac
if [ "$case" != sized ]; then
	case $line in
	*", freed at $name+0x"*) ;;
	*) show; fail "the free stack does not start at $name's frame" ;;
	esac
fi
echo "ok: $line"
