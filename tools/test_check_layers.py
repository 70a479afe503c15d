#!/usr/bin/env python3
"""test_check_layers.py — tools/check_layers.py on small fake trees.

    python3 tools/test_check_layers.py        (tools/test.sh runs it)

Each case writes a tree of a few files into a temporary directory, runs the
checker on it as tools/test.sh does, and compares its exit status and every
line it prints with the expected ones. The fake files take the names of real
modules, so the checker's own LAYERS places them.
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layers.py")


def run_on(files):
    """Write files ({path: text}) into a fresh tree; run the checker on it.
    Returns (exit status, printed lines)."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as fh:
                fh.write(textwrap.dedent(text).lstrip("\n"))
        r = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True)
        return r.returncode, r.stdout.splitlines()


# A tree whose arrows all point down: the API over malloc over spans over
# the OS, the preload compiling malloc.c again, a system call in os.c only.
CLEAN = {
    "include/pagealloc.h": """
        void *pa_malloc(unsigned long n);
        """,
    "preload/malloc_names.c": """
        #include "../src/malloc.c"
        """,
    "src/malloc.c": """
        #include "pagealloc.h"
        #include "span.h"
        void *pa_malloc(unsigned long n)
        {
        	return span_new(n); /* mmap( in a comment is not a call */
        }
        """,
    "src/span.h": """
        #include "os.h"
        void *span_new(unsigned long n);
        """,
    "src/span.c": """
        #include "span.h"
        static int helper(void) { return 0; }
        void *span_new(unsigned long n)
        {
        	const char *s = "madvise(";
        	return os_map(n + helper() + (s != 0));
        }
        """,
    "src/os.h": """
        void *os_map(unsigned long n);
        """,
    "src/os.c": """
        #include <sys/mman.h>
        #include "os.h"
        void *os_map(unsigned long n)
        {
        	return mmap(0, n, 3, 0x22, -1, 0);
        }
        """,
}


class CheckLayers(unittest.TestCase):
    def test_a_tree_whose_arrows_point_down_passes(self):
        self.assertEqual(run_on(CLEAN), (0, []))

    def test_the_real_tree_passes(self):
        r = subprocess.run([sys.executable, CHECKER], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout.splitlines()), (0, []))

    def test_a_cycle_and_an_upward_include_fail_one_line_each(self):
        files = dict(CLEAN)
        # central and large share a layer: each may reach the other, but
        # not both.
        files["src/central.h"] = """
            unsigned central_take(unsigned n);
            """
        files["src/central.c"] = """
            #include "central.h"
            #include "large.h"
            unsigned central_take(unsigned n)
            {
            	return n;
            }
            """
        files["src/large.h"] = """
            void *large_alloc(unsigned long n);
            """
        files["src/large.c"] = """
            #include "large.h"
            void *large_alloc(unsigned long n)
            {
            	return (void *)(unsigned long)central_take(n);
            }
            """
        # A span that looks up its thread cache: an include upward.
        files["src/tcache.h"] = """
            struct pa_tcache;
            """
        files["src/span.h"] = """
            #include "os.h"
            #include "tcache.h"
            void *span_new(unsigned long n);
            """
        self.assertEqual(run_on(files), (1, [
            'src/span.h:2: #include "tcache.h": tcache (thread cache) is above span (spans)',
            "cycle: central -> large -> central",
        ]))

    def test_a_call_upward_without_an_include_fails(self):
        files = dict(CLEAN)
        files["src/os.c"] = """
            #include <sys/mman.h>
            #include "os.h"
            void *span_new(unsigned long n);
            void *os_map(unsigned long n)
            {
            	return n > 1 ? span_new(n - 1) : mmap(0, n, 3, 0x22, -1, 0);
            }
            """
        self.assertEqual(run_on(files), (1, [
            "src/os.c:3: span_new(): span (spans) is above os (os)",
            "src/os.c:6: span_new(): span (spans) is above os (os)",
            "cycle: os -> span -> os",
        ]))

    def test_a_system_call_outside_os_c_fails(self):
        files = dict(CLEAN)
        files["src/span.c"] = """
            #include "span.h"
            #include <sys/mman.h>
            void *span_new(unsigned long n)
            {
            	madvise(0, n, 4);
            	__asm__ volatile("syscall" ::: "memory");
            	return os_map(n);
            }
            """
        self.assertEqual(run_on(files), (1, [
            "src/span.c:5: system call madvise() outside src/os.c",
            "src/span.c:6: syscall instruction outside src/os.c",
        ]))

    def test_a_file_in_no_layer_and_an_unknown_include_fail(self):
        files = dict(CLEAN)
        files["src/extra.c"] = """
            #include "span.h"
            """
        files["src/malloc.c"] = """
            #include "pagealloc.h"
            #include "span.h"
            #include "gone.h"
            """
        self.assertEqual(run_on(files), (1, [
            "src/extra.c: module extra is in no layer (LAYERS, tools/check_layers.py)",
            'src/malloc.c:3: #include "gone.h": no such file',
        ]))


if __name__ == "__main__":
    unittest.main()
