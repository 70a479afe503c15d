// Package pagealloc is libpagealloc from Go: memory outside Go's heap as
// []byte, counted by tag, freed by hand or an arena at a time, with C heap
// figures beside Go's and heap profiles that name the Go code that
// allocated.
//
// It is for what Dgraph's ristretto z, Pebble's manual and Arrow's
// allocators do with jemalloc: large or long-lived buffers the garbage
// collector should not scan or keep after a free phase. The names are z's:
//
//	buf := pagealloc.Calloc(n, "block-cache") // zeroed, len = cap = n
//	...
//	pagealloc.Free(buf)
//	fmt.Print(pagealloc.Leaks()) // what was not freed, by tag
//
// # Building
//
// A binary gets one of three backends; CurrentBackend says which:
//
//   - Vendored (with cgo, the default): the library's C sources, in this
//     module, compiled by cgo. `go build` needs Go and a C compiler, nothing
//     installed, nothing downloaded. The first build compiles the library
//     (about 20 s); Go's build cache keeps it.
//   - System (-tags pagealloc_system): an installed libpagealloc found by
//     pkg-config (`cmake --install`'s pagealloc.pc; set PKG_CONFIG_PATH for
//     a prefix of your own, and LD_LIBRARY_PATH to run). Go's build cache
//     does not notice a new PKG_CONFIG_PATH: when switching installations,
//     put the prefix in CGO_LDFLAGS too (-L PREFIX/lib), as
//     tools/test-go.sh does.
//   - GoMemory (CGO_ENABLED=0): Calloc is make and the garbage collector
//     frees; Free only keeps the counts and the checks, so code, tests and
//     Leaks work the same.
//
// # Rules for memory from Calloc and Heap
//
// With cgo the memory is C memory, and cgo's rule applies: it must not
// hold Go pointers. The garbage collector does not scan it, so a Go object
// referred to only from there is freed while still in use, and the write
// barrier never sees the store. Store offsets, indexes or other Calloc
// memory instead. Using a slice after its Free (or its Heap's Release) is
// a use after free, as in C.
//
// Free checks its argument: a slice whose first byte is not the first
// byte of a live Calloc block (Go memory, an interior slice, a block freed
// already) prints one line naming the pointer and stops the program.
//
// # Figures and profiles
//
// ReadStats gives the C heap's figures in runtime.MemStats's terms beside
// runtime.MemStats and the resident set, with the ledger RSS = Go + C heap
// + rest; its String prints them. WriteHeapProfile writes a pprof heap
// profile of the C heap in which Calloc's blocks carry the Go stacks that
// asked for them (sampled on the Go side, one block per prof_sample bytes
// on average, 512 KiB unless PAGEALLOC_CONF or SetProfileRate says
// otherwise), labelled with their tag: `go tool pprof -top FILE`.
//
// # The leak report at exit
//
// Run on the preload library, `pagealloc run --heap-profile DIR -- ./prog`
// reports at exit the sampled C blocks still live, site by site; samples of
// C code that Go called through cgo carry the Go frames that called it, and
// the report names them with file and line:
//
//	4.0 MiB in 64 objects from copyRecord (main.go:20) <- main.leakRecords (main.go:47) <- main.main (main.go:58)
//
// The library writes that report from its exit handlers, which Go's own
// exit (main returning, os.Exit) never runs: end main with Exit(code),
// which is C's exit. Under the preload library Calloc's blocks come from
// it too, so they are in the same report (and the copy linked in here
// writes no file of its own). The binary must be linked dynamically
// (LD_PRELOAD does not reach a -static one). go/internal/cgoleak is the
// example; docs/heap-profiles.md in the repository has the details.
//
// # Defragmentation
//
// After a free phase, ShouldMove names the live Calloc blocks whose moving
// would let a sparse span drain, and Move moves one (the caller updates its
// references): compaction that copies only what pins memory.
//
// The library reads PAGEALLOC_CONF as its C programs do (memory_limit,
// scavenge_delay_ms, ...: see include/pagealloc.h).
package pagealloc
