#!/usr/bin/env python3
"""test_pagealloc_map.py — tools/pagealloc_map.py on map files built here.

Each case writes a heap map in src/heapmap.h's format from a table of runs
(chunk, first page, pages, record), then checks what read_map gives back,
the totals, the PNG's pixels and the SVG's rectangles at chosen cells, and
the one-line errors for files that are not whole maps. The map of a real
process is tests/live/map_check.py's (ctest live_map).

    python3 tools/test_pagealloc_map.py
"""
import io
import os
import struct
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pagealloc_draw  # noqa: E402
import pagealloc_map as pm  # noqa: E402

KIND = {k: i for i, k in enumerate(pm.KINDS)}
SIZES = [0, 16, 32, 48, 64] + [0] * 61  # the class table's first sizes; 66 classes
BASE = 0x7f1234400000
CHUNK = 512 * 8192

# (chunk, first page, pages, kind, cls, inuse, objects); pages not named
# are released. The first page of a span or large object is marked FIRST.
RUNS = [
    (0, 0, 1, "small", 1, 1, 512),       # a 16-byte span pinned by one object
    (0, 1, 1, "small", 4, 128, 128),     # a full 64-byte span
    (0, 2, 1, "small", 2, 128, 256),     # half full
    (0, 3, 8, "large", 0, 0, 0),
    (0, 11, 4, "large_free", 0, 0, 0),
    (0, 15, 2, "cached", 0, 0, 0),
    (0, 17, 1, "other", 0, 0, 0),
    (0, 18, 100, "free", 0, 0, 0),
    (0, 500, 12, "large", 0, 0, 0),      # runs on into chunk 1
    (1, 0, 20, "large", 0, 0, 0),
]
FIRST_PAGES = {(0, 0), (0, 1), (0, 2), (0, 3), (0, 11), (0, 500)}


def build_map(path, magic=b"PAHEAPMP", version=1, cut=0):
    pages = [[(KIND["released"], 0, 0, 0, 0)] * 512 for _ in range(2)]
    for c, p0, n, kind, cls, inuse, objects in RUNS:
        for p in range(p0, p0 + n):
            flags = pm.FIRST if (c, p) in FIRST_PAGES else 0
            pages[c][p] = (KIND[kind], cls, flags, inuse, objects)
    # Chunk 0's low huge page (pages 0-255) was collapsed.
    for p in range(256):
        kind, cls, flags, inuse, objects = pages[0][p]
        pages[0][p] = (kind, cls, flags | pm.HUGE, inuse, objects)
    counts = [0] * 8
    for chunk in pages:
        for r in chunk:
            counts[r[0]] += 1
    counts[7] = 256
    header = struct.pack("=8sIIIIII QQ 8Q QQQQ", magic, version, 144, 8192, 512, 2, 66, 4242,
                         1700000000 * 10**9, *counts, 1 + 128 + 128, 16 + 128 * 64 + 128 * 32,
                         2, 1)
    body = struct.pack("=66I", *SIZES)  # 264 bytes: a multiple of 8, no padding
    for c, chunk in enumerate(pages):
        body += struct.pack("=Q", BASE + c * CHUNK)
        for kind, cls, flags, inuse, objects in chunk:
            body += struct.pack("=BBBBHH", kind, cls, flags, 0, inuse, objects)
    data = header + body
    with open(path, "wb") as f:
        f.write(data[:len(data) - cut])


class MapTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "t.map")
        build_map(self.path)

    def tearDown(self):
        self.tmp.cleanup()

    def cell(self, c, p):
        return BASE + c * CHUNK + p * 8192

    def test_read_map_gives_every_record_and_the_header(self):
        m = pm.read_map(self.path)
        self.assertEqual(m["pid"], 4242)
        self.assertEqual(m["time"], 1700000000)
        self.assertEqual((m["page_size"], m["chunk_pages"]), (8192, 512))
        self.assertEqual(m["class_size"][:5], [0, 16, 32, 48, 64])
        self.assertEqual([c["base"] for c in m["chunks"]], [BASE, BASE + CHUNK])
        self.assertEqual(m["chunks"][0]["pages"][0],
                         pm.Page("small", 1, pm.FIRST | pm.HUGE, 1, 512))
        self.assertEqual(m["chunks"][0]["pages"][4], pm.Page("large", 0, pm.HUGE, 0, 0))
        self.assertEqual(m["chunks"][0]["pages"][256], pm.Page("released", 0, 0, 0, 0))
        self.assertEqual(m["huge_pages"], 256)
        self.assertEqual(m["chunks"][1]["pages"][19], pm.Page("large", 0, 0, 0, 0))
        self.assertEqual(m["chunks"][1]["pages"][20], pm.Page("released", 0, 0, 0, 0))
        large = 8 + 12 + 20
        self.assertEqual(m["pages"], {"free": 100, "released": 1024 - 100 - 3 - large - 4 - 2 - 1,
                                      "cached": 2, "small": 3, "large": large, "large_free": 4,
                                      "other": 1})
        self.assertEqual(pm.page_at(m, self.cell(0, 11) + 100)[:2], (0, 11))
        self.assertIsNone(pm.page_at(m, BASE + 2 * CHUNK))

    def test_totals_are_bytes_of_each_kind_and_heap_figures(self):
        t = pm.totals(pm.read_map(self.path))
        self.assertEqual(t["chunks"], 2)
        self.assertEqual(t["heap_sys"], 8 << 20)
        self.assertEqual(t["bytes"]["large"], 40 * 8192)
        self.assertEqual(t["heap_inuse"], (3 + 40 + 4 + 1) * 8192)
        self.assertEqual((t["small_objects"], t["large_objects"], t["large_free_objects"]),
                         (257, 2, 1))
        # Pages in use by huge page: chunk 0's low one 16 (the cached two
        # are free), its high one 12, chunk 1's low one 20: 48 pages, which
        # one huge page of 256 could hold; none dense.
        self.assertEqual((t["huge_touched"], t["huge_fewest"], t["huge_dense"]), (3, 1, 0))
        self.assertEqual(t["huge_eighths"], [3, 0, 0, 0, 0, 0, 0, 0])

    def test_huge_occupancy_counts_dense_and_by_eighths(self):
        P = pm.Page
        # Huge page 0: 250 of 256 in use (dense: 240 and up); 1: 128 (half);
        # 2: one page; 3: none.
        pages = ([P("small", 1, 0, 1, 512)] * 250 + [P("free", 0, 0, 0, 0)] * 6 +
                 [P("large", 0, 0, 0, 0)] * 128 + [P("released", 0, 0, 0, 0)] * 128)
        pages2 = [P("other", 0, 0, 0, 0)] + [P("cached", 0, 0, 0, 0)] * 511
        m = {"page_size": 8192, "chunks": [{"base": BASE, "pages": pages},
                                           {"base": BASE + CHUNK, "pages": pages2}]}
        self.assertEqual(pm.huge_occupancy(m), {
            "huge_touched": 3, "huge_fewest": 2, "huge_dense": 1,
            "huge_eighths": [1, 0, 0, 0, 1, 0, 0, 1]})

    def test_defrag_spans_follow_the_contracts_rule(self):
        # Class 1 (512 objects a page): partial spans with 1, 1, 60 and 400 in
        # use (average 115.5, its 9/8 129.9): the three below it have a fuller
        # span to move into, 400 is above; a full span is not partial. Class
        # 2: one partial span of two pages alone in its class, nowhere to go.
        P = pm.Page
        pages = [P("small", 1, pm.FIRST, 1, 512), P("small", 1, pm.FIRST, 400, 512),
                 P("small", 1, pm.FIRST, 1, 512), P("small", 1, pm.FIRST, 512, 512),
                 P("small", 2, pm.FIRST, 3, 512), P("small", 2, 0, 3, 512),
                 P("small", 1, pm.FIRST, 60, 512)] + [P("free", 0, 0, 0, 0)] * 505
        m = {"chunks": [{"base": BASE, "pages": pages}]}
        d = pm.defrag_spans(m)
        self.assertEqual([(ci, p, n) for ci, p, n, _ in d], [(0, 0, 1), (0, 2, 1), (0, 6, 1)])
        self.assertEqual([(ci, p, n) for ci, p, n, _ in pm.small_spans(m)],
                         [(0, 0, 1), (0, 1, 1), (0, 2, 1), (0, 3, 1), (0, 4, 2), (0, 6, 1)])
        t = pm.totals(pm.read_map(self.path))
        self.assertEqual((t["defrag_spans"], t["defrag_bytes"]), (0, 0))

    def test_shades_run_from_one_object_to_a_full_span(self):
        self.assertEqual(pm.page_colour(pm.Page("small", 1, 1, 1, 512)), pm.small_colour(0))
        self.assertEqual(pm.page_colour(pm.Page("small", 2, 1, 128, 256)), pm.small_colour(4))
        self.assertEqual(pm.page_colour(pm.Page("small", 4, 1, 128, 128)),
                         pm.small_colour(pm.SHADES - 1))
        self.assertEqual(pm.small_colour(0), "#c6dbef")
        self.assertEqual(pm.small_colour(pm.SHADES - 1), "#08306b")

    # The cells checked in pictures, and the colour each must have.
    CELLS = [
        ((0, 0), "#c6dbef"),                      # one object of 512: the lightest blue
        ((0, 1), "#08306b"),                      # full: the darkest
        ((0, 3), pm.COLOURS["large_first"]),
        ((0, 4), pm.COLOURS["large"]),
        ((0, 11), pm.COLOURS["large_free_first"]),
        ((0, 12), pm.COLOURS["large_free"]),
        ((0, 15), pm.COLOURS["cached"]),
        ((0, 17), pm.COLOURS["other"]),
        ((0, 18), pm.COLOURS["free"]),
        ((0, 200), pm.COLOURS["released"]),
        ((1, 0), pm.COLOURS["large"]),            # the object from chunk 0 goes on
        ((1, 20), pm.COLOURS["released"]),
    ]

    def test_png_has_each_kinds_colour_in_its_cell(self):
        out = os.path.join(self.tmp.name, "t.png")
        pm.draw_file(self.path, out)
        w, h, rows = pagealloc_draw.read_png(out)
        for (c, p), want in self.CELLS:
            x, y = pm.cell_xy(c, p)
            for dx, dy in ((0, 0), (pm.CELL_W - 1, pm.CELL_H - 1)):
                px = rows[y + dy][3 * (x + dx):3 * (x + dx) + 3]
                self.assertEqual("#" + px.hex(), want, "cell %d.%d (%d, %d)" % (c, p, x + dx,
                                                                             y + dy))
        # Between the rows: the chunk's outline, then the background.
        x, y = pm.cell_xy(1, 0)
        self.assertEqual("#" + rows[y - 1][3 * x:3 * x + 3].hex(), pm.OUTLINE)
        self.assertEqual("#" + rows[y - 2][3 * x:3 * x + 3].hex(), pm.BACKGROUND)

    def test_svg_has_a_rect_per_run_with_its_tooltip(self):
        out = os.path.join(self.tmp.name, "t.svg")
        pm.draw_file(self.path, out)
        root = ET.parse(out).getroot()
        ns = "{http://www.w3.org/2000/svg}"
        rects = {}
        for r in root.iter(ns + "rect"):
            t = r.find(ns + "title")
            if t is not None:
                rects[(float(r.get("x")), float(r.get("y")))] = (r, t.text)
        for (c, p), want in self.CELLS:
            x, y = pm.cell_xy(c, p)
            hits = [(r, t) for (rx, ry), (r, t) in rects.items()
                    if ry == y and rx <= x < rx + float(r.get("width"))]
            self.assertEqual(len(hits), 1, "cell %d.%d" % (c, p))
            self.assertEqual(hits[0][0].get("fill"), want, "cell %d.%d" % (c, p))
        r, t = rects[pm.cell_xy(0, 0)]
        self.assertEqual(t, "%#x: span of 16-byte objects (class 1), 1 of 512 in use" % BASE)
        r, t = rects[pm.cell_xy(0, 4)]
        self.assertEqual(float(r.get("width")), 7 * pm.CELL_W)  # pages 4..10 of the object
        self.assertIn("(7 pages)", t)
        labels = [e.text for e in root.iter(ns + "text") if e.text and e.text.startswith("0x")]
        self.assertEqual(labels, ["%#x" % BASE, "%#x" % (BASE + CHUNK)])

    def test_files_that_are_not_whole_maps_are_one_line_errors(self):
        for kw, want in ((dict(magic=b"\0" * 8), "not a heap map, or not finished"),
                         (dict(version=2), "heap map version 2, this reader knows 1"),
                         (dict(cut=8), "bytes, want")):
            build_map(self.path, **kw)
            with self.assertRaises(pm.MapError) as e:
                pm.read_map(self.path)
            self.assertIn(want, str(e.exception))
            self.assertNotIn("\n", str(e.exception))
        with self.assertRaises(pm.MapError):
            pm.read_map(os.path.join(self.tmp.name, "none.map"))

    def run_main(self, args):
        out, err = io.StringIO(), io.StringIO()
        so, se = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            return pm.main(["pagealloc_map", "map"] + args), out.getvalue(), err.getvalue()
        finally:
            sys.stdout, sys.stderr = so, se

    def test_main_usage_and_errors(self):
        rc, out, err = self.run_main(["12"])
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith("pagealloc map: want PID -o FILE.png|FILE.svg\nusage:"))
        rc, out, err = self.run_main(["12", "-o", "x.jpg"])
        self.assertEqual((rc, err), (2, "pagealloc map: x.jpg: want a .png or .svg file\n"))
        rc, out, err = self.run_main(["999999999", "-o", "x.png"])
        self.assertEqual((rc, out, err), (1, "", "pagealloc map: no process 999999999\n"))


if __name__ == "__main__":
    unittest.main()
