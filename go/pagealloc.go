package pagealloc

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Backend says where a binary's Calloc memory comes from.
type Backend int

const (
	// Vendored: the library's C sources compiled by cgo inside this
	// package (the default with cgo).
	Vendored Backend = iota
	// System: an installed libpagealloc found by pkg-config (build tag
	// pagealloc_system).
	System
	// GoMemory: no cgo (CGO_ENABLED=0): Calloc is make, Free only
	// updates the counts, the garbage collector reclaims the memory.
	GoMemory
)

func (b Backend) String() string {
	switch b {
	case Vendored:
		return "vendored libpagealloc"
	case System:
		return "installed libpagealloc"
	case GoMemory:
		return "Go memory"
	}
	return "Backend(" + fmt.Sprint(int(b)) + ")"
}

// CurrentBackend says which of the three backends this binary was built with.
func CurrentBackend() Backend { return backend }

// ---- tags --------------------------------------------------------------------

// A block's meta word (its trailer with cgo, its entry in the table without):
// the size asked for, the tag's index and whether the profile sampled it.
const (
	metaSizeBits = 48
	metaTagBits  = 15
	metaSizeMask = 1<<metaSizeBits - 1
	metaTagMask  = 1<<metaTagBits - 1
	metaSampled  = 1 << (metaSizeBits + metaTagBits)
	// maxTags is how many distinct tags a process may use.
	maxTags = metaTagMask + 1
	// MaxAlloc is the largest n Calloc takes.
	MaxAlloc = metaSizeMask - trailerBytes
)

// tagCount is one tag's live figures: atomics, so that Calloc and Free of
// different tags never share a lock.
type tagCount struct {
	name   string
	bytes  int64
	blocks int64
}

var (
	tagIDs   sync.Map // tag string -> uint32 index into tags
	tagMu    sync.Mutex
	tags     [maxTags]*tagCount // under tagMu to add; read without it once set
	numTags  uint32             // atomic: entries of tags set
	allBytes int64              // atomic: NumAllocBytes
)

// tagID returns tag's index, adding it on its first use (the only slow path:
// a tag is a sync.Map hit from then on).
func tagID(tag string) uint32 {
	if id, ok := tagIDs.Load(tag); ok {
		return id.(uint32)
	}
	tagMu.Lock()
	defer tagMu.Unlock()
	if id, ok := tagIDs.Load(tag); ok {
		return id.(uint32)
	}
	n := atomic.LoadUint32(&numTags)
	if n == maxTags {
		fatalf("Calloc(%q): more than %d distinct tags", tag, maxTags)
	}
	tags[n] = &tagCount{name: strings.Clone(tag)}
	atomic.StoreUint32(&numTags, n+1)
	tagIDs.Store(tags[n].name, n)
	return n
}

// fatalf prints one line and stops the program: what Calloc does when
// memory runs out and Free when it is handed what Calloc did not return.
func fatalf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "pagealloc: "+format+"\n", args...)
	os.Exit(2)
}

// Calloc returns n zeroed bytes (len and cap n) that the garbage collector
// does not manage, counted under tag until Free. Out of memory is fatal:
// one line naming the size and tag, then exit status 2. n == 0 gives an
// empty slice that Free ignores. Safe for concurrent use.
//
// With cgo the memory is outside Go's heap: it must hold no Go pointer
// (cgo's rule: the garbage collector does not scan it, so an object
// reachable only from here would be freed under it). Each block holds 8
// bytes beyond n for its tag.
func Calloc(n int, tag string) []byte {
	if n <= 0 {
		if n < 0 {
			panic(fmt.Sprintf("pagealloc: Calloc(%d, %q): negative size", n, tag))
		}
		return []byte{}
	}
	if n > MaxAlloc {
		fatalf("Calloc(%d, %q): out of memory (larger than the %d bytes a block may have)", n, tag, MaxAlloc)
	}
	id := tagID(tag)
	meta := uint64(n) | uint64(id)<<metaSizeBits
	sampled := profSample(n)
	if sampled {
		meta |= metaSampled
	}
	p := sysCalloc(n, meta)
	if p == nil {
		fatalf("Calloc(%d, %q): out of memory", n, tag)
	}
	t := tags[id]
	atomic.AddInt64(&t.bytes, int64(n))
	atomic.AddInt64(&t.blocks, 1)
	atomic.AddInt64(&allBytes, int64(n))
	if sampled {
		profRecord(uintptr(p), n, id)
	}
	return unsafe.Slice((*byte)(p), n)
}

