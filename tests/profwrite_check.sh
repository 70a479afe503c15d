#!/usr/bin/env bash
# tests/profwrite_check.sh — src/profwrite.c's output read by the real
# readers: gzip(1) and Python for the compression, `go tool pprof` for the
# profile.
#
#   profwrite_check.sh gzip  TEST_PROFWRITE   (ctest profwrite_gzip)
#   profwrite_check.sh pprof TEST_PROFWRITE   (ctest profwrite_pprof)
#
# gzip: profw_gzip (test_profwrite --gzip) on edge cases — empty, one byte,
# runs longer than the longest match, 100 KiB of zeros, 1 MiB of random
# bytes (output larger than input: the 9-bit literal bound), random blocks
# repeated at distance 20000 (inside the 32 KiB window) and 40000 (outside
# it), the repository's C sources — each decompressed by gzip -dc and by
# Python's gzip module and compared with the input.
#
# pprof: test_profwrite --write FILE writes the three sites of the test's
# accept_sites; `go tool pprof -raw` must show exactly the period, the four
# sample types and each site's four values, mapping 1 the test binary with
# the build ID readelf finds in it, and libc's mapping with libc's; `go tool
# pprof -traces` must symbolize site_alpha and site_beta from the binary on
# disk, given on the command line and found through the mapping's file name.
# Then 1000 sites (--write-many): 1000 samples, the unmapped frame without a
# mapping, and the compressed and uncompressed sizes printed.
#
# `go` missing is a failure, not a skip: tools/setup-deps.sh installs
# golang-go, and without it nothing here has read a profile.
set -euo pipefail

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

