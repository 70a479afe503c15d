#!/usr/bin/env bash
# tests/live/stat.sh — `pagealloc stat` reads a running process (src/live.h,
# tools/pagealloc_stat.py).
#
#   stat.sh PRELOAD_SO LIVE_TARGET STAT_PY CASE
#
# CASE figures: live_target (tests/live/live_target.c) runs on the preload;
#   between its two readies it allocates 8 large blocks of 256 KiB and 1000
#   of 64 bytes, and `stat --json` before and after differs by exactly that:
#   large_objects +8, large_bytes +2 MiB, live_objects +1008, heap_alloc
#   +2 MiB + 64000; before anyone asked, the file has its figures once
#   and no story; `stat` prints the story with the same live objects;
#   the file is mode 0600 in a 0700 directory; `--watch 0.2` prints a header
#   and a line per interval and, when the process exits, one line saying so;
#   the file is gone after the exit.
# CASE errors: one line on stderr and exit status 1 for this shell's pid (not
#   on libpagealloc), a pid that does not exist, a planted file whose start
#   time is not its process's (removed, then reported as not on
#   libpagealloc), a planted file of a dead pid (removed), a process run with
#   live=off; for another user's process (pid 1) when not root.
# CASE linked: LIVE_TARGET is live_target_linked (-lpagealloc, no preload),
#   or live_target_static (-static with libpagealloc-preload.a): the figures
#   case's exact changes and the story.
# CASE python3: python3 on the preload; a 10 MiB bytearray allocated between
#   two readies is exactly one large object and its 1281 pages more.
set -u
. "$(dirname "$0")/../preload/common.sh"
preload=$1 target=$2 stat_py=$3 case=$4
need_programs python3
make_tmp

live_dir() { # where a process of ours keeps its live file (src/live.c: live_dir)
	if [ -n "${XDG_RUNTIME_DIR:-}" ] && [ -d "$XDG_RUNTIME_DIR" ] &&
		[ "$(stat -c %u:%a "$XDG_RUNTIME_DIR")" = "$(id -u):700" ]; then
		echo "$XDG_RUNTIME_DIR/pagealloc"
	else
		echo "/dev/shm/pagealloc-$(id -u)"
	fi
}

# json FILE KEY: a figure of a saved --json answer
json() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# expect_error WHAT PATTERN CMD...: exit status 1 and one stderr line matching PATTERN
expect_error() {
	local what=$1 pattern=$2
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	[ "$rc" = 1 ] || fail "$what: exit status $rc, want 1 ($(cat "$tmp/err"))"
	[ "$(wc -l <"$tmp/err")" = 1 ] || fail "$what: want one line, got: $(cat "$tmp/err")"
	grep -q -- "$pattern" "$tmp/err" || fail "$what: '$(cat "$tmp/err")' lacks '$pattern'"
	[ ! -s "$tmp/out" ] || fail "$what: printed to stdout: $(cat "$tmp/out")"
}

start_target() { # start live_target with extra env words; sets T_PID, T (coproc fds)
	local pre=$preload
	[ "$case" != linked ] || pre= # linked with -lpagealloc: no preload
	coproc T { exec env "$@" LD_PRELOAD="$pre" "$target" 8 262144 1000 64; }
	read -r -t 10 -u "${T[0]}" line || fail "live_target did not get ready"
	[ "$line" = "ready 0" ] || fail "live_target said '$line'"
}

