"""pagealloc_timeline.py — a process's memory over time: sampled, saved, drawn.

    pagealloc run --timeline FILE.csv [--timeline-ms 100] [--plot FILE.png] -- CMD
    pagealloc plot FILE.csv -o FILE.png|.svg [--title TEXT]

While CMD runs, `pagealloc run` (pagealloc_cli.py) calls Sampler.sample
every interval: a row of the time since CMD started, its RSS (VmRSS of
/proc/PID/status) and the heap's figures from its live file, read as
`pagealloc stat` reads them (pagealloc_stat.Live: a refresh asked for and
waited on, at most 100 ms, then the figures copied under the sequence
count). Only CMD itself is sampled, not the processes it starts. Until
the process makes its live file (its scavenger thread starts once the heap
has work: docs/design/scavenger.md, *When the thread starts*; never with
live=off) the heap columns are empty.

The CSV has a header line, then a row per sample:

    time_s       seconds since CMD started (3 decimals)
    rss          bytes resident, from the kernel
    FIGURE...    the live file's figures under its own names (src/live.c:
                 heap_sys, heap_inuse, heap_alloc, heap_idle,
                 heap_released, ... scavenger_cpu_ns), bytes, counts or
                 nanoseconds, but its rss, which is the kernel's above

plot draws two panels against time in seconds: above, RSS, the live heap
(heap_alloc) and what is released to the OS (heap_released), in MiB; below,
the scavenger's CPU in % of one core over each interval (from the growth of
scavenger_cpu_ns between two rows), with a legend and a title naming the
command.
"""
import os
import sys
import time

import pagealloc_draw
import pagealloc_stat

# The live file's figures (src/live.c figure_names), in its order, but rss.
FIGURES = ("heap_sys heap_inuse heap_alloc heap_idle heap_released span_released heap_usage "
           "max_fragmentation live_objects large_objects large_bytes thread_caches "
           "cached_bytes stashed_bytes scavenger_cpu_ns released_total release_calls "
           "cache_free metadata memory_limit limit_overruns updates stories partial_spans "
           "partial_free_bytes huge_bytes huge_collapses huge_splits memory_limit_auto "
           "cgroup_version cgroup_limit cgroup_other memory_pressure huge_freed "
           "collapse_failures collapse_waits").split()
COLUMNS = ["time_s", "rss"] + FIGURES

PLOT_USAGE = """usage: pagealloc plot FILE.csv -o FILE.png|.svg [--title TEXT]

Draws a timeline saved by pagealloc run --timeline FILE.csv: RSS, the live
heap (heap_alloc) and what is released to the OS (heap_released) in MiB, and
the scavenger's CPU in % of one core, against time. The title is TEXT, or
the CSV's name.
"""


