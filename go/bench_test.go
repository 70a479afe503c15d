package pagealloc

import "testing"

// 64-byte objects, 10,000 to an arena (a request's worth), the arena
// dropped (make: left to the garbage collector) or released after each;
// ns/op is per object. tools/bench-go.sh runs these alternating.

const benchBatch = 10000

var benchSink [][]byte

func BenchmarkMake64(b *testing.B) {
	objs := make([][]byte, benchBatch)
	for i := 0; i < b.N; i++ {
		j := i % benchBatch
		objs[j] = make([]byte, 64)
		if j == benchBatch-1 {
			benchSink = objs
			objs = make([][]byte, benchBatch)
		}
	}
}

func BenchmarkHeapCalloc64(b *testing.B) {
	objs := make([][]byte, benchBatch)
	h := NewHeap()
	for i := 0; i < b.N; i++ {
		j := i % benchBatch
		objs[j] = h.Calloc(64)
		if j == benchBatch-1 {
			h.Release()
			h = NewHeap()
		}
	}
	h.Release()
}

func BenchmarkCallocFree64(b *testing.B) {
	for i := 0; i < b.N; i++ {
		Free(Calloc(64, "bench"))
	}
}
