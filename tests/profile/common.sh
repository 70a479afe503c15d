# shellcheck shell=bash
# tests/profile/common.sh — sourced by the heap-profile test scripts; it
# sources tests/preload/common.sh (skip, fail, need_programs, make_tmp).
#
# need_go             fail unless `go tool pprof` runs: the tests install
#                     golang-go (tools/setup-deps.sh), so a missing go is a
#                     broken set-up, not a reason to skip
# pprof_top INDEX BIN FILE [ARG...]
#                     "FUNCTION VALUE" a line, one per function of
#                     `go tool pprof -top` (its flat column, in bytes or
#                     objects, exact) for sample index INDEX (inuse_space,
#                     inuse_objects, alloc_space, alloc_objects)
# pprof_total INDEX BIN FILE [ARG...]
#                     the profile's total for INDEX, from the same listing
# pprof_sums FILE     "alloc_objects A alloc_space B inuse_objects C
#                     inuse_space D": the profile's totals, from
#                     `go tool pprof -raw` (no symbols needed)
# flat_of FUNCTION    the value of FUNCTION in pprof_top's lines on stdin
#                     (0 when absent)
# within PCT EST TRUTH
#                     true when EST is within PCT percent of TRUTH
# prof_env CONF       the words for `env` that run a program on the preload
#                     library $PA_PRELOAD with PAGEALLOC_CONF=CONF
# profile_start LAST go|nogo "$@"
#                     the scripts' common start: exactly the arguments
#                     PRELOAD_SO PROGRAM (else the usage, lines 2 to LAST of
#                     the script's opening comment, and exit 2), sets
#                     PA_PRELOAD and prog, checks the library is there and,
#                     with go, that go tool pprof runs; then make_tmp
profile_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../preload/common.sh
. "$profile_here/../preload/common.sh"

need_go() {
	command -v go >/dev/null 2>&1 ||
		fail "go is not installed: tools/setup-deps.sh installs golang-go (go tool pprof reads the profiles back)"
	go tool pprof -h >/dev/null 2>&1 || fail "'go tool pprof' does not run"
}

# -unit=B prints every value whole (objects get a "B" too, which goes);
# -nodefraction=0 and a large -nodecount leave no function out.
pprof_listing() { # index bin file [args]
	local index=$1 bin=$2 file=$3
	shift 3
	go tool pprof -top -unit=B -nodefraction=0 -nodecount=100000 -sample_index="$index" \
		"$@" "$bin" "$file" 2>&1 || fail "go tool pprof -top -sample_index=$index $* $bin $file failed"
}

pprof_top() { # index bin file [args]
	pprof_listing "$@" | awk '
		seen && NF >= 6 {
			name = $6
			for (i = 7; i <= NF; i++) name = name " " $i
			v = $1
			sub(/B$/, "", v)
			print name, v
		}
		$1 == "flat" && $2 == "flat%" { seen = 1 }'
}

pprof_total() { # index bin file [args]
	local t
	t=$(pprof_listing "$@" | sed -n 's/^Showing nodes accounting for .* of \(-\{0,1\}[0-9]*\)B\{0,1\} total.*/\1/p')
	[ -n "$t" ] || t=0
	echo "$t"
}

pprof_sums() { # file
	go tool pprof -raw -symbolize=none "$1" 2>&1 | awk '
		/^Samples:/ { getline; n = split($0, type, " "); on = 1; next }
		/^Locations/ { on = 0 }
		on && /:/ {
			sub(/:.*/, "")
			for (i = 1; i <= n; i++) sum[i] += $i
		}
		END {
			if (n == 0) exit 1
			for (i = 1; i <= n; i++) {
				t = type[i]
				sub(/\/.*/, "", t)
				printf "%s%s %d", (i > 1 ? " " : ""), t, sum[i]
			}
			print ""
		}' || fail "go tool pprof -raw $1: no samples table"
}

flat_of() { # function
	awk -v f="$1" '$1 == f { v = $2 } END { print v + 0 }'
}

within() { # pct estimate truth
	local d=$(($2 - $3))
	[ $d -ge 0 ] || d=$((-d))
	[ $((d * 100)) -le $(($1 * $3)) ]
}

prof_env() { # conf
	printf '%s\n' "LD_PRELOAD=$PA_PRELOAD" "PAGEALLOC_CONF=$1"
}

profile_start() { # last go|nogo args...
	local last=$1 go=$2
	shift 2
	[ $# = 2 ] || {
		sed -n "2,${last}p" "$0" | sed 's/^# \{0,1\}//' >&2
		exit 2
	}
	PA_PRELOAD=$1 prog=$2
	[ -f "$PA_PRELOAD" ] || fail "no preload library at $PA_PRELOAD"
	[ "$go" = nogo ] || need_go
	make_tmp
}
