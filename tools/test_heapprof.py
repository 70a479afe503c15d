#!/usr/bin/env python3
"""Tests of tools/heapprof.py: decoding profile.proto (gzip and plain, packed
and unpacked repeated fields) into exact values, the leak and top reports'
exact lines, symbolizing a real ELF file through addr2line (and without it),
the size and count formats, bad files, the module's own encoder (a round
trip of a symbolized profile, exact values) and `symbolize` of a real C++
program's profile (a namespaced function and -O2's main named, with their
lines, in the profile itself). Profiles are built here by a small encoder of
protobuf's wire format, independent of the module's. Run: python3
tools/test_heapprof.py."""

import contextlib
import gzip
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

sys.dont_write_bytecode = True  # no __pycache__ in tools/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heapprof  # noqa: E402

HEAPPROF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "heapprof.py")

# ---- an encoder of protobuf's wire format, as profwrite.c writes it ------------------


def varint(n):
    n &= (1 << 64) - 1  # int64: two's complement, 10 bytes when negative
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(number, wire):
    return varint(number << 3 | wire)


def num(number, n):
    return key(number, 0) + varint(n)


def ld(number, payload):
    return key(number, 2) + varint(len(payload)) + payload


def repeated(number, values, packed):
    if packed:
        return ld(number, b"".join(varint(v) for v in values))
    return b"".join(num(number, v) for v in values)


HEAP_TYPES = (("alloc_objects", "count"), ("alloc_space", "bytes"),
              ("inuse_objects", "count"), ("inuse_space", "bytes"))


class Builder:
    """A profile message: strings interned in order of first use, records
    added in order, encoded by bytes()."""

    def __init__(self, packed=True, types=HEAP_TYPES, period=524288):
        self.packed = packed
        self.strings = [""]
        self.body = b""
        for t, u in types:
            self.body += ld(1, num(1, self.s(t)) + num(2, self.s(u)))
        self.tail = ld(11, num(1, self.s("space")) + num(2, self.s("bytes"))) + num(12, period)

    def s(self, text):
        if text not in self.strings:
            self.strings.append(text)
        return self.strings.index(text)

    def sample(self, locations, values):
        self.body += ld(2, repeated(1, locations, self.packed) + repeated(2, values, self.packed))

    def mapping(self, id, start, limit, offset, filename, build_id=""):
        self.body += ld(3, num(1, id) + num(2, start) + num(3, limit) + num(4, offset) +
                        num(5, self.s(filename)) + num(6, self.s(build_id)))

    def location(self, id, address, mapping_id=0, lines=()):
        msg = num(1, id) + num(3, address)
        if mapping_id:
            msg += num(2, mapping_id)
        for function_id, line in lines:
            msg += ld(4, num(1, function_id) + num(2, line))
        self.body += ld(4, msg)

    def function(self, id, name, filename="x.c", start_line=1):
        self.body += ld(5, num(1, id) + num(2, self.s(name)) + num(3, self.s(name)) +
                        num(4, self.s(filename)) + num(5, start_line))

    def raw(self, data):
        self.body += data

    def __bytes__(self):
        table = b"".join(ld(6, t.encode()) for t in self.strings)
        return self.body + table + self.tail


def write(directory, name, data, compress=True):
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if compress else data)
    return path


# A profile whose Locations carry Lines (the form `pprof -proto` writes):
# named without addr2line. Sites, innermost first:
#   load_index <- main                 40 MiB + 100 KiB live in 10,240 objects (two
#                                      call lines in load_index: two locations)
#   parse_row <- load_index <- main     4 MiB in 2,000 objects
#   cache_put <- worker <- thread_start <- clone    (shown to depth 3) 512 B in 1 object
#   free_me <- main                     nothing live (freed): not a candidate
def named_profile(packed=True):
    b = Builder(packed=packed)
    b.mapping(1, 0x555555554000, 0x555555559000, 0, "/usr/bin/prog", "abc123")
    for i, name in enumerate(("load_index", "main", "parse_row", "cache_put", "worker",
                              "thread_start", "clone", "free_me"), 1):
        b.function(i, name)
    b.location(1, 0x555555555100, 1, [(1, 10)])  # load_index, one call line
    b.location(2, 0x555555555140, 1, [(1, 12)])  # load_index, another
    b.location(3, 0x555555555200, 1, [(2, 30)])  # main
    b.location(4, 0x555555555300, 1, [(3, 7)])  # parse_row
    b.location(5, 0x555555555400, 1, [(4, 1), (5, 2)])  # cache_put inlined into worker
    b.location(6, 0x555555555500, 1, [(6, 3)])  # thread_start
    b.location(7, 0x555555555600, 1, [(7, 4)])  # clone
    b.location(8, 0x555555555700, 1, [(8, 5)])  # free_me
    b.sample([1, 3], [8000, 40 << 20, 8000, 40 << 20])
    b.sample([2, 3], [2240, 100 << 10, 2240, 100 << 10])
    b.sample([4, 1, 3], [3000, 6 << 20, 2000, 4 << 20])
    b.sample([5, 6, 7], [1, 512, 1, 512])
    b.sample([8, 3], [50, 4096, 0, 0])
    return bytes(b)