def vm_rss(pid):
    """Bytes resident of process pid, or None when it has exited."""
    try:
        with open("/proc/%d/status" % pid, "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None  # a zombie has no VmRSS


class Sampler:
    """Rows of samples of one process, written as they are taken when a
    path is given, kept in .rows (dicts of COLUMNS, None where empty)."""

    def __init__(self, path, interval):
        self.interval = interval
        self.rows = []
        self.out = open(path, "w") if path else None
        if self.out:
            self.out.write(",".join(COLUMNS) + "\n")
            self.out.flush()

    def start(self, pid):
        self.pid, self.t0, self.due, self.live = pid, time.monotonic(), time.monotonic(), None

    def next_due(self):
        """Seconds until the next sample is due (<= 0: now)."""
        return self.due - time.monotonic()

    def figures(self):
        """The live file's figures now, or None (no file yet, or no answer)."""
        if self.live is None:
            try:
                self.live = pagealloc_stat.Live(self.pid)
            except (pagealloc_stat.StatError, OSError, ValueError):
                return None
        try:
            if not self.live.refresh() and pagealloc_stat.maps_file(
                    self.pid, self.live.st) is False:
                self.live = None  # CMD exec'd another program: its file is new
                return None
            return self.live.read()[1]
        except (pagealloc_stat.StatError, OSError, ValueError):
            self.live = None
            return None

    def sample(self):
        t = time.monotonic() - self.t0
        # The next sample on the interval's grid, skipping what a slow
        # sample overran.
        now = time.monotonic()
        while self.due <= now:
            self.due += self.interval
        rss = vm_rss(self.pid)
        if rss is None:
            return
        figs = self.figures() or {}
        row = {"time_s": t, "rss": rss}
        for name in FIGURES:
            row[name] = figs.get(name)
        self.rows.append(row)
        if self.out:
            self.out.write(format_row(row) + "\n")
            self.out.flush()

    def close(self):
        if self.out:
            self.out.close()
            self.out = None


def format_row(row):
    out = []
    for c in COLUMNS:
        v = row.get(c)
        out.append("" if v is None else "%.3f" % v if c == "time_s" else "%d" % v)
    return ",".join(out)


def read_csv(path):
    """The rows of a saved timeline (dicts; None where a cell is empty)."""
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or lines[0].split(",")[:2] != ["time_s", "rss"]:
        raise ValueError("%s: not a timeline (want a header starting time_s,rss)" % path)
    names = lines[0].split(",")
    rows = []
    for n, line in enumerate(lines[1:], 2):
        cells = line.split(",")
        if len(cells) != len(names):
            raise ValueError("%s:%d: %d cells, want %d" % (path, n, len(cells), len(names)))
        try:
            rows.append({k: (float(v) if k == "time_s" else int(v)) if v != "" else None
                         for k, v in zip(names, cells)})
        except ValueError:
            raise ValueError("%s:%d: not a number in '%s'" % (path, n, line))
    return rows


# ---- the plot ----------------------------------------------------------------------

WIDTH, HEIGHT = 900, 560
LEFT, RIGHT, TOP = 70, 20, 56  # margins of the panels
MEM_H, GAP, CPU_H = 300, 46, 110  # the memory panel, the gap, the CPU panel
SERIES = (("rss", "RSS", "#1f4e9c"), ("heap_alloc", "live heap (heap_alloc)", "#2e8b3a"),
          ("heap_released", "released to the OS (heap_released)", "#d9822b"))
CPU_COLOR = "#8e3fa8"
GRID, AXIS, INK = "#e4e4e4", "#555555", "#222222"
MIB = 1048576.0


def nice_ticks(hi, n=6):
    """Ticks from 0 to at least hi, at a step of 1, 2 or 5 times a power of
    ten giving at most n+1 ticks."""
    if hi <= 0:
        hi = 1.0
    raw = hi / n
    p = 10.0 ** len(str(int(raw))) / 10 if raw >= 1 else 1.0
    while p > raw:
        p /= 10
    while p * 10 <= raw:
        p *= 10
    for m in (1, 2, 5, 10):
        step = m * p
        if step * n >= hi:
            break
    k = 0
    ticks = []
    while True:
        ticks.append(k * step)
        if k * step >= hi - 1e-9:
            return ticks
        k += 1


def label(v):
    return ("%.3f" % v).rstrip("0").rstrip(".") if v != int(v) else "%d" % v


def plot(rows, out, title):
    """Draw the rows (Sampler.rows or read_csv's) into out (.png or .svg)."""
    c = pagealloc_draw.Canvas(WIDTH, HEIGHT)
    pw = WIDTH - LEFT - RIGHT
    t_end = max([r["time_s"] for r in rows] + [0.001])
    xt = nice_ticks(t_end, 8)
    x_of = lambda t: LEFT + t / xt[-1] * pw  # noqa: E731
    if len(title) > 110:
        title = title[:107] + "..."
    c.text(WIDTH / 2, 22, title, color=INK, size=14, anchor="middle")

    # Memory, in MiB.
    top = TOP
    peak = max([r[k] or 0 for r in rows for k, _, _ in SERIES] + [0]) / MIB
    yt = nice_ticks(peak * 1.05 if peak else 1, 6)
    y_of = lambda v: top + MEM_H - v / yt[-1] * MEM_H  # noqa: E731
    axes(c, top, MEM_H, xt, x_of, yt, y_of, "MiB")
    for key, _, color in SERIES:
        for run in runs(rows, key):
            c.polyline([(x_of(t), y_of(v / MIB)) for t, v in run], color, width=2)
    # The legend, above the panel.
    x = LEFT
    for _, name, color in SERIES:
        c.rect(x, TOP - 16, 14, 4, color)
        c.text(x + 18, TOP - 10, name, color=INK, size=12)
        x += 18 + pagealloc_draw.text_width(name, 12) + 24
    if not any(r["heap_alloc"] is not None for r in rows):
        c.text(LEFT + pw / 2, top + MEM_H / 2, "no heap figures: the process kept no live file",
               color=AXIS, size=12, anchor="middle")

    # The scavenger's CPU, % of one core over each interval.
    top2 = TOP + MEM_H + GAP
    cpu = []
    prev = None
    for r in rows:
        if r["scavenger_cpu_ns"] is None:
            prev = None
            continue
        if prev is not None and r["time_s"] > prev[0]:
            pct = (r["scavenger_cpu_ns"] - prev[1]) / 1e9 / (r["time_s"] - prev[0]) * 100
            cpu.append((prev[0], r["time_s"], max(0.0, pct)))
        prev = (r["time_s"], r["scavenger_cpu_ns"])
    ct = nice_ticks(max([p for _, _, p in cpu] + [1.0]), 3)
    cy_of = lambda v: top2 + CPU_H - v / ct[-1] * CPU_H  # noqa: E731
    axes(c, top2, CPU_H, xt, x_of, ct, cy_of, "% CPU")
    for t1, t2, pct in cpu:
        x1, x2 = int(round(x_of(t1))), int(round(x_of(t2)))
        y = int(round(cy_of(pct)))
        if pct > 0:
            c.rect(x1, y, max(1, x2 - x1), top2 + CPU_H - y, CPU_COLOR,
                   title="%.2f%% of one core from %.2f s to %.2f s" % (pct, t1, t2))
    c.rect(LEFT, top2 - 16, 14, 4, CPU_COLOR)
    c.text(LEFT + 18, top2 - 10, "the scavenger's CPU, % of one core", color=INK, size=12)
    c.text(LEFT + pw / 2, HEIGHT - 8, "seconds since start", color=INK, size=12,
           anchor="middle")
    c.save(out)


def axes(c, top, h, xt, x_of, yt, y_of, unit):
    """A panel's grid, axes, ticks and labels."""
    left, right, bottom = LEFT, WIDTH - RIGHT, top + h
    for v in yt:
        y = int(round(y_of(v)))
        if v:
            c.line(left, y, right, y, GRID)
        c.line(left - 4, y, left, y, AXIS)
        c.text(left - 7, y + 4, label(v), color=INK, size=12, anchor="end")
    for t in xt:
        x = int(round(x_of(t)))
        c.line(x, bottom, x, bottom + 4, AXIS)
        c.text(x, bottom + 16, label(t), color=INK, size=12, anchor="middle")
    c.line(left, top, left, bottom, AXIS)
    c.line(left, bottom, right, bottom, AXIS)
    c.text(left - 7, top - 12, unit, color=INK, size=12,
           anchor="end")


def runs(rows, key):
    """The stretches of (time, value) where key has values."""
    out, cur = [], []
    for r in rows:
        if r[key] is None:
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append((r["time_s"], r[key]))
    if cur:
        out.append(cur)
    return out


def main_plot(args):
    """pagealloc plot FILE.csv -o FILE.png|.svg [--title TEXT]"""
    src = out = title = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-h", "--help"):
            sys.stdout.write(PLOT_USAGE)
            return 0
        if a in ("-o", "--title"):
            if i + 1 >= len(args):
                return usage("%s needs a value" % a)
            if a == "-o":
                out = args[i + 1]
            else:
                title = args[i + 1]
            i += 2
            continue
        if a.startswith("-") and a != "-":
            return usage("unknown option '%s'" % a)
        if src is not None:
            return usage("unexpected argument '%s'" % a)
        src = a
        i += 1
    if src is None or out is None:
        return usage("want FILE.csv and -o FILE")
    if not out.lower().endswith((".png", ".svg")):
        return usage("-o '%s': want a name ending in .png or .svg" % out)
    try:
        rows = read_csv(src)
        plot(rows, out, title if title is not None else os.path.basename(src))
    except OSError as e:
        sys.stderr.write("pagealloc plot: %s: %s\n" % (e.filename or src, e.strerror or e))
        return 1
    except ValueError as e:
        sys.stderr.write("pagealloc plot: %s\n" % e)
        return 1
    return 0


def usage(line):
    sys.stderr.write("pagealloc plot: %s\n%s" % (line, PLOT_USAGE))
    return 2
