// clang-format off
//go:build cgo && !pagealloc_system

/* Written by gen_csrc.go (go generate): the library's src/pagemap.c,
 * compiled by cgo as one translation unit of the vendored build. */
#include "../src/pagemap.c"
