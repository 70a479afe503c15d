package pagealloc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// Tests that must stop the program run in a child: the test binary again,
// with PAGEALLOC_TEST_CHILD naming what to do.
func TestMain(m *testing.M) {
	if name := os.Getenv("PAGEALLOC_TEST_CHILD"); name != "" {
		children[name]()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var children = map[string]func(){
	"free-foreign": func() {
		b := make([]byte, 100)
		fmt.Printf("%p\n", &b[0])
		Free(b)
	},
	"free-interior": func() {
		b := Calloc(100, "interior")
		fmt.Printf("%p\n", &b[1])
		Free(b[1:])
	},
	"free-twice": func() {
		b := Calloc(100, "twice")
		fmt.Printf("%p\n", &b[0])
		Free(b)
		Free(b)
	},
	"calloc-oom": func() {
		Calloc(256<<20, "huge") // past memory_limit_hard (the parent sets it)
	},
	"calloc-too-large": func() {
		Calloc(MaxAlloc+1, "huge")
	},
	"leaks-none": func() {
		b := Calloc(10, "x")
		Free(b)
		fmt.Print(Leaks())
	},
	"leaks-some": func() {
		Calloc(10, "small")
		Calloc(1000, "big")
		Calloc(1000, "big")
		fmt.Print(Leaks())
	},
}

// child runs children[name] in a new process; its stdout and stderr, and
// whether it exited 0.
func child(t *testing.T, name string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PAGEALLOC_TEST_CHILD="+name, "GOTRACEBACK=single")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

func TestCallocIsZeroedWithLenAndCapN(t *testing.T) {
	for _, n := range []int{1, 7, 64, 1000, 32768, 1 << 20} {
		b := Calloc(n, "zeroed")
		if len(b) != n || cap(b) != n {
			t.Fatalf("Calloc(%d): len %d cap %d", n, len(b), cap(b))
		}
		for i, c := range b {
			if c != 0 {
				t.Fatalf("Calloc(%d)[%d] = %d, want 0", n, i, c)
			}
		}
		for i := range b {
			b[i] = 0xa5
		}
		Free(b)
		// The block's next owner gets zeroes again.
		c := Calloc(n, "zeroed")
		for i, x := range c {
			if x != 0 {
				t.Fatalf("Calloc(%d) after a Free: [%d] = %d", n, i, x)
			}
		}
		Free(c)
	}
	if b := Calloc(0, "zeroed"); len(b) != 0 || b == nil {
		t.Fatalf("Calloc(0) = %v, want an empty non-nil slice", b)
	}
	Free(nil)
	Free([]byte{})
}

func tagStat(tag string) TagStat {
	for _, s := range Tags() {
		if s.Tag == tag {
			return s
		}
	}
	return TagStat{Tag: tag}
}

func TestBytesPerTagAfterAKnownSequence(t *testing.T) {
	before := NumAllocBytes()
	a := [][]byte{Calloc(100, "seq-a"), Calloc(200, "seq-a"), Calloc(300, "seq-a")}
	b := [][]byte{Calloc(5000, "seq-b"), Calloc(7, "seq-b")}
	Free(a[1])
	Free(b[0][:10]) // a shorter slice of the same first byte is the same block
	cases := []struct {
		tag           string
		bytes, blocks int64
	}{
		{"seq-a", 400, 2},
		{"seq-b", 7, 1},
		{"seq-never", 0, 0},
	}
	for _, c := range cases {
		if s := tagStat(c.tag); s.Bytes != c.bytes || s.Blocks != c.blocks {
			t.Errorf("%s: %d bytes in %d blocks, want %d in %d", c.tag, s.Bytes, s.Blocks, c.bytes, c.blocks)
		}
	}
	if got := NumAllocBytes() - before; got != 407 {
		t.Errorf("NumAllocBytes grew by %d, want 407", got)
	}
	Free(a[0])
	Free(a[2])
	Free(b[1])
	if got := NumAllocBytes() - before; got != 0 {
		t.Errorf("NumAllocBytes after freeing all: %+d", got)
	}
	for _, tag := range []string{"seq-a", "seq-b"} {
		if s := tagStat(tag); s.Bytes != 0 || s.Blocks != 0 {
			t.Errorf("%s after freeing all: %+v", tag, s)
		}
		if strings.Contains(Leaks(), tag) {
			t.Errorf("Leaks names %s after freeing all:\n%s", tag, Leaks())
		}
	}
}

func TestLeaksSaysNoneOrListsTagsLargestFirst(t *testing.T) {
	out, errs, ok := child(t, "leaks-none")
	if !ok || out != "pagealloc: no Calloc blocks live\n" {
		t.Errorf("leaks-none: ok=%v out=%q err=%q", ok, out, errs)
	}
	out, errs, ok = child(t, "leaks-some")
	want := "pagealloc: 2010 bytes live in 3 Calloc blocks\n" +
		"        2000 bytes        2 blocks  big\n" +
		"          10 bytes        1 blocks  small\n"
	if !ok || out != want {
		t.Errorf("leaks-some: ok=%v out=\n%s want\n%s err=%q", ok, out, want, errs)
	}
}

// The one line a bad Free prints first on standard error: the library's
// own check with cgo (it names Free, the pointer and the fault; then abort
// and Go's trace of the goroutine), Free's own without (and nothing else:
// exit status 2).
func badFreeLine(ptr, fault string) string {
	if backend == GoMemory {
		fault = "not a slice Calloc returned (not the first byte of a live Calloc block, or freed already)"
	}
	return "pagealloc: Free(" + ptr + "): " + fault
}

func TestFreeOfASliceCallocDidNotReturnStopsWithOneLine(t *testing.T) {
	cases := []struct{ name, fault string }{
		{"free-foreign", "not a live block of this heap (foreign pointer, or freed already)"},
		{"free-interior", "points inside a block, not at its start (interior pointer)"},
		{"free-twice", "block is already free (double free)"},
	}
	for _, c := range cases {
		out, errs, ok := child(t, c.name)
		ptr := strings.TrimSpace(out)
		if ok {
			t.Errorf("%s: exited 0; stderr %q", c.name, errs)
			continue
		}
		want := badFreeLine(ptr, c.fault)
		first, rest, _ := strings.Cut(errs, "\n")
		if ptr == "" || first != want {
			t.Errorf("%s: want the first line\n%s\ngot:\n%s", c.name, want, firstLines(errs, 3))
		}
		if backend == GoMemory && rest != "" {
			t.Errorf("%s: more than the one line: %q", c.name, errs)
		}
	}
}

func TestCallocOutOfMemoryIsFatalWithOneLine(t *testing.T) {
	cases := []struct{ name, line string }{
		{"calloc-too-large", fmt.Sprintf("pagealloc: Calloc(%d, \"huge\"): out of memory (larger than the %d bytes a block may have)\n", MaxAlloc+1, MaxAlloc)},
	}
	if backend != GoMemory {
		cases = append(cases, struct{ name, line string }{"calloc-oom", "pagealloc: Calloc(268435456, \"huge\"): out of memory\n"})
	}
	os.Setenv("PAGEALLOC_CONF", "memory_limit_hard=64M")
	defer os.Unsetenv("PAGEALLOC_CONF")
	for _, c := range cases {
		out, errs, ok := child(t, c.name)
		if ok || errs != c.line {
			t.Errorf("%s: exit 0 %v, stdout %q, stderr %q, want %q", c.name, ok, out, errs, c.line)
		}
	}
}

func firstLines(s string, n int) string {
	l := strings.SplitN(s, "\n", n+1)
	if len(l) > n {
		l = l[:n]
	}
	return strings.Join(l, "\n")
}

func TestHeapReleaseGivesItsBytesBack(t *testing.T) {
	runtime.LockOSThread() // the C figures below are this thread's, exact
	defer runtime.UnlockOSThread()
	before := ReadStats().C
	h := NewHeap()
	var objs [][]byte
	for i := 0; i < 3000; i++ {
		objs = append(objs, h.Calloc(64))
	}
	big := h.Calloc(100 << 10)
	for i, o := range objs {
		if len(o) != 64 || uintptr(unsafe.Pointer(&o[0]))%16 != 0 {
			t.Fatalf("object %d: len %d at %p", i, len(o), &o[0])
		}
		o[0], o[63] = 1, 1
	}
	if d := uintptr(unsafe.Pointer(&objs[1][0])) - uintptr(unsafe.Pointer(&objs[0][0])); d != 64 {
		t.Errorf("consecutive 64-byte objects %d bytes apart, want 64 (one region)", d)
	}
	st := h.Stats()
	// 3000 * 64 bytes fill two 64 KiB regions and part of a third; the
	// 100 KiB block is its own, 13 pages.
	want := HeapStats{Requested: 3000*64 + 100<<10, Blocks: 3001}
	if backend != GoMemory {
		want.LiveObjects, want.Allocs = 4, 4
		want.PageBytes = 3*regionBytes + 13*8192
		want.LiveBytes = want.PageBytes
	} else {
		want.LiveObjects, want.Allocs = 4, 4
		want.PageBytes = 3*regionBytes + 100<<10
		want.LiveBytes = want.PageBytes
	}
	if st != want {
		t.Errorf("heap stats\n %+v, want\n %+v", st, want)
	}
	during := ReadStats().C
	_ = big
	h.Release()
	after := ReadStats().C
	if backend != GoMemory {
		if d := during.PageInuse - before.PageInuse; d != want.PageBytes {
			t.Errorf("C pages in use grew by %d, want the heap's %d", d, want.PageBytes)
		}
		if after.PageInuse != before.PageInuse {
			t.Errorf("after Release: C pages in use %d, want %d as before", after.PageInuse, before.PageInuse)
		}
	}
	if s := h.Stats(); s != (HeapStats{}) {
		t.Errorf("stats after Release: %+v", s)
	}
	h.Release()
	defer func() {
		if recover() == nil {
			t.Error("Heap.Calloc after Release did not panic")
		}
	}()
	h.Calloc(1)
}

func TestReadStatsCountsCallocInTheCHeap(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := ReadStats()
	b := Calloc(1<<20, "stats") // a large block: 1 MiB and its trailer, 129 pages
	mid := ReadStats()
	Free(b)
	after := ReadStats()
	if d := mid.CallocBytes - before.CallocBytes; d != 1<<20 {
		t.Errorf("CallocBytes grew by %d", d)
	}
	if backend != GoMemory {
		if d := mid.C.HeapAlloc - before.C.HeapAlloc; d != 129*8192 {
			t.Errorf("C HeapAlloc grew by %d, want %d", d, 129*8192)
		}
		if after.C.HeapAlloc != before.C.HeapAlloc {
			t.Errorf("C HeapAlloc after Free %d, before %d", after.C.HeapAlloc, before.C.HeapAlloc)
		}
		if mid.CHeld < mid.C.HeapUsage || mid.C.HeapUsage < 1<<20 {
			t.Errorf("C held %d, usage %d", mid.CHeld, mid.C.HeapUsage)
		}
	}
	if mid.RSS == 0 || int64(mid.RSS) != int64(mid.GoHeld)+int64(mid.CHeld)+mid.Rest {
		t.Errorf("ledger: RSS %d, Go %d + C %d + rest %d", mid.RSS, mid.GoHeld, mid.CHeld, mid.Rest)
	}
	s := mid.String()
	for _, w := range []string{"pagealloc (" + backend.String() + "): RSS ", "Calloc:  1.0 MiB live", "C heap:", "Go heap:"} {
		if !strings.Contains(s, w) {
			t.Errorf("String() lacks %q:\n%s", w, s)
		}
	}
}

func TestVendoredSourcesMatchSrc(t *testing.T) {
	srcs, _ := filepath.Glob("../src/*.c")
	ours, _ := filepath.Glob("c_*.c")
	if len(srcs) == 0 || len(srcs) != len(ours) {
		t.Fatalf("%d sources in ../src, %d c_*.c here: run go generate", len(srcs), len(ours))
	}
	for _, s := range srcs {
		name := filepath.Base(s)
		b, err := os.ReadFile("c_" + name)
		if err != nil || !bytes.Contains(b, []byte(`#include "../src/`+name+`"`)) {
			t.Errorf("c_%s does not include ../src/%s: run go generate", name, name)
		}
	}
}

func TestBackendNamesTheBuild(t *testing.T) {
	want := Vendored
	if os.Getenv("CGO_ENABLED") == "0" {
		want = GoMemory
	}
	if os.Getenv("PAGEALLOC_TEST_BACKEND") == "system" {
		want = System
	}
	if CurrentBackend() != want {
		t.Errorf("CurrentBackend() = %v, want %v", CurrentBackend(), want)
	}
}
