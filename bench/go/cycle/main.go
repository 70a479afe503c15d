// Command cycle is Dgraph's memory test from Go, scaled to a small machine:
// allocate blocks of random sizes until LIVE bytes are live, free random
// blocks down to KEEP bytes, pause, repeat. After each free phase it
// samples the resident set every 100 ms for PAUSE and reports RSS/live at
// the end of the pause and how soon RSS came within 1.25x of live; and the
// time per allocation of the allocation phases, the first write to each
// of the block's pages included (which is where the kernel's page faults
// fall, in calloc or after it).
//
//	go run ./bench/go/cycle -alloc=pagealloc
//	go run ./bench/go/cycle -alloc=libc                  # cgo calloc/free: glibc
//	LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 go run ./bench/go/cycle -alloc=libc
//	go run ./bench/go/cycle -alloc=make                  # Go's heap and its GC
//	go run ./bench/go/cycle -alloc=pagealloc -scavenge   # pagealloc.Scavenge() after each free
//	go run ./bench/go/cycle -alloc=pagealloc -defrag -scavenge  # Move what ShouldMove names first
//
// The live set is held as a program that keeps many blocks holds them: a
// table of a pointer and a size per block (12 bytes), sized once for the
// round's expected count; not a [][]byte (24 bytes a block, regrown by
// append, each old copy garbage for the collector), which made the Go heap
// ~7 MiB of a 64 MiB live set. -table=slices keeps that [][]byte, to
// compare. Live bytes are the blocks' bytes either way; the table is not
// counted in them (-table=compact: ~1.6 MiB at 1 GiB live).
//
// One line of results per round, then a summary line (tab-separated
// key=value) that tools/bench-go.sh collects.
package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unsafe"

	pagealloc "github.com/libpagealloc/pagealloc/go"
)

var (
	alloc   = flag.String("alloc", "pagealloc", "make | libc | pagealloc")
	release = flag.Bool("scavenge", false, "after each free phase, give free memory back at once (pagealloc.Scavenge, or debug.FreeOSMemory for make)")
	live    = flag.Int64("live", 1<<30, "bytes live at the end of each allocation phase")
	keep    = flag.Int64("keep", 64<<20, "bytes live after each free phase")
	minSize = flag.Int("min", 16, "smallest block")
	maxSize = flag.Int("max", 64<<10, "largest block (sizes are log-uniform in [min, max])")
	rounds  = flag.Int("rounds", 3, "allocate/free/pause rounds")
	pause   = flag.Duration("pause", 5*time.Second, "pause after each free phase")
	seed    = flag.Int64("seed", 1, "random seed")
	defrag  = flag.Bool("defrag", false, "pagealloc: after each free phase, Move the blocks ShouldMove names (then Scavenge with -scavenge)")
	stats   = flag.Bool("stats", false, "print pagealloc.ReadStats() at the end of each pause")
	tableF  = flag.String("table", "compact", "how the live set is held: compact (a pointer and a size per block, sized once) or slices (a [][]byte grown by append)")
)

type allocator struct {
	calloc func(n int) []byte
	free   func(b []byte)
}

func allocators() map[string]allocator {
	return map[string]allocator{
		"make": {func(n int) []byte { return make([]byte, n) }, func([]byte) {}},
		"libc": {func(n int) []byte {
			p := C.calloc(1, C.size_t(n))
			if p == nil {
				panic("calloc: out of memory")
			}
			return unsafe.Slice((*byte)(p), n)
		}, func(b []byte) { C.free(unsafe.Pointer(&b[0])) }},
		"pagealloc": {func(n int) []byte { return pagealloc.Calloc(n, "cycle") }, pagealloc.Free},
	}
}

// table is the live set: block i is ptr[i], size[i] bytes.
type table struct {
	ptr    []unsafe.Pointer
	size   []int32
	blocks [][]byte // -table=slices: the blocks themselves instead
}

func (t *table) len() int {
	if t.blocks != nil {
		return len(t.blocks)
	}
	return len(t.ptr)
}

func (t *table) add(b []byte) {
	if t.blocks != nil {
		t.blocks = append(t.blocks, b)
		return
	}
	t.ptr = append(t.ptr, unsafe.Pointer(&b[0]))
	t.size = append(t.size, int32(len(b)))
}

func (t *table) at(i int) []byte {
	if t.blocks != nil {
		return t.blocks[i]
	}
	return unsafe.Slice((*byte)(t.ptr[i]), t.size[i])
}

