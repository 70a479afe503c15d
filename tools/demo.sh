#!/usr/bin/env bash
# Build libpagealloc (optimised, with debug info) into build/, then run a real
# Debian program on it with build/pagealloc: Perl (perl-base, in every Debian
# system, and a program that takes every string, hash and array from malloc)
# builds a 300 000-key hash and a 500 000-string list, drops them but every
# 64th string, and waits two seconds, long enough for the scavenger to return
# the freed memory. Its output comes first, then the story of its heap.
# `tools/demo.sh pages` runs the page-heap demo (build/pa-demo) instead.
# Installs missing Debian packages first (needs root for that).
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)" --target pagealloc_preload pa-demo

if [ "${1:-}" = pages ]; then
	exec build/pa-demo
fi
if [ ! -f build/libpagealloc-preload.so ] || [ ! -x build/pagealloc ]; then
	echo "demo: build/libpagealloc-preload.so or build/pagealloc is missing after the build;" \
		"the preload library is not part of this tree's CMakeLists.txt yet" >&2
	exit 1
fi

echo "\$ build/pagealloc run -- perl -e '<build a big hash and list, keep 1 string in 64>'"
build/pagealloc run -- perl -e '
	my (%h, @l);
	$h{"key$_"} = "value-$_-" x 8 for 1 .. 300_000;
	push @l, "$_" x 40 for 1 .. 500_000;
	my @keep = @l[grep { $_ % 64 == 0 } 0 .. $#l];
	undef %h;
	undef @l;
	my $sum = 0;
	$sum = ($sum * 31 + length) % 1_000_000_007 for @keep;
	print "perl: kept ", scalar @keep, " of 500000 strings, checksum $sum\n";
	sleep 2;
'
