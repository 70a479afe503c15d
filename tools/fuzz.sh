#!/usr/bin/env bash
# Build the libFuzzer targets (tests/fuzz/, docs/fuzzing.md) with clang,
# ASan and UBSan, and run each for a bounded time on its corpus.
#   tools/fuzz.sh [--time SECONDS] [--build DIR] [TARGET...] [-- LIBFUZZER-FLAGS...]
# TARGET: fuzz_conf, fuzz_malloc (default both, one after the other).
# SECONDS: per target (default 45). DIR: the build (default build-fuzz/).
# Flags after -- go to libFuzzer (e.g. -len_control=0 -max_len=1024).
#
# The repository's corpus (tests/fuzz/corpus/conf/, .../malloc/) is read, not
# written: what a run finds goes to DIR/corpus/TARGET/, crashes to
# DIR/artifacts/, libFuzzer's output to DIR/TARGET.log. The last line of each
# run is libFuzzer's final line (executions, cov:, ft:, corpus, exec/s).
# Exits nonzero on the first target that crashed, broke a check or leaked,
# with the input and the command that reproduces it.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=45
dir=build-fuzz
targets=()
flags=()
while [ $# -gt 0 ]; do
	case $1 in
	--)
		shift
		flags=("$@")
		break
		;;
	--time)
		seconds=$2
		shift 2
		;;
	--build)
		dir=$2
		shift 2
		;;
	fuzz_conf | fuzz_malloc)
		targets+=("$1")
		shift
		;;
	*)
		echo "usage: tools/fuzz.sh [--time SECONDS] [--build DIR] [fuzz_conf] [fuzz_malloc]" \
			"[-- LIBFUZZER-FLAGS...]" >&2
		exit 2
		;;
	esac
done
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_conf fuzz_malloc)

if ! command -v clang >/dev/null; then
	echo "fuzz.sh: clang not found: run tools/setup-deps.sh (Debian: clang, libclang-rt-14-dev)" >&2
	exit 1
fi

# PA_WERROR=OFF: a warning only clang gives must not stop the fuzzers (the gcc
# builds of tools/test.sh hold the warning set).
cmake -S . -B "$dir" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPA_FUZZ=ON \
	-DPA_WERROR=OFF -DPA_BUILD_TESTS=OFF -DPA_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir" -j "$(nproc)" --target "${targets[@]}" >/dev/null

for t in "${targets[@]}"; do
	seeds=tests/fuzz/corpus/${t#fuzz_}
	work=$dir/corpus/$t
	mkdir -p "$work" "$dir/artifacts"
	log=$dir/$t.log
	echo "fuzz.sh: $t for ${seconds}s on $seeds"
	# -timeout: one input running 30 s is a hang, and a finding.
	if ! "$dir/$t" -max_total_time="$seconds" -timeout=30 -print_final_stats=1 \
		-artifact_prefix="$dir/artifacts/$t-" ${flags[@]+"${flags[@]}"} "$work" "$seeds" \
		>"$log" 2>&1; then
		echo "fuzz.sh: $t FAILED; the end of $log:" >&2
		tail -n 40 "$log" >&2
		input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
		if [ -n "$input" ]; then
			echo "fuzz.sh: reproduce: $dir/$t $input" >&2
		fi
		exit 1
	fi
	grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1
done
