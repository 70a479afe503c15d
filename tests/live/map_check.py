#!/usr/bin/python3 -S
"""map_check.py — `pagealloc map` draws a heap of known shape cell by cell.

    map_check.py PRELOAD_SO MAP_TARGET TOOLS_DIR PAGEALLOC

map_target (tests/live/map_target.c) runs on the preload with prof=off and
map_prefix=TMP/exit: seed 000's keep-every-512th heap (one 16-byte object
kept per 8 KiB span), two live large blocks of 128 and 768 pages (the
second across a chunk's end), a freed one of 32 pages in the thread's
large slots, every free page released by malloc_trim(0). Checks:

  * the map asked of the running process (tools/pagealloc_map.py: ask_map,
    read_map): each kept object's page is a 16-byte span (class 1) with 1
    of 512 objects in use, marked first; each large block's pages are
    large, the first marked, none past its end; the freed block's 32 pages
    are a freed large object; the page after it is free and released; the
    totals count exactly the 896 large pages of 2 live objects and the 32
    of the freed one, and at least the kept objects;
  * `pagealloc map PID -o F.png` and `-o F.svg` (main): exit 0, no .map
    file left beside the live file; the PNG's pixel at each of those cells
    is its kind's colour (the lightest small-span shade for a kept
    object's page); the SVG's rect covering the cell has that fill and a
    tooltip naming the span's class and objects in use;
  * an error: `pagealloc map` of this script's own pid (not on
    libpagealloc) exits 1 with one line on standard error;
  * at exit the process writes TMP/exit.PID.map (map_prefix), whose cells
    are the same, and draw_file draws it;
  * `pagealloc run --map F.svg -- map_target` (the command PAGEALLOC): the
    SVG it draws at exit has the same cells, found by the chunks' address
    labels.

Exit status 0 when all pass, 1 with a line per failure, 77 to skip.
"""
import io
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

preload, target, tools, pagealloc = sys.argv[1:5]
sys.path.insert(0, tools)
import pagealloc_draw  # noqa: E402
import pagealloc_map as pm  # noqa: E402
import pagealloc_stat  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def read_facts(lines):
    """map_target's lines up to its ready."""
    facts = {"large": []}
    for line in lines:
        w = line.split()
        if w[0] == "ready":
            break
        if w[0] == "kept":
            facts["kept"] = [int(a, 16) for a in w[1:]]
        elif w[0] == "large":
            facts["large"].append((int(w[1], 16), int(w[2])))
        elif w[0] in ("freed", "after"):
            facts[w[0]] = int(w[1], 16), int(w[2]) if len(w) > 2 else 0
    else:
        sys.exit("map_target ended before its ready")
    return facts


def start(tmp):
    env = dict(os.environ, LD_PRELOAD=preload,
               PAGEALLOC_CONF="prof=off,map_prefix=%s/exit" % tmp)
    proc = subprocess.Popen([target], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                            text=True)
    return proc, read_facts(proc.stdout)


