#!/usr/bin/env bash
# tests/profile/peaks.sh PRELOAD_SO PROGRAM — the peak, interval and final
# profiles of peaks.c (PROGRAM), run with prof_sample=64K,
# prof_interval=16M and prof_prefix=DIR/p, are written when the rule says
# and hold what it says, read back through `go tool pprof -raw`.
#
# The rule (prof.c, prof_record): at each sample, a peak profile is due
# when the estimated live bytes are at least 32 * prof_sample (2 MiB) and
# at least 1.1 times those at the last peak profile. peaks.c's blocks are
# of 1 MiB and more, sampled with probability 1 - e^-16 and weight
# 1.0000001: the estimates are exact (within a few bytes). Its live heap
# goes 1.5, 2.5, 3.5, ..., 65.5 MiB (a 1.5 MiB block, then 64 of 1 MiB),
# then 0, then 1, 2, ..., 40 MiB. The peaks (live MiB at each):
#   2.5 (the first at least 2 MiB), 3.5, ..., 10.5 (each at least 1.1 times
#   the last), then 12.5 (11.5 < 11.55), 14.5, 16.5, 18.5, 20.5, 23.5,
#   26.5, 29.5, 32.5, 36.5, 40.5, 45.5, 50.5, 56.5, 62.5 (the next would
#   be 68.75): 24 peak profiles, none after 62.5 (the regrowth to 40 MiB
#   stays below); the closest call is 51 KiB from its threshold (10.5 >=
#   1.1 * 9.5 = 10.45), far above the estimates' error.
# Interval profiles: one each time the estimated allocated bytes pass a
# multiple of 16 MiB, at 16.5, 32.5, 48.5, 64.5, 80.5 and 96.5 MiB
# allocated: floor(105.5 / 16) = 6 of them. Totals are compared within 1
# KiB.
# The scavenger runs: its thread, started from inside a malloc of the
# program's, has pthread_create allocate a DTV (288 bytes) through us, which
# must not be sampled (malloc.c, background_work): at 64K it once was, once
# in 230 runs, counted at the program's site, 64 KiB more live, enough to
# move a peak (the closest is 51 KiB from its threshold).
# Final: exactly one, the last file written, holding 40 MiB live and
# 105.5 MiB allocated. Every file is named DIR/p.PID.SEQ.KIND.pb.gz with
# the program's pid and SEQ 0001, 0002, ... in the order written.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

profile_start 5 go "$@"

MiB=1048576
mkdir "$tmp/prof"
mapfile -t envs < <(prof_env "prof=on,prof_sample=64K,prof_interval=16M,prof_prefix=$tmp/prof/p")
env "${envs[@]}" "$prog" &
pid=$!
wait $pid || fail "$prog failed"

bad=0
complain() {
	echo "FAIL: $*" >&2
	bad=1
}

# The files, in the order of their SEQ (the order written).
(cd "$tmp/prof" && ls) | sort -t. -k3,3n >"$tmp/files.list"
seq=0
while read -r name; do
	seq=$((seq + 1))
	want=$(printf 'p.%d.%04d.' "$pid" $seq)
	case $name in
	"$want"final.pb.gz | "$want"peak.pb.gz | "$want"interval.pb.gz) ;;
	*) complain "file $seq is '$name', not ${want}{final,peak,interval}.pb.gz" ;;
	esac
done <"$tmp/files.list"
[ $bad = 0 ] || fail "the files are not named PREFIX.PID.SEQ.KIND.pb.gz in order: $(cat "$tmp/files.list")"

# close ACTUAL EXPECTED_MIB_TIMES_2 SLACK_BYTES
close() {
	local d=$(($1 - $2 * MiB / 2))
	[ $d -ge 0 ] || d=$((-d))
	[ $d -le "$3" ]
}

mib() { awk -v b="$1" 'BEGIN { printf "%.3f MiB", b / 1048576 }'; }

