#!/usr/bin/env python3
"""Tests of tools/valkey/apply-valkey.py on a made-up checkout: files that
hold only the lines the script looks for (no Valkey source), the exact text
it writes, that a second run changes nothing, and that a missing line stops
it before any file changes. Run: python3 tools/valkey/test_apply_valkey.py
(tools/test.sh does)."""

import importlib.util
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in tools/
spec = importlib.util.spec_from_file_location("apply_valkey", os.path.join(HERE, "apply-valkey.py"))
apply_valkey = importlib.util.module_from_spec(spec)
spec.loader.exec_module(apply_valkey)

# Each file: its anchor lines between two lines of our own.
FAKE = {
    "src/zmalloc.h": "A\n#elif defined(__APPLE__)\n#include <malloc/malloc.h>\nB\n",
    "src/zmalloc.c": "A\n#define dallocx(ptr, flags) je_dallocx(ptr, flags)\n#endif\nB\n"
                     "#else\n\nint zmalloc_get_allocator_info(void);\n",
    "src/object.c": "A\n#else\n        addReplyBulkCString(c, \"Stats not supported for the current "
                    "allocator\");\n#endif\n",
    "src/Makefile": "A\n\tFINAL_LIBS := ../deps/jemalloc/lib/libjemalloc.a $(FINAL_LIBS)\nendif\nB\n"
                    "ENGINE_BENCHMARK_OBJ=ae.o zmalloc.o\nC\n",
}


def make_checkout(root, files=FAKE):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def read(root, rel):
    with open(os.path.join(root, rel)) as f:
        return f.read()


def run(root):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = apply_valkey.main(["apply-valkey.py", root])
    return rc, out.getvalue(), err.getvalue()


class Apply(unittest.TestCase):
    def test_each_edit_lands_beside_the_jemalloc_line_it_mirrors(self):
        with tempfile.TemporaryDirectory() as d:
            make_checkout(d)
            rc, out, _ = run(d)
            self.assertEqual(rc, 0)
            self.assertEqual(out.count("apply-valkey: edited"), 4)
            h = read(d, "src/zmalloc.h")
            self.assertEqual(h.split("\n")[1], "#elif defined(USE_PAGEALLOC)")
            self.assertIn('#include "zmalloc_pagealloc.h"\n\n#elif defined(__APPLE__)\n', h)
            c = read(d, "src/zmalloc.c")
            self.assertIn("je_dallocx(ptr, flags)\n", c)
            self.assertIn("#define free(ptr) pa_free(ptr)\n", c)
            self.assertIn("#define mallocx(size, flags) allocatorDefragAlloc(size)\n"
                          "#define dallocx(ptr, flags) allocatorDefragFree(ptr, 0)\n#endif\n", c)
            self.assertIn(" * jemalloc_purge are libpagealloc's, in zmalloc_pagealloc.c. */\n\n"
                          "#else\n\nint zmalloc_get_allocator_info(", c)
            o = read(d, "src/object.c")
            self.assertIn("pagealloc_stats_print(inputCatSds, &info);", o)
            self.assertTrue(o.index("#elif defined(USE_PAGEALLOC)") < o.index("#else"))
            m = read(d, "src/Makefile")
            self.assertIn("ifeq ($(MALLOC),pagealloc)\n\tFINAL_CFLAGS+= -DUSE_PAGEALLOC "
                          "-DPAGEALLOC_VERSION=$(PAGEALLOC_VERSION) -I$(PAGEALLOC_INCLUDE)\n", m)
            self.assertIn("ENGINE_BENCHMARK_OBJ=ae.o zmalloc.o\n# libpagealloc: its figures", m)
            self.assertIn("ENGINE_BENCHMARK_OBJ+= zmalloc_pagealloc.o\nendif\nC\n", m)
            for name in ("zmalloc_pagealloc.h", "zmalloc_pagealloc.c"):
                self.assertEqual(read(d, "src/" + name), read(HERE, name))

    def test_a_second_run_changes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            make_checkout(d)
            run(d)
            before = {rel: read(d, rel) for rel in FAKE}
            rc, out, _ = run(d)
            self.assertEqual(rc, 0)
            self.assertEqual(out, "")
            self.assertEqual({rel: read(d, rel) for rel in FAKE}, before)

    def test_a_missing_line_stops_it_naming_file_and_line_with_no_file_changed(self):
        with tempfile.TemporaryDirectory() as d:
            files = dict(FAKE)
            files["src/object.c"] = "A\n#endif\n"
            make_checkout(d, files)
            rc, out, err = run(d)
            self.assertEqual(rc, 1)
            self.assertEqual(out, "")
            self.assertEqual(err, "apply-valkey: %s/src/object.c: line '#else' not found (a Valkey "
                             "other than the late-2024 snapshot?)\n" % d)
            self.assertEqual({rel: read(d, rel) for rel in files}, files)
            self.assertFalse(os.path.exists(os.path.join(d, "src/zmalloc_pagealloc.c")))

    def test_a_folder_without_zmalloc_is_not_a_checkout(self):
        with tempfile.TemporaryDirectory() as d:
            rc, _, err = run(d)
            self.assertEqual(rc, 1)
            self.assertEqual(err, "apply-valkey: %s: no src/zmalloc.c, not a Valkey checkout\n" % d)


if __name__ == "__main__":
    unittest.main()