class Silent:
    """Captures what main() prints."""

    def __enter__(self):
        self.out, self.err = io.StringIO(), io.StringIO()
        self._o = contextlib.redirect_stdout(self.out)
        self._e = contextlib.redirect_stderr(self.err)
        self._o.__enter__()
        self._e.__enter__()
        return self

    def __exit__(self, *exc):
        self._e.__exit__(*exc)
        self._o.__exit__(*exc)


# ---- tests -----------------------------------------------------------------------------


class Formats(unittest.TestCase):
    def test_size_picks_the_unit_and_keeps_one_decimal(self):
        cases = [
            ("zero", 0, "0 B"),
            ("bytes stay whole", 512, "512 B"),
            ("the last byte count", 1023, "1023 B"),
            ("exactly one KiB", 1024, "1.0 KiB"),
            ("rounds to the nearest tenth", 1690, "1.7 KiB"),
            ("rounding to 1024.0 KiB moves up a unit", (1 << 20) - 1, "1.0 MiB"),
            ("the example's 40.1 MiB", int(40.1 * (1 << 20)), "40.1 MiB"),
            ("exactly one GiB", 1 << 30, "1.0 GiB"),
            ("GiB is the largest unit", 2048 << 30, "2048.0 GiB"),
            ("a negative size", -2048, "-2.0 KiB"),
        ]
        for name, n, want in cases:
            with self.subTest(name):
                self.assertEqual(heapprof.size(n), want)

    def test_count_has_thousands_separators(self):
        for n, want in [(0, "0"), (999, "999"), (1000, "1,000"), (12345, "12,345"),
                        (1234567, "1,234,567")]:
            self.assertEqual(heapprof.count(n), want)


