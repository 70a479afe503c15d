#!/usr/bin/env python3
"""pagealloc_map.py — the heap map: every page of a heap, drawn.

    pagealloc map PID -o FILE.png|FILE.svg [--json]
    pagealloc run --map FILE.png|FILE.svg -- CMD...   (draws the map at exit)

The process writes its heap's map (src/heapmap.h has the format): asked
through its live file (map_request, src/live.h), its scavenger thread
walks the heap chunk by chunk and writes PATH.map beside the live file;
with map_prefix=PREFIX it writes PREFIX.PID.map at exit. This module reads
such a file (read_map: plain Python data) and draws it (draw / draw_file):
each chunk of 512 pages a row of cells in address order, the chunk's
address at the left, every page coloured by what it is:

    small span        blue, darker the fuller its span (objects in use
                      over its capacity: in use from the span's view, so
                      objects in thread caches count)
    large object      orange, its first page dark; a freed one waiting
                      for reuse (a thread's large slots, the large stash)
                      light orange
    per-CPU cache     purple: free pages a CPU's page cache holds, or
                      frees it queued
                      a red bar under a span a defrag would empty: the
                      defrag contract's rule (pagealloc.h, pa_defrag_hint):
                      a partial span at most 12.5% fuller than its class's
                      partial spans on average, with a fuller one to move
                      its objects into
    free, resident    light grey
    free, released    very light grey inside the chunk's outline
    other             dark grey: pages in use by the page API's callers

and a legend with the colours and the totals. With --json, `map` also
prints the totals as one JSON object. The drawing is SVG or PNG by the
output's extension (tools/pagealloc_draw.py). Errors are one line on
standard error and exit status 1, as `pagealloc stat` gives them.
Python 3 standard library only.
"""
import collections
import json
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pagealloc_stat  # noqa: E402  (the live file: finding it, asking it)

ME = "pagealloc map"
MAGIC = b"PAHEAPMP"
VERSION = 1
# struct heapmap_header (src/heapmap.h): native order, 144 bytes.
HEADER = struct.Struct("=8sIIIIII QQ 8Q QQQQ")
HEADER_FIELDS = ("magic version header_bytes page_size chunk_pages nchunks nclasses pid "
                 "time_ns").split()
PAGE = struct.Struct("=BBBBHH")  # struct heapmap_page
KINDS = ("free", "released", "cached", "small", "large", "large_free", "other")
FIRST, SAMPLED, HUGE = 1, 2, 4
WAIT_S = 10  # the longest `map` waits for the process's answer

Page = collections.namedtuple("Page", "kind cls flags inuse objects")


class MapError(Exception):
    """One line for the user; exit status 1."""


# ---- reading ---------------------------------------------------------------


