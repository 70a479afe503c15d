#!/usr/bin/env bash
# tests/profile/leak.sh PAGEALLOC PROGRAM REPORT_NAME PPROF_NAME — the leak
# report of `pagealloc run --heap-profile DIR --prof-sample 64K -- PROGRAM`
# (PAGEALLOC: the build tree's tools/pagealloc.in, configured) for leak.c or
# leak_cxx.cc, which leak 40 MiB from one function and free everything else:
#   - one line "SIZE in N objects from REPORT_NAME <- main ..." whose SIZE is
#     within 10% of 40 MiB (REPORT_NAME: leak_records, or for C++ the
#     function that called new, store::make_nodes(int), as addr2line -C
#     names it);
#   - DIR holds the program's final profile, heap.PID.SEQ.final.pb.gz (PID
#     the program's, which it prints), and only one, and its symbolized copy
#     heap.PID.SEQ.final.sym.pb.gz (tools/heapprof.py symbolize) with the
#     same samples (go tool pprof -raw's totals);
#   - the report's last line is "look at it: go tool pprof -http=: PROGRAM
#     SYMFILE";
#   - `go tool pprof -top SYMFILE` and `go tool pprof -top PROGRAM SYMFILE`
#     list PPROF_NAME with a nonzero flat inuse_space, and main with a
#     nonzero cum. Debian's Go 1.19 pprof names neither a namespaced C++
#     function (store::make_nodes) nor main of a gcc -O2 program (both are
#     built -O2) from the raw profile: it shows [PROGRAM's base name]; the
#     symbolized copy carries the names.
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

# The symbolized copy, beside the final profile.
sym=${final%.pb.gz}.sym.pb.gz
if [ ! -f "$dir/$sym" ]; then
	fail "$dir holds no symbolized copy $sym of the final profile: $(ls "$dir" | tail -n 3)"
fi
raw_sums=$(pprof_sums "$dir/$final")
sym_sums=$(pprof_sums "$dir/$sym")
[ "$raw_sums" = "$sym_sums" ] ||
	complain "the symbolized copy's totals are '$sym_sums', the final profile's '$raw_sums'"

last=$(tail -n 1 "$tmp/err")
want="look at it: go tool pprof -http=: $prog $dir/$sym"
[ "$last" = "$want" ] || complain "the report's last line is '$last', not '$want'"

# The flat and cum columns of a `go tool pprof -top -unit=B` listing on
# stdin: "FUNCTION FLAT CUM" a line.
columns() {
	awk '
		seen && NF >= 6 {
			name = $6
			for (i = 7; i <= NF; i++) name = name " " $i
			f = $1
			c = $4
			sub(/B$/, "", f)
			sub(/B$/, "", c)
			print name, f, c
		}
		$1 == "flat" && $2 == "flat%" { seen = 1 }'
}

# check_listing WHAT: the listing in $tmp/listing names PPROF_NAME with a
# nonzero flat and main with a nonzero cum.
check_listing() {
	local flat main_cum
	flat=$(columns <"$tmp/listing" | awk -v f="$pprof_name" '$1 == f { v = $2 } END { print v + 0 }')
	main_cum=$(columns <"$tmp/listing" | awk '$1 == "main" { v = $3 } END { print v + 0 }')
	if [ "$flat" -gt 0 ] && [ "$main_cum" -gt 0 ]; then
		echo "$1: $pprof_name holds $flat bytes (flat), main $main_cum (cum)"
	else
		complain "$1 lists $pprof_name with $flat bytes (flat) and main with $main_cum (cum):"
		cat "$tmp/listing" >&2
	fi
}

go tool pprof -top -unit=B -nodefraction=0 -nodecount=100000 -sample_index=inuse_space \
	"$dir/$sym" >"$tmp/listing" 2>&1 || fail "go tool pprof -top $sym failed"
check_listing "go tool pprof -top $sym"
pprof_listing inuse_space "$prog" "$dir/$sym" >"$tmp/listing"
check_listing "go tool pprof -top PROGRAM $sym"
if [ $bad != 0 ]; then
	echo "---- pagealloc run's report:" >&2
	cat "$tmp/err" >&2
	fail "the leak report or the final profile is not what it should be"
fi
echo "PASS: the leak report names $report_name and the final profile holds it"
