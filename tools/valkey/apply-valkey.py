#!/usr/bin/env python3
"""apply-valkey.py: make a Valkey checkout buildable with `make MALLOC=pagealloc`.

    tools/valkey/apply-valkey.py VALKEY_CHECKOUT

Copies zmalloc_pagealloc.h and zmalloc_pagealloc.c (this folder) into the
checkout's src/ and makes five small edits there, each an #elif or a make
block beside the jemalloc one it mirrors, each marked "libpagealloc":

  src/zmalloc.h  an `#elif defined(USE_PAGEALLOC)` allocator branch that
                 includes zmalloc_pagealloc.h (ZMALLOC_LIB, zmalloc_size,
                 HAVE_DEFRAG);
  src/zmalloc.c  malloc/calloc/realloc/free as pa_*, and the cache-bypassing
                 mallocx/dallocx of zmalloc_no_tcache/zfree_no_tcache as the
                 defrag contract's allocatorDefragAlloc/allocatorDefragFree;
                 the generic zmalloc_get_allocator_info/jemalloc_purge/
                 set_jemalloc_bg_thread left out (zmalloc_pagealloc.c has
                 libpagealloc's);
  src/object.c   MEMORY MALLOC-STATS prints libpagealloc's heap story;
  src/Makefile   MALLOC=pagealloc: -DUSE_PAGEALLOC, PAGEALLOC_INCLUDE,
                 PAGEALLOC_LIB, PAGEALLOC_VERSION, and zmalloc_pagealloc.o
                 in the server's, the CLI's and the benchmark's objects.

Idempotent: a file that already has its edit is left as it is. Each edit
finds its place by a line of the fetched snapshot (late 2024); if a line is
not there, the script stops and names the file and the line, changing no file.
"""
import os
import shutil
import sys

MARK = "libpagealloc"

ZMALLOC_H = (
    "#elif defined(__APPLE__)\n#include <malloc/malloc.h>\n",
    "#elif defined(USE_PAGEALLOC)\n"
    "/* libpagealloc (make MALLOC=pagealloc): zmalloc_pagealloc.h gives ZMALLOC_LIB,\n"
    " * zmalloc_size and HAVE_DEFRAG. */\n"
    '#include "zmalloc_pagealloc.h"\n\n',
    "before",
)

ZMALLOC_C_MACROS = (
    "#define dallocx(ptr, flags) je_dallocx(ptr, flags)\n",
    "/* libpagealloc: the pa_ functions, and active defrag's cache-bypassing pair\n"
    " * (zmalloc_no_tcache, zfree_no_tcache) on its defrag contract. */\n"
    "#elif defined(USE_PAGEALLOC)\n"
    "#define malloc(size) pa_malloc(size)\n"
    "#define calloc(count, size) pa_calloc(count, size)\n"
    "#define realloc(ptr, size) pa_realloc(ptr, size)\n"
    "#define free(ptr) pa_free(ptr)\n"
    "#define mallocx(size, flags) allocatorDefragAlloc(size)\n"
    "#define dallocx(ptr, flags) allocatorDefragFree(ptr, 0)\n",
    "after",
)

ZMALLOC_C_INFO = (
    "#else\n\nint zmalloc_get_allocator_info(",
    "#elif defined(USE_PAGEALLOC)\n"
    "/* libpagealloc: zmalloc_get_allocator_info, set_jemalloc_bg_thread and\n"
    " * jemalloc_purge are libpagealloc's, in zmalloc_pagealloc.c. */\n\n",
    "before",
)

OBJECT_C = (
    '#else\n        addReplyBulkCString(c, "Stats not supported for the current allocator");\n',
    "#elif defined(USE_PAGEALLOC)\n"
    "        /* libpagealloc: its heap story, pa_malloc_stats_print's text. */\n"
    "        sds info = sdsempty();\n"
    "        pagealloc_stats_print(inputCatSds, &info);\n"
    '        addReplyVerbatim(c, info, sdslen(info), "txt");\n'
    "        sdsfree(info);\n",
    "before",
)

MAKEFILE_LIBS = (
    "\tFINAL_LIBS := ../deps/jemalloc/lib/libjemalloc.a $(FINAL_LIBS)\nendif\n",
    "\n# libpagealloc (its tools/valkey/build-valkey.sh sets these): PAGEALLOC_INCLUDE\n"
    "# holds pagealloc.h, PAGEALLOC_LIB is libpagealloc.a or -L... -lpagealloc.\n"
    "ifeq ($(MALLOC),pagealloc)\n"
    "\tFINAL_CFLAGS+= -DUSE_PAGEALLOC -DPAGEALLOC_VERSION=$(PAGEALLOC_VERSION) -I$(PAGEALLOC_INCLUDE)\n"
    "\tFINAL_LIBS := $(PAGEALLOC_LIB) $(FINAL_LIBS) -lpthread\n"
    "endif\n",
    "after",
)

MAKEFILE_OBJS = (
    "ENGINE_BENCHMARK_OBJ=",
    "# libpagealloc: its figures and defrag contract, in every program that links zmalloc.o.\n"
    "ifeq ($(MALLOC),pagealloc)\n"
    "ENGINE_SERVER_OBJ+= zmalloc_pagealloc.o\n"
    "ENGINE_CLI_OBJ+= zmalloc_pagealloc.o\n"
    "ENGINE_BENCHMARK_OBJ+= zmalloc_pagealloc.o\n"
    "endif\n",
    "after-line",
)

EDITS = {
    "src/zmalloc.h": [ZMALLOC_H],
    "src/zmalloc.c": [ZMALLOC_C_MACROS, ZMALLOC_C_INFO],
    "src/object.c": [OBJECT_C],
    "src/Makefile": [MAKEFILE_LIBS, MAKEFILE_OBJS],
}


def apply_edit(text, anchor, insert, where):
    """text with insert placed before/after anchor (after-line: after the
    whole line that starts with anchor); None if anchor is missing."""
    i = text.find(anchor)
    if i < 0:
        return None
    if where == "before":
        return text[:i] + insert + text[i:]
    if where == "after":
        j = i + len(anchor)
    else:
        j = text.index("\n", i) + 1
    return text[:j] + insert + text[j:]


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: apply-valkey.py VALKEY_CHECKOUT\n")
        return 2
    checkout = argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    if not os.path.isfile(os.path.join(checkout, "src", "zmalloc.c")):
        sys.stderr.write("apply-valkey: %s: no src/zmalloc.c, not a Valkey checkout\n" % checkout)
        return 1
    out = {}
    for rel, edits in EDITS.items():
        path = os.path.join(checkout, rel)
        with open(path) as f:
            text = f.read()
        if MARK in text:
            continue
        for anchor, insert, where in edits:
            new = apply_edit(text, anchor, insert, where)
            if new is None:
                first = anchor.splitlines()[0] if anchor.strip() else anchor
                sys.stderr.write("apply-valkey: %s: line %r not found (a Valkey other than the "
                                 "late-2024 snapshot?)\n" % (path, first))
                return 1
            text = new
        out[path] = text
    for path, text in out.items():
        with open(path, "w") as f:
            f.write(text)
        print("apply-valkey: edited %s" % path)
    for name in ("zmalloc_pagealloc.h", "zmalloc_pagealloc.c"):
        shutil.copyfile(os.path.join(here, name), os.path.join(checkout, "src", name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
