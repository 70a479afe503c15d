#!/usr/bin/env bash
# pa_malloc against the Debian peers, side by side (docs: /work/shared/BENCHMARKING.md):
#
#   tools/bench-malloc.sh [--rounds R] [--quick] [--no-callgrind] [--out DIR]
#
# Builds build/ (RelWithDebInfo: -O2 -g), then R rounds (default 5; --quick: 1)
# in which every allocator runs bench/malloc_pairs.c once with --reps 1, in
# turn: pagealloc (build/malloc-pairs), glibc (build/malloc-pairs-libc), and
# jemalloc, tcmalloc, mimalloc (the same program with the peer's .so in
# LD_PRELOAD). A peer whose .so is missing is installed when running as root
# (libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0), else skipped with a note.
# Per case and allocator the figure is the median over the rounds; the last
# column is the median over rounds of pagealloc / best peer taken inside each
# round (best peer: the lowest median).
#
# Then instructions per malloc+free pair under callgrind, which do not depend
# on the machine's load: N pairs in malloc_pairs.c's pair_loop, counted with
# --toggle-collect=pair_loop (callgrind does not replace malloc, so a preloaded
# peer is what runs). Valgrind does not implement rseq: libpagealloc's page
# caches run in their locked mode there.
#
# Last, build/seed000-frag: seed 000's fragmentation examples on pa_malloc.
#
# Into DIR (default bench-results/, which .gitignore covers):
#   malloc.md             machine, versions, both tables (also printed)
#   malloc-pairs-raw.txt  every run's lines, prefixed with round= and alloc=
#   malloc-callgrind.txt  callgrind totals per allocator and size
#   seed000-frag.txt      seed000-frag's output
#   malloc-build.log      the build's output
# Takes about 3 minutes with the defaults on 2 cores (--quick: under 1).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=5
out=bench-results
do_callgrind=1
cg_pairs=100000
cg_sizes=(16 64 256 1024 4096)

usage() {
	sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--rounds)
		[ $# -ge 2 ] || usage
		rounds=$2
		shift
		;;
	--quick) rounds=1 ;;
	--no-callgrind) do_callgrind=0 ;;
	--out)
		[ $# -ge 2 ] || usage
		out=$2
		shift
		;;
	*) usage ;;
	esac
	shift
done
case $rounds in '' | *[!0-9]* | 0) usage ;; esac

mkdir -p "$out"
libdir=/usr/lib/x86_64-linux-gnu
peers=(jemalloc tcmalloc mimalloc)
declare -A peer_so=([jemalloc]=$libdir/libjemalloc.so.2
	[tcmalloc]=$libdir/libtcmalloc_minimal.so.4 [mimalloc]=$libdir/libmimalloc.so.2)
declare -A peer_pkg=([jemalloc]=libjemalloc2 [tcmalloc]=libtcmalloc-minimal4
	[mimalloc]=libmimalloc2.0)

installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

# ---- peers -------------------------------------------------------------------
missing=()
for p in "${peers[@]}"; do
	installed "${peer_pkg[$p]}" || missing+=("${peer_pkg[$p]}")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -eq 0 ]; then
		echo "bench-malloc: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
			{ apt-get update >/dev/null && apt-get install -y --no-install-recommends \
				"${missing[@]}" >/dev/null; } ||
			echo "bench-malloc: could not install ${missing[*]}" >&2
	else
		echo "bench-malloc: not root, not installing ${missing[*]}" >&2
	fi
fi

# ---- build -------------------------------------------------------------------
# A library that does not build yet (work in progress in src/) still leaves
# the glibc program and the peers to measure: build what builds, and use a
# program only if its target is up to date now (never a stale binary).
{
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
		cmake --build build -j "$(nproc)"
} >"$out/malloc-build.log" 2>&1 ||
	echo "bench-malloc: the full build failed (see $out/malloc-build.log);" \
		"building the benchmark targets one by one" >&2
declare -A ok=()
for t in malloc-pairs-libc malloc-pairs seed000-frag; do
	if cmake --build build -j "$(nproc)" --target "$t" >>"$out/malloc-build.log" 2>&1; then
		ok[$t]=1
	else
		echo "bench-malloc: $t did not build" >&2
	fi
