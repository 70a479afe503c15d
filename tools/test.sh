#!/usr/bin/env bash
# Check the formatting (tools/format.sh --check) and the layering
# (tools/check_layers.py), then build libpagealloc five ways and run every
# test in each:
#   build/       plain (RelWithDebInfo), all tests, then pa-demo and the
#                malloc API test under valgrind
#   build-release/, build-debug/  Release (no debug information) and Debug
#                (no optimisation), all tests
#   build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer, all tests
#   build-tsan/  ThreadSanitizer, the tests named *concurrent* or *thread*
# then the Go package's tests (tools/test-go.sh), the tests of tools/report.py (tools/heapprof.py's are a ctest), the fuzz targets for 45 s each
# (tools/fuzz.sh: build-fuzz/, clang) and the smoke runs of tools/compare.sh
# and tools/profile.sh (build-prof/).
# Installs missing Debian packages first (needs root for that). Exits nonzero
# on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
step() { printf '\n==== %s\n' "$*"; }

tools/setup-deps.sh

step "formatting: tools/format.sh --check"
tools/format.sh --check

step "layering: tools/check_layers.py (no cycle, no upward arrow) and its tests"
python3 tools/check_layers.py
python3 tools/test_check_layers.py

build() { # dir, cmake options...
	local dir=$1
	shift
	cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
	cmake --build "$dir" -j "$jobs"
}

step "plain build: build/"
build build
(cd build && ctest --output-on-failure -j2)

for type in Release Debug; do
	dir=build-$(echo "$type" | tr A-Z a-z)
	step "$type build: $dir/"
	build "$dir" -DCMAKE_BUILD_TYPE=$type -DPA_BUILD_BENCH=OFF
	(cd "$dir" && ctest --output-on-failure -j2)
done

step "ASan+UBSan build: build-asan/"
build build-asan -DPA_SANITIZE=address,undefined -DPA_BUILD_BENCH=OFF
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j2)

step "TSan build: build-tsan/ (threaded tests only)"
build build-tsan -DPA_SANITIZE=thread -DPA_BUILD_BENCH=OFF
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	ctest --output-on-failure -j2 -R 'concurrent|thread' --no-tests=ignore)

step "valgrind memcheck: build/pa-demo, the malloc API test"
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
memcheck build/pa-demo
for t in test_malloc_api; do
	memcheck "build/$t"
done

step "Go package: tools/test-go.sh (go vet; go test -race vendored, CGO_ENABLED=0, -tags pagealloc_system)"
tools/test-go.sh build

step "report tool: tools/test_report.py (medians, ratios, targets, tables)"
python3 tools/test_report.py

step "Valkey backend: tools/valkey/test_apply_valkey.py (the edits to a checkout)"
python3 tools/valkey/test_apply_valkey.py

step "fuzzing: tools/fuzz.sh --time 45 (build-fuzz/: fuzz_conf, fuzz_malloc on their corpus)"
tools/fuzz.sh --time 45

step "side-by-side smoke run: tools/compare.sh --quick (the runner, not timings)"
tools/compare.sh --quick >/dev/null

step "profiling smoke run: tools/profile.sh --quick --callgrind (libpagealloc frames by name)"
tools/profile.sh --quick --callgrind --out bench-results/profile-quick >/dev/null

step "all tests passed"
