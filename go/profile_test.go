package pagealloc

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
)

func init() {
	children["profile"] = func() {
		SetProfileRate(1) // every Calloc sampled: weights of exactly 1
		blocks := make([][]byte, 100)
		profiledAllocSite(blocks)
		for _, b := range blocks[:50] {
			Free(b)
		}
		f, err := os.Create(os.Getenv("PAGEALLOC_TEST_PROFILE"))
		if err != nil {
			panic(err)
		}
		if err := WriteHeapProfile(f); err != nil {
			panic(err)
		}
		if err := f.Close(); err != nil {
			panic(err)
		}
		g, err := os.Create(os.Getenv("PAGEALLOC_TEST_PROFILE") + ".go")
		if err != nil {
			panic(err)
		}
		runtime.GC()
		if err := pprof.Lookup("heap").WriteTo(g, 0); err != nil {
			panic(err)
		}
		if err := g.Close(); err != nil {
			panic(err)
		}
	}
}

// profiledAllocSite makes no Go allocation of its own: Go's heap profile,
// merged below, must not add a sample of it (an append's growth, sampled
// now and then at Go's rate, weighs about 512 kB).
//
//go:noinline
func profiledAllocSite(out [][]byte) {
	for i := range out {
		out[i] = Calloc(4096, "profiled")
	}
}

// The child allocates 100 blocks of 4 KiB from profiledAllocSite and frees
// 50, with the library sampling about every 4 KiB too (its samples of
// Calloc's blocks must not appear beside the Go ones).
func TestHeapProfileNamesTheGoCallerInPprof(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pb.gz")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PAGEALLOC_TEST_CHILD=profile", "PAGEALLOC_TEST_PROFILE="+path,
		"PAGEALLOC_CONF=prof_sample=4096")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	pprof := func(args ...string) string {
		t.Helper()
		if args[len(args)-1] != path+".go" {
			args = append(args, path)
		}
		args = append([]string{"tool", "pprof"}, args...)
		out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), args...).Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cases := []struct{ index, total string }{
		{"inuse_space", "200kB"}, // 50 * 4096
		{"inuse_objects", "50"},
		{"alloc_space", "400kB"},
		{"alloc_objects", "100"},
	}
	for _, c := range cases {
		out := pprof("-top", "-sample_index="+c.index)
		site := regexp.MustCompile(`(?m)^\s*` + c.total + `\s+100(\.00)?%.*/pagealloc/go\.profiledAllocSite\s*$`)
		total := regexp.MustCompile(`(?m)^Showing nodes accounting for ` + c.total + `, 100(\.00)?% of ` + c.total + ` total`)
		if !site.MatchString(out) || !total.MatchString(out) {
			t.Errorf("-sample_index=%s: want %s, all of it in profiledAllocSite:\n%s", c.index, c.total, out)
		}
		if strings.Contains(out, "gopa_calloc") {
			t.Errorf("-sample_index=%s: the library's own sample of a Calloc block is there:\n%s", c.index, out)
		}
	}
	// Merged with Go's own heap profile of the same process: one report.
	if out := pprof("-top", "-sample_index=alloc_space", path, path+".go"); !regexp.MustCompile(`(?m)^\s*400kB .*/pagealloc/go\.profiledAllocSite\s*$`).MatchString(out) {
		t.Errorf("merged with Go's heap profile: want profiledAllocSite's 400kB:\n%s", out)
	}
	if out := pprof("-tags"); !regexp.MustCompile(`tag: Total 200\.0kB\s*\n\s*200\.0kB \(\s*100%\): profiled`).MatchString(out) {
		t.Errorf("-tags: want every sample under tag profiled:\n%s", out)
	}
}
