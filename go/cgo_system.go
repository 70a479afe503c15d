//go:build cgo && pagealloc_system

package pagealloc

// An installed libpagealloc, found through pkg-config (pagealloc.pc, which
// `cmake --install` writes): build with -tags pagealloc_system.

// #cgo pkg-config: pagealloc
import "C"

const backend = System
