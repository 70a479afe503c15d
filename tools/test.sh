#!/usr/bin/env bash
# libpagealloc's tests, two ways:
#
#   tools/test.sh          the quick check, a newcomer's first command (minutes
#                          on 2 cores): every test once, in one build
#   tools/test.sh --full   the full matrix (what .ci/run calls): the quick
#                          steps, then every build type, the sanitizers,
#                          valgrind, long fuzzing and the smoke runs
#   tools/test.sh --list   the steps, and which command runs each
#
# The steps are the table STEPS below, in the order they run: one line each,
# "quick" (both commands run it) or "full" (only --full), the function that
# runs it, and what it checks. A new step is a function step_NAME and a line
# in the table; moving a step between the commands is changing its first word.
#
# Installs missing Debian packages first (tools/setup-deps.sh; needs root for
# that). Exits nonzero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS=(
	"quick format     formatting: tools/format.sh --check"
	"quick layers     layering: tools/check_layers.py (no cycle, no upward arrow) and its tests; tools/check_links.py (every relative link of the docs leads to a file)"
	"quick plain      plain build build/ (RelWithDebInfo): every ctest test (quick: stress rounds / 10)"
	"quick report     report tool: tools/test_report.py (medians, ratios, targets, tables)"
	"quick valkey     Valkey backend: tools/valkey/test_apply_valkey.py (the edits to a checkout)"
	"quick go         Go package: tools/test-go.sh (go vet; go test -race vendored, CGO_ENABLED=0, -tags pagealloc_system)"
	"quick fuzz_short fuzzing: tools/fuzz.sh --time 10 (build-fuzz/: fuzz_conf, fuzz_malloc on their corpus)"
	"full  release    Release build build-release/ (no debug information): every ctest test"
	"full  debug      Debug build build-debug/ (no optimisation): every ctest test"
	"full  asan       ASan+UBSan build build-asan/: every ctest test"
	"full  tsan       TSan build build-tsan/: the tests named *concurrent* or *thread*"
	"full  memcheck   valgrind memcheck: build/pa-demo, the malloc API test"
	"full  fuzz       fuzzing: tools/fuzz.sh --time 45 (the same targets, longer)"
	"full  compare    side-by-side smoke run: tools/compare.sh --quick (the runner, not timings)"
	"full  profile    profiling smoke run: tools/profile.sh --quick --callgrind (libpagealloc frames by name)"
)

jobs=$(nproc)

build() { # dir, cmake options...
	local dir=$1
	shift
	cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
	cmake --build "$dir" -j "$jobs"
}

step_format() { tools/format.sh --check; }

step_layers() {
	python3 tools/check_layers.py
	python3 tools/test_check_layers.py
	python3 tools/check_links.py
}

# The quick check runs the long stress tests (fork with threads inside
# malloc, the threaded malloc model, the page-heap model) at a tenth of their
# rounds; --full's builds run them whole.
step_plain() {
	build build
	local scale=1
	[ "$mode" = full ] || scale=0.1
	(cd build && PA_TEST_SCALE=$scale ctest --output-on-failure -j2)
}

step_report() { python3 tools/test_report.py; }

step_go() { tools/test-go.sh build; }

step_valkey() { python3 tools/valkey/test_apply_valkey.py; }

step_fuzz_short() { tools/fuzz.sh --time 10; }

build_type() { # type: every ctest test in build-<type>/
	local dir
	dir=build-$(echo "$1" | tr A-Z a-z)
	build "$dir" -DCMAKE_BUILD_TYPE="$1" -DPA_BUILD_BENCH=OFF
	(cd "$dir" && ctest --output-on-failure -j2)
}
step_release() { build_type Release; }
step_debug() { build_type Debug; }

step_asan() {
	build build-asan -DPA_SANITIZE=address,undefined -DPA_BUILD_BENCH=OFF
	(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
		UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j2)
}

step_tsan() {
	build build-tsan -DPA_SANITIZE=thread -DPA_BUILD_BENCH=OFF
	(cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
		ctest --output-on-failure -j2 -R 'concurrent|thread' --no-tests=ignore)
}

# Each program's output (and valgrind's) goes to a log, shown when it fails.
memcheck() {
	local log
	log=$(mktemp)
	if ! valgrind --quiet --error-exitcode=1 --leak-check=full "$@" >"$log" 2>&1; then
		echo "FAILED under valgrind: $*" >&2
		tail -n 80 "$log" >&2
		rm -f "$log"
		return 1
	fi
	rm -f "$log"
}
step_memcheck() {
	memcheck build/pa-demo
	memcheck build/test_malloc_api
}

step_fuzz() { tools/fuzz.sh --time 45; }

step_compare() { tools/compare.sh --quick >/dev/null; }

step_profile() {
	tools/profile.sh --quick --callgrind --out bench-results/profile-quick >/dev/null
}

mode=quick
case ${1:-} in
"") ;;
--full) mode=full ;;
--list) mode=list ;;
*)
	echo "usage: tools/test.sh [--full | --list]" >&2
	exit 2
	;;
esac

if [ "$mode" = list ]; then
	for line in "${STEPS[@]}"; do
		read -r scope name what <<<"$line"
		case $scope in
		quick) printf '%-10s tools/test.sh and --full: %s\n' "$name" "$what" ;;
		full) printf '%-10s tools/test.sh --full only: %s\n' "$name" "$what" ;;
		esac
	done
	exit 0
fi

SECONDS=0
times=()
tools/setup-deps.sh

for line in "${STEPS[@]}"; do
	read -r scope name what <<<"$line"
	case $scope in
	quick) ;;
	full) [ "$mode" = full ] || continue ;;
	*)
		echo "tools/test.sh: step $name: scope '$scope' is neither quick nor full" >&2
		exit 2
		;;
	esac
	printf '\n==== %s\n' "$what"
	start=$SECONDS
	"step_$name"
	times+=("$(printf '%-10s %4d s' "$name" $((SECONDS - start)))")
done

if [ "$mode" = full ]; then
	printf '\n==== all tests passed (the full matrix) in %d s:\n' $SECONDS
else
	printf '\n==== all tests passed (the quick check; tools/test.sh --full runs the full matrix) in %d s:\n' \
		$SECONDS
fi
printf '  %s\n' "${times[@]}"
