package pagealloc_test

import (
	"fmt"
	"os"

	pagealloc "github.com/libpagealloc/pagealloc/go"
)

func tagBytes(tag string) int64 {
	for _, t := range pagealloc.Tags() {
		if t.Tag == tag {
			return t.Bytes
		}
	}
	return 0
}

// Buffers outside Go's heap, counted by tag until freed.
func Example() {
	buf := pagealloc.Calloc(1<<20, "example-cache")
	copy(buf, "hello")
	fmt.Println(len(buf), cap(buf), string(buf[:5]), buf[5])
	fmt.Println("live under example-cache:", tagBytes("example-cache"))
	pagealloc.Free(buf)
	fmt.Println("after Free:", tagBytes("example-cache"))
	// Output:
	// 1048576 1048576 hello 0
	// live under example-cache: 1048576
	// after Free: 0
}

// An arena: many small objects, one Release.
func ExampleHeap() {
	h := pagealloc.NewHeap()
	var nodes [][]byte
	for i := 0; i < 10000; i++ {
		nodes = append(nodes, h.Calloc(64))
	}
	st := h.Stats()
	fmt.Println(len(nodes), "objects,", st.Requested, "bytes requested")
	h.Release()
	fmt.Println(h.Stats().Requested, "after Release")
	// Output:
	// 10000 objects, 640000 bytes requested
	// 0 after Release
}

// The tags that hold memory, most bytes first; Leaks prints the same.
func ExampleTags() {
	a := pagealloc.Calloc(3000, "example-index")
	b := pagealloc.Calloc(500, "example-values")
	c := pagealloc.Calloc(500, "example-values")
	for _, t := range pagealloc.Tags() {
		if t.Tag == "example-index" || t.Tag == "example-values" {
			fmt.Println(t.Tag, t.Bytes, t.Blocks)
		}
	}
	pagealloc.Free(a)
	pagealloc.Free(b)
	pagealloc.Free(c)
	// Output:
	// example-index 3000 1
	// example-values 1000 2
}

// Where the process's memory is.
func ExampleReadStats() {
	s := pagealloc.ReadStats()
	fmt.Println(int64(s.RSS) == int64(s.GoHeld)+int64(s.CHeld)+s.Rest)
	// Output: true
}

// A heap profile that names the Go functions that called Calloc: read it
// with `go tool pprof -top heap.pb.gz`.
func ExampleWriteHeapProfile() {
	f, err := os.CreateTemp("", "heap-*.pb.gz")
	if err != nil {
		panic(err)
	}
	defer os.Remove(f.Name())
	if err := pagealloc.WriteHeapProfile(f); err != nil {
		panic(err)
	}
	fmt.Println(f.Close())
	// Output: <nil>
}