class Decoding(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def profile(self, packed=True):
        b = Builder(packed=packed)
        b.mapping(1, 0x400000, 0x401000, 0x1000, "/bin/prog", "b1d")
        b.mapping(2, 0x7f0000000000, 0x7f0000010000, 0, "/lib/libc.so.6")
        b.location(1, 0x400123, 1)
        b.location(2, 0x7f0000000456, 2)
        b.location(3, 0x400200, 0, [(1, 42), (2, 7)])
        b.function(1, "inner", "a.c", 40)
        b.function(2, "outer", "a.c", 5)
        b.sample([1, 2], [3, 3 << 19, 1, 1 << 19])
        b.sample([3], [0, 0, -1, -(1 << 40)])  # negative int64: 10-byte varints
        b.raw(num(9, 1700000000123456789) + num(10, 5000000000) +
              repeated(13, [b.s("hi")], packed))
        # Fields pprof does not know, of every wire type, are skipped.
        b.raw(key(99, 1) + b"\x01" * 8 + key(98, 5) + b"\x02" * 4 +
              num(97, 5) + ld(96, b"xyz"))
        return bytes(b)

    def check(self, p):
        self.assertEqual([(t.type, t.unit) for t in p.sample_type], list(HEAP_TYPES))
        self.assertEqual((p.period_type.type, p.period_type.unit, p.period),
                         ("space", "bytes", 524288))
        self.assertEqual((p.time_nanos, p.duration_nanos), (1700000000123456789, 5000000000))
        self.assertEqual(p.comment, ["hi"])
        self.assertEqual([(s.location_id, s.value) for s in p.sample],
                         [([1, 2], [3, 3 << 19, 1, 1 << 19]), ([3], [0, 0, -1, -(1 << 40)])])
        self.assertEqual([(m.id, m.memory_start, m.memory_limit, m.file_offset, m.filename,
                           m.build_id) for m in p.mapping],
                         [(1, 0x400000, 0x401000, 0x1000, "/bin/prog", "b1d"),
                          (2, 0x7f0000000000, 0x7f0000010000, 0, "/lib/libc.so.6", "")])
        self.assertEqual([(loc.id, loc.mapping_id, loc.address,
                           [(ln.function_id, ln.line) for ln in loc.line]) for loc in p.location],
                         [(1, 1, 0x400123, []), (2, 2, 0x7f0000000456, []),
                          (3, 0, 0x400200, [(1, 42), (2, 7)])])
        self.assertEqual([(f.id, f.name, f.system_name, f.filename, f.start_line)
                          for f in p.function],
                         [(1, "inner", "inner", "a.c", 40), (2, "outer", "outer", "a.c", 5)])
        self.assertIs(p.locations[2], p.location[1])
        self.assertIs(p.mapping_of(p.locations[3]), p.mapping[0])  # no mapping_id: by address

    def test_gzip_packed(self):
        self.check(heapprof.read(write(self.dir, "a", self.profile(packed=True))))

    def test_gzip_unpacked(self):
        self.check(heapprof.read(write(self.dir, "a", self.profile(packed=False))))

    def test_plain_packed_and_unpacked(self):
        for packed in (True, False):
            with self.subTest(packed=packed):
                path = write(self.dir, "a", self.profile(packed), compress=False)
                self.check(heapprof.read(path))

    def test_a_repeated_field_split_over_packed_and_unpacked_runs_is_joined(self):
        b = Builder()
        b.location(1, 0x10)
        b.location(2, 0x20)
        b.raw(ld(2, ld(1, varint(1)) + num(1, 2) +
                 num(2, 5) + ld(2, varint(6) + varint(7) + varint(8))))
        p = heapprof.decode(bytes(b))
        self.assertEqual((p.sample[0].location_id, p.sample[0].value), ([1, 2], [5, 6, 7, 8]))

    def test_varints_of_every_length_round_trip(self):
        for n in (0, 1, 127, 128, 300, (1 << 32) + 5, (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
            with self.subTest(n=n):
                self.assertEqual(heapprof.varint(varint(n), 0), (n, len(varint(n))))
        self.assertEqual(heapprof.int64(heapprof.varint(varint(-2), 0)[0]), -2)


class BadFiles(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def test_each_bad_file_raises_profile_error_with_its_reason(self):
        good = named_profile()
        b = Builder()
        b.sample([9], [1, 1, 1, 1])
        missing_location = bytes(b)
        b = Builder()
        b.sample([], [1, 2])
        too_few_values = bytes(b)
        cases = [
            ("empty", b"", False, "empty file"),
            ("text", b"hello, world\n", False, "wire type"),
            ("truncated gzip", gzip.compress(good)[:40], False, "bad gzip data"),
            ("a field running past its message", ld(2, b"\x0a\x05ab"), True, "past its message"),
            ("truncated varint", b"\x08\xff", True, "truncated varint"),
            ("no string table", num(12, 5), True, "string table"),
            ("a string index outside the table", ld(1, num(1, 7)) + ld(6, b""), True,
             "string 7 is not in the table"),
            ("a sample naming a missing location", missing_location, True, "location 9"),
            ("a sample with too few values", too_few_values, True, "2 values for 4 sample types"),
        ]
        for name, data, compress, reason in cases:
            with self.subTest(name):
                path = write(self.dir, "bad", data, compress)
                with self.assertRaises(heapprof.ProfileError) as cm:
                    heapprof.read(path)
                self.assertIn(reason, str(cm.exception))

    def test_a_missing_file_raises_profile_error(self):
        with self.assertRaises(heapprof.ProfileError) as cm:
            heapprof.read(os.path.join(self.dir, "absent"))
        self.assertEqual(str(cm.exception), "No such file or directory")

    def test_leaks_needs_the_heap_sample_types(self):
        b = Builder(types=(("samples", "count"),))
        p = heapprof.decode(bytes(b))
        with self.assertRaises(heapprof.ProfileError) as cm:
            heapprof.leak_report("f", p, heapprof.Symbolizer(p))
        self.assertIn("no alloc_objects sample type", str(cm.exception))

    def test_the_command_prints_one_line_and_exits_1(self):
        path = write(self.dir, "heap.1.0001.final.pb.gz", b"not gzip, not a profile", False)
        r = subprocess.run([sys.executable, HEAPPROF, "leaks", path],
                           capture_output=True, text=True, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.stderr.count("\n"), 1)
        self.assertTrue(r.stderr.startswith("heapprof.py: %s: not a heap profile: " % path),
                        r.stderr)

    def test_one_bad_file_among_good_ones_still_reports_the_good_ones(self):
        good = write(self.dir, "heap.7.0001.final.pb.gz", named_profile())
        bad = write(self.dir, "bad", b"", False)
        with Silent() as s:
            self.assertEqual(heapprof.main(["leaks", bad, good]), 1)
        self.assertIn("leak candidates of pid 7", s.out.getvalue())
        self.assertEqual(s.err.getvalue(),
                         "heapprof.py: %s: not a heap profile: empty file\n" % bad)


class Reports(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def test_leak_report_lines(self):
        path = write(self.dir, "heap.1234.0003.final.pb.gz", named_profile())
        with Silent() as s:
            self.assertEqual(heapprof.main(["leaks", path]), 0)
        self.assertEqual(s.out.getvalue().splitlines(), [
            "==== pagealloc: leak candidates of pid 1234 in %s (live sampled objects at exit: "
            "~44.1 MiB in 12,241 objects, estimated)" % path,
            "40.1 MiB in 10,240 objects from load_index <- main",
            "4.0 MiB in 2,000 objects from parse_row <- load_index <- main",
            "512 B in 1 object from cache_put <- worker <- thread_start",
            "look at it: go tool pprof -http=: /usr/bin/prog %s" % path,
        ])

    def test_leak_report_stops_at_main(self):
        b = Builder()
        b.mapping(1, 0x555555554000, 0x555555559000, 0, "/usr/bin/prog", "abc123")
        for i, name in enumerate(("leak_it", "main", "__libc_start_call_main"), 1):
            b.function(i, name)
        for i in (1, 2, 3):
            b.location(i, 0x555555555000 + 0x100 * i, 1, [(i, i)])
        b.sample([1, 2, 3], [10, 640, 10, 640])
        b.sample([2, 3], [1, 8 << 20, 1, 8 << 20])
        path = write(self.dir, "heap.9.0001.final.pb.gz", bytes(b))
        p = heapprof.read(path)
        self.assertEqual(heapprof.leak_report(path, p, heapprof.Symbolizer(p))[1:3], [
            "8.0 MiB in 1 object from main",
            "640 B in 10 objects from leak_it <- main",
        ])

    def test_a_c_function_called_from_go_is_named_with_its_go_caller_and_line(self):
        # A malloc in C code a Go program called through cgo, as the library
        # samples it (stack.c crosses into the Go frames): cgo's wrapper, the
        # runtime's switch of stacks, the Go stub and the pointer-check
        # closure are left out; Go's frames carry file:line; runtime.main
        # and below are cut at main.main. A Calloc block's C side goes too.
        b = Builder()
        b.mapping(1, 0x400000, 0x600000, 0, "/usr/bin/goprog", "abc123")
        frames = [("copyRecord", "/src/cgoleak/main.go", 19),
                  ("_cgo_8a1b2c3d4e5f_Cfunc_copyRecord", "/tmp/go-build/cgo-gcc-prolog", 60),
                  ("runtime.asmcgocall.abi0", "/usr/lib/go/src/runtime/asm_amd64.s", 844),
                  ("runtime.cgocall", "/usr/lib/go/src/runtime/cgocall.go", 158),
                  ("main._Cfunc_copyRecord", "_cgo_gotypes.go", 41),
                  ("main.leakRecords.func1", "/src/cgoleak/main.go", 45),
                  ("main.leakRecords", "/src/cgoleak/main.go", 45),
                  ("main.main", "/src/cgoleak/main.go", 56),
                  ("runtime.main", "/usr/lib/go/src/runtime/proc.go", 250),
                  ("gopa_calloc", "gopa.c", 47),
                  ("github.com/libpagealloc/pagealloc/go.sysCalloc", "/src/go/cgo.go", 35),
                  # sysCalloc inlined into Calloc, as addr2line names it
                  ("github.com/libpagealloc/pagealloc/go.Calloc", "/src/go/cgo.go", 37),
                  ("github.com/libpagealloc/pagealloc/go.Calloc", "/src/go/pagealloc.go", 140)]
        for i, (name, file, line) in enumerate(frames, 1):
            b.function(i, name, file)
            b.location(i, 0x401000 + 0x100 * i, 1, [(i, line)])
        b.sample([1, 2, 3, 4, 5, 6, 7, 8, 9], [64, 64 << 16, 64, 64 << 16])
        b.sample([10, 2, 3, 4, 5, 11, 12, 13, 7, 8, 9], [1, 100, 1, 100])
        path = write(self.dir, "heap.9.0001.final.pb.gz", bytes(b))
        p = heapprof.read(path)
        self.assertEqual(heapprof.leak_report(path, p, heapprof.Symbolizer(p))[1:3], [
            "4.0 MiB in 64 objects from copyRecord (main.go:19) <- main.leakRecords (main.go:45)"
            " <- main.main (main.go:56)",
            "100 B in 1 object from github.com/libpagealloc/pagealloc/go.Calloc (pagealloc.go:140)"
            " <- main.leakRecords (main.go:45) <- main.main (main.go:56)",
        ])

    def test_leak_report_same_from_unpacked_and_plain_files(self):
        a = write(self.dir, "heap.1.0001.final.pb.gz", named_profile(packed=True))
        b = write(self.dir, "heap.1.0002.final.pb", named_profile(packed=False), compress=False)
        pa, pb = heapprof.read(a), heapprof.read(b)
        self.assertEqual(heapprof.leak_report("x", pa, heapprof.Symbolizer(pa)),
                         heapprof.leak_report("x", pb, heapprof.Symbolizer(pb)))

    def test_the_pprof_command_quotes_a_path_with_a_space(self):
        path = write(self.dir, "heap.5.0001.final.pb.gz", named_profile())
        p = heapprof.read(path)
        lines = heapprof.leak_report("/tmp/a dir/f.pb.gz", p, heapprof.Symbolizer(p))
        self.assertEqual(lines[-1],
                         "look at it: go tool pprof -http=: /usr/bin/prog '/tmp/a dir/f.pb.gz'")

    def test_top_cuts_the_list_and_sums_the_rest(self):
        path = write(self.dir, "heap.1234.0001.peak.pb.gz", named_profile())
        with Silent() as s:
            self.assertEqual(heapprof.main(["leaks", "--top", "1", path]), 0)
        self.assertEqual(s.out.getvalue().splitlines()[0:3], [
            "==== pagealloc: leak candidates of pid 1234 in %s (live sampled objects at the peak: "
            "~44.1 MiB in 12,241 objects, estimated)" % path,
            "40.1 MiB in 10,240 objects from load_index <- main",
            "... and 4.0 MiB in 2,001 objects from 2 more sites",
        ])

    def test_nothing_live_is_one_line(self):
        b = Builder()
        b.mapping(1, 0x1000, 0x2000, 0, "/bin/p")
        b.function(1, "f")
        b.location(1, 0x1100, 1, [(1, 1)])
        b.sample([1], [10, 1000, 0, 0])
        path = write(self.dir, "heap.99.0001.final.pb.gz", bytes(b))
        with Silent() as s:
            self.assertEqual(heapprof.main(["leaks", path]), 0)
        self.assertEqual(s.out.getvalue(),
                         "==== pagealloc: no leak candidates of pid 99: no sampled object live "
                         "at exit (%s)\n" % path)

    def test_a_profile_without_samples_has_no_leak_candidates(self):
        path = write(self.dir, "other-name.pb.gz", bytes(Builder()))
        with Silent() as s:
            self.assertEqual(heapprof.main(["leaks", path]), 0)
        self.assertEqual(s.out.getvalue(),
                         "==== pagealloc: no leak candidates of %s: no sampled object live "
                         "when written (%s)\n" % (path, path))

    def test_top_report_lists_whole_stacks(self):
        path = write(self.dir, "p.pb.gz", named_profile())
        with Silent() as s:
            self.assertEqual(heapprof.main(["top", "--top", "2", path]), 0)
        self.assertEqual(s.out.getvalue().splitlines(), [
            "%s: 44.1 MiB in 12,241 live objects (estimated), 3 sites holding them" % path,
            "     inuse      %      objects      alloc      objects  stack",
            "  40.1 MiB  90.9%       10,240   40.1 MiB       10,240  load_index <- main",
            "   4.0 MiB   9.1%        2,000    6.0 MiB        3,000  "
            "parse_row <- load_index <- main",
        ])

    def test_dump_names_every_record(self):
        path = write(self.dir, "p.pb.gz", named_profile())
        with Silent() as s:
            self.assertEqual(heapprof.main(["dump", path]), 0)
        out = s.out.getvalue().splitlines()
        self.assertEqual(out[0], "sample_type: alloc_objects/count alloc_space/bytes "
                                 "inuse_objects/count inuse_space/bytes")
        self.assertIn("  values 8000 41943040 8000 41943040 locations 1 3", out)
        self.assertIn("  1: 0x555555554000-0x555555559000 offset 0x0 /usr/bin/prog "
                      "build_id abc123", out)
        self.assertIn("  5: 0x555555555400 mapping 1 cache_put:1 worker:2", out)


class Encoding(unittest.TestCase):
    """heapprof.encode: what it writes decodes back to the same values."""

    def test_varints_match_the_tests_encoder(self):
        for n in (0, 1, 127, 128, 300, (1 << 32) + 5, (1 << 63) - 1, -1, -2, -(1 << 40)):
            with self.subTest(n=n):
                self.assertEqual(heapprof.put_varint(n), varint(n))

    def symbolized(self):
        """A raw profile (no Lines, no Functions) as the allocator writes it,
        decoded, then given what symbolize gives a profile by hand: two
        Functions, Lines (one location with an inlined frame), a mapping's
        flags; and fields the allocator leaves empty, to cover them."""
        b = Builder()
        b.mapping(1, 0x555555554000, 0x555555559000, 0x1000, "/usr/bin/prog", "abc123")
        b.mapping(2, 0x7F0000000000, 0x7F0000010000, 0, "/lib/libc.so.6", "def456")
        b.location(1, 0x555555555100, 1)
        b.location(2, 0x555555555200, 1)
        b.location(3, 0x7F0000000456, 2)
        b.sample([1, 2, 3], [3, 3 << 19, 1, 1 << 19])
        b.sample([2, 3], [0, 0, -1, -(1 << 40)])  # negative int64: 10-byte varints
        b.raw(ld(2, repeated(1, [3], True) + repeated(2, [1, 2, 3, 4], True) +
                 ld(3, num(1, b.s("thread")) + num(2, b.s("worker"))) +
                 ld(3, num(1, b.s("bytes")) + num(3, 4096) + num(4, b.s("B")))))
        b.raw(num(9, 1700000000123456789) + num(10, 5000000000) +
              repeated(13, [b.s("a comment")], False))
        p = heapprof.decode(bytes(b))
        self.raw_strings = list(p.string_table)
        for i, (name, system, file) in enumerate(
                [("store::make_nodes(int)", "_ZN5store10make_nodesEi", "/src/leak.cc"),
                 ("store::wrap(int)", "_ZN5store4wrapEi", "/src/leak.cc"),
                 ("main", "main", "/src/leak.cc")], 1):
            f = heapprof.Function()
            f.id, f.name, f.system_name, f.filename = i, name, system, file
            p.function.append(f)
        f.start_line = 28
        p.locations[1].line = [heapprof.Line(2, 16, 5), heapprof.Line(1, 22)]
        p.locations[2].line = [heapprof.Line(3, 31)]
        p.locations[3].is_folded = True
        m = p.mappings[1]
        m.has_functions = m.has_filenames = m.has_line_numbers = m.has_inline_frames = True
        p.drop_frames, p.keep_frames, p.default_sample_type = "drop.*", "keep.*", "inuse_space"
        return p

    def test_a_symbolized_profile_round_trips_with_exact_values(self):
        data = heapprof.encode(self.symbolized())
        p = heapprof.decode(data)
        self.assertEqual([(t.type, t.unit) for t in p.sample_type], list(HEAP_TYPES))
        self.assertEqual((p.period_type.type, p.period_type.unit, p.period),
                         ("space", "bytes", 524288))
        self.assertEqual((p.time_nanos, p.duration_nanos), (1700000000123456789, 5000000000))
        self.assertEqual(p.comment, ["a comment"])
        self.assertEqual((p.drop_frames, p.keep_frames, p.default_sample_type),
                         ("drop.*", "keep.*", "inuse_space"))
        self.assertEqual([(s.location_id, s.value, s.label) for s in p.sample], [
            ([1, 2, 3], [3, 3 << 19, 1, 1 << 19], []),
            ([2, 3], [0, 0, -1, -(1 << 40)], []),
            ([3], [1, 2, 3, 4], [("thread", "worker", 0, ""), ("bytes", "", 4096, "B")]),
        ])
        self.assertEqual([(m.id, m.memory_start, m.memory_limit, m.file_offset, m.filename,
                           m.build_id, m.has_functions, m.has_filenames, m.has_line_numbers,
                           m.has_inline_frames) for m in p.mapping], [
            (1, 0x555555554000, 0x555555559000, 0x1000, "/usr/bin/prog", "abc123",
             True, True, True, True),
            (2, 0x7F0000000000, 0x7F0000010000, 0, "/lib/libc.so.6", "def456",
             False, False, False, False),
        ])
        self.assertEqual([(loc.id, loc.mapping_id, loc.address, loc.is_folded,
                           [(ln.function_id, ln.line, ln.column) for ln in loc.line])
                          for loc in p.location], [
            (1, 1, 0x555555555100, False, [(2, 16, 5), (1, 22, 0)]),
            (2, 1, 0x555555555200, False, [(3, 31, 0)]),
            (3, 2, 0x7F0000000456, True, []),
        ])
        self.assertEqual([(f.id, f.name, f.system_name, f.filename, f.start_line)
                          for f in p.function], [
            (1, "store::make_nodes(int)", "_ZN5store10make_nodesEi", "/src/leak.cc", 0),
            (2, "store::wrap(int)", "_ZN5store4wrapEi", "/src/leak.cc", 0),
            (3, "main", "main", "/src/leak.cc", 28),
        ])
        # The string table read stays as it was; what the records added is
        # at its end, once each, in the order the encoder met it.
        self.assertEqual(p.string_table[:len(self.raw_strings)], self.raw_strings)
        self.assertEqual(p.string_table[len(self.raw_strings):], [
            "store::make_nodes(int)", "_ZN5store10make_nodesEi", "/src/leak.cc",
            "store::wrap(int)", "_ZN5store4wrapEi", "main", "drop.*", "keep.*"])
        # And encoding what was decoded gives the same bytes.
        self.assertEqual(heapprof.encode(p), data)

    def test_a_raw_profile_re_encoded_keeps_its_string_table_and_values(self):
        raw = named_profile(packed=False)
        p = heapprof.decode(raw)
        q = heapprof.decode(heapprof.encode(p))
        self.assertEqual(q.string_table, p.string_table)
        self.assertEqual(heapprof.dump(q), heapprof.dump(p))

    def test_symbolize_writes_gzip_and_the_command_says_why_it_cannot(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        src = write(d, "heap.3.0001.final.pb.gz", named_profile())
        out = os.path.join(d, "heap.3.0001.final.sym.pb.gz")
        with Silent() as s:
            self.assertEqual(heapprof.main(["symbolize", src, out]), 0)
        self.assertEqual((s.out.getvalue(), s.err.getvalue()), ("", ""))
        with open(out, "rb") as f:
            self.assertEqual(f.read(2), heapprof.GZIP_MAGIC)
        self.assertEqual(sorted(os.listdir(d)), ["heap.3.0001.final.pb.gz",
                                                 "heap.3.0001.final.sym.pb.gz"])
        # Its Locations had Lines already: nothing changes.
        self.assertEqual(heapprof.dump(heapprof.read(out)), heapprof.dump(heapprof.read(src)))
        with Silent() as s:
            self.assertEqual(heapprof.main(["symbolize", src, os.path.join(d, "no", "x")]), 1)
        self.assertTrue(s.err.getvalue().startswith("heapprof.py: cannot write "), s.err.getvalue())
        with Silent() as s:
            self.assertEqual(heapprof.main(["symbolize", out + ".absent", out]), 1)
        self.assertIn("not a heap profile", s.err.getvalue())


# A program whose functions the symbolizer must name from its file.
PROGRAM = r"""
#include <stdlib.h>
__attribute__((noinline)) void *load_index(size_t n) { return malloc(n); }
__attribute__((noinline)) void *parse_row(size_t n) { return load_index(n) ; }
int main(void) { return parse_row(10) != 0; }
"""


@unittest.skipUnless(all(shutil.which(t) for t in ("gcc", "nm", "readelf", "addr2line")),
                     "needs gcc, nm, readelf and addr2line (binutils)")
class Symbolizing(unittest.TestCase):
    """Addresses into a real ELF file, mapped at a made-up base as the loader
    would map its executable segment."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def build(self, *flags):
        src = os.path.join(self.dir, "prog.c")
        exe = os.path.join(self.dir, "prog")
        with open(src, "w") as f:
            f.write(PROGRAM)
        subprocess.run(["gcc", "-g", "-O1", *flags, "-o", exe, src], check=True)
        syms = {}
        for line in subprocess.run(["nm", exe], capture_output=True, text=True,
                                   check=True).stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[2] in ("load_index", "parse_row", "main"):
                syms[parts[2]] = int(parts[0], 16)
        text = None
        for line in subprocess.run(["readelf", "-lW", exe], capture_output=True, text=True,
                                   check=True).stdout.splitlines():
            parts = line.split()
            if parts[:1] == ["LOAD"] and "E" in parts[6:-1]:
                text = int(parts[1], 16), int(parts[2], 16), int(parts[5], 16)
        return exe, syms, text

    def profile(self, exe, syms, text, base):
        """A final profile: one site, load_index <- parse_row <- main, each
        address a few bytes into its function, the executable segment mapped
        at BASE + its page-aligned vaddr, and one address in no mapping."""
        offset, vaddr, memsz = text
        page = 4096
        start = base + (vaddr & ~(page - 1))
        b = Builder()
        b.mapping(1, start, start + memsz + page, offset & ~(page - 1), exe)
        for i, name in enumerate(("load_index", "parse_row", "main"), 1):
            b.location(i, base + syms[name] + 2, 1)
        b.location(4, 0x10, 0)
        b.sample([1, 2, 3], [4, 4096, 4, 4096])
        b.sample([4], [1, 64, 1, 64])
        return write(self.dir, "heap.42.0001.final.pb.gz", bytes(b))

    def check(self, *flags, base):
        exe, syms, text = self.build(*flags)
        path = self.profile(exe, syms, text, base)
        with Silent() as s:
            self.assertEqual(heapprof.main(["leaks", path]), 0)
        self.assertEqual(s.out.getvalue().splitlines(), [
            "==== pagealloc: leak candidates of pid 42 in %s (live sampled objects at exit: "
            "~4.1 KiB in 5 objects, estimated)" % path,
            "4.0 KiB in 4 objects from load_index <- parse_row <- main",
            "64 B in 1 object from 0x10",
            "look at it: go tool pprof -http=: %s %s" % (exe, path),
        ])
        return exe, syms, path

    def test_a_pie_mapped_at_a_high_base_is_named_by_addr2line(self):
        self.check("-fPIE", "-pie", base=0x7F1234560000)

    def test_a_fixed_address_executable_is_named_by_addr2line(self):
        self.check("-fno-pie", "-no-pie", base=0)

    def test_without_addr2line_frames_are_file_plus_file_address(self):
        exe, syms, path = self.check("-fPIE", "-pie", base=0x7F1234560000)
        p = heapprof.read(path)
        with mock.patch.object(heapprof.shutil, "which", return_value=None):
            lines = heapprof.leak_report(path, p, heapprof.Symbolizer(p))
        self.assertEqual(lines[1], "4.0 KiB in 4 objects from prog+0x%x <- prog+0x%x <- prog+0x%x"
                         % (syms["load_index"] + 2, syms["parse_row"] + 2, syms["main"] + 2))

    def test_a_mapping_whose_file_is_gone_falls_back_to_file_plus_offset(self):
        b = Builder()
        b.mapping(1, 0x7F0000001000, 0x7F0000002000, 0x1000, "/nonexistent/libgone.so")
        b.location(1, 0x7F0000001234, 1)
        b.sample([1], [1, 32, 1, 32])
        p = heapprof.decode(bytes(b))
        self.assertEqual(heapprof.Symbolizer(p).names, {1: ["libgone.so+0x1234"]})



# A C++ program whose own stack is the profile's: take() stands for malloc
# and notes its return address, make_nodes notes its own; the program prints
# both and take's address (to find where it was loaded). The inlined wrap
# is not static: binutils 2.40's addr2line names a static inlined function
# by its caller's symbol.
CXX_PROGRAM = r"""
#include <cstdio>
#include <cstdlib>

static void *sites[2];

extern "C" __attribute__((noinline)) void *take(size_t n)
{
	sites[0] = __builtin_return_address(0);
	return malloc(n);
}

namespace store {

__attribute__((always_inline)) inline void *wrap(int n)
{
	return take(static_cast<size_t>(n)); // LINE wrap
}

__attribute__((noinline)) void *make_nodes(int n)
{
	sites[1] = __builtin_return_address(0);
	void *p = wrap(n); // LINE make_nodes
	static_cast<char *>(p)[0] = 1;
	return p;
}

} // namespace store

int main()
{
	void *p = store::make_nodes(64); // LINE main
	std::printf("%p %p %p\n", sites[0], sites[1], reinterpret_cast<void *>(&take));
	std::free(p);
	return 0;
}
"""


@unittest.skipUnless(all(shutil.which(t) for t in ("g++", "nm", "readelf", "addr2line")),
                     "needs g++, nm, readelf and addr2line (binutils)")
class SymbolizingCxx(unittest.TestCase):
    """`symbolize` on the profile of a real C++ program built -O2 -g (a PIE,
    as Debian builds): store::make_nodes (which Go 1.19's pprof cannot name:
    its DWARF DIE has no DW_AT_name) and main (in .text.startup at -O2)
    named in the profile, with their lines; then decoded."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.src = os.path.join(self.dir, "leak.cc")
        self.exe = os.path.join(self.dir, "leak")
        with open(self.src, "w") as f:
            f.write(CXX_PROGRAM)
        self.line = {}
        for i, text in enumerate(CXX_PROGRAM.split("\n"), 1):
            if "// LINE " in text:
                self.line[text.split("// LINE ")[1]] = i
        subprocess.run(["g++", "-g", "-O2", "-fPIE", "-pie", "-o", self.exe, self.src],
                       check=True)
        out = subprocess.run([self.exe], capture_output=True, text=True, check=True).stdout
        in_make_nodes, in_main, take = (int(w, 16) for w in out.split())
        take_vaddr = None
        for line in subprocess.run(["nm", self.exe], capture_output=True, text=True,
                                   check=True).stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[2] == "take":
                take_vaddr = int(parts[0], 16)
        text = None
        for line in subprocess.run(["readelf", "-lW", self.exe], capture_output=True,
                                   text=True, check=True).stdout.splitlines():
            parts = line.split()
            if parts[:1] == ["LOAD"] and "E" in parts[6:-1]:
                text = int(parts[1], 16), int(parts[2], 16), int(parts[5], 16)
        base = take - take_vaddr
        offset, vaddr, memsz = text
        page = 4096
        start = base + (vaddr & ~(page - 1))
        # As the allocator writes them: return addresses less one, the
        # executable segment's mapping with the file's offset; a library
        # that is gone; an address in no mapping.
        b = Builder()
        b.mapping(1, start, start + memsz + page, offset & ~(page - 1), self.exe, "b1d")
        b.mapping(2, 0x7F0000001000, 0x7F0000002000, 0x1000, "/nonexistent/libgone.so")
        b.location(1, in_make_nodes - 1, 1)
        b.location(2, in_main - 1, 1)
        b.location(3, 0x7F0000001234, 2)
        b.location(4, 0x10, 0)
        b.sample([1, 2], [4, 4096, 4, 4096])
        b.sample([3, 2], [1, 64, 1, 64])
        b.sample([4], [1, 32, 0, 0])
        self.raw = write(self.dir, "heap.42.0001.final.pb.gz", bytes(b))
        self.sym = os.path.join(self.dir, "heap.42.0001.final.sym.pb.gz")
        with Silent():
            self.assertEqual(heapprof.main(["symbolize", self.raw, self.sym]), 0)

    def test_the_namespaced_function_and_main_are_named_with_their_lines(self):
        p = heapprof.read(self.sym)

        def frames(loc_id):
            return [(p.functions[ln.function_id].name, p.functions[ln.function_id].system_name,
                     p.functions[ln.function_id].filename, ln.line)
                    for ln in p.locations[loc_id].line]

        # Innermost first: wrap, inlined into make_nodes.
        self.assertEqual(frames(1), [
            ("store::wrap(int)", "_ZN5store4wrapEi", self.src, self.line["wrap"]),
            ("store::make_nodes(int)", "_ZN5store10make_nodesEi", self.src,
             self.line["make_nodes"]),
        ])
        self.assertEqual(frames(2), [("main", "main", self.src, self.line["main"])])
        self.assertEqual((frames(3), frames(4)), ([], []))  # nothing to name them by
        self.assertEqual(len(p.function), 3)
        self.assertTrue(all(f.start_line == 0 for f in p.function))
        self.assertEqual([(m.has_functions, m.has_filenames, m.has_line_numbers,
                           m.has_inline_frames) for m in p.mapping],
                         [(True, True, True, True), (False, False, False, False)])

    def test_everything_else_is_kept(self):
        raw, sym = heapprof.read(self.raw), heapprof.read(self.sym)
        self.assertEqual(sym.string_table[:len(raw.string_table)], raw.string_table)
        self.assertEqual([(s.location_id, s.value) for s in sym.sample],
                         [(s.location_id, s.value) for s in raw.sample])
        self.assertEqual([(loc.id, loc.mapping_id, loc.address) for loc in sym.location],
                         [(loc.id, loc.mapping_id, loc.address) for loc in raw.location])
        self.assertEqual([(m.id, m.memory_start, m.memory_limit, m.file_offset, m.filename,
                           m.build_id) for m in sym.mapping],
                         [(m.id, m.memory_start, m.memory_limit, m.file_offset, m.filename,
                           m.build_id) for m in raw.mapping])
        self.assertEqual((sym.sample_type[3].type, sym.period_type.type, sym.period),
                         ("inuse_space", "space", 524288))

    def test_leaks_and_top_say_the_same_of_both(self):
        raw, sym = heapprof.read(self.raw), heapprof.read(self.sym)
        want = heapprof.leak_report("F", raw, heapprof.Symbolizer(raw))
        self.assertEqual(heapprof.leak_report("F", sym, heapprof.Symbolizer(sym)), want)
        self.assertEqual(want[1:3], [
            "4.0 KiB in 4 objects from store::wrap(int) <- store::make_nodes(int) <- main",
            "64 B in 1 object from libgone.so+0x1234 <- main",
        ])
        self.assertEqual(heapprof.top_report("F", sym, heapprof.Symbolizer(sym)),
                         heapprof.top_report("F", raw, heapprof.Symbolizer(raw)))
        # The symbolized file's name is a profile's name: the report knows its pid.
        with Silent() as s:
            heapprof.main(["leaks", self.sym])
        self.assertIn("leak candidates of pid 42 in %s (live sampled objects at exit"
                      % self.sym, s.out.getvalue())

if __name__ == "__main__":
    unittest.main()
