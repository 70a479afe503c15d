#!/usr/bin/env bash
# tests/profile/leak.sh PAGEALLOC PROGRAM REPORT_NAME PPROF_NAME — the leak
# report of `pagealloc run --heap-profile DIR --prof-sample 64K -- PROGRAM`
# (PAGEALLOC: the build tree's tools/pagealloc.in, configured) for leak.c or
# leak_cxx.cc, which leak 40 MiB from one function and free everything else:
#   - one line "SIZE in N objects from REPORT_NAME <- main ..." whose SIZE is
#     within 10% of 40 MiB (REPORT_NAME: leak_records, or for C++ the
#     function that called new, as addr2line -C names it);
#   - DIR holds the program's final profile, heap.PID.SEQ.final.pb.gz (PID
#     the program's, which it prints), and only one;
#   - the report's last line is "look at it: go tool pprof -http=: PROGRAM
#     FINAL";
#   - `go tool pprof -top PROGRAM FINAL` lists PPROF_NAME with a nonzero flat
#     inuse_space.
# The leaked blocks are 160 of 256 KiB: each is sampled with probability
# p = 1 - e^-4 = 0.982 at 64K, and the estimate's relative standard error
# is sqrt((1-p) / (160 p)) = 1.1%: 10% is 9 standard errors. (At the
# default 512K it would be 11%, hence --prof-sample.)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

[ $# = 4 ] || {
	sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
pagealloc=$1 prog=$2 report_name=$3 pprof_name=$4
[ -x "$pagealloc" ] || fail "no pagealloc command at $pagealloc"
need_go
need_programs python3 addr2line
make_tmp

dir=$tmp/prof
"$pagealloc" run --heap-profile "$dir" --prof-sample 64K -- "$prog" >"$tmp/out" 2>"$tmp/err" ||
	fail "pagealloc run $prog failed: $(tail -n 5 "$tmp/err")"
pid=$(cat "$tmp/out")
case $pid in '' | *[!0-9]*) fail "$prog printed '$pid', not its pid" ;; esac

bad=0
complain() {
	echo "FAIL: $*" >&2
	bad=1
}

# The final profile.
mapfile -t finals < <(cd "$dir" && ls -- *.final.pb.gz 2>/dev/null)
if [ ${#finals[@]} != 1 ]; then
	fail "$dir holds ${#finals[@]} final profiles, not one: ${finals[*]:-none}"
fi
final=${finals[0]}
[[ $final =~ ^heap\.$pid\.[0-9]{4,}\.final\.pb\.gz$ ]] ||
	complain "the final profile is named '$final', not heap.$pid.SEQ.final.pb.gz"
echo "final profile: $final"

# The report's line for the leaking function, innermost first.
line=$(grep -F " objects from $report_name <- main" "$tmp/err" | head -n 1) || true
if [ -z "$line" ]; then
	complain "no line of the leak report names '$report_name <- main'"
else
	echo "report: $line"
	bytes=$(awk '{
		u = $2
		m = u == "B" ? 1 : u == "KiB" ? 1024 : u == "MiB" ? 1048576 : u == "GiB" ? 1073741824 : 0
		printf "%d", $1 * m }' <<<"$line")
	within 10 "$bytes" $((40 * 1048576)) ||
		complain "the report estimates $report_name's leak at $bytes bytes, not within 10% of 40 MiB"
fi

last=$(tail -n 1 "$tmp/err")
want="look at it: go tool pprof -http=: $prog $dir/$final"
[ "$last" = "$want" ] || complain "the report's last line is '$last', not '$want'"

pprof_top inuse_space "$prog" "$dir/$final" >"$tmp/top"
flat=$(flat_of "$pprof_name" <"$tmp/top")
if [ "$flat" -gt 0 ]; then
	echo "go tool pprof -top: $pprof_name holds $flat bytes"
else
	complain "go tool pprof -top $prog $final does not list $pprof_name:"
	cat "$tmp/top" >&2
fi
if [ $bad != 0 ]; then
	echo "---- pagealloc run's report:" >&2
	cat "$tmp/err" >&2
	fail "the leak report or the final profile is not what it should be"
fi
echo "PASS: the leak report names $report_name and the final profile holds it"