def read_map(path):
    """The map file at path as plain data:

        {"pid", "time" (s since the epoch), "page_size", "chunk_pages",
         "class_size": [bytes per object of each class; 0: large],
         "pages": {kind: pages}, "huge_pages" (pages in collapsed huge
         pages), "small_objects", "small_bytes",
         "large_objects", "large_free_objects",
         "chunks": [{"base": address, "pages": [Page(kind, cls, flags,
                                                     inuse, objects)]}]}

    kind is one of KINDS; flags has FIRST (a span's or large object's first
    page), SAMPLED and HUGE. Raises MapError for a file that is not a whole map."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise MapError("%s: %s" % (path, e.strerror or e))
    if len(data) < HEADER.size:
        raise MapError("%s: not a heap map (%d bytes)" % (path, len(data)))
    v = HEADER.unpack_from(data, 0)
    h = dict(zip(HEADER_FIELDS, v[:9]))
    if h["magic"] != MAGIC:
        raise MapError("%s: not a heap map, or not finished (no magic)" % path)
    if h["version"] != VERSION:
        raise MapError("%s: heap map version %d, this reader knows %d" %
                       (path, h["version"], VERSION))
    pages_by_kind = v[9:17]
    small_objects, small_bytes, large_objects, large_free = v[17:21]
    off = h["header_bytes"]
    nclasses, npages = h["nclasses"], h["chunk_pages"]
    class_size = list(struct.unpack_from("=%dI" % nclasses, data, off))
    off += (nclasses * 4 + 7) // 8 * 8
    chunk_bytes = 8 + npages * PAGE.size
    if len(data) != off + h["nchunks"] * chunk_bytes:
        raise MapError("%s: %d bytes, want %d for %d chunks" %
                       (path, len(data), off + h["nchunks"] * chunk_bytes, h["nchunks"]))
    chunks = []
    for _ in range(h["nchunks"]):
        base = struct.unpack_from("=Q", data, off)[0]
        recs = data[off + 8:off + chunk_bytes]
        pages = [Page(KINDS[k] if k < len(KINDS) else "other", c, fl, u, o)
                 for k, c, fl, _, u, o in PAGE.iter_unpack(recs)]
        chunks.append({"base": base, "pages": pages})
        off += chunk_bytes
    return {
        "pid": h["pid"],
        "time": h["time_ns"] / 1e9,
        "page_size": h["page_size"],
        "chunk_pages": npages,
        "class_size": class_size,
        "pages": {k: pages_by_kind[i] for i, k in enumerate(KINDS)},
        "huge_pages": pages_by_kind[len(KINDS)],
        "small_objects": small_objects,
        "small_bytes": small_bytes,
        "large_objects": large_objects,
        "large_free_objects": large_free,
        "chunks": chunks,
    }


def page_at(m, addr):
    """(chunk index, page index, Page) of the page holding addr, or None."""
    chunk_bytes = m["page_size"] * m["chunk_pages"]
    for ci, c in enumerate(m["chunks"]):
        if c["base"] <= addr < c["base"] + chunk_bytes:
            p = (addr - c["base"]) // m["page_size"]
            return ci, p, c["pages"][p]
    return None


def small_spans(m):
    """The small spans of map m: (chunk index, first page, pages, Page of
    its first page), in address order."""
    out = []
    for ci, c in enumerate(m["chunks"]):
        pages = c["pages"]
        p = 0
        while p < len(pages):
            pg = pages[p]
            q = p + 1
            if pg.kind == "small":
                while q < len(pages) and pages[q].kind == "small" and \
                        not pages[q].flags & FIRST:
                    q += 1
                out.append((ci, p, q - p, pg))
            p = q
    return out


def defrag_spans(m):
    """The small spans a defrag would empty, by the contract's rule
    (src/central.h, central_defrag_rule): of the partial spans of a class
    (some object free, some in use), those whose objects in use are at
    most 9/8 of the class's average, when a span at least as full exists
    to move into. Returns the list of small_spans' entries."""
    by_class = collections.defaultdict(list)
    for s in small_spans(m):
        pg = s[3]
        if 0 < pg.inuse < pg.objects:
            by_class[pg.cls].append(s)
    out = []
    for spans in by_class.values():
        n, total = len(spans), sum(s[3].inuse for s in spans)
        for s in spans:
            inuse = s[3].inuse
            fuller = sum(1 for o in spans if o[3].inuse >= inuse) > 1
            if fuller and inuse * n * 8 <= total * 9:
                out.append(s)
    return out


def totals(m):
    """The legend's figures: "bytes" of pages per kind, chunks, heap_sys
    (the chunks' bytes), heap_inuse (less free, released and cached pages),
    the objects in use in small spans and their bytes, large objects."""
    ps = m["page_size"]
    t = {"pid": m["pid"], "time": m["time"], "chunks": len(m["chunks"]),
         "heap_sys": len(m["chunks"]) * m["chunk_pages"] * ps,
         "bytes": {k: m["pages"][k] * ps for k in KINDS},
         "huge_bytes": m.get("huge_pages", 0) * ps}
    b = t["bytes"]
    t["heap_inuse"] = t["heap_sys"] - b["free"] - b["released"] - b["cached"]
    t["small_objects"], t["small_object_bytes"] = m["small_objects"], m["small_bytes"]
    t["large_objects"], t["large_free_objects"] = m["large_objects"], m["large_free_objects"]
    d = defrag_spans(m)
    t["defrag_spans"], t["defrag_bytes"] = len(d), sum(s[2] for s in d) * ps
    t.update(huge_occupancy(m))
    return t


HUGE_PAGE = 2 << 20  # x86-64's (the heap map does not record it)
IN_USE = ("small", "large", "large_free", "other")  # heap_inuse's pages


