//go:build !cgo

package pagealloc

import (
	"os"
	"sync"
	"unsafe"
)

// Without cgo, Calloc's memory is Go's: make, and the garbage collector
// frees it once nothing refers to it. The table below keeps each live
// block's meta word by address (not a reference: a dropped block is still
// collected, and stays counted as what it is, a block never freed).

const backend = GoMemory

const trailerBytes = 0

var (
	goMu     sync.Mutex
	goBlocks = map[uintptr]uint64{} // under goMu
)

func sysCalloc(n int, meta uint64) unsafe.Pointer {
	p := unsafe.Pointer(&make([]byte, n)[0])
	goMu.Lock()
	goBlocks[uintptr(p)] = meta
	goMu.Unlock()
	return p
}

func sysFree(p unsafe.Pointer) uint64 {
	goMu.Lock()
	meta, ok := goBlocks[uintptr(p)]
	delete(goBlocks, uintptr(p))
	goMu.Unlock()
	if !ok {
		fatalf("Free(%p): not a slice Calloc returned (not the first byte of a live Calloc block, or freed already)", p)
	}
	return meta
}

// ---- arenas: Go memory, dropped at Release ---------------------------------

type sysHeap struct {
	chunks *[][]byte
	st     *HeapStats
}

func sysHeapNew() sysHeap { return sysHeap{new([][]byte), new(HeapStats)} }

func (s sysHeap) calloc(n int) unsafe.Pointer {
	b := make([]byte, n)
	*s.chunks = append(*s.chunks, b)
	s.st.LiveBytes += uint64(n)
	s.st.LiveObjects++
	s.st.PageBytes += uint64(n)
	s.st.Allocs++
	return unsafe.Pointer(&b[0])
}

func (s sysHeap) release() { *s.chunks = nil }

func (s sysHeap) stats() HeapStats { return *s.st }

// ---- figures: no C heap ------------------------------------------------------

func readCStats(c *CStats) { *c = CStats{} }

func cThreadCacheFlush() {}

// Go memory is the garbage collector's: nothing to move.
func sysDefragHint(p unsafe.Pointer) bool { return false }

func sysDefragMove(p unsafe.Pointer) unsafe.Pointer { return p }

func cScavenge() uint64 { return 0 }

func cProfDump(path string) bool { return false }

func callocFrames() []addrRange { return nil }

// preloaded: no C heap to share with a preloaded libpagealloc.
const preloaded = false

func sysExit(code int) { os.Exit(code) }
