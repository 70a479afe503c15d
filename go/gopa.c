// clang-format off
//go:build cgo

/*
 * gopa.c — the C side of Calloc and Free: one cgo crossing each.
 *
 * A block of Calloc holds the caller's n bytes, then its trailer (tag,
 * size, sampled: the meta word of pagealloc.go) in the last 8 bytes of the
 * block's usable size, so the caller's first byte is the block's and
 * pa_free checks the caller's pointer itself.
 *
 * gopa_calloc is the frame every sample the library takes of a Calloc
 * block starts in (the library trims its own frames): profile.go leaves
 * those samples to the Go side, which knows the Go stack. It finds them by
 * address, from gopa_calloc to gopa_free, which follows it here; keep the
 * two together and in this order, and keep anything that allocates out of
 * them.
 *
 * One heap per process: where libpagealloc is preloaded as well (`pagealloc
 * run`, LD_PRELOAD), the program's C code allocates from the preloaded
 * library, and so do Calloc, Free, ShouldMove, Move, Scavenge and
 * WriteHeapProfile (gopa_init finds its functions): the C code's blocks and
 * Calloc's are in one heap, one heap profile and one report at exit. The
 * copy linked into the program then writes no file of its own at exit (no
 * profile, story, map or live file under the same process id as the
 * preloaded one's); its arenas (Heap) and ReadStats's C figures stay its own.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pagealloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void *(*calloc_fn)(size_t, size_t) = pa_calloc;
static void (*free_fn)(void *) = pa_free;
static size_t (*usable_fn)(void *) = pa_malloc_usable_size;
static size_t (*usable_as_fn)(void *, const char *) = pa_malloc_usable_size_as;
static int (*hint_fn)(const void *) = pa_defrag_hint;
static void *(*move_fn)(void *) = pa_defrag_move;
static int (*trim_fn)(size_t) = pa_malloc_trim;
static int (*dump_fn)(const char *) = pa_prof_dump;

void *gopa_calloc(size_t n, uint64_t meta)
{
	void *p = calloc_fn(1, n + sizeof meta);
	if (p == NULL)
		return NULL;
	memcpy((char *)p + usable_fn(p) - sizeof meta, &meta, sizeof meta);
	return p;
}

/* The library reports a pointer its heap did not hand out before anything
 * is read: one line naming Free, the pointer and the fault, then abort. */
uint64_t gopa_free(void *p)
{
	uint64_t meta;
	memcpy(&meta, (char *)p + usable_as_fn(p, "Free") - sizeof meta, sizeof meta);
	free_fn(p);
	return meta;
}

int gopa_defrag_hint(void *p) { return hint_fn(p); }
void *gopa_defrag_move(void *p) { return move_fn(p); }
int gopa_trim(void) { return trim_fn(0); }
int gopa_prof_dump(const char *path) { return dump_fn(path); }

/* The preloaded libpagealloc's function name, or NULL: one found after this
 * program (RTLD_NEXT) in the object that also has pa_prof_dump. */
static void *preloaded(const char *name, const Dl_info *lib)
{
	Dl_info in;
	void *f = dlsym(RTLD_NEXT, name);
	if (f == NULL || dladdr(f, &in) == 0 || in.dli_fbase != lib->dli_fbase)
		return NULL;
	return f;
}

/* 1: libpagealloc is preloaded, and Calloc's blocks now come from it. The
 * preloaded library is the one after this program with pa_prof_dump that is
 * not the library pa_calloc comes from (this program, vendored; or an
 * installed libpagealloc.so, whose pa_prof_dump the preload's would hide). */
int gopa_init(void)
{
	Dl_info lib, own;
	void *dump = dlsym(RTLD_NEXT, "pa_prof_dump");
	if (dump == NULL || dladdr(dump, &lib) == 0 || dladdr((void *)pa_calloc, &own) == 0 ||
	    lib.dli_fbase == own.dli_fbase)
		return 0;
	void *c = preloaded("calloc", &lib), *f = preloaded("free", &lib);
	void *u = preloaded("malloc_usable_size", &lib), *h = preloaded("pa_defrag_hint", &lib);
	void *m = preloaded("pa_defrag_move", &lib), *t = preloaded("malloc_trim", &lib);
	void *ua = preloaded("pa_malloc_usable_size_as", &lib);
	if (!c || !f || !u || !h || !m || !t || !ua)
		return 0;
	calloc_fn = (void *(*)(size_t, size_t))c;
	free_fn = (void (*)(void *))f;
	usable_fn = (size_t(*)(void *))u;
	usable_as_fn = (size_t(*)(void *, const char *))ua;
	hint_fn = (int (*)(const void *))h;
	move_fn = (void *(*)(void *))m;
	trim_fn = (int (*)(size_t))t;
	dump_fn = (int (*)(const char *))dump;
	pa_config("prof_prefix=,stats_print=off,map_prefix=,live=off");
	return 1;
}

/* C's exit: atexit handlers and destructors run, the libraries' among them
 * (Go's own exit runs none). */
void gopa_exit(int code) { exit(code); }
