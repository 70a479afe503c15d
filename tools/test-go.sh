#!/usr/bin/env bash
# The Go package (go/), offline, each way a binary can get it:
#   go vet, with and without cgo;
#   go test -race: the vendored build (the library compiled by cgo);
#   CGO_ENABLED=0 go test: the same API tests on Go memory;
#   a program in a module of its own (a replace directive to this tree)
#     builds and runs with nothing installed, linked dynamically and
#     -static (which LD_PRELOAD never reaches);
#   -tags pagealloc_system: an installed libpagealloc through pkg-config,
#     installed from BUILD (default build/, built by the caller) into
#     BUILD/go-prefix. Go's build cache keys a package on CGO_* but not on
#     what pkg-config says, so the prefix goes into CGO_LDFLAGS too: a
#     package built against another prefix is not reused.
# Nothing is downloaded: the module needs only the standard library.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

export GOFLAGS=-mod=mod GOPROXY=off
unset GOTOOLCHAIN
# Go keeps its build cache under $HOME; a CI job without one gets a cache here.
if [ -z "${GOCACHE:-}" ] && [ -z "${HOME:-}" ] && [ -z "${XDG_CACHE_HOME:-}" ]; then
	export GOCACHE=$PWD/$build/go-cache
fi

echo "go vet (cgo: the package and bench/go; then CGO_ENABLED=0)"
go vet ./...
CGO_ENABLED=0 go vet ./go
echo "go test -race (vendored)"
go test -count=1 -race ./go
echo "CGO_ENABLED=0 go test (Go memory)"
CGO_ENABLED=0 go test -count=1 ./go
echo "a program of its own module: go build, dynamic and -static"
user=$(mktemp -d)
trap 'rm -rf "$user"' EXIT
cat >"$user/go.mod" <<EOF
module example.com/user

go 1.19

require github.com/libpagealloc/pagealloc v0.0.0

replace github.com/libpagealloc/pagealloc => $PWD
EOF
cat >"$user/main.go" <<'EOF'
package main

import (
	"fmt"

	pagealloc "github.com/libpagealloc/pagealloc/go"
)

func main() {
	b := pagealloc.Calloc(100, "user")
	fmt.Println(pagealloc.CurrentBackend(), len(b), pagealloc.NumAllocBytes())
	pagealloc.Free(b)
	fmt.Print(pagealloc.Leaks())
}
EOF
want=$'vendored libpagealloc 100 100\npagealloc: no Calloc blocks live'
(cd "$user" && go build -o user . &&
	go build -o user-static -ldflags '-linkmode external -extldflags -static' .)
for exe in user user-static; do
	got=$("$user/$exe")
	if [ "$got" != "$want" ]; then
		printf 'test-go: %s printed:\n%s\n' "$exe" "$got" >&2
		exit 1
	fi
done

echo "pagealloc run --heap-profile on a cgo program that leaks in C (go/internal/cgoleak)"
# Every block sampled (--prof-sample 1: weights of exactly 1). The report
# names the C function and the Go call site, file and line, of the 64
# leaked copies; the Calloc and Free pairs balance and are not there. With
# -leak-calloc one Calloc block is kept too: under the preload library
# Calloc's blocks are its (one heap, one report), named at the Go caller.
leak='4.0 MiB in 64 objects from copyRecord (main.go:20) <- main.leakRecords (main.go:47) <- main.main (main.go:58)'
kept='^97\.7 KiB in 1 object from github\.com/libpagealloc/pagealloc/go\.Calloc (pagealloc\.go:[0-9]*) <- main\.keepIndex (main\.go:73) <- main\.main (main\.go:61)$'
check_leak_report() { # EXE
	local report
	report=$("$build/pagealloc" run --quiet --prof-sample 1 --heap-profile "$user/hp" -- "$1" 2>&1 >"$user/cgoleak.out")
	if [ "$(printf '%s\n' "$report" | sed -n 2p)" != "$leak" ] ||
		[ "$(cat "$user/cgoleak.out")" != 'pagealloc: no Calloc blocks live' ] ||
		printf '%s\n' "$report" | grep -q 'Calloc \|gopa_\|sysCalloc'; then
		printf 'test-go: the leak report of %s: want line 2\n%s\nand no Calloc site; got:\n%s\n' "$1" "$leak" "$report" >&2
		exit 1
	fi
	report=$("$build/pagealloc" run --quiet --prof-sample 1 --heap-profile "$user/hp" -- "$1" -leak-calloc 2>&1 >/dev/null)
	if [ "$(printf '%s\n' "$report" | sed -n 2p)" != "$leak" ] || ! printf '%s\n' "$report" | sed -n 3p | grep -q "$kept"; then
		printf 'test-go: the leak report of %s -leak-calloc: want lines 2 and 3\n%s\n%s\ngot:\n%s\n' "$1" "$leak" "$kept" "$report" >&2
		exit 1
	fi
}
go build -o "$user/cgoleak" ./go/internal/cgoleak
check_leak_report "$user/cgoleak"

echo "go test -tags pagealloc_system (installed from $build/)"
prefix=$(cd "$build" && pwd)/go-prefix
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
CGO_LDFLAGS="-L$prefix/lib" PKG_CONFIG_PATH=$prefix/lib/pkgconfig LD_LIBRARY_PATH=$prefix/lib PAGEALLOC_TEST_BACKEND=system \
	go test -count=1 -tags pagealloc_system ./go
echo "the leak report with the installed libpagealloc (cgoleak, -tags pagealloc_system)"
CGO_LDFLAGS="-L$prefix/lib" PKG_CONFIG_PATH=$prefix/lib/pkgconfig \
	go build -tags pagealloc_system -o "$user/cgoleak-system" ./go/internal/cgoleak
LD_LIBRARY_PATH=$prefix/lib check_leak_report "$user/cgoleak-system"