done
if [ -z "${ok[malloc-pairs-libc]:-}" ]; then
	echo "bench-malloc: build/malloc-pairs-libc did not build; see $out/malloc-build.log" >&2
	exit 1
fi

allocs=()
notes=()
if [ -n "${ok[malloc-pairs]:-}" ]; then
	allocs+=(pagealloc)
else
	notes+=("pagealloc: build/malloc-pairs did not build (src/ not ready?), not measured")
fi
allocs+=(glibc)
for p in "${peers[@]}"; do
	if [ -e "${peer_so[$p]}" ]; then
		allocs+=("$p")
	else
		notes+=("$p: ${peer_so[$p]} missing (${peer_pkg[$p]}), not measured")
	fi
done

# run_alloc NAME ARGS...: the benchmark program on allocator NAME.
run_alloc() {
	local name=$1
	shift
	case $name in
	pagealloc) build/malloc-pairs "$@" ;;
	glibc) build/malloc-pairs-libc "$@" ;;
	*) LD_PRELOAD=${peer_so[$name]} build/malloc-pairs-libc "$@" ;;
	esac
}

version_of() {
	case $1 in
	pagealloc) echo "$(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD -- src include 2>/dev/null || echo ' + uncommitted changes')" ;;
	glibc) dpkg-query -W -f='libc6 ${Version}' libc6 ;;
	*) dpkg-query -W -f="${peer_pkg[$1]} \${Version}" "${peer_pkg[$1]}" 2>/dev/null || echo unknown ;;
	esac
}

# ---- timed rounds ------------------------------------------------------------
# Other work on the machine moves every figure: its load goes into the report.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
raw=$out/malloc-pairs-raw.txt
: >"$raw"
for ((r = 1; r <= rounds; r++)); do
	for a in "${allocs[@]}"; do
		echo "bench-malloc: round $r/$rounds: $a" >&2
		run_alloc "$a" --reps 1 | sed "s/^/round=$r alloc=$a /" >>"$raw"
	done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# The table: one row per case, one column per allocator.
pairs_table() {
	awk -v allocs="${allocs[*]}" '
	function median(s, n, i, j, t, v) {
		n = split(s, v, " ")
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
				t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
			}
		return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
	}
	function human(b) {
		if (b >= 1048576) return b / 1048576 " MiB"
		if (b >= 1024) return b / 1024 " KiB"
		return b " B"
	}
	{
		for (i = 1; i <= NF; i++) {
			split($i, kv, "=")
			f[kv[1]] = kv[2]
		}
		key = f["case"] " " f["size"] " " f["threads"]
		if (!(key in seen)) { seen[key] = 1; order[++nkeys] = key }
		vals[key, f["alloc"]] = vals[key, f["alloc"]] " " f["ns_per_op"]
		byround[key, f["alloc"], f["round"]] = f["ns_per_op"]
		if (f["round"] + 0 > nrounds) nrounds = f["round"] + 0
	}
	END {
		na = split(allocs, al, " ")
		printf "| case |"
		for (a = 1; a <= na; a++) printf " %s |", al[a]
		printf " best peer | pagealloc/best |\n|---|"
		for (a = 1; a <= na + 2; a++) printf "---:|"
		printf "\n"
		for (k = 1; k <= nkeys; k++) {
			key = order[k]
			split(key, p, " ")
			if (p[1] == "xthread") label = "xthread 16..1024 B, malloc in 1, free in the other"
			else if (p[3] > 1) label = p[1] " " human(p[2]) ", per thread of " p[3]
			else label = p[1] " " human(p[2])
			printf "| %s |", label
			best = ""; bestv = 0
			for (a = 1; a <= na; a++) {
				m = ((key, al[a]) in vals) ? median(vals[key, al[a]]) : ""
				printf " %s |", m == "" ? "-" : sprintf("%.1f", m)
				if (al[a] != "pagealloc" && m != "" && (best == "" || m + 0 < bestv)) {
					best = al[a]; bestv = m + 0
				}
			}
			ratios = ""
			for (r = 1; r <= nrounds; r++)
				if (((key, "pagealloc", r) in byround) && ((key, best, r) in byround))
					ratios = ratios " " byround[key, "pagealloc", r] / byround[key, best, r]
			printf " %s |", best == "" ? "-" : best
			printf " %s |\n", ratios == "" ? "-" : sprintf("%.2f", median(ratios))
		}
	}' "$raw"
}

