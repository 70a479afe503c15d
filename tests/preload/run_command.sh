#!/usr/bin/env bash
# tests/preload/run_command.sh — `pagealloc run -- CMD` (tools/pagealloc.in):
#
#   run_command.sh PAGEALLOC_COMMAND
#
#  - sort of a generated file: the same output as without it, and its heap's
#    report on stderr with a nonzero heap_inuse;
#  - --stats-file DIR/%p over a bash pipeline: a report per process in DIR;
#  - CMD's exit status comes back (3), and a death by SIGTERM as 143;
#  - --thread-cache-total: the report shows the share it sets;
#  - --quiet: no report;
#  - the scavenger thread runs for sort, and is not started for seq 1 3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

[ $# = 1 ] || fail "usage: run_command.sh PAGEALLOC_COMMAND"
pagealloc=$1
[ -x "$pagealloc" ] || fail "no pagealloc command at $pagealloc"
need_programs sort seq bash
make_tmp

awk 'BEGIN { x = 7; for (i = 0; i < 50000; i++) { x = (x * 1103515245 + 12345) % 2147483648
	print x } }' >"$tmp/in"
sort "$tmp/in" >"$tmp/ref"
"$pagealloc" run -- sort "$tmp/in" >"$tmp/out" 2>"$tmp/err" ||
	fail "pagealloc run -- sort exited with $?: $(head -n 5 "$tmp/err")"
expect_same "$tmp/ref" "$tmp/out" "pagealloc run -- sort"
mkdir "$tmp/one"
cp "$tmp/err" "$tmp/one/report"
stats_check "$tmp/one" sort

# The scavenger thread starts once its heap has work (docs/design/scavenger.md,
# *When the thread starts*): sort's heap grows and gives pages back; seq 1 3
# does neither, and its report says the thread was not started.
grep -q '^  thread  *running' "$tmp/err" ||
	fail "sort: the scavenger did not start: $(grep '^  thread ' "$tmp/err")"
mkdir "$tmp/seq"
"$pagealloc" run --stats-file "$tmp/seq/%p" -- seq 1 3 >/dev/null 2>&1 ||
	fail "pagealloc run -- seq 1 3 exited with $?"
grep -q '^  thread  *not started' "$tmp"/seq/* ||
	fail "seq 1 3: the scavenger started: $(grep -h '^  thread ' "$tmp"/seq/*)"

mkdir "$tmp/stats"
out=$("$pagealloc" run --stats-file "$tmp/stats/%p" -- \
	bash -c 'seq 1 20000 | sort -rn | tail -n 1' 2>"$tmp/err2")
[ "$out" = 1 ] || fail "pagealloc run -- bash pipeline printed '$out', not 1"
stats_check "$tmp/stats" bash seq

# --thread-cache-total reaches the library: the stats name it.
"$pagealloc" run --thread-cache-total 1M -- sort "$tmp/in" >"$tmp/out5" 2>"$tmp/err5" ||
	fail "pagealloc run --thread-cache-total 1M -- sort exited with $?"
expect_same "$tmp/ref" "$tmp/out5" "pagealloc run --thread-cache-total 1M -- sort"
grep -q 'of thread_cache_total 1.00 MiB' "$tmp/err5" ||
	fail "--thread-cache-total 1M: no 'of thread_cache_total 1.00 MiB' in $(grep 'thread caches' "$tmp/err5")"

status=0
"$pagealloc" run --quiet -- sh -c 'exit 3' 2>"$tmp/err3" || status=$?
[ $status = 3 ] || fail "pagealloc run -- sh -c 'exit 3' exited with $status"
[ ! -s "$tmp/err3" ] || fail "pagealloc run --quiet wrote to stderr: $(cat "$tmp/err3")"

status=0
"$pagealloc" run -- bash -c 'kill -TERM $$' 2>"$tmp/err4" || status=$?
[ $status = 143 ] || fail "pagealloc run -- bash killed by SIGTERM exited with $status, not 143"
grep -q 'SIGTERM' "$tmp/err4" || fail "no word of SIGTERM on stderr: $(cat "$tmp/err4")"
echo "PASS: pagealloc run: same output as without it, reports, exit statuses 3 and 143"