// Free gives back a slice whose first byte is the first byte of a slice
// Calloc returned (reslicing its end is fine; cap 0 does nothing). A slice
// that did not come from Calloc, or one freed already, stops the program
// with one line naming the pointer and the fault, such as
// "pagealloc: Free(0xc000012000): not a live block of this heap (foreign
// pointer, or freed already)" (with cgo: the library's own check, then
// SIGABRT and the Go stacks; without: exit status 2).
func Free(b []byte) {
	if cap(b) == 0 {
		return
	}
	p := unsafe.Pointer(&b[:1][0])
	meta := sysFree(p)
	n := int64(meta & metaSizeMask)
	id := uint32(meta>>metaSizeBits) & metaTagMask
	if id >= atomic.LoadUint32(&numTags) || n == 0 {
		fatalf("Free(%p): not a slice Calloc returned (the block carries no Calloc trailer)", p)
	}
	t := tags[id]
	atomic.AddInt64(&t.bytes, -n)
	atomic.AddInt64(&t.blocks, -1)
	atomic.AddInt64(&allBytes, -n)
	if meta&metaSampled != 0 {
		profForget(uintptr(p))
	}
}

// Exit ends the program with status code as C's exit does: the C
// libraries' exit handlers run, libpagealloc's among them, which write its
// report at exit — the heap's story (stats_print), the final heap profile
// (prof_prefix) and the heap map (map_prefix) that `pagealloc run` and
// `pagealloc run --heap-profile` read for their reports. Go's own exit
// (main returning, os.Exit) runs no C exit handler, so a Go program that
// wants those reports ends with Exit, typically as main's last line. As
// with os.Exit, deferred functions do not run; other goroutines go on
// running while the handlers do, as other threads do in a C program that
// calls exit. Without cgo it is os.Exit.
func Exit(code int) {
	sysExit(code)
}

// NumAllocBytes is the bytes of Calloc's blocks not yet freed (as asked
// for: the 8-byte trailers and the size classes' rounding are in
// ReadStats's C figures, not here).
func NumAllocBytes() int64 { return atomic.LoadInt64(&allBytes) }

// TagStat is one tag's live Calloc blocks.
type TagStat struct {
	Tag    string
	Bytes  int64
	Blocks int64
}

// Tags returns the live bytes and blocks of every tag that has any, most
// bytes first (ties by tag).
func Tags() []TagStat {
	var out []TagStat
	n := atomic.LoadUint32(&numTags)
	for i := uint32(0); i < n; i++ {
		t := tags[i]
		s := TagStat{t.name, atomic.LoadInt64(&t.bytes), atomic.LoadInt64(&t.blocks)}
		if s.Blocks != 0 || s.Bytes != 0 {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Tag < out[j].Tag
	})
	return out
}

// Leaks describes the Calloc blocks not yet freed, by tag, most bytes
// first: one line per tag, or one line saying there are none. Call it at
// the end of a test or a program to find what was not freed.
func Leaks() string {
	ts := Tags()
	if len(ts) == 0 {
		return "pagealloc: no Calloc blocks live\n"
	}
	var b strings.Builder
	var bytes, blocks int64
	for _, t := range ts {
		bytes += t.Bytes
		blocks += t.Blocks
	}
	fmt.Fprintf(&b, "pagealloc: %d bytes live in %d Calloc blocks\n", bytes, blocks)
	for _, t := range ts {
		fmt.Fprintf(&b, "%12d bytes %8d blocks  %s\n", t.Bytes, t.Blocks, t.Tag)
	}
	return b.String()
}

//go:generate go run gen_csrc.go
