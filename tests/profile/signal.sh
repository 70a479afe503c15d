#!/usr/bin/env bash
# tests/profile/signal.sh PRELOAD_SO PROGRAM — prof_signal=SIGUSR2: signal.c
# (PROGRAM) raises SIGUSR2 and allocates a little more; it is not killed
# (exit 0), and DIR/s.PID.SEQ.signal.pb.gz appears, one of them, holding
# before_signal's block of 1 MiB (sampled with probability 1 - e^-16 at
# prof_sample=64K: within 1 KiB; read back with `go tool pprof -top`),
# besides the final profile.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

profile_start 6 go "$@"

mkdir "$tmp/prof"
mapfile -t envs < <(prof_env "prof=on,prof_sample=64K,prof_signal=SIGUSR2,prof_prefix=$tmp/prof/s")
env "${envs[@]}" "$prog" &
pid=$!
status=0
wait $pid || status=$?
[ $status = 0 ] || fail "$prog exited with status $status (SIGUSR2 is $(kill -l SIGUSR2 2>/dev/null))"

mapfile -t signals < <(cd "$tmp/prof" && ls -- s."$pid".*.signal.pb.gz 2>/dev/null)
[ ${#signals[@]} = 1 ] ||
	fail "${#signals[@]} signal profiles in $tmp/prof, not one: $(ls "$tmp/prof")"
[ -e "$(echo "$tmp/prof/s.$pid".*.final.pb.gz)" ] || fail "no final profile: $(ls "$tmp/prof")"
got=$(pprof_top inuse_space "$prog" "$tmp/prof/${signals[0]}" | flat_of before_signal)
if [ "$got" -lt 1048576 ] || [ "$got" -gt $((1048576 + 1024)) ]; then
	fail "${signals[0]}: before_signal holds $got bytes, not 1 MiB"
fi
echo "${signals[0]}: before_signal $got bytes (1 MiB)"
echo "PASS: SIGUSR2 wrote a signal profile"