def wait_live(pid):
    """The live file appears at the scavenger thread's first wake."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return pagealloc_stat.Live(pid)
        except pagealloc_stat.StatError as e:
            if time.monotonic() > deadline:
                sys.exit("no live file for map_target: %s" % e)
            time.sleep(0.01)


def pages_from(m, addr, n):
    """The n Pages from addr on, across chunks."""
    out = []
    for i in range(n):
        at = pm.page_at(m, addr + i * m["page_size"])
        out.append(at[2] if at else None)
    return out


def expected_cells(m, facts):
    """(what, address, Page wanted or a test, colour) for the cells checked."""
    cls16 = m["class_size"].index(16)
    cells = []
    for a in facts["kept"]:
        cells.append(("kept object %#x" % a, a, pm.Page("small", cls16, pm.FIRST, 1, 512)))
    for base, n in facts["large"]:
        cells.append(("large %#x first page" % base, base, pm.Page("large", 0, pm.FIRST, 0, 0)))
        cells.append(("large %#x page 1" % base, base + m["page_size"],
                      pm.Page("large", 0, 0, 0, 0)))
        cells.append(("large %#x last page" % base, base + (n - 1) * m["page_size"],
                      pm.Page("large", 0, 0, 0, 0)))
    a, n = facts["freed"]
    cells.append(("freed %#x first page" % a, a, pm.Page("large_free", 0, pm.FIRST, 0, 0)))
    cells.append(("freed %#x last page" % a, a + (n - 1) * m["page_size"],
                  pm.Page("large_free", 0, 0, 0, 0)))
    cells.append(("page after the freed block", facts["after"][0],
                  pm.Page("released", 0, 0, 0, 0)))
    return cells


def check_map(m, facts, label):
    check(len(facts["kept"]) >= 200, "%s: only %d objects kept" % (label, len(facts["kept"])))
    for what, addr, want in expected_cells(m, facts):
        at = pm.page_at(m, addr)
        check(at is not None and at[2] == want, "%s: %s: %s, want %s" %
              (label, what, at and at[2], want))
    for base, n in facts["large"]:
        run = pages_from(m, base, n + 1)
        check(all(p.kind == "large" for p in run[:n]) and
              sum(p.flags & pm.FIRST for p in run[:n]) == 1,
              "%s: large %#x: not %d large pages with one first" % (label, base, n))
        check(run[n] is None or run[n].kind != "large" or run[n].flags & pm.FIRST,
              "%s: large %#x runs past its %d pages" % (label, base, n))
    a, n = facts["freed"]
    check(all(p.kind == "large_free" for p in pages_from(m, a, n)),
          "%s: freed %#x: not %d waiting large pages" % (label, a, n))
    check(m["pages"]["large"] == 128 + 768 and m["large_objects"] == 2,
          "%s: %d large pages of %d objects, want 896 of 2" %
          (label, m["pages"]["large"], m["large_objects"]))
    check(m["pages"]["large_free"] == 32 and m["large_free_objects"] == 1,
          "%s: %d freed large pages of %d objects, want 32 of 1" %
          (label, m["pages"]["large_free"], m["large_free_objects"]))
    check(m["small_objects"] >= len(facts["kept"]),
          "%s: %d small objects, fewer than the kept" % (label, m["small_objects"]))
    check(sum(m["pages"].values()) == len(m["chunks"]) * 512,
          "%s: the kinds' pages do not add up to the chunks'" % label)


def check_png(m, facts, path):
    w, h, rows = pagealloc_draw.read_png(path)
    for what, addr, want in expected_cells(m, facts):
        ci, p, _ = pm.page_at(m, addr)
        x, y = pm.cell_xy(ci, p)
        x, y = x + pm.CELL_W // 2, y + pm.CELL_H // 2
        got = "#" + rows[y][3 * x:3 * x + 3].hex()
        check(got == pm.page_colour(want), "PNG: %s: pixel (%d, %d) %s, want %s" %
              (what, x, y, got, pm.page_colour(want)))
    check(pm.page_colour(pm.Page("small", 1, 1, 1, 512)) == pm.small_colour(0),
          "a span with 1 object of 512 in use is not the lightest shade")


def svg_rect_at(root, x, y):
    """The last rect drawn over pixel (x, y): the one seen."""
    found = None
    for r in root.iter("{http://www.w3.org/2000/svg}rect"):
        rx, ry = float(r.get("x")), float(r.get("y"))
        rw, rh = float(r.get("width")), float(r.get("height"))
        if rx <= x < rx + rw and ry <= y < ry + rh:
            found = r
    return found


def check_svg(m, facts, path):
    root = ET.parse(path).getroot()
    for what, addr, want in expected_cells(m, facts):
        ci, p, _ = pm.page_at(m, addr)
        x, y = pm.cell_xy(ci, p)
        r = svg_rect_at(root, x + 0.5, y + 0.5)
        fill = r.get("fill") if r is not None else None
        check(fill == pm.page_colour(want), "SVG: %s: rect fill %s, want %s" %
              (what, fill, pm.page_colour(want)))
        if want.kind == "small" and r is not None:
            t = r.find("{http://www.w3.org/2000/svg}title")
            check(t is not None and "16-byte objects (class 1), 1 of 512 in use" in t.text,
                  "SVG: %s: tooltip %r" % (what, t is not None and t.text))


def svg_chunk_bases(root):
    """The chunks' addresses, from their labels, in row order."""
    bases = []
    for t in root.iter("{http://www.w3.org/2000/svg}text"):
        if t.text and t.text.startswith("0x") and float(t.get("x")) == pm.LEFT - 8:
            bases.append(int(t.text, 16))
    return bases


