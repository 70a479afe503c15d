#!/usr/bin/env bash
# tests/preload/valgrind.sh — memcheck sees libpagealloc's blocks through its
# client requests (src/vg.h), preloaded or linked:
#
#   valgrind.sh preload PRELOAD_SO PROGRAM leak|uaf|clean|only_leaks [SIZE]
#   valgrind.sh linked  -          PROGRAM leak|uaf|clean|only_leaks [SIZE]
#
# preload: PROGRAM calls malloc/free, LD_PRELOAD is the preload library and
# valgrind runs with --soname-synonyms=somalloc=nouserintercepts. Memcheck
# replaces the allocation functions of every shared object that exports
# them (valgrind(1), --soname-synonyms), so without that option a preloaded
# malloc is replaced by valgrind's own and libpagealloc never runs (with
# somalloc=*pagealloc-preload* likewise: that names which library to
# replace). nouserintercepts, a soname no library has, limits the
# replacement to the C library's malloc, which the preload shadows.
# linked: PROGRAM was built with -DPA_LINKED against libpagealloc and calls
# pa_malloc/pa_free, names memcheck never replaces.
#
# leak:  exit status 99 (--error-exitcode), "definitely lost: 3,000 bytes in
#        3 blocks", the loss record's stack through leak_three_blocks
# uaf:   exit status 99, "Invalid read of size 1" in read_after_free, in a
#        block free'd there
# clean: exit status 0, "ERROR SUMMARY: 0 errors"
# only_leaks SIZE: PROGRAM SIZE leaks three blocks of SIZE bytes and
#        allocates nothing else: exit status 99, "definitely lost: 3*SIZE
#        bytes in 3 blocks", nothing possibly lost or still reachable (no
#        word of the allocator's metadata may look like a pointer to them)
# Every allocation stack must be libpagealloc's: no frame of valgrind's own
# allocator (vg_replace_malloc.c, in vgpreload_memcheck-*.so). Valgrind gets 20 s: a hang is a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

[ $# = 4 ] || [ $# = 5 ] || {
	sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
mode=$1 PA_PRELOAD=$2 program=$3 kind=$4 args=("${@:5}")
need_programs valgrind
make_tmp
ulimit -c 0

vg=(valgrind --leak-check=full --error-exitcode=99 --errors-for-leak-kinds=definite
	--soname-synonyms=somalloc=nouserintercepts --num-callers=20)
case $mode in
preload)
	[ -f "$PA_PRELOAD" ] || fail "no preload library at $PA_PRELOAD"
	envs=(LD_PRELOAD="$PA_PRELOAD")
	;;
linked) envs=() ;;
*) fail "mode $mode: preload or linked" ;;
esac

status=0
env "${envs[@]}" timeout 20 "${vg[@]}" "$program" "${args[@]}" >"$tmp/out" 2>"$tmp/vg" || status=$?
show() {
	echo "valgrind's output:" >&2
	sed 's/^/  /' "$tmp/vg" >&2
}
if [ $status = 124 ]; then
	show
	fail "$kind ($mode): valgrind did not finish in 20 s (a deadlock?)"
fi

want_status=99
[ "$kind" = clean ] && want_status=0
if [ $status != $want_status ]; then
	show
	fail "$kind ($mode): exit status $status, not $want_status"
fi
expect_line() { # extended regular expression
	if ! grep -Eq "$1" "$tmp/vg"; then
		show
		fail "$kind ($mode): valgrind's output has no line matching: $1"
	fi
}
case $kind in
leak)
	expect_line 'definitely lost: 3,000 bytes in 3 blocks$'
	# The loss record, then its stack: leak_three_blocks must be in it.
	record=$(sed -n '/3,000 bytes in 3 blocks are definitely lost/,/^==[0-9]*== *$/p' "$tmp/vg")
	if [[ $record != *leak_three_blocks* ]]; then
		show
		fail "leak ($mode): the loss record's stack does not name leak_three_blocks"
	fi
	;;
uaf)
	expect_line 'Invalid read of size 1$'
	expect_line 'at 0x[0-9A-Fa-f]+: read_after_free \(valgrind_uaf.c'
	expect_line "Address 0x[0-9A-Fa-f]+ is 10 bytes inside a block of size 100 free'd"
	;;
clean)
	expect_line 'ERROR SUMMARY: 0 errors'
	;;
only_leaks)
	# valgrind groups the digits by threes with commas
	lost=$(echo $((3 * args[0])) | sed -E ':a; s/([0-9])([0-9]{3})($|,)/\1,\2\3/; ta')
	expect_line "definitely lost: $lost bytes in 3 blocks\$"
	expect_line 'possibly lost: 0 bytes in 0 blocks$'
	expect_line 'still reachable: 0 bytes in 0 blocks$'
	;;
*) fail "kind $kind: leak, uaf, clean or only_leaks" ;;
esac
if grep -Eq 'vg_replace_malloc|vgpreload_memcheck' "$tmp/vg"; then
	show
	fail "$kind ($mode): valgrind's own malloc served the program, not libpagealloc"
fi
echo "PASS: $kind ($mode): $(grep -E 'definitely lost:|Invalid read|ERROR SUMMARY' "$tmp/vg" |
	head -n 2 | sed 's/^==[0-9]*== *//' | tr '\n' ' ')"
