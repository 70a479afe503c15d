#!/usr/bin/env bash
# Build the benchmarks as fully static executables in build-static/, to carry
# to another machine (for example one with many cores, for scaling curves).
#
# Debian's libbenchmark-dev ships only a shared libbenchmark, so this builds a
# static google-benchmark once from Debian's own source package (the version
# libbenchmark-dev has, fetched with apt-get source through a temporary
# deb-src list; the system's apt configuration is not changed) into
# build-gbench/, then configures with -DPA_BENCH_STATIC=ON against it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

tools/setup-deps.sh

gb=$root/build-gbench
if [ ! -f "$gb/install/lib/cmake/benchmark/benchmarkConfig.cmake" ]; then
	apt_dir=$gb/apt
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/parts" "$gb/src"
	cat >"$apt_dir/parts/debian-src.sources" <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
	apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/parts"
		  -o "Dir::State::Lists=$apt_dir/lists")
	apt-get "${apt_opts[@]}" update
	(cd "$gb/src" && apt-get "${apt_opts[@]}" source --download-only benchmark)
	tar -xzf "$gb"/src/benchmark_*.orig.tar.gz -C "$gb/src"
	srcdir=$(find "$gb/src" -maxdepth 1 -type d -name 'benchmark-*' | head -n1)
	cmake -S "$srcdir" -B "$gb/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
		-DBENCHMARK_ENABLE_TESTING=OFF -DBENCHMARK_ENABLE_WERROR=OFF \
		-DCMAKE_INSTALL_PREFIX="$gb/install"
	cmake --build "$gb/build" -j "$(nproc)" --target install
fi

cmake -S . -B build-static -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPA_BUILD_TESTS=OFF \
	-DPA_BENCH_STATIC=ON -Dbenchmark_DIR="$gb/install/lib/cmake/benchmark"
cmake --build build-static -j "$(nproc)"
ls -l build-static/bench_* 2>/dev/null || echo "bench-static: no bench/bench_*.cc to build"