def check_run_map(tmp):
    """pagealloc run --map: the SVG drawn at exit."""
    out = os.path.join(tmp, "run.svg")
    proc = subprocess.run([pagealloc, "run", "--quiet", "--conf", "prof=off", "--map", out, "--",
                           target], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)
    check(proc.returncode == 0, "run --map: exit %d: %s" % (proc.returncode, proc.stderr))
    check(os.path.exists(out), "run --map: no %s" % out)
    if proc.returncode != 0 or not os.path.exists(out):
        return
    facts = read_facts(proc.stdout.splitlines())
    root = ET.parse(out).getroot()
    bases = svg_chunk_bases(root)
    m = {"page_size": 8192, "chunk_pages": 512, "class_size": [0, 16],
         "chunks": [{"base": b, "pages": [None] * 512} for b in bases]}
    for what, addr, want in expected_cells(m, facts):
        at = pm.page_at(m, addr)
        check(at is not None, "run --map: %s: %#x in no chunk row" % (what, addr))
        if at is None:
            continue
        x, y = pm.cell_xy(at[0], at[1])
        r = svg_rect_at(root, x + 0.5, y + 0.5)
        fill = r.get("fill") if r is not None else None
        check(fill == pm.page_colour(want), "run --map: %s: rect fill %s, want %s" %
              (what, fill, pm.page_colour(want)))


def run_main(args):
    """pagealloc_map.main's exit status, standard output and error."""
    out, err = io.StringIO(), io.StringIO()
    so, se = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        rc = pm.main(["pagealloc", "map"] + args)
    finally:
        sys.stdout, sys.stderr = so, se
    return rc, out.getvalue(), err.getvalue()


def main():
    if not os.path.exists(preload):
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        proc, facts = start(tmp)
        pid = proc.pid
        try:
            live = wait_live(pid)
            m = pm.read_map(pm.ask_map(pid))
            os.unlink(live.path + ".map")
            check_map(m, facts, "map of the running process")
            for ext, fn in (("png", check_png), ("svg", check_svg)):
                out = os.path.join(tmp, "heap." + ext)
                rc, so, se = run_main([str(pid), "-o", out])
                check(rc == 0 and se == "", "map -o %s: exit %d, %r" % (out, rc, se))
                check(not os.path.exists(live.path + ".map"), "map left %s.map" % live.path)
                if rc == 0:
                    fn(m, facts, out)
            rc, so, se = run_main([str(os.getpid()), "-o", os.path.join(tmp, "self.png")])
            check(rc == 1 and se.count("\n") == 1 and se.startswith("pagealloc map: ") and
                  so == "", "map of a process not on libpagealloc: exit %d, %r" % (rc, se))
        finally:
            proc.stdin.write("go\n")
            proc.stdin.close()
            proc.wait(timeout=30)
        exit_map = os.path.join(tmp, "exit.%d.map" % pid)
        check(os.path.exists(exit_map), "no %s at exit (map_prefix)" % exit_map)
        if os.path.exists(exit_map):
            m = pm.draw_file(exit_map, os.path.join(tmp, "exit.svg"))
            check_map(m, facts, "map at exit")
            check_svg(m, facts, os.path.join(tmp, "exit.svg"))
        check_run_map(tmp)
    if failures:
        print("%d failures" % len(failures))
        return 1
    print("ok: %d kept objects, %d chunks" % (len(facts["kept"]), len(m["chunks"])))
    return 0


sys.exit(main())
