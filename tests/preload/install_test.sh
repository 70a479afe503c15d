#!/usr/bin/env bash
# tests/preload/install_test.sh — the installed package, as a user builds
# against it: `cmake --install BUILD --prefix TMP`, then a small program
# (consumer.c: pa_malloc, pa_free, pa_malloc_stats, pa_config) built
#
#   install_test.sh BUILD_DIR pkgconfig   through pkg-config: shared (it must
#                                         load TMP's libpagealloc.so.0), static
#                                         (libpagealloc.a: no libpagealloc in
#                                         ldd) and fully static (-static)
#   install_test.sh BUILD_DIR cmake       through find_package(pagealloc):
#                                         pagealloc::pagealloc (shared) and
#                                         pagealloc::pagealloc_static
#   install_test.sh BUILD_DIR preload     TMP/bin/pagealloc run -- sort, on
#                                         TMP's libpagealloc-preload.so
#
# Every program must run and print "consumer ok"; exits 77 when a tool it
# needs (cc, pkg-config, cmake) is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

[ $# = 2 ] || {
	sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
build=$(cd "$1" && pwd)
mode=$2
need_programs cc cmake
make_tmp
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || {
	cat "$tmp/install.log" >&2
	fail "cmake --install $build --prefix $prefix failed"
}
libdir=$prefix/lib
[ -d "$libdir" ] || libdir=$(dirname "$(find "$prefix" -name libpagealloc.a | head -n 1)")

check_run() { # program what
	local out
	out=$("$1" 2>&1) || fail "$2: the program failed: $out"
	[ "$out" = "consumer ok" ] || fail "$2: printed '$out', not 'consumer ok'"
}
# (Outputs go through variables: `cmd | grep -q` fails under pipefail when
# grep stops reading early.)
uses_shared() { # program what: must load the installed libpagealloc.so
	local deps
	deps=$(ldd "$1")
	[[ $deps == *"$libdir/libpagealloc.so"* ]] ||
		fail "$2: does not load $libdir/libpagealloc.so: $deps"
}
no_shared() {
	local deps syms
	deps=$(ldd "$1" 2>&1 || true)
	[[ $deps != *libpagealloc* ]] || fail "$2: linked statically, yet loads libpagealloc: $deps"
	syms=$(nm "$1")
	[[ $syms == *" T pa_malloc"$'\n'* ]] || fail "$2: pa_malloc is not in the program"
}

case $mode in
pkgconfig)
	need_programs pkg-config
	export PKG_CONFIG_PATH=$libdir/pkgconfig
	pkg-config --exists pagealloc || fail "pkg-config does not find pagealloc in $PKG_CONFIG_PATH"
	read -ra cflags <<<"$(pkg-config --cflags pagealloc)"
	read -ra libs <<<"$(pkg-config --libs pagealloc)"
	read -ra static_libs <<<"$(pkg-config --static --libs pagealloc)"
	pc_libdir=$(pkg-config --variable=libdir pagealloc)
	[ "$pc_libdir" -ef "$libdir" ] || fail "pagealloc.pc says libdir=$pc_libdir, not $libdir"

	cc -o "$tmp/shared" "$here/consumer.c" "${cflags[@]}" "${libs[@]}" -Wl,-rpath,"$libdir"
	uses_shared "$tmp/shared" "pkg-config, shared"
	check_run "$tmp/shared" "pkg-config, shared"

	# -Wl,-Bstatic: the archive, where a shared library of the name exists too.
	cc -o "$tmp/static" "$here/consumer.c" "${cflags[@]}" \
		-Wl,-Bstatic "${static_libs[@]}" -Wl,-Bdynamic
	no_shared "$tmp/static" "pkg-config, static"
	check_run "$tmp/static" "pkg-config, static"

	cc -static -o "$tmp/full-static" "$here/consumer.c" "${cflags[@]}" "${static_libs[@]}"
	no_shared "$tmp/full-static" "pkg-config, -static"
	check_run "$tmp/full-static" "pkg-config, -static"
	echo "PASS: pkg-config: shared, static and -static programs run on the installed library"
	;;
cmake)
	for kind in shared static; do
		target=pagealloc::pagealloc
		[ $kind = static ] && target=pagealloc::pagealloc_static
		src=$tmp/cmake-$kind
		mkdir -p "$src"
		cp "$here/consumer.c" "$src/"
		cat >"$src/CMakeLists.txt" <<-EOF
			cmake_minimum_required(VERSION 3.25)
			project(consumer LANGUAGES C)
			find_package(pagealloc 0.1 REQUIRED CONFIG)
			add_executable(consumer consumer.c)
			target_link_libraries(consumer PRIVATE $target)
			if(NOT EXISTS "\${PAGEALLOC_PRELOAD_LIBRARY}")
				message(FATAL_ERROR "PAGEALLOC_PRELOAD_LIBRARY=\${PAGEALLOC_PRELOAD_LIBRARY} does not exist")
			endif()
		EOF
		if ! { cmake -S "$src" -B "$src/build" -DCMAKE_PREFIX_PATH="$prefix" &&
			cmake --build "$src/build"; } >"$tmp/cmake-$kind.log" 2>&1; then
			cat "$tmp/cmake-$kind.log" >&2
			fail "find_package(pagealloc) with $target: configure or build failed"
		fi
		if [ $kind = shared ]; then
			uses_shared "$src/build/consumer" "find_package, $target"
		else
			no_shared "$src/build/consumer" "find_package, $target"
		fi
		check_run "$src/build/consumer" "find_package, $target"
	done
	echo "PASS: find_package(pagealloc): pagealloc::pagealloc and pagealloc::pagealloc_static"
	;;
preload)
	need_programs sort
	[ -x "$prefix/bin/pagealloc" ] || fail "no $prefix/bin/pagealloc"
	[ -f "$libdir/libpagealloc-preload.so" ] || fail "no $libdir/libpagealloc-preload.so"
	version=$("$prefix/bin/pagealloc" version)
	[[ $version == *"$libdir/libpagealloc-preload.so"* ]] ||
		fail "the installed pagealloc names another library: $version"
	seq 1 5000 | sort -R --random-source=/dev/zero >"$tmp/in"
	sort -n "$tmp/in" >"$tmp/ref"
	mkdir "$tmp/stats"
	"$prefix/bin/pagealloc" run --stats-file "$tmp/stats/%p" -- sort -n "$tmp/in" >"$tmp/out" 2>/dev/null
	expect_same "$tmp/ref" "$tmp/out" "installed pagealloc run -- sort"
	stats_check "$tmp/stats" sort
	echo "PASS: the installed pagealloc runs sort on the installed preload library"
	;;
*) fail "mode $mode: pkgconfig, cmake or preload" ;;
esac
