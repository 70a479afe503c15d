/*
 * zmalloc_pagealloc.c: libpagealloc's figures and defrag contract for a
 * Valkey server built with `make MALLOC=pagealloc` (see zmalloc_pagealloc.h
 * and tools/valkey/build-valkey.sh, which copy this file into the checkout).
 *
 * Active defragmentation asks, pointer by pointer, whether moving a block
 * would help (allocatorShouldDefrag), and when it would, allocates the new
 * home bypassing every cache (allocatorDefragAlloc), copies, and frees the
 * old block straight to its span (allocatorDefragFree). libpagealloc's
 * answer: a small block whose span is partial, not being carved by a cache
 * and no fuller than its class's partial spans on average moves into the
 * fullest partial span of its class, so sparse spans drain and go back to
 * the page heap, whose scavenger returns their pages to the OS.
 *
 * Whether to run at all is decided from zmalloc_get_allocator_info: Valkey
 * starts when allocator_frag_bytes (the free slots inside partial spans,
 * allocatorDefragGetFragSmallbins) pass active-defrag-ignore-bytes and
 * frag_bytes / allocated passes active-defrag-threshold-lower.
 *
 * The first five functions are Valkey 8.1's allocator interface; the rest
 * are the names the fetched (pre-8.1) snapshot calls, each a few lines over
 * the five or over pa_malloc_stats.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zmalloc.h" /* USE_PAGEALLOC: includes zmalloc_pagealloc.h */
#include <pagealloc.h>

/* ---- Valkey 8.1's allocator interface ---------------------------------- */

int allocatorDefragInit(void)
{
	/* Nothing to look up: the contract's figures come from the heap itself. */
	return 0;
}

void *allocatorDefragAlloc(size_t size)
{
	return pa_defrag_malloc(size);
}

void allocatorDefragFree(void *ptr, size_t size)
{
	(void)size; /* the span knows the block's class */
	pa_defrag_free(ptr);
}

unsigned long allocatorDefragGetFragSmallbins(void)
{
	return pa_defrag_frag_bytes();
}

int allocatorShouldDefrag(void *ptr)
{
	return pa_defrag_hint(ptr);
}

/* ---- The snapshot's names ---------------------------------------------- */

/* defrag.c declares and calls jemalloc's hint under this name. */
int je_get_defrag_hint(void *ptr);
int je_get_defrag_hint(void *ptr)
{
	return allocatorShouldDefrag(ptr);
}

/* INFO memory's allocator_* fields, MEMORY DOCTOR and active defrag's start
 * and stop all read these. In jemalloc's terms:
 *   allocated: bytes in live blocks (each at its class's size);
 *   active:    pages of spans and large blocks, less the free 4 KiB pages
 *              inside spans already given back to the OS;
 *   resident:  the heap's resident pages (active plus free pages not yet
 *              released) and the allocator's own metadata;
 *   retained:  free pages given back to the OS, still mapped;
 *   muzzy:     0 (pages go back with MADV_DONTNEED, release=dontneed);
 *   frag_smallbins_bytes: free slots inside partial small-object spans. */
int zmalloc_get_allocator_info(size_t *allocated, size_t *active, size_t *resident,
                               size_t *retained, size_t *muzzy, size_t *frag_smallbins_bytes)
{
	struct pa_malloc_stats ms;
	struct pa_stats st;
	if (pa_malloc_stats(&ms) != 0 || pa_stats(&st) != 0) {
		*allocated = *active = *resident = *frag_smallbins_bytes = 0;
		if (retained)
			*retained = 0;
		if (muzzy)
			*muzzy = 0;
		return 0;
	}
	*allocated = ms.heap_alloc;
	*active = ms.heap_inuse - ms.span_released;
	*resident = ms.heap_usage + st.metadata;
	if (retained)
		*retained = ms.heap_released + ms.span_released;
	if (muzzy)
		*muzzy = 0;
	*frag_smallbins_bytes = allocatorDefragGetFragSmallbins();
	return 1;
}

/* jemalloc-bg-thread: libpagealloc's scavenger thread always runs (it returns
 * free pages to the OS while the server is idle); nothing to switch. */
void set_jemalloc_bg_thread(int enable)
{
	(void)enable;
}

/* MEMORY PURGE, and FLUSHALL/FLUSHDB where built for it: the caller's thread
 * cache, free pages inside spans and every free heap page back to the OS. */
int jemalloc_purge(void)
{
	pa_malloc_trim(0);
	return 0;
}

void pagealloc_stats_print(void (*write_cb)(void *, const char *), void *cbopaque)
{
	/* pa_malloc_stats_print writes to a file descriptor and allocates
	 * nothing; an anonymous memory file takes its text back. */
	int fd = memfd_create("pagealloc-stats", MFD_CLOEXEC);
	if (fd < 0) {
		write_cb(cbopaque, "libpagealloc: memfd_create failed, no stats\n");
		return;
	}
	pa_malloc_stats_print(fd);
	char buf[4096];
	ssize_t n;
	if (lseek(fd, 0, SEEK_SET) == 0) {
		while ((n = read(fd, buf, sizeof(buf) - 1)) > 0) {
			buf[n] = '\0';
			write_cb(cbopaque, buf);
		}
	}
	close(fd);
}
