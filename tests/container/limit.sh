#!/usr/bin/env bash
# limit.sh — a container's memory limit, followed (memory_limit=auto).
#
#   limit.sh CYCLE PRELOAD STAT_PY
#
# Makes memory cgroups of its own, under the test's own cgroup (cgroup v2
# at /sys/fs/cgroup, or v1's memory controller at /sys/fs/cgroup/memory),
# and runs CYCLE (tests/container/cycle.c: 650 pairs, 3 rounds; 91 MiB at
# its peak on an allocator that keeps the holes, 61 MiB on one that gives
# them back) in each, under a limit of 80 MiB:
#   1. on glibc's malloc: killed by the kernel (its free chunks between live
#      ones stay resident);
#   2. on libpagealloc with no memory_limit: killed too (its free pages wait
#      scavenge_delay_ms before the scavenger gives them back), which shows
#      that the limit is what saves case 3;
#   3. on libpagealloc with memory_limit=auto: exits 0; its story names the
#      cgroup's limit file and 80.0 MiB;
#   4. with memory_limit=auto under 1 GiB, lowered to 80 MiB after the first
#      holes are freed: the heap follows the new limit (`pagealloc stat
#      --json`, STAT_PY, shows cgroup_limit 80 MiB and where it came from
#      within 20 s; cycle waits for the test meanwhile) and the rest of the
#      run is not killed.
# Prints each run's peak (the cgroup's and the process's VmHWM). Skips
# (exit 77) when not root or no memory cgroup is writable.
set -euo pipefail

cycle=$1
preload=$2
stat_py=$3
limit=$((80 << 20))
pairs=650
rounds=3

skip() {
	echo "SKIP: $*"
	exit 77
}
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || skip "not root: making a cgroup and moving a process into it needs root"
[ -r /proc/self/cgroup ] || skip "no /proc/self/cgroup"

# Where to make the cgroups: under our own, in the hierarchy that has the
# memory controller.
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
	version=2
	own=$(sed -n 's/^0:://p' /proc/self/cgroup)
	parent=/sys/fs/cgroup${own%/}
	limit_file=memory.max
	# The parent hands the memory controller to its children; a cgroup
	# with processes of its own may not (v2's rule), the root may.
	if ! grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null &&
		! echo +memory >"$parent/cgroup.subtree_control" 2>/dev/null; then
		parent=/sys/fs/cgroup
		grep -qw memory "$parent/cgroup.subtree_control" ||
			echo +memory >"$parent/cgroup.subtree_control" 2>/dev/null ||
			skip "cgroup v2: cannot enable the memory controller for a child of $parent"
	fi
elif [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
	version=1
	own=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}memory\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' /proc/self/cgroup)
	parent=/sys/fs/cgroup/memory${own%/}
	limit_file=memory.limit_in_bytes
else
	skip "no memory cgroup: neither cgroup v2 with the memory controller at /sys/fs/cgroup nor v1 at /sys/fs/cgroup/memory"
fi
[ -w "$parent" ] || skip "cgroup v$version: $parent is not writable (a read-only cgroup mount?)"