# grew BEFORE.json AFTER.json KEY:WANT...: each figure grew by exactly WANT
grew() {
	local before=$1 after=$2 kv key want got
	shift 2
	for kv in "$@"; do
		key=${kv%%:*} want=${kv#*:}
		got=$(($(json "$after" "$key") - $(json "$before" "$key")))
		[ "$got" = "$want" ] || fail "$key grew by $got, want $want"
	done
}

# step_grew PID KEY:WANT...: `stat --json` of PID before and after its
# second step (a line to the coproc T, then its "ready 1"); each figure
# grew by exactly WANT (grew). Leaves the answers in before.json and after.json.
step_grew() {
	local pid=$1 line
	shift
	python3 "$stat_py" stat --json "$pid" >"$tmp/before.json" || fail "stat --json failed"
	echo go >&"${T[1]}"
	read -r -t 10 -u "${T[0]}" line && [ "$line" = "ready 1" ] || fail "no second ready"
	python3 "$stat_py" stat --json "$pid" >"$tmp/after.json" || fail "stat --json failed"
	grew "$tmp/before.json" "$tmp/after.json" "$@"
}

# The live file of pid, within 10 s (its scavenger thread makes it): its
# own, not one that an earlier process of the same pid left (pids come
# round fast beside the fork tests): pagealloc_stat's Live checks the
# file's pid and start time, and removes such a file.
wait_live_file() {
	local i
	for i in $(seq 200); do
		python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import pagealloc_stat
pagealloc_stat.Live(int(sys.argv[2]))' "$(dirname "$stat_py")" "$1" 2>/dev/null && return
		sleep 0.05
	done
	fail "no live file $(live_dir)/$1"
}

case $case in
figures)
	# prof=off: a sampled small block is a span of its own (docs/design.md,
	# heap profiles) and would count as a large object.
	start_target PAGEALLOC_CONF=prof=off
	pid=$T_PID
	dir=$(live_dir)
	# The thread makes the file on its first wake, which a loaded machine
	# may run after "ready 0" (a Release run once found no file there, and
	# a run of the full matrix one left by an earlier process of its pid).
	wait_live_file "$pid"
	[ "$(stat -c %a "$dir/$pid")" = 600 ] || fail "file mode $(stat -c %a "$dir/$pid"), want 600"
	[ "$(stat -c %a "$dir")" = 700 ] || fail "directory mode $(stat -c %a "$dir"), want 700"
	# Before any reader asks: the figures filled in once, no story (it
	# waits for the first reader: src/live.c, live_publish), so its text
	# slots' pages stay untouched. "updates stories text_len".
	got=$(python3 -c '
import sys, time
sys.path.insert(0, sys.argv[1])
import pagealloc_stat as s
live = s.Live(int(sys.argv[2]))
for _ in range(200):
    h, figs, text = live.read()
    if figs["updates"] != 0:
        break
    time.sleep(0.05)
print(figs["updates"], figs["stories"], h["text_len"])' "$(dirname "$stat_py")" "$pid") ||
		fail "reading the unasked file failed"
	[ "$got" = "1 0 0" ] || fail "unasked file: updates stories text_len $got, want 1 0 0"
	step_grew "$pid" large_objects:8 large_bytes:2097152 live_objects:1008 heap_alloc:2161152
	live=$(json "$tmp/after.json" live_objects)
	# No memory_limit: said so, with nothing from a cgroup.
	got="$(json "$tmp/after.json" memory_limit_source) $(json "$tmp/after.json" memory_limit_auto)"
	got="$got $(json "$tmp/after.json" cgroup_limit) $(json "$tmp/after.json" memory_pressure)"
	[ "$got" = "none 0 0 None" ] ||
		fail "--json: memory_limit_source, _auto, cgroup_limit, memory_pressure $got, want none 0 0 None"
	# The huge-page events are counters: integers that never fall.
	for k in huge_collapses huge_splits huge_freed collapse_failures collapse_waits; do
		b=$(json "$tmp/before.json" $k) a=$(json "$tmp/after.json" $k)
		[[ "$b" =~ ^[0-9]+$ && "$a" =~ ^[0-9]+$ && $a -ge $b ]] ||
			fail "--json: $k $b then $a, want a count that never falls"
	done
	python3 "$stat_py" stat "$pid" >"$tmp/story" || fail "stat failed"
	grep -q "^  memory_limit  *none$" "$tmp/story" ||
		fail "stat: memory_limit not none: $(grep memory_limit "$tmp/story")"
	grep -q "^==== pagealloc: the story of the heap of pid $pid " "$tmp/story" ||
		fail "stat: no story header: $(head -3 "$tmp/story")"
	grep -q "^  live objects  *$live, of which large (over 32 KiB) 8 in 2.00 MiB" "$tmp/story" ||
		fail "stat: live objects not $live with 8 large: $(grep 'live objects' "$tmp/story")"
	grep -q "^==== end of the story of pid $pid ====" "$tmp/story" || fail "stat: story cut"
	# Its lines, until 3 of them are there (within 30 s: a loaded machine
	# may take Python's start-up several times over, and a fixed 2 s once
	# gave fewer lines under a full ctest -j2).
	python3 "$stat_py" stat --watch 0.2 "$pid" >"$tmp/watch" &
	watcher=$!
	for _ in $(seq 600); do
		[ "$(grep -c '^[0-9][0-9]:' "$tmp/watch")" -ge 3 ] && break
		sleep 0.05
	done
	kill "$watcher"
	wait "$watcher" 2>/dev/null
	grep -q '^time .*rss .*heap_sys .*inuse .*alloc .*released .*frag .*scav_cpu%' "$tmp/watch" ||
		fail "--watch: no header: $(head -1 "$tmp/watch")"
	n=$(grep -c '^[0-9][0-9]:' "$tmp/watch")
	[ "$n" -ge 3 ] || fail "--watch 0.2 for 30 s: $n lines, want at least 3"
	python3 "$stat_py" stat --watch 0.1 "$pid" >"$tmp/watch2" 2>"$tmp/watch2.err" &
	watcher=$!
	# The process exits once the watcher has printed a line of it (Python
	# may take longer than any fixed pause to start on a loaded machine).
	for _ in $(seq 200); do
		grep -q '^[0-9][0-9]:' "$tmp/watch2" && break
		sleep 0.05
	done
	echo go >&"${T[1]}"
	wait "$T_PID"
	wait "$watcher" || fail "--watch: exit status $? after the process exited: $(cat "$tmp/watch2.err")"
	[ "$(tail -1 "$tmp/watch2")" = "process $pid exited" ] ||
		fail "--watch: last line '$(tail -1 "$tmp/watch2")'"
	[ ! -e "$dir/$pid" ] || fail "$dir/$pid is still there after the exit"
	;;
errors)
	expect_error "this shell" "process $$ does not run on libpagealloc" \
		python3 "$stat_py" stat $$
	expect_error "no such pid" "no process 99999999" python3 "$stat_py" stat 99999999
	dir=$(live_dir)
	mkdir -p -m 700 "$dir"
	# A file left by a crash, its pid now someone else's: start time 1.
	sleep 30 &
	other=$!
	python3 - "$dir/$other" "$other" <<'PY'
