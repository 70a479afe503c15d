#!/usr/bin/env bash
# Install the Debian 12 packages that building and testing libpagealloc needs.
# Idempotent: does nothing (and needs no network) when they are all present.
set -euo pipefail

# The build and the cmocka tests; clang with libFuzzer for the fuzz targets
# (tools/fuzz.sh); then the real programs the preload matrix runs
# (tests/preload/matrix.sh: each test skips when its program is missing);
# Go's pprof (golang-go) and binutils (its symbolizer, and addr2line for
# tools/heapprof.py), which read the heap profiles back in the tests;
# Prometheus (prometheus, with promtool), which scrapes `pagealloc serve`
# in its test.
packages=(build-essential cmake pkg-config libcmocka-dev libbenchmark-dev libnuma-dev valgrind
	clang-format clang libclang-rt-14-dev libc6-dev python3 perl sqlite3 git xz-utils bzip2 gzip
	tar mawk findutils grep sed diffutils coreutils make time golang-go binutils
	prometheus)

missing=()
for p in "${packages[@]}"; do
	# "install ok installed" only: a removed package leaves config-files behind.
	if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "setup-deps: missing Debian packages: ${missing[*]}" >&2
	echo "setup-deps: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi

echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