# Peaks: live MiB times 2.
expected_peaks=(5 7 9 11 13 15 17 19 21 25 29 33 37 41 47 53 59 65 73 81 91 101 113 125)
mapfile -t peaks < <(grep '\.peak\.pb\.gz$' "$tmp/files.list")
for f in "${peaks[@]}"; do
	pprof_sums "$tmp/prof/$f" | awk '{ print $8 }'
done >"$tmp/peak.values"
mapfile -t got <"$tmp/peak.values"
if [ ${#got[@]} != ${#expected_peaks[@]} ]; then
	complain "${#got[@]} peak profiles, not ${#expected_peaks[@]}"
fi
for i in "${!expected_peaks[@]}"; do
	e=${expected_peaks[$i]}
	g=${got[$i]:-}
	if [ -z "$g" ]; then
		complain "peak $((i + 1)): missing (expected $(mib $((e * MiB / 2))) live)"
	elif ! close "$g" "$e" 1024; then
		complain "peak $((i + 1)) (${peaks[$i]}): $(mib "$g") live, not $(mib $((e * MiB / 2)))"
	else
		echo "peak $((i + 1)): $(mib "$g") live (${peaks[$i]})"
	fi
done
for ((i = ${#expected_peaks[@]}; i < ${#got[@]}; i++)); do
	complain "peak $((i + 1)) (${peaks[$i]}): $(mib "${got[$i]}") live, one too many"
done

# Intervals: allocated MiB times 2 at each.
expected_intervals=(33 65 97 129 161 193)
mapfile -t intervals < <(grep '\.interval\.pb\.gz$' "$tmp/files.list")
for f in "${intervals[@]}"; do
	pprof_sums "$tmp/prof/$f" | awk '{ print $4 }'
done >"$tmp/interval.values"
mapfile -t got <"$tmp/interval.values"
for i in "${!got[@]}"; do
	e=${expected_intervals[$i]:-}
	if [ -z "$e" ]; then
		complain "interval $((i + 1)) (${intervals[$i]}): at $(mib "${got[$i]}") allocated, one too many"
	elif ! close "${got[$i]}" "$e" 1024; then
		complain "interval $((i + 1)) (${intervals[$i]}): at $(mib "${got[$i]}") allocated, not $(mib $((e * MiB / 2)))"
	else
		echo "interval $((i + 1)): at $(mib "${got[$i]}") allocated (${intervals[$i]})"
	fi
done

# The final profile: one, the last, 40 MiB live of 105.5 MiB allocated,
# and as many interval profiles as 16 MiB go into its estimate.
mapfile -t finals < <(grep '\.final\.pb\.gz$' "$tmp/files.list")
if [ ${#finals[@]} != 1 ]; then
	complain "${#finals[@]} final profiles, not 1"
elif [ "${finals[0]}" != "$(tail -n 1 "$tmp/files.list")" ]; then
	complain "the final profile ${finals[0]} is not the last file written"
else
	read -r _ _ _ alloc _ _ _ inuse < <(pprof_sums "$tmp/prof/${finals[0]}")
	close "$inuse" 80 1024 || complain "the final profile holds $(mib "$inuse") live, not 40 MiB"
	close "$alloc" 211 1024 ||
		complain "the final profile counts $(mib "$alloc") allocated, not 105.5 MiB"
	due=$((alloc / (16 * MiB)))
	[ ${#intervals[@]} = $due ] ||
		complain "${#intervals[@]} interval profiles, not floor($(mib "$alloc") / 16 MiB) = $due"
	echo "final: $(mib "$inuse") live, $(mib "$alloc") allocated; ${#intervals[@]} interval profiles"
fi
[ $bad = 0 ] || fail "peak, interval or final profiles not as the rule says (PA_KEEP_TMP=1 keeps them)"
echo "PASS: 24 peak profiles at the right heights, 6 interval profiles, one final"