import struct, sys
h = struct.pack("=8sIIQQQQQQQIIIIQII88x", b"PALIVE\0\0", 2, 192, 65536, int(sys.argv[2]), 1,
                0, 0, 0, 0, 0, 192, 2048, 0, 0, 0, 0)
with open(sys.argv[1], "wb") as f:
    f.write(h + bytes(65536 - len(h)))
PY
	chmod 600 "$dir/$other"
	expect_error "stale file" "process $other does not run on libpagealloc" \
		python3 "$stat_py" stat "$other"
	[ ! -e "$dir/$other" ] || fail "the stale file $dir/$other is still there"
	kill "$other"
	wait "$other" 2>/dev/null
	# A file of a pid that is gone.
	cp /dev/null "$dir/$other"
	expect_error "dead pid" "no process $other" python3 "$stat_py" stat "$other"
	[ ! -e "$dir/$other" ] || fail "the file of dead pid $other is still there"
	# live=off: no file made. (One may be there already: a process killed by
	# a signal leaves its file, and its pid comes round again; the reader
	# finds it stale below. What must not be there is a file made since.)
	touch "$tmp/before"
	start_target PAGEALLOC_CONF=live=off
	[ ! "$dir/$T_PID" -nt "$tmp/before" ] || fail "live=off made $dir/$T_PID"
	expect_error "live=off" "process $T_PID does not run on libpagealloc" \
		python3 "$stat_py" stat --json "$T_PID"
	echo go >&"${T[1]}"
	echo go >&"${T[1]}"
	wait "$T_PID"
	if [ "$(id -u)" != 0 ]; then
		expect_error "another user" "process 1 belongs to another user" \
			python3 "$stat_py" stat 1
	fi
	;;
