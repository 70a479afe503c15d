// Command cgoleak is a cgo program that leaks in C and frees correctly in
// Go: the case `pagealloc run --heap-profile` reports with the Go call
// site, where valgrind needed a C-only test program (docs/heap-profiles.md,
// "From Go"; tools/test-go.sh runs it).
//
// leakRecords calls a C function, copyRecord, that mallocs a copy of each
// record it is given and keeps none: 64 blocks of 64 KiB (4 MiB) leak. The
// Go side's own buffers are Calloc and Free pairs that balance. The program
// ends with pagealloc.Exit, which runs the C library's exit report (Go's
// own exit runs none). With the argument -leak-calloc it also keeps one
// Calloc block (keepIndex), which the report names the same way.
package main

/*
#include <stdlib.h>
#include <string.h>

static void *copyRecord(const void *rec, size_t n)
{
	void *p = malloc(n);
	if (p != NULL)
		memcpy(p, rec, n);
	return p;
}
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"

	pagealloc "github.com/libpagealloc/pagealloc/go"
)

const (
	records    = 64
	recordSize = 64 << 10
)

// leakRecords hands each record to C, which copies it and never frees the
// copy.
//
//go:noinline
func leakRecords(buf []byte) {
	for i := 0; i < records; i++ {
		C.copyRecord(unsafe.Pointer(&buf[0]), C.size_t(len(buf)))
	}
}

func main() {
	for i := 0; i < 100; i++ {
		b := pagealloc.Calloc(recordSize, "records")
		b[0] = byte(i)
		pagealloc.Free(b)
	}
	buf := pagealloc.Calloc(recordSize, "records")
	leakRecords(buf)
	pagealloc.Free(buf)
	if len(os.Args) > 1 && os.Args[1] == "-leak-calloc" {
		keepIndex()
	}
	fmt.Print(pagealloc.Leaks())
	pagealloc.Exit(0)
}

var index []byte

// keepIndex allocates a block it never frees.
//
//go:noinline
func keepIndex() {
	index = pagealloc.Calloc(100000, "index")
}
