//go:build cgo

package pagealloc

/*
#include <pagealloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// gopa.c
void *gopa_calloc(size_t n, uint64_t meta);
uint64_t gopa_free(void *p);
int gopa_defrag_hint(void *p);
void *gopa_defrag_move(void *p);
int gopa_trim(void);
int gopa_prof_dump(const char *path);
int gopa_init(void);
void gopa_exit(int code);
*/
import "C"

import (
	"unsafe"
)

// trailerBytes is what each Calloc block holds beyond the caller's bytes.
const trailerBytes = 8

// preloaded: libpagealloc is preloaded too (pagealloc run), and Calloc's
// blocks come from it (gopa.c).
var preloaded = C.gopa_init() != 0

func sysExit(code int) { C.gopa_exit(C.int(code)) }

func sysCalloc(n int, meta uint64) unsafe.Pointer {
	return C.gopa_calloc(C.size_t(n), C.uint64_t(meta))
}

func sysFree(p unsafe.Pointer) uint64 {
	return uint64(C.gopa_free(p))
}

// ---- arenas ----------------------------------------------------------------

type sysHeap struct{ h *C.pa_heap_t }

func sysHeapNew() sysHeap {
	h := C.pa_heap_new()
	if h == nil {
		fatalf("NewHeap: the library has no heap to give (at most 4096 live at once)")
	}
	return sysHeap{h}
}

func (s sysHeap) calloc(n int) unsafe.Pointer {
	return C.pa_heap_calloc(s.h, 1, C.size_t(n))
}

func (s sysHeap) release() { C.pa_heap_destroy(s.h) }

func (s sysHeap) stats() HeapStats {
	var st C.struct_pa_heap_stats
	C.pa_heap_stats(s.h, &st)
	return HeapStats{
		LiveBytes:   uint64(st.live_bytes),
		LiveObjects: uint64(st.live_objects),
		PageBytes:   uint64(st.page_bytes),
		Spans:       uint64(st.spans),
		Allocs:      uint64(st.allocs),
	}
}

// ---- figures ---------------------------------------------------------------

func readCStats(c *CStats) {
	var m C.struct_pa_malloc_stats
	C.pa_malloc_stats(&m)
	var s C.struct_pa_stats
	C.pa_stats(&s)
	*c = CStats{
		HeapSys:          uint64(m.heap_sys),
		HeapInuse:        uint64(m.heap_inuse),
		HeapAlloc:        uint64(m.heap_alloc),
		HeapIdle:         uint64(m.heap_idle),
		HeapReleased:     uint64(m.heap_released),
		SpanReleased:     uint64(m.span_released),
		HeapUsage:        uint64(m.heap_usage),
		MaxFragmentation: uint64(m.max_fragmentation),
		LiveObjects:      uint64(m.live_objects),
		CachedBytes:      uint64(m.cached_bytes),
		PageInuse:        uint64(s.heap_inuse - s.cache_free - s.cache_queued),
		FragBytes:        uint64(C.pa_defrag_frag_bytes()),
		Metadata:         uint64(s.metadata),
	}
}

func sysDefragHint(p unsafe.Pointer) bool { return C.gopa_defrag_hint(p) != 0 }

func sysDefragMove(p unsafe.Pointer) unsafe.Pointer { return C.gopa_defrag_move(p) }

// cThreadCacheFlush hands the calling thread's cached objects back
// (ReadStats's figures are then exact for what this thread did).
func cThreadCacheFlush() { C.pa_thread_cache_flush() }

// cScavenge is pa_malloc_trim(0): this thread's cache and the per-CPU
// page caches back, the free 4 KiB pages inside spans and every free page
// released; the bytes that made resident memory smaller.
func cScavenge() uint64 {
	var before, after C.struct_pa_malloc_stats
	C.pa_malloc_stats(&before)
	C.pa_malloc_trim(0)
	if preloaded {
		C.gopa_trim() // Calloc's blocks' heap: the preloaded library's
	}
	C.pa_malloc_stats(&after)
	return uint64(before.heap_usage) - uint64(after.heap_usage)
}

// ---- profiles --------------------------------------------------------------

// callocFrames is where the library's samples of Calloc's blocks start:
// gopa_calloc, up to gopa_free (gopa.c). nil if the compiler did not keep
// them in that order: those samples then stay in the profile beside the
// Go side's.
func callocFrames() []addrRange {
	lo := uint64(uintptr(unsafe.Pointer(C.gopa_calloc)))
	hi := uint64(uintptr(unsafe.Pointer(C.gopa_free)))
	if lo >= hi || hi-lo > 4096 {
		return nil
	}
	return []addrRange{{lo, hi}}
}

// cProfDump writes the library's heap profile to path.
func cProfDump(path string) bool {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return C.gopa_prof_dump(cs) == 0
}