tmp=$(mktemp -d)
made=()
cleanup() {
	for cg in "${made[@]+"${made[@]}"}"; do
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			rmdir "$cg" 2>/dev/null && break
			sleep 0.2
		done
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

n=0
# A new cgroup with limit $1 bytes into $cg (and no swap to escape to).
new_cgroup() {
	n=$((n + 1))
	cg=$parent/pa-test-$$-$n
	mkdir "$cg" || skip "cgroup v$version: cannot make $cg"
	made+=("$cg")
	set_limit "$1"
}
set_limit() {
	if [ "$version" = 2 ]; then
		echo "$1" >"$cg/memory.max"
		[ ! -f "$cg/memory.swap.max" ] || echo 0 >"$cg/memory.swap.max"
	else
		# memsw (memory + swap) may never be below the memory limit:
		# lower the memory limit first, raise memsw first.
		if [ -f "$cg/memory.memsw.limit_in_bytes" ]; then
			echo "$1" >"$cg/memory.limit_in_bytes" 2>/dev/null || true
			echo "$1" >"$cg/memory.memsw.limit_in_bytes"
		fi
		echo "$1" >"$cg/memory.limit_in_bytes"
	fi
}
peak() {
	local f=$cg/memory.peak
	[ "$version" = 2 ] || f=$cg/memory.max_usage_in_bytes
	if [ -r "$f" ]; then
		echo "$(($(cat "$f") >> 10)) KiB"
	else
		echo "unknown"
	fi
}

# Run "$@" in $cg, its output into $tmp/out.$n: status into rc.
run_in() {
	set +e
	(
		echo "$BASHPID" >"$cg/cgroup.procs" || exit 99
		exec "$@"
	) >"$tmp/out.$n" 2>&1
	rc=$?
	set -e
	[ "$rc" != 99 ] || fail "cannot move a process into $cg"
}
report() { # what
	echo "$1: exit $rc, cgroup peak $(peak), $(grep -h peak_rss "$tmp/out.$n" || echo "no peak_rss line")"
}

echo "cgroup v$version under $parent; limit $((limit >> 20)) MiB; cycle $pairs pairs, $rounds rounds"

# 1. glibc.
new_cgroup $limit
run_in "$cycle" $pairs $rounds
report "glibc malloc"
[ "$rc" = 137 ] || fail "glibc's malloc was not killed under $((limit >> 20)) MiB (exit $rc): the cycle no longer needs more than the limit; $(cat "$tmp/out.$n")"

# 2. libpagealloc, no limit.
new_cgroup $limit
run_in env LD_PRELOAD="$preload" "$cycle" $pairs $rounds
report "libpagealloc, no memory_limit"
[ "$rc" = 137 ] || fail "libpagealloc with no memory_limit was not killed (exit $rc): the cycle does not show what the limit does; $(cat "$tmp/out.$n")"

# 3. libpagealloc, memory_limit=auto.
new_cgroup $limit
run_in env LD_PRELOAD="$preload" \
	PAGEALLOC_CONF="memory_limit=auto,stats_print=on,stats_file=$tmp/story.$n" "$cycle" $pairs $rounds
report "libpagealloc, memory_limit=auto"
[ "$rc" = 0 ] || fail "killed or failed under memory_limit=auto (exit $rc): $(cat "$tmp/out.$n")"
line=$(grep '^ *memory_limit ' "$tmp/story.$n") || fail "no memory_limit line in the story"
echo "  story:$line"
want="(auto from cgroup v$version $cg/$limit_file 80.00 MiB less a sixteenth and "
case $line in
*"$want"*) ;;
*) fail "the story's memory_limit line does not say '$want'" ;;
esac

# 4. memory_limit=auto, the limit lowered while it runs.
new_cgroup $((1 << 30))
mkfifo "$tmp/in"
(
	echo "$BASHPID" >"$cg/cgroup.procs" || exit 99
	exec env LD_PRELOAD="$preload" \
		PAGEALLOC_CONF="memory_limit=auto,stats_print=on,stats_file=$tmp/story.$n" \
		"$cycle" $pairs $rounds wait <"$tmp/in"
) >"$tmp/out.$n" 2>&1 &
pid=$!
exec 3>"$tmp/in"
for _ in $(seq 300); do
	grep -q '^freed' "$tmp/out.$n" && break
	kill -0 $pid 2>/dev/null || break
	sleep 0.1
done
grep -q '^freed' "$tmp/out.$n" || fail "cycle did not reach its first free: $(cat "$tmp/out.$n")"
set_limit $limit
# The scavenger thread reads the cgroup every second: wait for it.
source=
for _ in $(seq 200); do
	python3 "$stat_py" stat --json $pid >"$tmp/json" 2>/dev/null || break
	read -r got source < <(python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
print(j["cgroup_limit"], j["memory_limit_source"])' "$tmp/json")
	[ "$got" != $limit ] || break
	sleep 0.1
done
[ "$got" = $limit ] || fail "pagealloc stat --json: cgroup_limit $got 20 s after the limit became $limit"
echo "  pagealloc stat --json: cgroup_limit $got, memory_limit $(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["memory_limit"])' "$tmp/json"), memory_limit_source '$source'"
[ "$source" = "auto from cgroup v$version $cg/$limit_file" ] ||
	fail "pagealloc stat --json: memory_limit_source '$source'"
echo go >&3
exec 3>&-
set +e
wait $pid
rc=$?
set -e
report "libpagealloc, memory_limit=auto, 1 GiB lowered to $((limit >> 20)) MiB"
[ "$rc" = 0 ] || fail "killed or failed after the limit was lowered (exit $rc): $(cat "$tmp/out.$n")"
grep -q "(auto from cgroup v$version $cg/$limit_file 80.00 MiB less a sixteenth and " "$tmp/story.$n" ||
	fail "the story does not name the lowered limit: $(grep memory_limit "$tmp/story.$n")"
echo "ok"
