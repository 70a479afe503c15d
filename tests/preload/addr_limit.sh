#!/usr/bin/env bash
# tests/preload/addr_limit.sh PRELOAD_SO FILL — under an address-space limit
# (ulimit -v), a program on libpagealloc gets at least 95% of the heap that
# glibc's malloc gives it, and a small malloc after the heap is full
# succeeds wherever glibc's does. FILL is addr_fill.c: it mallocs blocks of
# one size until malloc fails (which must set ENOMEM), then one of 64 bytes.
#
# The sweep: limits of 64 MiB, 256 MiB and 1 GiB with blocks of 64 B, 4 KiB
# and 1 MiB; 4 GiB and 64 GiB with 1 MiB blocks (small blocks there would
# make glibc write 4 to 64 GiB: each has a header).
#
# At 64 MiB what we reserve beyond glibc weighs most: the page map's leaf
# (1.125 MiB) and home middle array (32 KiB, pagemap.h), the library's code
# and tables. There, over 20 runs of each (2026-11-25, RelWithDebInfo and
# Debug alike, docs/benchmarks.md §8): 58 blocks of 1 MiB (95.0%) in every
# run, 95.4-96.0% with 4 KiB blocks (heap-profile sampling on: a sampled
# block has a page of its own), 117-119% with 64-byte ones. The bar is 95%
# there as elsewhere, with little to spare: the 58th block, 1.6% of the
# limit, is lost with 768 KiB less room, and 4 KiB blocks go under 95%
# with 640 KiB less (ulimit -v 64768 and 64896 give 57 blocks and 94.8%).
# Until the page map's root became 256 bytes instead of 1 MiB of bss (a
# root entry per GiB) the figures were 57 blocks (93.4%) and 94.2%, and the
# bars 93% and 94%. A run under load sometimes gets less (a block fewer
# twice in a day of loaded runs, 93.6% with 4 KiB blocks once in 20: which
# of the heap's last growth and the scavenger thread's own mappings comes
# first), so at 64 MiB ours is the best of five runs. On 2026-11-28 (main
# aab84a8, the page map's word and the guard bytes' change in): 4 KiB
# blocks gave 94.97-95.22% in 30 runs of the plain build, 94.8-95.3% in 12
# of the Debug build, and one run in 42 92.0%; the heap profile's sampled
# blocks, each on a page of its own, cost 0.75% there (95.8% with
# prof=off, in every run). Best of three failed twice in ~28 runs of the
# test while other work ran, never in 20 alone.
# On 2026-11-28 (AMD EPYC VM) the Debug build's CI run gave 94.5% in all
# five tries: a thread moved between CPUs leaves runs of pages in the other
# CPU's page cache, and the heap's growth failed with them stranded. A failed
# allocation now flushes the thread's cache and the per-CPU page caches and
# retries once, as it did under memory_limit_hard only: 12 runs under two
# busy loops gave 60.65-61.31 MB (4 under 95%) before, 61.17-61.34 after.
#
# The small malloc after: glibc still has the last few KiB of its top chunk
# for a 64-byte block when larger ones no longer fit; libpagealloc keeps 4
# pages for classes of at most 256 bytes (central.c, the reserve) and maps
# its next span-record block ahead (meta.c), and a range joins the heap
# only with the page-map leaves that cover it (pagemap_prepare), which this
# checks. Without the last, at 1 GiB with 4 KiB blocks, the heap's final
# growth into a new GiB sometimes got no leaf and the small malloc failed
# (once in ~300 runs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

[ $# = 2 ] || {
	sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
PA_PRELOAD=$1 fill=$2
[ -f "$PA_PRELOAD" ] || fail "no preload library at $PA_PRELOAD"
ulimit -c 0

run() { # limit_kib size [preload]
	if [ $# = 3 ]; then
		(ulimit -v "$1" && LD_PRELOAD=$3 "$fill" "$2")
	else
		(ulimit -v "$1" && "$fill" "$2")
	fi
}

bad=0
check() { # limit_kib size percent [runs: ours is the best of them]
	local g o try ob oe os
	g=$(run "$1" "$2") || fail "glibc: $fill $2 under ulimit -v $1 failed"
	read -r gb _ gs <<<"$g"
	for try in $(seq "${4:-1}"); do
		o=$(run "$1" "$2" "$PA_PRELOAD") || fail "preload: $fill $2 under ulimit -v $1 failed"
		read -r ob oe os <<<"$o"
		[ $((ob * 100)) -lt $((gb * $3)) ] || break
	done
	local pct=$((ob * 1000 / gb))
	local line
	line=$(printf 'ulimit -v %9d KiB, %7d-byte blocks: glibc %12d bytes, ours %12d (%d.%d%%)' \
		"$1" "$2" "$gb" "$ob" $((pct / 10)) $((pct % 10)))
	if [ $((ob * 100)) -lt $((gb * $3)) ]; then
		echo "FAIL: $line: under $3%" >&2
		bad=1
	elif [ "$oe" != 1 ]; then
		echo "FAIL: $line: the failing malloc did not set ENOMEM" >&2
		bad=1
	elif [ "$gs" = 1 ] && [ "$os" != 1 ]; then
		echo "FAIL: $line: malloc(64) after it fails where glibc's succeeds" >&2
		bad=1
	else
		echo "$line"
	fi
}

for size in 64 4096 1048576; do
	check 65536 $size 95 5
done
for limit in 262144 1048576; do
	for size in 64 4096 1048576; do
		check $limit $size 95
	done
done
for limit in 4194304 67108864; do
	check $limit 1048576 95
done
[ $bad = 0 ] || fail "a program under an address-space limit got less than it should"
echo "PASS: every limit gives at least 95% of glibc's heap"
