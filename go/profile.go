package pagealloc

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Heap profiles of Calloc's memory with the Go stacks that asked for it.
//
// The library samples its own allocations with stacks from the C unwind
// tables, and goes on past cgo's entry into the Go frames (its stack walk
// reads Go's frame pointers from runtime.asmcgocall up): C code that Go
// called is named with its Go callers, in this profile and in the report
// at exit. Calloc's blocks are sampled on the Go side instead, with their
// tag (a label the C side does not know), with the library's scheme (an
// exponential count-down of mean prof_sample bytes, each sample weighted
// by 1/(1-e^(-n/mean))) and the same mean, and each sampled block's Go
// stack (runtime.Callers) is kept until Free. WriteHeapProfile takes the library's own profile, leaves out
// its samples of Calloc's blocks (their stacks pass through gopa_calloc:
// the Go side stands for them), and adds the Go samples, with function
// names, files and lines, and a "tag" label, so one profile shows C code's
// heap by C function and Calloc's by Go function.

// maxStack is the deepest Go stack a sample keeps (Go's own heap profiles
// keep 32).
const maxStack = 32

// siteKey is one stack and tag.
type siteKey struct {
	stk [maxStack]uintptr
	tag uint32
}

// site sums the weighted samples of one siteKey.
type site struct {
	key                      siteKey
	allocObjects, allocBytes float64
	inuseObjects, inuseBytes float64
}

type liveSample struct {
	s    *site
	w, n float64
}

var (
	// profRate is the mean bytes between samples; 0: none. Atomic.
	profRate = defaultProfRate()
	// profLeft counts down to the next sample. Atomic.
	profLeft int64

	profMu    sync.Mutex
	profRand  = rand.New(rand.NewSource(time.Now().UnixNano())) // under profMu
	profSites = map[siteKey]*site{}                             // under profMu
	profLive  = map[uintptr]liveSample{}                        // under profMu
)

// defaultProfRate is the library's prof_sample: 512 KiB unless
// PAGEALLOC_CONF says otherwise (prof=off: no samples).
func defaultProfRate() int64 {
	rate := int64(512 << 10)
	for _, kv := range strings.Split(os.Getenv("PAGEALLOC_CONF"), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "prof":
			if v == "off" {
				return 0
			}
		case "prof_sample":
			if n, err := parseSize(v); err == nil && n > 0 {
				rate = n
			}
		}
	}
	return rate
}

// parseSize reads the library's SIZE: a number with an optional K, M or G.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

// SetProfileRate sets the mean bytes Calloc allocates between two sampled
// blocks (the library's prof_sample; the default is PAGEALLOC_CONF's, or
// 512 KiB) and returns the previous rate; 0 stops sampling, 1 samples
// every block. Blocks sampled before keep their weights.
func SetProfileRate(bytes int) int {
	old := atomic.SwapInt64(&profRate, int64(bytes))
	profMu.Lock()
	atomic.StoreInt64(&profLeft, profDraw(int64(bytes)))
	profMu.Unlock()
	return int(old)
}

// profDraw is the next count-down: exponential of mean rate. Under profMu.
func profDraw(rate int64) int64 {
	if rate <= 0 {
		return math.MaxInt64
	}
	return int64(profRand.ExpFloat64() * float64(rate))
}

// profSample says whether Calloc's block of n bytes is to be sampled: one
// atomic add on the fast path.
func profSample(n int) bool {
	if atomic.AddInt64(&profLeft, -int64(n)) >= 0 {
		return false
	}
	profMu.Lock()
	defer profMu.Unlock()
	if atomic.LoadInt64(&profLeft) >= 0 { // another goroutine drew already
		return false
	}
	rate := atomic.LoadInt64(&profRate)
	atomic.StoreInt64(&profLeft, profDraw(rate))
	return rate > 0
}

// profRecord keeps the stack of Calloc's caller for sampled block p.
func profRecord(p uintptr, n int, id uint32) {
	var k siteKey
	runtime.Callers(3, k.stk[:]) // runtime.Callers, profRecord, Calloc
	k.tag = id
	rate := float64(atomic.LoadInt64(&profRate))
	w := 1.0
	if rate > 0 {
		w = 1 / (1 - math.Exp(-float64(n)/rate))
	}
	fn := float64(n)
	profMu.Lock()
	s := profSites[k]
	if s == nil {
		s = &site{key: k}
		profSites[k] = s
	}
	s.allocObjects += w
	s.allocBytes += w * fn
	s.inuseObjects += w
	s.inuseBytes += w * fn
	profLive[p] = liveSample{s, w, fn}
	profMu.Unlock()
}

// profForget takes sampled block p out of the live figures.
func profForget(p uintptr) {
	profMu.Lock()
	if l, ok := profLive[p]; ok {
		delete(profLive, p)
		l.s.inuseObjects -= l.w
		l.s.inuseBytes -= l.w * l.n
	}
	profMu.Unlock()
}

// profMove moves a sampled block's record with the block (Move).
func profMove(from, to uintptr) {
	profMu.Lock()
	if l, ok := profLive[from]; ok {
		delete(profLive, from)
		profLive[to] = l
	}
	profMu.Unlock()
}

// WriteHeapProfile writes the heap profile of C memory in pprof's format
// (gzip-compressed profile.proto; sample types alloc_objects, alloc_space,
// inuse_objects, inuse_space as runtime/pprof's heap profile has them):
// the library's samples of C code's allocations with their C stacks, and
// Calloc's with the Go stacks that called it, labelled with their tag.
// `go tool pprof FILE` reads it; with a Go heap profile of the same
// program it merges (`go tool pprof -top go.pb.gz c.pb.gz`).
func WriteHeapProfile(w io.Writer) error {
	var base []byte
	if backend != GoMemory {
		var err error
		if base, err = cProfile(); err != nil {
			return err
		}
	}
	out, err := mergeProfile(base, goSamples(), atomic.LoadInt64(&profRate))
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(w)
	if _, err := zw.Write(out); err != nil {
		return err
	}
	return zw.Close()
}

// cProfile is the library's profile, uncompressed.
func cProfile() ([]byte, error) {
	f, err := os.CreateTemp("", "pagealloc-*.pb.gz")
	if err != nil {
		return nil, err
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)
	if !cProfDump(path) {
		return nil, fmt.Errorf("pagealloc: the library could not write its profile to %s", path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("pagealloc: the library's profile: %v", err)
	}
	return io.ReadAll(zr)
}

// goSample is one site's figures, rounded, with its stack and tag.
type goSample struct {
	stk    []uintptr
	tag    string
	values [4]int64 // alloc_objects, alloc_space, inuse_objects, inuse_space
}

func goSamples() []goSample {
	profMu.Lock()
	defer profMu.Unlock()
	out := make([]goSample, 0, len(profSites))
	for _, s := range profSites {
		n := 0
		for n < maxStack && s.key.stk[n] != 0 {
			n++
		}
		out = append(out, goSample{
			stk: append([]uintptr(nil), s.key.stk[:n]...),
			tag: tags[s.key.tag].name,
			values: [4]int64{int64(math.Round(s.allocObjects)), int64(math.Round(s.allocBytes)),
				int64(math.Round(s.inuseObjects)), int64(math.Round(s.inuseBytes))},
		})
	}
	return out
}

func init() {
	profMu.Lock()
	atomic.StoreInt64(&profLeft, profDraw(atomic.LoadInt64(&profRate)))
	profMu.Unlock()
}
