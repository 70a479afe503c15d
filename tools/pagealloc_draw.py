"""pagealloc_draw.py — a small canvas for the pagealloc command's pictures.

    c = Canvas(640, 400)                     white, or Canvas(w, h, "#rrggbb")
    c.rect(x, y, w, h, "#3060c0", title="tooltip (SVG only)")
    c.line(x1, y1, x2, y2, "#000000", width=1)
    c.polyline([(x, y), ...], "#c03030", width=2)
    c.text(x, y, "label", color="#000000", size=12, anchor="start")
    c.save("out.svg")                        or "out.png"

Coordinates are pixels, the origin top left, y down; a text's y is its
baseline, as in SVG. Colours are "#rrggbb". The picture is kept as a list of
shapes: save() writes them as SVG elements (a rect with a title carries it
as a <title> child, the browser's tooltip), or draws them, in order, into an
RGB raster written as PNG (zlib and struct: one IDAT, filter 0 on every
row, 8-bit truecolour).

The PNG rasterizer is exact where tests look: a rect with integer
coordinates fills exactly the pixels x..x+w-1, y..y+h-1 (clipped to the
canvas; fractional coordinates round to the nearest pixel); a line is
Bresenham's, and one of width N is N such lines side by side across its
direction (no anti-aliasing anywhere); text is a 5x7 bitmap font in 6x8
cells covering printable ASCII (any other character draws as '?'; g, p, q
and y hang two pixels below the baseline), scaled
by whole pixels: scale = round(size / 10), at least 1, so size 12 is 7
pixels high and 6 wide per character, and size 20 twice that. SVG text is
the viewer's monospace font at that size.

read_png(path) -> (width, height, rows) reads an 8-bit RGB PNG back (every
filter type), rows a list of bytes objects of 3*width; for tests.

Standard library only (Debian 12's python3, 3.11).
"""
import re
import struct
import zlib

# The 5x7 glyphs of ' ' (32) to '~' (126), in order: per glyph 7 rows top
# down, each two hex digits whose low 5 bits are the row, bit 4 the
# leftmost pixel. Drawn by hand in the shapes of the classic 5x7 LCD fonts;
# g, p, q and y hang two rows below the baseline (_DESCENDERS).
_FONT_HEX = (
    "00000000000000040404040400040a0a0a000000000a0a1f0a1f0a0a040f140e051e0418190204081303"
    "0c12140815120d0404080000000002040808080402080402020204080004150e1504000004041f040400"
    "000000000c04080000001f00000000000000000c0c000102040810000e11131519110e040c040404040e"
    "0e11010204081f1f02040201110e02060a121f02021f101e0101110e0608101e11110e1f010204080808"
    "0e11110e11110e0e11110f01020c000c0c000c0c00000c0c000c04080204081008040200001f001f0000"
    "080402010204080e1101020400040e11010d15150e0e11111f1111111e11111e11111e0e11101010110e"
    "1c12111111121c1f10101e10101f1f10101e1010100e11101711110f1111111f1111110e04040404040e"
    "0702020202120c111214181412111010101010101f111b1515111111111119151311110e11111111110e"
    "1e11111e1010100e11111115120d1e11111e1412110f10100e01011e1f0404040404041111111111110e"
    "11111111110a041111111515150a11110a040a11111111110a0404041f01020408101f0e08080808080e"
    "001008040201000e02020202020e040a11000000000000000000001f0804020000000000000e010f110f"
    "1010161911111e00000e1010110e01010d1311110f00000e111f100e0609081c0808080f1111110f010e"
    "1010161911111104000c0404040e0200060202120c101012141814120c04040404040e00001a15151111"
    "0000161911111100000e1111110e1e1111111e10100f1111110f01010000161910101000000e100e011e"
    "08081c080809060000111111130d00001111110a040000111115150a0000110a040a11111111110f010e"
    "00001f0204081f02040408040402040404040404040804040204040800000815020000"
)
_FONT_W, _FONT_H, _CELL_W = 5, 7, 6
_DESCENDERS = "gpqy"
_GLYPHS = {}
for _i in range(95):
    _GLYPHS[chr(32 + _i)] = bytes.fromhex(_FONT_HEX[_i * 14:(_i + 1) * 14])
