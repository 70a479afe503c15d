package pagealloc

import (
	"sync"
	"unsafe"
)

// Arena sizes. Heap.Calloc cuts blocks of up to maxBumpAlloc bytes from a
// region of regionBytes that it takes from the library in one call, so
// 64-byte objects cost one cgo crossing per 1,024 of them; larger blocks
// are one call each (their own cost dwarfs the crossing's ~100 ns).
const (
	regionBytes  = 64 << 10
	maxBumpAlloc = regionBytes / 8
	// bumpAlign is the alignment of every Heap.Calloc block, malloc's.
	bumpAlign = 16
)

// A Heap is an arena: memory from Calloc stays until Release frees all of
// it at once, in time proportional to the heap's spans rather than its
// objects. With cgo it is one of the library's heaps (pa_heap_new), counted
// apart from the default heap. Safe for concurrent use.
//
// Like Calloc's, a Heap's memory must hold no Go pointer: the garbage
// collector neither scans it nor knows it keeps anything alive (cgo's rule
// for C memory), so a Go object referred to only from here would be freed
// while still in use.
type Heap struct {
	mu   sync.Mutex
	sys  sysHeap
	live bool
	// The current region: its bytes [off, regionBytes) are free.
	region unsafe.Pointer
	off    uintptr
	// Requested bytes and blocks handed out, bump and direct.
	bytes, blocks uint64
}

// HeapStats is a Heap's figures.
type HeapStats struct {
	LiveBytes   uint64 // bytes of its live blocks at their class size (regions count whole)
	LiveObjects uint64 // its live blocks as the library counts them (a region is one)
	PageBytes   uint64 // pages it holds, in bytes
	Spans       uint64 // small-object spans
	Allocs      uint64 // blocks allocated from the library over its life
	Requested   uint64 // bytes Heap.Calloc handed out (as asked for)
	Blocks      uint64 // blocks Heap.Calloc handed out
}

// NewHeap returns an empty arena.
func NewHeap() *Heap { return &Heap{sys: sysHeapNew(), live: true} }

// Calloc returns n zeroed bytes of h, aligned to 16 bytes, valid until
// h.Release. There is no Free for one block. Out of memory is fatal, as
// for the package's Calloc; Calloc after Release panics.
func (h *Heap) Calloc(n int) []byte {
	if n <= 0 {
		if n < 0 {
			panic("pagealloc: Heap.Calloc of a negative size")
		}
		return []byte{}
	}
	h.mu.Lock()
	if !h.live {
		h.mu.Unlock()
		panic("pagealloc: Heap.Calloc after Release")
	}
	h.bytes += uint64(n)
	h.blocks++
	size := uintptr(n+bumpAlign-1) &^ (bumpAlign - 1)
	if h.region != nil && regionBytes-h.off >= size {
		p := unsafe.Add(h.region, h.off)
		h.off += size
		h.mu.Unlock()
		return unsafe.Slice((*byte)(p), n)
	}
	p := h.slow(n, size)
	h.mu.Unlock()
	return unsafe.Slice((*byte)(p), n)
}

// slow takes a block of its own (large ones) or a new region. Under h.mu.
func (h *Heap) slow(n int, size uintptr) unsafe.Pointer {
	if n > maxBumpAlloc {
		p := h.sys.calloc(n)
		if p == nil {
			fatalf("Heap.Calloc(%d): out of memory", n)
		}
		return p
	}
	r := h.sys.calloc(regionBytes)
	if r == nil {
		fatalf("Heap.Calloc(%d): out of memory (a %d-byte region)", n, regionBytes)
	}
	h.region, h.off = r, size
	return r
}

// Release frees every block of h at once; their memory goes back to the
// library (and from there to the OS, by the scavenger). Using a slice from
// h afterwards is a use after free. A second Release does nothing.
func (h *Heap) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.live {
		return
	}
	h.live = false
	h.region, h.off = nil, 0
	h.sys.release()
}

// Stats returns h's figures (zero after Release).
func (h *Heap) Stats() HeapStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.live {
		return HeapStats{}
	}
	s := h.sys.stats()
	s.Requested, s.Blocks = h.bytes, h.blocks
	return s
}