func (t *table) set(i int, b []byte) {
	if t.blocks != nil {
		t.blocks[i] = b
		return
	}
	t.ptr[i] = unsafe.Pointer(&b[0])
}

// remove takes block i out, the last block in its place.
func (t *table) remove(i int) {
	last := t.len() - 1
	if t.blocks != nil {
		t.blocks[i] = t.blocks[last]
		t.blocks[last] = nil
		t.blocks = t.blocks[:last]
		return
	}
	t.ptr[i], t.size[i] = t.ptr[last], t.size[last]
	t.ptr[last] = nil
	t.ptr, t.size = t.ptr[:last], t.size[:last]
}

func rss() int64 {
	b, _ := os.ReadFile("/proc/self/statm")
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func main() {
	flag.Parse()
	a, ok := allocators()[*alloc]
	if !ok {
		fmt.Fprintf(os.Stderr, "cycle: -alloc=%s: make, libc or pagealloc\n", *alloc)
		os.Exit(2)
	}
	rng := rand.New(rand.NewSource(*seed))
	lmin, lmax := float64(*minSize), float64(*maxSize)
	size := func() int { return int(lmin * pow(lmax/lmin, rng.Float64())) }
	var blocks table
	switch *tableF {
	case "compact":
		// The expected count of a round, log-uniform sizes' mean being
		// (max - min) / ln(max / min), and some room: append grows it
		// past that if need be.
		n := int(float64(*live)/((lmax-lmin)/math.Log(lmax/lmin))*1.05) + 1024
		blocks.ptr = make([]unsafe.Pointer, 0, n)
		blocks.size = make([]int32, 0, n)
	case "slices":
		blocks.blocks = [][]byte{}
	default:
		fmt.Fprintf(os.Stderr, "cycle: -table=%s: compact or slices\n", *tableF)
		os.Exit(2)
	}
	var liveBytes int64
	var allocs int64
	var allocTime time.Duration
	var ratios []float64
	var within []float64
	for r := 1; r <= *rounds; r++ {
		start := time.Now()
		n0 := blocks.len()
		for liveBytes < *live {
			b := a.calloc(size())
			for i := 0; i < len(b); i += 4096 { // what a program does next: write it
				b[i] = 1
			}
			b[len(b)-1] = 1
			blocks.add(b)
			liveBytes += int64(len(b))
		}
		allocTime += time.Since(start)
		allocs += int64(blocks.len() - n0)
		peak := rss()
		for liveBytes > *keep {
			i := rng.Intn(blocks.len())
			b := blocks.at(i)
			liveBytes -= int64(len(b))
			a.free(b)
			blocks.remove(i)
		}
		freed := time.Now()
		if *defrag {
			for i := 0; i < blocks.len(); i++ {
				if b := blocks.at(i); pagealloc.ShouldMove(b) {
					blocks.set(i, pagealloc.Move(b))
				}
			}
		}
		if *release {
			if *alloc == "make" {
				debug.FreeOSMemory()
			} else {
				pagealloc.Scavenge()
			}
		}
		reached := -1.0
		var now int64
		for time.Since(freed) < *pause {
			time.Sleep(100 * time.Millisecond)
			now = rss()
			if reached < 0 && float64(now) <= 1.25*float64(liveBytes) {
				reached = time.Since(freed).Seconds()
			}
		}
		ratio := float64(now) / float64(liveBytes)
		ratios = append(ratios, ratio)
		within = append(within, reached)
		fmt.Printf("round %d: peak RSS %.0f MiB at %.0f MiB live; after the free phase and %v: RSS %.1f MiB, live %.1f MiB, RSS/live %.2f, within 1.25x after %s\n",
			r, mib(peak), mib(*live), *pause, mib(now), mib(liveBytes), ratio, secs(reached))
		if *stats {
			fmt.Print(pagealloc.ReadStats())
		}
	}
	runtime.KeepAlive(&blocks)
	worst, slowest := 0.0, 0.0
	for i, x := range ratios {
		if x > worst {
			worst = x
		}
		if within[i] < 0 {
			slowest = -1
		} else if slowest >= 0 && within[i] > slowest {
			slowest = within[i]
		}
	}
	fmt.Printf("summary\talloc=%s\tns_per_alloc=%.1f\tallocs=%d\tworst_rss_per_live=%.2f\tslowest_within_1.25x_s=%.1f\n",
		*alloc, float64(allocTime.Nanoseconds())/float64(allocs), allocs, worst, slowest)
}

func pow(x, y float64) float64 { return math.Pow(x, y) }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func secs(s float64) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f s", s)
}