def huge_occupancy(m):
    """How the pages in use sit in 2 MiB huge pages: huge_touched (huge
    pages with a page in use), huge_fewest (the fewest that could hold
    them), huge_dense (at least 15/16 in use: what the scavenger collapses)
    and huge_eighths (touched huge pages by eighths of their pages in use,
    the last bin counting full ones too)."""
    hp = max(1, HUGE_PAGE // m["page_size"])
    touched = dense = inuse = 0
    eighths = [0] * 8
    for c in m["chunks"]:
        pages = c["pages"]
        for h0 in range(0, len(pages), hp):
            u = sum(1 for pg in pages[h0:h0 + hp] if pg.kind in IN_USE)
            inuse += u
            if u:
                touched += 1
                eighths[min(7, u * 8 // hp)] += 1
            dense += u >= hp - hp // 16
    return {"huge_touched": touched, "huge_fewest": -(-inuse // hp), "huge_dense": dense,
            "huge_eighths": eighths}


# ---- drawing ---------------------------------------------------------------

CELL_W, CELL_H, ROW_GAP = 2, 10, 4  # a page's cell; the gap between chunks
LEFT, TOP = 132, 44                 # the address column; the title above
SHADES = 8                          # fullness steps of a small span
# Small spans: light blue (nearly empty) to dark blue (full).
SMALL_LIGHT, SMALL_DARK = (0xc6, 0xdb, 0xef), (0x08, 0x30, 0x6b)
COLOURS = {
    "free": "#cfcfcf",
    "released": "#f6f6f6",
    "cached": "#9e9ac8",
    "large": "#e6550d",
    "large_first": "#8c2d04",      # a large object's first page: where one ends
    "large_free": "#fdc897",       # and the next begins
    "large_free_first": "#d08a50",
    "other": "#525252",
}
OUTLINE = "#b0b0b0"
DEFRAG = "#d7301f"  # the bar under a span a defrag would empty
BACKGROUND = "#ffffff"
TEXT = "#222222"
LABELS = {
    "small": "small-object spans",
    "large": "large objects (first page dark)",
    "large_free": "freed large objects waiting for reuse",
    "cached": "per-CPU page caches",
    "free": "free, resident",
    "released": "free, released to the OS",
    "other": "other pages in use",
}


def small_shade(fullness):
    """The shade step (0 .. SHADES-1) of a span whose objects are this
    fraction in use: 0 for a span with one object in use of 512, the last
    for a full one."""
    s = int(fullness * SHADES)
    return min(max(s, 0), SHADES - 1)


def small_colour(step):
    t = step / (SHADES - 1)
    return "#%02x%02x%02x" % tuple(round(a + (b - a) * t) for a, b in zip(SMALL_LIGHT,
                                                                          SMALL_DARK))


def page_colour(pg):
    """The fill of a page's cell."""
    if pg.kind == "small":
        return small_colour(small_shade(pg.inuse / pg.objects if pg.objects else 0))
    if pg.flags & FIRST and pg.kind in ("large", "large_free"):
        return COLOURS[pg.kind + "_first"]
    return COLOURS[pg.kind]


def cell_xy(ci, p):
    """The top left pixel of page p of chunk ci's cell."""
    return LEFT + p * CELL_W, TOP + ci * (CELL_H + ROW_GAP)


def page_title(m, base, p, pg):
    """A cell's tooltip in SVG: its address and what it is."""
    addr = "%#x" % (base + p * m["page_size"])
    if pg.kind == "small":
        return "%s: span of %d-byte objects (class %d), %d of %d in use" % (
            addr, m["class_size"][pg.cls], pg.cls, pg.inuse, pg.objects)
    return "%s: %s" % (addr, LABELS[pg.kind])


def human(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return "%.1f %s" % (n / size, unit)
    return "%d B" % n


def legend_lines(t):
    """The legend: (kind or None, text) per line."""
    lines = [(k, "%s  %s" % (LABELS[k], human(t["bytes"][k])))
             for k in ("small", "large", "large_free", "cached", "free", "released", "other")]
    lines.append((None, "small objects in use %d (%s); live large objects %d, freed %d" %
                   (t["small_objects"], human(t["small_object_bytes"]), t["large_objects"],
                    t["large_free_objects"])))
    lines.append(("defrag", "spans a defrag would empty (pa_defrag_move): %d, %s" %
                  (t["defrag_spans"], human(t["defrag_bytes"]))))
    lines.append((None, "%d chunks of 4 MiB: heap_sys %s, in use %s, released %s" %
                   (t["chunks"], human(t["heap_sys"]), human(t["heap_inuse"]),
                    human(t["bytes"]["released"]))))
    lines.append((None, "in huge pages the scavenger collapsed: %s" % human(t["huge_bytes"])))
    lines.append((None, "2 MiB huge pages with pages in use: %d (the fewest that could hold them: "
                  "%d); dense, 15/16 in use: %d" % (t["huge_touched"], t["huge_fewest"],
                                                    t["huge_dense"])))
    return lines


def draw(m, out_path):
    """Draw map m (read_map's data) to out_path, SVG or PNG by its extension."""
    import pagealloc_draw
    t = totals(m)
    n = len(m["chunks"])
    width = LEFT + m["chunk_pages"] * CELL_W + 20
    rows_end = TOP + n * (CELL_H + ROW_GAP)
    legend = legend_lines(t)
    height = rows_end + 16 + 18 * len(legend) + 28
    cv = pagealloc_draw.Canvas(width, height, BACKGROUND)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(m["time"]))
    cv.text(8, 20, "heap map of pid %d, %s: %d chunks, a row of 512 pages (8 KiB) each" %
            (m["pid"], when, n), TEXT, 14, "start")
    cv.text(8, 36, "address", TEXT, 11, "start")
    for ci, c in enumerate(m["chunks"]):
        x0, y0 = cell_xy(ci, 0)
        cv.text(LEFT - 8, y0 + CELL_H - 1, "%#x" % c["base"], TEXT, 10, "end")
        # The chunk's outline, then its pages in runs of one colour that
        # are one thing: a span, a large object, free pages.
        cv.rect(x0 - 1, y0 - 1, m["chunk_pages"] * CELL_W + 2, CELL_H + 2, OUTLINE)
        pages = c["pages"]
        p = 0
        while p < len(pages):
            colour = page_colour(pages[p])
            q = p + 1
            while q < len(pages) and page_colour(pages[q]) == colour and \
                    not pages[q].flags & FIRST and pages[q].cls == pages[p].cls:
                q += 1
            x, y = cell_xy(ci, p)
            cv.rect(x, y, (q - p) * CELL_W, CELL_H, colour,
                    title=page_title(m, c["base"], p, pages[p]) if q - p == 1 else
                    "%s (%d pages)" % (page_title(m, c["base"], p, pages[p]), q - p))
            p = q
    # A bar under each span a defrag would empty, in the gap below its row.
    for ci, p, npages, _ in defrag_spans(m):
        x, y = cell_xy(ci, p)
        cv.rect(x, y + CELL_H + 1, npages * CELL_W, 2, DEFRAG)
    # The legend: a swatch per kind, the small spans' shades, the totals.
    y = rows_end + 16
    for kind, line in legend:
        if kind == "small":
            for s in range(SHADES):
                cv.rect(8 + s * 6, y, 6, 12, small_colour(s))
            cv.text(66, y + 10, line + "  (lightest: almost empty, darkest: full)", TEXT, 11,
                    "start")
        elif kind == "defrag":
            cv.rect(8 + 18, y + 5, 14, 3, DEFRAG)
            cv.text(66, y + 10, line, TEXT, 11, "start")
        elif kind is not None:
            cv.rect(8 + 18, y - 1, 14, 14, OUTLINE)
            cv.rect(8 + 19, y, 12, 12, COLOURS[kind])
            cv.text(66, y + 10, line, TEXT, 11, "start")
        else:
            cv.text(8, y + 10, line, TEXT, 11, "start")
        y += 18
    cv.save(out_path)


def draw_file(map_path, out_path):
    """Read the map file at map_path and draw it to out_path."""
    m = read_map(map_path)
    draw(m, out_path)
    return m


# ---- asking a running process ------------------------------------------------


def ask_map(pid):
    """Ask process pid for its map and wait for it: the map file's path,
    written beside its live file (the caller removes it)."""
    try:
        return pagealloc_stat.Live(pid).fetch("map", "heap map", WAIT_S)
    except pagealloc_stat.StatError as e:
        raise MapError(str(e))


USAGE = """usage: pagealloc map PID -o FILE.png|FILE.svg [--json]

Draws the heap of running process PID: each 4 MiB chunk a row of its 512
pages in address order, each page coloured by what holds it (small-object
spans shaded by how full they are, large objects, per-CPU page caches,
free and released pages), with a legend and the totals. --json also prints
the totals as one JSON object.
"""


def main(argv):
    args = list(argv[1:])
    if args and args[0] == "map":
        args = args[1:]
    out, as_json, rest = None, False, []
    try:
        while args:
            a = args.pop(0)
            if a == "-o":
                out = args.pop(0)
            elif a == "--json":
                as_json = True
            elif a in ("-h", "--help"):
                sys.stdout.write(USAGE)
                return 0
            elif a.startswith("-"):
                sys.stderr.write("%s: unknown option %s\n%s" % (ME, a, USAGE))
                return 2
            else:
                rest.append(a)
        if len(rest) != 1 or not out:
            raise ValueError
        pid = int(rest[0])
        if pid <= 0:
            raise ValueError
    except (ValueError, IndexError):
        sys.stderr.write("%s: want PID -o FILE.png|FILE.svg\n%s" % (ME, USAGE))
        return 2
    if not out.endswith((".png", ".svg")):
        sys.stderr.write("%s: %s: want a .png or .svg file\n" % (ME, out))
        return 2
    try:
        path = ask_map(pid)
        try:
            m = draw_file(path, out)
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
    except MapError as e:
        sys.stderr.write("%s: %s\n" % (ME, e))
        return 1
    except OSError as e:
        sys.stderr.write("%s: %s: %s\n" % (ME, getattr(e, "filename", None) or out,
                                           e.strerror or e))
        return 1
    except KeyboardInterrupt:
        return 130
    t = totals(m)
    if as_json:
        print(json.dumps(t))
    else:
        print("heap map of process %d in %s: %d chunks, %s in use" %
              (pid, out, t["chunks"], human(t["heap_inuse"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
