//go:build cgo && !pagealloc_system

package pagealloc

// The library's sources, compiled by cgo inside this package (c_*.c, one
// per ../src/*.c): nothing to install. The flags are CMakeLists.txt's for
// the library's objects: its internal names stay hidden.

// #cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}/../src -D_GNU_SOURCE -fvisibility=hidden
// #cgo LDFLAGS: -pthread
import "C"

const backend = Vendored