_COLOR = re.compile(r"#[0-9a-fA-F]{6}\Z")
_ANCHORS = ("start", "middle", "end")


def _rgb(color):
    """'#rrggbb' as bytes of 3; a ValueError naming the colour otherwise."""
    if not isinstance(color, str) or not _COLOR.match(color):
        raise ValueError("colour %r: want '#rrggbb'" % (color,))
    return bytes.fromhex(color[1:])


def text_scale(size):
    """Whole pixels per font pixel for a text of this size."""
    return max(1, int(size / 10 + 0.5))


def text_width(s, size=12):
    """Width in pixels of s in the PNG's font (the SVG's is the viewer's)."""
    k = text_scale(size)
    return max(0, len(s) * _CELL_W * k - k)


def _escape(s):
    return (str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _num(v):
    """A coordinate for SVG: integers without a point."""
    return "%d" % v if float(v).is_integer() else "%.2f" % v


class Canvas:
    """A picture of width x height pixels; shapes are drawn in the order given."""

    def __init__(self, width, height, background="#ffffff"):
        width, height = int(width), int(height)
        if width <= 0 or height <= 0:
            raise ValueError("canvas %dx%d: want a positive width and height" % (width, height))
        _rgb(background)
        self.width, self.height, self.background = width, height, background
        self.shapes = []

    def rect(self, x, y, w, h, fill, title=None):
        _rgb(fill)
        self.shapes.append(("rect", x, y, w, h, fill, title))

    def line(self, x1, y1, x2, y2, color, width=1):
        _rgb(color)
        self.shapes.append(("polyline", [(x1, y1), (x2, y2)], color, width))

    def polyline(self, points, color, width=1):
        _rgb(color)
        self.shapes.append(("polyline", [(p[0], p[1]) for p in points], color, width))

    def text(self, x, y, s, color="#000000", size=12, anchor="start"):
        _rgb(color)
        if anchor not in _ANCHORS:
            raise ValueError("text anchor %r: want start, middle or end" % (anchor,))
        self.shapes.append(("text", x, y, str(s), color, size, anchor))

    def save(self, path):
        """Write the picture: SVG or PNG by the extension of path."""
        ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
        if ext == "svg":
            data = self.svg().encode()
        elif ext == "png":
            data = self.png()
        else:
            raise ValueError("%s: cannot tell the format: want a name ending in .png or .svg" %
                             path)
        with open(path, "wb") as f:
            f.write(data)

    # ---- SVG ----------------------------------------------------------------------

    def svg(self):
        out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
               'viewBox="0 0 %d %d">' % (self.width, self.height, self.width, self.height),
               '<rect x="0" y="0" width="%d" height="%d" fill="%s"/>' %
               (self.width, self.height, self.background)]
        for s in self.shapes:
            if s[0] == "rect":
                _, x, y, w, h, fill, title = s
                attrs = 'x="%s" y="%s" width="%s" height="%s" fill="%s"' % (
                    _num(x), _num(y), _num(w), _num(h), fill)
                if title is None:
                    out.append("<rect %s/>" % attrs)
                else:
                    out.append("<rect %s><title>%s</title></rect>" % (attrs, _escape(title)))
            elif s[0] == "polyline":
                _, pts, color, width = s
                out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="%s"/>' %
                           (" ".join("%s,%s" % (_num(x), _num(y)) for x, y in pts), color,
                            _num(width)))
            else:
                _, x, y, text, color, size, anchor = s
                out.append('<text x="%s" y="%s" fill="%s" font-family="monospace" '
                           'font-size="%s" text-anchor="%s">%s</text>' %
                           (_num(x), _num(y), color, _num(size), anchor, _escape(text)))
        out.append("</svg>\n")
        return "\n".join(out)

    # ---- PNG ----------------------------------------------------------------------

    def raster(self):
        """The picture drawn: a bytearray of height rows of width RGB pixels."""
        self._pix = bytearray(_rgb(self.background) * (self.width * self.height))
        for s in self.shapes:
            if s[0] == "rect":
                self._fill(s[1], s[2], s[3], s[4], _rgb(s[5]))
            elif s[0] == "polyline":
                self._polyline(s[1], _rgb(s[2]), s[3])
            else:
                self._text(*s[1:])
        pix, self._pix = self._pix, None
        return pix

    def png(self):
        pix = self.raster()
        stride = self.width * 3
        raw = b"".join(b"\0" + bytes(pix[r * stride:(r + 1) * stride])
                       for r in range(self.height))

        def chunk(kind, data):
            return (struct.pack(">I", len(data)) + kind + data +
                    struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

        return (b"\x89PNG\r\n\x1a\n" +
                chunk(b"IHDR", struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))

    def _fill(self, x, y, w, h, rgb):
        x0, y0 = max(0, int(round(x))), max(0, int(round(y)))
        x1, y1 = min(self.width, int(round(x + w))), min(self.height, int(round(y + h)))
        if x1 <= x0 or y1 <= y0:
            return
        row = rgb * (x1 - x0)
        for r in range(y0, y1):
            at = (r * self.width + x0) * 3
            self._pix[at:at + len(row)] = row

    def _plot(self, x, y, rgb):
        if 0 <= x < self.width and 0 <= y < self.height:
            at = (y * self.width + x) * 3
            self._pix[at:at + 3] = rgb

    def _bresenham(self, x1, y1, x2, y2, rgb):
        dx, dy = abs(x2 - x1), -abs(y2 - y1)
        sx, sy = (1 if x1 < x2 else -1), (1 if y1 < y2 else -1)
        err = dx + dy
        while True:
            self._plot(x1, y1, rgb)
            if x1 == x2 and y1 == y2:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x1 += sx
            if e2 <= dx:
                err += dx
                y1 += sy

    def _polyline(self, pts, rgb, width):
        n = max(1, int(round(width)))
        offsets = [k - (n - 1) // 2 for k in range(n)]  # width 2: 0 and +1
        pts = [(int(round(x)), int(round(y))) for x, y in pts]
        for (x1, y1), (x2, y2) in zip(pts, pts[1:]):
            steep = abs(y2 - y1) > abs(x2 - x1)
            for o in offsets:
                if steep:
                    self._bresenham(x1 + o, y1, x2 + o, y2, rgb)
                else:
                    self._bresenham(x1, y1 + o, x2, y2 + o, rgb)
        if len(pts) == 1:
            self._plot(pts[0][0], pts[0][1], rgb)

    def _text(self, x, y, s, color, size, anchor):
        k = text_scale(size)
        w = text_width(s, size)
        left = int(round(x)) - {"start": 0, "middle": w // 2, "end": w}[anchor]
        top = int(round(y)) - _FONT_H * k
        rgb = _rgb(color)
        for i, ch in enumerate(s):
            glyph = _GLYPHS.get(ch, _GLYPHS["?"])
            gx = left + i * _CELL_W * k
            gy = top + (2 * k if ch in _DESCENDERS else 0)
            for r, bits in enumerate(glyph):
                for c in range(_FONT_W):
                    if bits & (0x10 >> c):
                        self._fill(gx + c * k, gy + r * k, k, k, rgb)


def read_png(path):
    """(width, height, rows) of an 8-bit RGB PNG; rows: bytes of 3*width each."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("%s: not a PNG file" % path)
    pos, idat, width = 8, [], None
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if zlib.crc32(kind + body) & 0xFFFFFFFF != struct.unpack(">I", data[pos + 8 + n:
                                                                            pos + 12 + n])[0]:
            raise ValueError("%s: chunk %s: bad CRC" % (path, kind.decode("latin-1")))
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype != 2 or interlace != 0:
                raise ValueError("%s: not 8-bit RGB without interlace" % path)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    if width is None:
        raise ValueError("%s: no IHDR" % path)
    raw = zlib.decompress(b"".join(idat))
    stride, bpp = width * 3, 3
    rows, prev = [], bytearray(stride)
    for r in range(height):
        ftype = raw[r * (stride + 1)]
        line = bytearray(raw[r * (stride + 1) + 1:(r + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 0:
                break
            if ftype == 1:
                p = a
            elif ftype == 2:
                p = b
            elif ftype == 3:
                p = (a + b) // 2
            elif ftype == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                p = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            else:
                raise ValueError("%s: row %d: filter type %d" % (path, r, ftype))
            line[i] = (line[i] + p) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows
