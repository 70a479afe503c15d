#!/usr/bin/env bash
# Build a Valkey checkout on libpagealloc, active defragmentation included:
#
#   tools/valkey/build-valkey.sh VALKEY_CHECKOUT [PAGEALLOC_BUILD]
#
# PAGEALLOC_BUILD (default: build-valkey/ in this repository, configured
# Release here if it has no libpagealloc.a) is a CMake build directory of
# this repository. The script applies apply-valkey.py to the checkout (our
# two files copied into src/, five marked edits beside the jemalloc ones)
# and runs `make MALLOC=pagealloc` there, linking libpagealloc.a statically:
# the server's zmalloc is pa_malloc/pa_free, everything else in the process
# (libc's own users) stays on glibc, as with Valkey's bundled jemalloc.
# JOBS (default 2) is make's -j. Extra make variables can follow in
# VALKEY_MAKE_ARGS (default: BUILD_TLS=no).
#
# Then: src/valkey-server --activedefrag yes; INFO memory says
# mem_allocator:libpagealloc-X.Y.Z.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: tools/valkey/build-valkey.sh VALKEY_CHECKOUT [PAGEALLOC_BUILD]" >&2
	exit 2
fi
checkout=$(cd "$1" && pwd)
build=${2:-$root/build-valkey}
jobs=${JOBS:-2}

if [ ! -f "$build/libpagealloc.a" ]; then
	cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_BENCH=OFF -DPA_BUILD_TESTS=OFF >/dev/null
fi
# Up to date even when the build directory was there already.
cmake --build "$build" -j"$jobs" --target pagealloc_static
build=$(cd "$build" && pwd)

version=$(sed -n 's/^project(libpagealloc VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
python3 "$here/apply-valkey.py" "$checkout"

# shellcheck disable=SC2086 # VALKEY_MAKE_ARGS is a list of words
make -C "$checkout" -j"$jobs" MALLOC=pagealloc PAGEALLOC_INCLUDE="$root/include" \
	PAGEALLOC_LIB="$build/libpagealloc.a" PAGEALLOC_VERSION="$version" ${VALKEY_MAKE_ARGS:-BUILD_TLS=no}
echo "build-valkey: $checkout/src/valkey-server on libpagealloc $version ($build/libpagealloc.a)"