# ---- callgrind -----------------------------------------------------------------
cg_raw=$out/malloc-callgrind.txt
: >"$cg_raw"
callgrind_table() {
	local tmp a s total
	tmp=$(mktemp -d)
	printf '| size |'
	for a in "${allocs[@]}"; do printf ' %s |' "$a"; done
	printf '\n|---:|'
	for a in "${allocs[@]}"; do printf -- '---:|'; done
	printf '\n'
	for s in "${cg_sizes[@]}"; do
		printf '| %s B |' "$s"
		for a in "${allocs[@]}"; do
			echo "bench-malloc: callgrind $a $s B" >&2
			rm -f "$tmp/cg.out"
			if run_alloc_valgrind "$a" "$s" "$tmp/cg.out" >"$tmp/log" 2>&1 && [ -s "$tmp/cg.out" ]; then
				# "totals:" where present (the collected events), else "summary:".
				total=$(awk '/^totals:/ { t = $2 } /^summary:/ { s = $2 }
					END { print (t != "" ? t : s) }' "$tmp/cg.out")
				echo "alloc=$a size=$s pairs=$cg_pairs Ir=$total" >>"$cg_raw"
				awk -v t="$total" -v n="$cg_pairs" 'BEGIN { printf " %.1f |", t / n }'
			else
				echo "alloc=$a size=$s failed: $(tail -1 "$tmp/log")" >>"$cg_raw"
				printf ' failed |'
			fi
		done
		printf '\n'
	done
	rm -rf "$tmp"
}

run_alloc_valgrind() {
	local a=$1 size=$2 file=$3
	local vg=(valgrind --tool=callgrind --callgrind-out-file="$file" --toggle-collect=pair_loop)
	case $a in
	pagealloc) "${vg[@]}" build/malloc-pairs --callgrind-pair "$size" "$cg_pairs" ;;
	glibc) "${vg[@]}" build/malloc-pairs-libc --callgrind-pair "$size" "$cg_pairs" ;;
	*) LD_PRELOAD=${peer_so[$a]} "${vg[@]}" build/malloc-pairs-libc --callgrind-pair "$size" "$cg_pairs" ;;
	esac
}

# ---- report --------------------------------------------------------------------
{
	echo "# malloc: pagealloc and its peers"
	echo
	echo "Command: tools/bench-malloc.sh --rounds $rounds$([ $do_callgrind = 1 ] || echo ' --no-callgrind')"
	echo
	echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "- machine: nproc $(nproc), $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2; exit }'), kernel $(uname -r)"
	echo "- compiler: $(cc --version | head -1)"
	echo "- load average (1, 5, 15 min) before the timed rounds: $load_before; after: $load_after"
	for a in "${allocs[@]}"; do echo "- $a: $(version_of "$a")"; done
	for n in "${notes[@]}"; do echo "- note: $n"; done
	echo
	echo "## ns per operation (median of $rounds round(s), each one run with --reps 1)"
	echo
	echo "pair: malloc+free of one size, first byte written; per-thread figures for 2 threads;"
	echo "xthread: ns per object. pagealloc/best: median over rounds of the in-round ratio."
	echo
	pairs_table
	if [ $do_callgrind = 1 ]; then
		echo
		echo "## instructions per malloc+free pair (callgrind, $cg_pairs pairs in pair_loop)"
		echo
		callgrind_table
	fi
} >"$out/malloc.md"
cat "$out/malloc.md"

if [ -n "${ok[seed000-frag]:-}" ]; then
	echo "bench-malloc: seed000-frag -> $out/seed000-frag.txt" >&2
	build/seed000-frag >"$out/seed000-frag.txt" 2>&1 || echo "bench-malloc: seed000-frag failed" >&2
	cat "$out/seed000-frag.txt"
else
	echo "bench-malloc: build/seed000-frag not built; seed 000 not run" >&2
fi
