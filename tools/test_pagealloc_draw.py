#!/usr/bin/env python3
"""Tests of tools/pagealloc_draw.py: a PNG of known rects, lines and text read
back with read_png has exactly their pixels; the SVG has the elements (a
rect's title as its tooltip, text escaped); bad colours, anchors and
extensions are one-line ValueErrors; read_png undoes every filter type.
Run: python3 tools/test_pagealloc_draw.py."""

import os
import struct
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
import zlib

sys.dont_write_bytecode = True  # no __pycache__ in tools/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pagealloc_draw as draw  # noqa: E402

WHITE, RED, BLUE, BLACK = b"\xff\xff\xff", b"\xff\x00\x00", b"\x00\x00\xff", b"\x00\x00\x00"
SVG = "{http://www.w3.org/2000/svg}"


def pixel(rows, x, y):
    return rows[y][3 * x:3 * x + 3]


class DrawTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def roundtrip(self, canvas):
        canvas.save(self.path("c.png"))
        return draw.read_png(self.path("c.png"))

    def test_rects_fill_exactly_their_pixels(self):
        c = draw.Canvas(40, 30, background="#ffffff")
        c.rect(3, 4, 10, 5, "#ff0000")  # x 3..12, y 4..8
        c.rect(10, 6, 20, 30, "#0000ff")  # over the red one, clipped at the bottom
        c.rect(-5, 28, 8, 10, "#000000")  # clipped at the left and bottom: x 0..2, y 28..29
        w, h, rows = self.roundtrip(c)
        self.assertEqual((w, h, len(rows)), (40, 30, 30))
        want = [[WHITE] * 40 for _ in range(30)]
        for y in range(4, 9):
            for x in range(3, 13):
                want[y][x] = RED
        for y in range(6, 30):
            for x in range(10, 30):
                want[y][x] = BLUE
        for y in range(28, 30):
            for x in range(0, 3):
                want[y][x] = BLACK
        for y in range(30):
            self.assertEqual(rows[y], b"".join(want[y]), "row %d" % y)

    def test_background_colour(self):
        _, _, rows = self.roundtrip(draw.Canvas(3, 2, background="#102030"))
        self.assertEqual(rows, [b"\x10\x20\x30" * 3] * 2)

    def test_lines_are_bresenham(self):
        c = draw.Canvas(10, 10)
        c.line(0, 0, 9, 9, "#000000")  # the diagonal
        c.line(0, 9, 4, 9, "#ff0000", width=2)  # rows 9 and 10 (off the canvas)
        _, _, rows = self.roundtrip(c)
        for y in range(10):
            for x in range(10):
                want = BLACK if x == y else RED if (y == 9 and x <= 4) else WHITE
                if (x, y) == (9, 9):
                    want = BLACK
                self.assertEqual(pixel(rows, x, y), want, (x, y))

    def test_polyline_width_two_is_two_pixels_across(self):
        c = draw.Canvas(8, 8)
        c.polyline([(1, 2), (6, 2), (6, 7)], "#0000ff", width=2)
        _, _, rows = self.roundtrip(c)
        got = {(x, y) for y in range(8) for x in range(8) if pixel(rows, x, y) == BLUE}
        want = {(x, y) for x in range(1, 7) for y in (2, 3)} | {(x, y) for x in (6, 7)
                                                                for y in range(2, 8)}
        self.assertEqual(got, want)

    def test_text_is_the_bitmap_font(self):
        # 'T' at scale 1: a top bar of 5 and a stem in the middle column, 7
        # rows ending on the baseline row above y.
        c = draw.Canvas(12, 12)
        c.text(2, 10, "T", size=12)
        _, _, rows = self.roundtrip(c)
        got = {(x, y) for y in range(12) for x in range(12) if pixel(rows, x, y) == BLACK}
        want = {(x, 3) for x in range(2, 7)} | {(4, y) for y in range(3, 10)}
        self.assertEqual(got, want)
        # Scale 2 (size 20): every font pixel a 2x2 square; anchor end puts
        # the text's right edge at x.
        c = draw.Canvas(30, 30)
        c.text(20, 20, "T", size=20, anchor="end")
        _, _, rows = self.roundtrip(c)
        got = {(x, y) for y in range(30) for x in range(30) if pixel(rows, x, y) == BLACK}
        want = {(x, y) for x in range(10, 20) for y in (6, 7)} | {
            (x, y) for x in (14, 15) for y in range(6, 20)}
        self.assertEqual(got, want)
        self.assertEqual(draw.text_width("abc", 12), 17)
        self.assertEqual(draw.text_width("abc", 20), 34)

    def test_every_printable_character_has_a_glyph(self):
        for code in range(33, 127):
            c = draw.Canvas(8, 10)
            c.text(1, 9, chr(code))
            _, _, rows = self.roundtrip(c)
            self.assertIn(BLACK, b"".join(rows), "character %r drew nothing" % chr(code))

    def test_svg_has_the_elements(self):
        c = draw.Canvas(100, 50, background="#eeeeee")
        c.rect(1, 2, 3, 4, "#ff0000", title="span <7> & more")
        c.rect(5, 6, 7.5, 8, "#00ff00")
        c.line(0, 0, 10, 10, "#0000ff", width=2)
        c.polyline([(0, 1), (2, 3), (4, 5)], "#000000")
        c.text(50, 40, "a<b", size=14, anchor="middle")
        c.save(self.path("c.svg"))
        root = ET.parse(self.path("c.svg")).getroot()
        self.assertEqual(root.tag, SVG + "svg")
        self.assertEqual((root.get("width"), root.get("height")), ("100", "50"))
        rects = root.findall(SVG + "rect")
        self.assertEqual([(r.get("x"), r.get("y"), r.get("width"), r.get("height"), r.get("fill"))
                          for r in rects],
                         [("0", "0", "100", "50", "#eeeeee"), ("1", "2", "3", "4", "#ff0000"),
                          ("5", "6", "7.50", "8", "#00ff00")])
        self.assertEqual(rects[1].find(SVG + "title").text, "span <7> & more")
        self.assertIsNone(rects[2].find(SVG + "title"))
        lines = root.findall(SVG + "polyline")
        self.assertEqual([(p.get("points"), p.get("stroke"), p.get("stroke-width")) for p in lines],
                         [("0,0 10,10", "#0000ff", "2"), ("0,1 2,3 4,5", "#000000", "1")])
        (text,) = root.findall(SVG + "text")
        self.assertEqual((text.text, text.get("x"), text.get("y"), text.get("font-size"),
                          text.get("text-anchor")), ("a<b", "50", "40", "14", "middle"))

    def test_bad_input_is_one_line(self):
        c = draw.Canvas(4, 4)
        cases = [
            (lambda: c.rect(0, 0, 1, 1, "red"), "colour 'red': want '#rrggbb'"),
            (lambda: c.line(0, 0, 1, 1, "#12345"), "colour '#12345': want '#rrggbb'"),
            (lambda: c.text(0, 0, "x", anchor="left"),
             "text anchor 'left': want start, middle or end"),
            (lambda: c.save(self.path("c.jpg")),
             "%s: cannot tell the format: want a name ending in .png or .svg" %
             self.path("c.jpg")),
            (lambda: draw.Canvas(0, 3), "canvas 0x3: want a positive width and height"),
        ]
        for fn, msg in cases:
            with self.assertRaises(ValueError) as e:
                fn()
            self.assertEqual(str(e.exception), msg)
        self.assertFalse(os.path.exists(self.path("c.jpg")))

    def test_read_png_undoes_every_filter(self):
        # Two pixels a row, one row per filter type 0-4, encoded here.
        w, rows = 2, [bytes([10 * r + i for i in range(6)]) for r in range(5)]
        raw, prev = b"", bytes(6)
        for ftype, row in enumerate(rows):
            out = bytearray()
            for i in range(6):
                a = row[i - 3] if i >= 3 else 0
                b = prev[i]
                c = prev[i - 3] if i >= 3 else 0
                p = [0, a, b, (a + b) // 2, None][ftype]
                if ftype == 4:
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    p = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                out.append((row[i] - p) & 0xFF)
            raw += bytes([ftype]) + bytes(out)
            prev = row

        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(
                ">I", zlib.crc32(kind + data))

        with open(self.path("f.png"), "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" +
                    chunk(b"IHDR", struct.pack(">IIBBBBB", w, 5, 8, 2, 0, 0, 0)) +
                    chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
        self.assertEqual(draw.read_png(self.path("f.png")), (2, 5, rows))


if __name__ == "__main__":
    unittest.main()
