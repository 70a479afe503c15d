#!/usr/bin/env bash
# tests/preload/guard.sh — guarded sampling through the real entry points
# (LD_PRELOAD, PAGEALLOC_CONF=guard_sample=1): PROGRAM writes one byte past
# the end of a block whose size is a multiple of 16 (guard_overflow.c with
# malloc, guard_overflow.cc with new[]) and must die of SIGSEGV after
# exactly one line on stderr, "pagealloc: heap-buffer-overflow at ADDR: 1
# byte past the end of a SIZE-byte block at PTR, allocated at STACK", PTR
# the pointer the program announced, ADDR = PTR + SIZE, and STACK naming
# the program's own frame (NAME+0xOFFSET).
#
#   guard.sh PRELOAD_SO PROGRAM SIZE [PAGEALLOC]
#
# With PAGEALLOC (the build tree's `pagealloc` command) the program runs as
# `pagealloc run --quiet --guard-all -- PROGRAM` instead: the same line
# first, then the same report symbolized ("pagealloc: symbolized: ..." and
# "  allocated at:", "    #0 main FILE:LINE (NAME+0xOFFSET)": the program is
# built with -O0 -g, so its malloc call is guard_overflow.c's line 12),
# pagealloc's own "pagealloc: PROGRAM was killed by signal 11 (SIGSEGV)"
# last, and pagealloc exits with the program's status.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

[ $# = 3 ] || [ $# = 4 ] || {
	sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
PA_PRELOAD=$1 program=$2 size=$3 pagealloc=${4:-}
[ -f "$PA_PRELOAD" ] || fail "no preload library at $PA_PRELOAD"
make_tmp
ulimit -c 0

status=0
if [ -n "$pagealloc" ]; then
	"$pagealloc" run --quiet --guard-all -- "$program" >"$tmp/out" 2>"$tmp/err" || status=$?
else
	env LD_PRELOAD="$PA_PRELOAD" PAGEALLOC_CONF=guard_sample=1 \
		"$program" >"$tmp/out" 2>"$tmp/err" || status=$?
fi

show() {
	echo "stdout:" >&2
	sed 's/^/  /' "$tmp/out" >&2
	echo "stderr:" >&2
	sed 's/^/  /' "$tmp/err" >&2
}

ptr=$(sed -n 's/^pointer \(0x[0-9a-f]*\)$/\1/p' "$tmp/out")
[ -n "$ptr" ] || { show; fail "the program did not announce its pointer (exit status $status)"; }
[ $status = $((128 + 11)) ] || { show; fail "exit status $status, not 139 (SIGSEGV)"; }
if [ -n "$pagealloc" ]; then
	last=$(tail -n 1 "$tmp/err")
	[ "$last" = "pagealloc: $program was killed by signal 11 (SIGSEGV)" ] ||
		{ show; fail "pagealloc run's last line is not that $program was killed by SIGSEGV"; }
	addr=$(printf '0x%x' $((ptr + size)))
	sym="pagealloc: symbolized: heap-buffer-overflow at $addr: 1 byte past the end of a $size-byte block at $ptr"
	[ "$(sed -n 2p "$tmp/err")" = "$sym" ] || { show; fail "line 2 is not \"$sym\""; }
	[ "$(sed -n 3p "$tmp/err")" = "  allocated at:" ] || { show; fail "line 3 is not \"  allocated at:\""; }
	frame=$(sed -n 4p "$tmp/err")
	case $frame in
	"    #0 main $(dirname "$here")/preload/guard_overflow.c:12 ($(basename "$program")+0x"*) ;;
	*) show; fail "line 4 is not frame #0, main at guard_overflow.c:12" ;;
	esac
	head -n 1 "$tmp/err" >"$tmp/first"
	mv "$tmp/first" "$tmp/err"
fi
lines=$(wc -l <"$tmp/err")
[ "$lines" = 1 ] || { show; fail "$lines lines on stderr, not exactly one"; }
addr=$(printf '0x%x' $((ptr + size)))
want="pagealloc: heap-buffer-overflow at $addr: 1 byte past the end of a $size-byte block at $ptr, allocated at "
line=$(cat "$tmp/err")
case $line in
"$want"*) ;;
*) show; fail "the line does not start \"$want\"" ;;
esac
name=$(basename "$program")
case ${line#"$want"} in
*"$name+0x"*) ;;
*) show; fail "the allocation stack does not name $name" ;;
esac
echo "ok: $line"
