package pagealloc

import (
	"encoding/binary"
	"runtime"
	"testing"
)

// 8,192 blocks of 40 bytes (48 with the trailer: one size class), 7 of
// every 8 freed: sparse spans. Moving what ShouldMove names keeps every
// block's bytes and its tag, and leaves fewer free slots in partial spans.
func TestMoveKeepsBytesAndTagAndDrainsSparseSpans(t *testing.T) {
	runtime.LockOSThread() // one thread cache: ReadStats's flush is exact
	defer runtime.UnlockOSThread()
	const n, size = 8192, 40
	blocks := make([][]byte, n)
	for i := range blocks {
		blocks[i] = Calloc(size, "defrag")
		binary.LittleEndian.PutUint64(blocks[i], uint64(i))
	}
	var kept [][]byte
	for i, b := range blocks {
		if i%8 == 0 {
			kept = append(kept, b)
		} else {
			Free(b)
		}
	}
	before := ReadStats().C
	moved := 0
	for i, b := range kept {
		if ShouldMove(b) {
			kept[i] = Move(b)
			moved++
		}
	}
	after := ReadStats().C
	for i, b := range kept {
		if got := binary.LittleEndian.Uint64(b); got != uint64(i*8) || len(b) != size || cap(b) != size {
			t.Fatalf("block %d after the moves: %d (len %d cap %d)", i*8, got, len(b), cap(b))
		}
	}
	if s := tagStat("defrag"); s.Bytes != n/8*size || s.Blocks != n/8 {
		t.Errorf("tag after %d moves: %+v, want %d bytes in %d blocks", moved, s, n/8*size, n/8)
	}
	if backend == GoMemory {
		if moved != 0 {
			t.Errorf("Go memory: %d blocks moved", moved)
		}
	} else if moved == 0 || after.FragBytes >= before.FragBytes {
		t.Errorf("%d blocks moved; free slots in partial spans %d -> %d", moved, before.FragBytes, after.FragBytes)
	} else {
		t.Logf("%d of %d blocks moved; free slots in partial spans %d -> %d bytes", moved, len(kept), before.FragBytes, after.FragBytes)
	}
	for _, b := range kept {
		Free(b)
	}
	if s := tagStat("defrag"); s.Bytes != 0 || s.Blocks != 0 {
		t.Errorf("tag after freeing every moved block: %+v", s)
	}
	if ShouldMove(nil) || len(Move(nil)) != 0 {
		t.Error("ShouldMove(nil) or Move(nil)")
	}
}
