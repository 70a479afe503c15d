//go:build ignore

// gen_csrc.go writes one file c_NAME.c per library source ../src/NAME.c:
// each includes its source, so cgo compiles the whole library inside this
// package (the vendored build) as separate translation units, the way
// CMake compiles it (the sources share static names, so one unity file
// would not compile). Run it after adding or removing a file in src/:
//
//	go generate ./go
//
// TestVendoredSourcesMatchSrc fails when the files here and src/ differ.
package main

import (
	"log"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	old, _ := filepath.Glob("c_*.c")
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			log.Fatal(err)
		}
	}
	srcs, err := filepath.Glob("../src/*.c")
	if err != nil || len(srcs) == 0 {
		log.Fatalf("no ../src/*.c (run from go/): %v", err)
	}
	for _, s := range srcs {
		name := strings.TrimSuffix(filepath.Base(s), ".c")
		text := "// clang-format off\n//go:build cgo && !pagealloc_system\n\n" +
			"/* Written by gen_csrc.go (go generate): the library's src/" + name + ".c,\n" +
			" * compiled by cgo as one translation unit of the vendored build. */\n" +
			"#include \"../src/" + name + ".c\"\n"
		if err := os.WriteFile("c_"+name+".c", []byte(text), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
