package pagealloc

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// CStats is the C heap's figures in the Go runtime's terms (the library's
// pa_malloc_stats), in bytes. All zero for the GoMemory backend.
type CStats struct {
	HeapSys          uint64 // heap memory mapped from the OS
	HeapInuse        uint64 // pages of spans and large blocks
	HeapAlloc        uint64 // bytes of live blocks (class size; large: pages)
	HeapIdle         uint64 // HeapSys - HeapInuse: free pages, resident or not
	HeapReleased     uint64 // free pages given back to the OS
	SpanReleased     uint64 // free 4 KiB pages inside spans given back (part of HeapInuse)
	HeapUsage        uint64 // the heap's resident memory: HeapSys - HeapReleased - SpanReleased
	MaxFragmentation uint64 // HeapInuse - HeapAlloc
	LiveObjects      uint64 // live blocks, Calloc's and the arenas' and C code's
	CachedBytes      uint64 // free blocks held in thread caches
	// PageInuse is the page level's figure: pages handed out, to the
	// default heap's spans and large blocks and to every Heap's (the
	// figures above count the default heap only), less those the per-CPU
	// page caches hold free.
	PageInuse uint64
	// FragBytes is the free slots inside partly used small-object spans
	// of the default heap: what moving every block ShouldMove names could
	// win back at most.
	FragBytes uint64
	Metadata  uint64 // the page heap's own bitmaps and summaries
}

// Stats is where a process's memory is: the C heap's figures, Go's, the
// resident set, and the ledger that ties them:
//
//	RSS = GoHeld + CHeld + Rest
type Stats struct {
	Backend Backend
	// Calloc's live blocks, as NumAllocBytes, and how many.
	CallocBytes, CallocBlocks int64
	C                         CStats
	Go                        runtime.MemStats
	// RSS is the process's resident memory (/proc/self/statm), 0 where
	// there is none to read.
	RSS uint64
	// GoHeld is what Go's runtime holds from the OS and has not given
	// back: Go.Sys - Go.HeapReleased.
	GoHeld uint64
	// CHeld is the C heap's resident memory and its metadata:
	// C.HeapUsage + C.Metadata.
	CHeld uint64
	// Rest = RSS - GoHeld - CHeld: the program's code and data, C's own
	// malloc, thread stacks outside Go; negative when Go's held but
	// never-touched pages outweigh it.
	Rest int64
}

// ReadStats returns the figures now. It flushes the calling thread's
// object cache first, so a single-threaded program's C figures are exact;
// it stops the world briefly, as runtime.ReadMemStats does.
func ReadStats() Stats {
	var s Stats
	s.Backend = backend
	cThreadCacheFlush()
	readCStats(&s.C)
	runtime.ReadMemStats(&s.Go)
	for _, t := range Tags() {
		s.CallocBytes += t.Bytes
		s.CallocBlocks += t.Blocks
	}
	s.RSS = rss()
	s.GoHeld = s.Go.Sys - s.Go.HeapReleased
	s.CHeld = s.C.HeapUsage + s.C.Metadata
	s.Rest = int64(s.RSS) - int64(s.GoHeld) - int64(s.CHeld)
	return s
}

// rss reads the resident set from /proc/self/statm (pages).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// mib prints bytes in MiB with one decimal, as the heap's story does.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// String tells s the way the library's heap story does: the ledger first,
// then each side's figures.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pagealloc (%s): RSS %s = Go %s + C heap %s + rest %s\n",
		s.Backend, mib(int64(s.RSS)), mib(int64(s.GoHeld)), mib(int64(s.CHeld)), mib(s.Rest))
	fmt.Fprintf(&b, "  Calloc:  %s live in %d blocks\n", mib(s.CallocBytes), s.CallocBlocks)
	c := s.C
	fmt.Fprintf(&b, "  C heap:  sys %s, inuse %s, alloc %s in %d objects, idle %s, released %s (+%s inside spans), fragmentation %s (%s movable), cached %s, pages in use (with arenas) %s, metadata %s\n",
		mib(int64(c.HeapSys)), mib(int64(c.HeapInuse)), mib(int64(c.HeapAlloc)), c.LiveObjects,
		mib(int64(c.HeapIdle)), mib(int64(c.HeapReleased)), mib(int64(c.SpanReleased)),
		mib(int64(c.MaxFragmentation)), mib(int64(c.FragBytes)), mib(int64(c.CachedBytes)), mib(int64(c.PageInuse)), mib(int64(c.Metadata)))
	g := &s.Go
	fmt.Fprintf(&b, "  Go heap: sys %s, inuse %s, alloc %s in %d objects, idle %s, released %s, stacks %s, other %s, %d GCs\n",
		mib(int64(g.Sys)), mib(int64(g.HeapInuse)), mib(int64(g.HeapAlloc)), g.HeapObjects,
		mib(int64(g.HeapIdle)), mib(int64(g.HeapReleased)), mib(int64(g.StackSys)),
		mib(int64(g.Sys-g.HeapSys-g.StackSys)), g.NumGC)
	return b.String()
}

// Scavenge gives every free page of the C heap back to the OS now, the
// free 4 KiB pages inside partly used spans too (pa_malloc_trim(0); the
// background scavenger does this within seconds anyway), and returns by how
// many bytes the C heap's resident memory shrank. Nothing for the GoMemory backend: debug.FreeOSMemory is Go's.
func Scavenge() uint64 { return cScavenge() }
