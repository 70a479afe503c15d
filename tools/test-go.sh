#!/usr/bin/env bash
# The Go package (go/), offline, each way a binary can get it:
#   go vet, with and without cgo;
#   go test -race: the vendored build (the library compiled by cgo);
#   CGO_ENABLED=0 go test: the same API tests on Go memory;
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

echo "go vet (cgo: the package and bench/go; then CGO_ENABLED=0)"
go vet ./...
CGO_ENABLED=0 go vet ./go
echo "go test -race (vendored)"
go test -count=1 -race ./go
echo "CGO_ENABLED=0 go test (Go memory)"
CGO_ENABLED=0 go test -count=1 ./go
echo "go test -tags pagealloc_system (installed from $build/)"
prefix=$(cd "$build" && pwd)/go-prefix
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
CGO_LDFLAGS="-L$prefix/lib" PKG_CONFIG_PATH=$prefix/lib/pkgconfig LD_LIBRARY_PATH=$prefix/lib PAGEALLOC_TEST_BACKEND=system \
	go test -count=1 -tags pagealloc_system ./go
