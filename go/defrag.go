package pagealloc

import "unsafe"

// Defragmentation: after a free phase, live blocks scattered over many
// sparse spans keep those spans' pages resident. Moving the few that the
// library names (ShouldMove) into fuller spans lets the sparse ones drain
// and go back to the OS; the program updates its references to the moved
// block (Move returns it). This is seed 000's "compact by copying", told
// which objects to copy.
//
// Only Calloc's blocks qualify: a Heap's memory, large blocks (over 32 KiB)
// and the blocks the library samples for its own profile are never named.

// ShouldMove reports whether moving b (a live slice from Calloc, at its
// first byte) now would help a sparse span drain. False for an empty
// slice, and always with the GoMemory backend. A slice that is not a live
// Calloc block stops the program with one line, as Free does.
func ShouldMove(b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	return sysDefragHint(unsafe.Pointer(&b[:1][0]))
}

// Move returns b's contents in a block of the same size class from the
// fullest sparse span, freeing b, when ShouldMove(b) holds; otherwise b
// itself. After a move b must not be used: the caller replaces every
// reference to it with the result (len and cap as b's were at Calloc). The
// block keeps its tag; NumAllocBytes and the tags do not change.
func Move(b []byte) []byte {
	if cap(b) == 0 {
		return b
	}
	p := unsafe.Pointer(&b[:1][0])
	q := sysDefragMove(p)
	if q == p {
		return b
	}
	profMove(uintptr(p), uintptr(q))
	return unsafe.Slice((*byte)(q), cap(b))[:len(b)]
}