profile)
	# `pagealloc profile PID -o FILE`: the process's own thread writes its
	# heap profile beside its live file, the reader moves it to FILE. At
	# prof_sample=64K each of the 8 blocks of 256 KiB is sampled with
	# probability 1 - e^-4 (98%), with weight 1.02: the profile holds at
	# least 1 MiB live unless 5 of 8 went unsampled (odds ~1e-6).
	need_programs go
	start_target PAGEALLOC_CONF=prof_sample=64K
	pid=$T_PID
	dir=$(live_dir)
	echo go >&"${T[1]}"
	read -r -t 10 -u "${T[0]}" line && [ "$line" = "ready 1" ] || fail "no second ready"
	python3 "$stat_py" profile "$pid" -o "$tmp/p.pb.gz" >"$tmp/out" 2>&1 ||
		fail "profile failed: $(cat "$tmp/out")"
	[ "$(cat "$tmp/out")" = "heap profile of process $pid in $tmp/p.pb.gz (go tool pprof $tmp/p.pb.gz)" ] ||
		fail "profile said: $(cat "$tmp/out")"
	[ "$(head -c 2 "$tmp/p.pb.gz" | od -An -tx1 | tr -d ' ')" = 1f8b ] || fail "not gzip"
	ls "$dir" | grep -q "^$pid\.pb\.gz" && fail "a profile was left in $dir"
	go tool pprof -raw "$tmp/p.pb.gz" >"$tmp/raw" 2>"$tmp/raw.err" ||
		fail "go tool pprof -raw: $(cat "$tmp/raw.err")"
	grep -q '^Period: 65536$' "$tmp/raw" || fail "no Period 65536: $(head -3 "$tmp/raw")"
	grep -q '^alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes' \
		"$tmp/raw" || fail "sample types: $(grep -A1 '^Samples' "$tmp/raw")"
	inuse=$(awk '/^Samples/ {s = 1; next} /^Locations/ {s = 0} s && /:/ {v += $4} END {print v + 0}' "$tmp/raw")
	[ "$inuse" -ge 1048576 ] || fail "the profile holds $inuse bytes live, want at least 1 MiB"
	expect_error "no such pid" "no process 99999999" python3 "$stat_py" profile 99999999 -o "$tmp/x"
	echo go >&"${T[1]}"
	wait "$T_PID"
	echo "ok: profile of $pid, $inuse bytes live"
	;;
linked)
	# The same figures from a program linked with -lpagealloc (no preload).
	start_target PAGEALLOC_CONF=prof=off
	pid=$T_PID
	wait_live_file "$pid"
	step_grew "$pid" large_objects:8 large_bytes:2097152 live_objects:1008 heap_alloc:2161152
	python3 "$stat_py" stat "$pid" | grep -q "^==== pagealloc: the story of the heap of pid $pid " ||
		fail "stat: no story"
	echo go >&"${T[1]}"
	wait "$T_PID"
	[ ! -e "$(live_dir)/$pid" ] || fail "the live file is still there after the exit"
	;;
python3)
	# python3 itself on the preload: 96 MiB grown and given back (the
	# scavenger starts and makes the file), then between two readies one
	# bytearray of 10 MiB: malloc(10 MiB + 1), a large object of 1281 pages.
	coproc T {
		exec env PAGEALLOC_CONF=prof=off LD_PRELOAD="$preload" python3 -c '
import sys
b = bytearray(96 << 20); del b
b = bytearray(1 << 20); del b
print("ready 0", flush=True); sys.stdin.readline()
keep = bytearray(10 << 20)
print("ready 1", flush=True); sys.stdin.readline()'
	}
	read -r -t 20 -u "${T[0]}" line && [ "$line" = "ready 0" ] || fail "python3 did not get ready"
	pid=$T_PID
	wait_live_file "$pid"
	step_grew "$pid" large_objects:1 large_bytes:$((1281 * 8192))
	echo go >&"${T[1]}"
	wait "$T_PID"
	;;
*)
	fail "unknown case $case"
	;;
esac
echo "PASS: live $case"
