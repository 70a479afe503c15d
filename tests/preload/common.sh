# shellcheck shell=bash
# tests/preload/common.sh — sourced by the preload test scripts.
#
# skip MSG            exit 77 (CTest SKIP_RETURN_CODE) with a line saying why
# need_programs P...  skip unless every program P is on PATH (or a path that exists)
# fail MSG            print "FAIL: MSG" to stderr and exit 1
# make_tmp            $tmp: a fresh directory, removed at exit unless PA_KEEP_TMP=1
# expect_same A B WHAT
#                     fail with a unified diff unless files A and B are equal
# stats_check DIR COMM...
#                     fail unless DIR holds a report of stats_print=on
#                     (src/stats_print.c) for each program COMM (the report's
#                     header names the program as it was started, a path or a
#                     name: COMM is its last component) whose heap_inuse is not
#                     0: proof that the program's malloc was libpagealloc's. A
#                     process that leaves by _exit (dash) or dies of SIGPIPE
#                     writes no report: name the programs that end normally
# preload_env STATSDIR
#                     the words for `env` that run a program on the preload
#                     library $PA_PRELOAD, its stats reports going to STATSDIR;
#                     $PA_PRELOAD_CONF (if set) is added to its PAGEALLOC_CONF
#                     (the matrix run with numa=on,numa_fake=2, for one)
#
# The statistics files are the proof the tests prefer: they exist only if
# libpagealloc's own code ran at exit in that process, and a nonzero
# heap_inuse means it served allocations. /proc/self/maps would prove
# loading, not use.

skip() {
	echo "SKIP: $*"
	exit 77
}

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

need_programs() {
	local p
	for p in "$@"; do
		if ! command -v "$p" >/dev/null 2>&1; then
			skip "$p is not installed (tools/setup-deps.sh does not install it)"
		fi
	done
}

make_tmp() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/pa-preload.XXXXXX")
	if [ "${PA_KEEP_TMP:-0}" = 1 ]; then
		echo "keeping $tmp"
	else
		trap 'rm -rf "$tmp"' EXIT
	fi
}

expect_same() { # expected actual what
	if ! cmp -s "$1" "$2"; then
		echo "FAIL: $3: output differs (--- without the preload, +++ with it):" >&2
		diff -u "$1" "$2" | head -n 60 >&2 || true
		exit 1
	fi
}

# The number in "heap_inuse ... (N bytes)" of one report file.
stats_heap_inuse() {
	sed -n 's/^  heap_inuse .*(\([0-9]*\) bytes).*/\1/p' "$1" | head -n 1
}

stats_check() { # dir comm...
	local dir=$1 comm f found inuse
	shift
	for comm in "$@"; do
		found=0
		for f in "$dir"/*; do
			[ -f "$f" ] || continue
			grep -q "^==== pagealloc: the story of the heap of pid [0-9]* (\(.*/\)\{0,1\}$comm) at exit ====" \
				"$f" || continue
			inuse=$(stats_heap_inuse "$f")
			if [ -n "$inuse" ] && [ "$inuse" -gt 0 ]; then
				found=1
				break
			fi
		done
		if [ $found = 0 ]; then
			echo "FAIL: no statistics report with a nonzero heap_inuse from '$comm':" \
				"its malloc was not libpagealloc's (stats_print=on, stats_file=$dir/%p)" >&2
			echo "reports written:" >&2
			grep -h '^==== pagealloc: the story' "$dir"/* 2>/dev/null | head -n 20 >&2 || true
			exit 1
		fi
	done
}

preload_env() { # statsdir
	printf '%s\n' "LD_PRELOAD=$PA_PRELOAD" \
		"PAGEALLOC_CONF=stats_print=on,stats_file=$1/%p${PA_PRELOAD_CONF:+,$PA_PRELOAD_CONF}" \
		"PA_EXPECT_MALLOC=libpagealloc-preload.so"
}