[ $# = 2 ] || fail "usage: profwrite_check.sh gzip|pprof TEST_PROFWRITE"
mode=$1
bin=$(realpath "$2")
[ -x "$bin" ] || fail "no test program at $2"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/profwrite_check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Fail with a diff unless files $1 (got) and $2 (want) are equal.
expect_same() {
	diff -u "$2" "$1" >&2 || fail "$3: output differs from the expected (diff above: - want, + got)"
}

check_gzip() {
	command -v gzip >/dev/null || fail "gzip is not installed"
	command -v python3 >/dev/null || fail "python3 is not installed"
	python3 - "$tmp" <<-'EOF'
		import os, random, sys
		d = sys.argv[1]
		rnd = random.Random(1)
		def put(name, data):
		    with open(os.path.join(d, name + ".in"), "wb") as f:
		        f.write(data)
		put("empty", b"")
		put("one_byte", b"x")
		put("run_1000", b"a" * 1000)
		put("zeros_100k", bytes(100 << 10))
		put("random_1m", rnd.randbytes(1 << 20))
		block = rnd.randbytes(20000)
		put("repeat_at_20000", block + block + block)
		block = rnd.randbytes(40000)
		put("repeat_at_40000", block + block)
	EOF
	cat "$(dirname "$0")"/../src/*.c >"$tmp/sources.in"
	for f in "$tmp"/*.in; do
		name=$(basename "$f" .in)
		"$bin" --gzip <"$f" >"$tmp/$name.gz" || fail "$name: test_profwrite --gzip failed"
		gzip -t "$tmp/$name.gz" || fail "$name: gzip -t rejects the stream"
		gzip -dc "$tmp/$name.gz" | cmp -s - "$f" || fail "$name: gzip -dc gives other bytes"
		python3 -c 'import gzip, sys
sys.exit(gzip.open(sys.argv[1]).read() != open(sys.argv[2], "rb").read())' \
			"$tmp/$name.gz" "$f" || fail "$name: Python's gzip gives other bytes"
		echo "$name: $(stat -c %s "$f") -> $(stat -c %s "$tmp/$name.gz") bytes"
	done
}

# The GNU build ID of ELF file $1, as readelf prints it.
build_id() {
	readelf -n "$1" | awk '/Build ID:/ { print $3; exit }'
}

check_pprof() {
	command -v go >/dev/null ||
		fail "go is not on PATH: install golang-go (tools/setup-deps.sh); go tool pprof reads the profiles"
	command -v readelf >/dev/null || fail "readelf (binutils) is not installed"
	export PPROF_TMPDIR=$tmp HOME=$tmp
	local prof=$tmp/heap.pb.gz
	(cd "$tmp" && "$bin" --write "$prof") || fail "test_profwrite --write failed"
	[ -f "$prof" ] || fail "no profile at $prof"
	! compgen -G "$tmp/*.tmp.*" >/dev/null || fail "a temporary file remains: $(ls "$tmp")"
	gzip -t "$prof" || fail "gzip -t rejects the profile"

	go tool pprof -raw "$prof" >"$tmp/raw" 2>"$tmp/raw.err" ||
		fail "go tool pprof -raw: $(cat "$tmp/raw.err")"
	sed -n '1,2p; /^Samples:/,/^Locations/p' "$tmp/raw" | sed '$d' >"$tmp/raw.head"
	cat >"$tmp/raw.want" <<-'EOF'
		PeriodType: space bytes
		Period: 524288
		Samples:
		alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]
		          3    3145728          1    1048576: 1 2 
		          5    2621440          2     524288: 2 3 
		          7    7340032          0          0: 3 
	EOF
	expect_same "$tmp/raw.head" "$tmp/raw.want" "go tool pprof -raw: types, period, samples"
	grep -q '^Duration: 1s$' "$tmp/raw" || fail "duration is not 1s: $(grep Duration "$tmp/raw")"

	local libc
	libc=$(awk '$3 ~ /\/libc\.so/ { print $3; exit }' "$tmp/raw")
	[ -n "$libc" ] || fail "no libc mapping in go tool pprof -raw: $(sed -n '/^Mappings/,$p' "$tmp/raw")"
	sed -n '/^Mappings/,$p' "$tmp/raw" | awk 'NR > 1 { print $1, $3, $4 }' >"$tmp/maps.got"
	printf '1: %s %s\n2: %s %s\n' "$bin" "$(build_id "$bin")" "$libc" "$(build_id "$libc")" \
		>"$tmp/maps.want"
	expect_same "$tmp/maps.got" "$tmp/maps.want" "go tool pprof -raw: mappings (file, build ID)"
	grep -Eq '^ +1: 0x[0-9a-f]+ M=1 site_alpha ' "$tmp/raw" || fail "location 1 is not site_alpha"
	grep -Eq '^ +2: 0x[0-9a-f]+ M=1 site_beta ' "$tmp/raw" || fail "location 2 is not site_beta"
	grep -Eq '^ +3: 0x[0-9a-f]+ M=2 ' "$tmp/raw" || fail "location 3 is not in mapping 2 (libc)"

	# -traces with the binary named, then found through the mapping.
	local args index
	for args in "$bin $prof" "$prof"; do
		for index in inuse_space inuse_objects alloc_space alloc_objects; do
			# shellcheck disable=SC2086 # two words on purpose
			go tool pprof -traces -sample_index=$index $args >"$tmp/traces" 2>"$tmp/traces.err" ||
				fail "go tool pprof -traces $args: $(cat "$tmp/traces.err")"
			grep -q "^Type: $index\$" "$tmp/traces" || fail "-traces $args: not Type: $index"
			sed -n '/^-----------+/,$p' "$tmp/traces" |
				grep -v '^-----------+' >"$tmp/traces.got"
			case $index in
			inuse_space) set -- 1MB 512kB 0 ;;
			inuse_objects) set -- 1 2 0 ;;
			alloc_space) set -- 3MB 2.50MB 7MB ;;
			alloc_objects) set -- 3 5 7 ;;
			esac
			printf '%10s   site_alpha\n             site_beta\n%10s   site_beta\n             [libc.so.6]\n%10s   [libc.so.6]\n' \
				"$@" >"$tmp/traces.want"
			expect_same "$tmp/traces.got" "$tmp/traces.want" \
				"go tool pprof -traces -sample_index=$index $args"
		done
	done

	# A thousand sites of eight frames.
	prof=$tmp/many.pb.gz
	"$bin" --write-many "$prof" 1000 || fail "test_profwrite --write-many failed"
	gzip -t "$prof" || fail "gzip -t rejects the 1000-site profile"
	go tool pprof -raw "$prof" >"$tmp/raw" 2>"$tmp/raw.err" ||
		fail "go tool pprof -raw (1000 sites): $(cat "$tmp/raw.err")"
	local samples
	samples=$(sed -n '/^Samples:/,/^Locations/p' "$tmp/raw" | grep -c ':.*[0-9] $' || true)
	[ "$samples" = 1000 ] || fail "1000 sites written, $samples samples read"
	grep -Eq '^ +[0-9]+: 0x1000 $' "$tmp/raw" ||
		fail "the unmapped frame 0x1000 is not a location without a mapping"
	echo "1000 sites: $(gzip -dc "$prof" | wc -c) bytes of profile.proto," \
		"$(stat -c %s "$prof") gzipped (gzip -9: $(gzip -dc "$prof" | gzip -9 | wc -c))"
}

case $mode in
gzip) check_gzip ;;
pprof) check_pprof ;;
*) fail "unknown mode $mode" ;;
esac
echo "PASS: profwrite_$mode"
