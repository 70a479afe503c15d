#!/usr/bin/env python3
"""The arithmetic and the Markdown of the benchmark reports.

tools/compare.sh, tools/bench-malloc.sh and tools/bench-preload.sh run the
programs, each allocator in turn, and write what every run measured as raw
lines of key=value words. Everything computed from those lines lives here:
the median over the repetitions, pagealloc's ratio to each peer, the targets
(met, or missed with the figure), the Markdown reports, and the plots of
compare.sh (data written here, drawn by gnuplot). Standard library only
(Debian 12's python3, 3.11).

    report.py compare --out DIR --allocs "A ..." --workloads "W ..."
                      --command CMD --elapsed S          < about-lines
    report.py malloc --raw FILE --allocs "A ..." --rounds R
                     [--callgrind FILE --pairs N]        < about-lines
    report.py preload --raw FILE --allocs "A ..." --jobs "J ..."  < about-lines
    report.py callgrind-total CALLGRIND.OUT

Each report goes to standard output; its first lines, which describe the run
(date, machine, versions, load: what the script saw), come from standard
input and are copied as they are. compare also writes DIR/ratios.dat and,
when gnuplot is installed, DIR/compare-{cycle,service,ratios}.png.

How the figures are taken (as the project measures: side by side,
alternating, a ratio only inside one repetition):

* median: of an odd count the middle value, of an even count the mean of
  the two middle ones; no values, no median (a "-" in the tables).
* ratio to a peer: pagealloc's figure over the peer's in each repetition
  where both have one (and the peer's is above 0), then the median of those.
* best peer: the peer, not pagealloc, with the lowest median; the first in
  the allocators' order on a tie.
* a figure computed from others (a ratio, a sum) is kept to 6 significant
  digits: 18.513 / 16.83 is then 1.1, which meets a target of 1.1, not
  1.1000000000000003, which would miss it by the binary fractions' error.

Raw lines: whitespace-separated key=value words (a word without "=" is
ignored); bench-preload's lines are "round= job= alloc= status=" followed by
/usr/bin/time's four numbers "wall user sys maxrss_kib". tools/test_report.py
tests this module.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

# compare.sh's targets: pagealloc's median wall time at most TIME_TARGET times
# the best peer's; its peak RSS at most RSS_TARGET times the best peer's;
# wl-cycle's RSS / live bytes at most CYCLE_TARGET after each pause; and
# wl-seed000's RSS at most glibc's at every step; wl-turnover's RSS / live bytes
# after its pause at most TURNOVER_TARGET and below every peer's.
TIME_TARGET = 1.1
RSS_TARGET = 1.0
CYCLE_TARGET = 1.25
TURNOVER_TARGET = 2.0

# The three figures /usr/bin/time gives each run in compare.sh's raw.txt.
TIME_FIGURES = ("wall_s", "cpu_s", "maxrss_mib")

PA = "pagealloc"

# ---- numbers -------------------------------------------------------------------


NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def number(text):
    """The number a raw value starts with (0 if none), as awk reads one."""
    m = NUMBER.match(text)
    return float(m.group(0)) if m else 0.0


def kept(x):
    """A computed figure as the reports keep it: 6 significant digits."""
    if x == int(x):
        return x
    return float("%.6g" % x)


def plain(x):
    """A number as plain text: an integer without a point, else 6 digits."""
    if x == int(x) and abs(x) < 1e16:
        return "%d" % x
    return "%.6g" % x


def median(values):
    """The median of a list of numbers; None for an empty list."""
    v = sorted(values)
    n = len(v)
    if n == 0:
        return None
    if n % 2:
        return v[n // 2]
    return (v[n // 2 - 1] + v[n // 2]) / 2


def fmt(x):
    """A figure to three significant digits or so: 1037, 15.8, 0.24; - for none."""
    if x is None:
        return "-"
    if x >= 100:
        return "%.0f" % x
    if x >= 10:
        return "%.1f" % x
    return "%.2f" % x


def pct(x):
    """How far a ratio lies above (or below) 1, in percent: +10%."""
    return "%+.0f%%" % ((x - 1) * 100)


# ---- raw lines -----------------------------------------------------------------


def parse_words(line):
    """The key=value words of a raw line, in order, as a dict of strings."""
    fields = {}
    for word in line.split():
        key, eq, value = word.partition("=")
        if eq:
            fields[key] = value
    return fields


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line for line in f.read().splitlines() if line.strip()]


def table_head(first, columns, align_first="---"):
    """A Markdown table's two header lines: FIRST, then COLUMNS right-aligned."""
    return [
        "| %s |%s" % (first, "".join(" %s |" % c for c in columns)),
        "|%s|%s" % (align_first, "---:|" * len(columns)),
    ]


# ---- compare.sh: whole programs, every allocator, N repetitions ----------------


def is_figure(key):
    """compare.sh's figures: keys in _s, _mib or _ratio (lower is better), not rates."""
    return re.search(r"(_s|_mib|_ratio)$", key) is not None and not key.endswith("_per_s")


class Figures:
    """One figure's values per row (a workload's figure, a benchmark case) and
    allocator, each from one repetition; medians, best peer and ratios."""

    def __init__(self):
        self.vals = {}  # (row, alloc) -> [values], in the order added
        self.byrep = {}  # (row, alloc) -> {repetition: value}

    def add(self, row, alloc, rep, x):
        self.vals.setdefault((row, alloc), []).append(x)
        self.byrep.setdefault((row, alloc), {})[rep] = x

    def median(self, row, alloc):
        return median(self.vals.get((row, alloc), []))

    def best(self, row, allocs):
        """The peer with the lowest median on ROW; None if no peer has one."""
        best, best_value = None, None
        for a in allocs:
            m = self.median(row, a) if a != PA else None
            if m is not None and (best is None or m < best_value):
                best, best_value = a, m
        return best

    def ratio(self, row, peer):
        """Median over the repetitions of pagealloc's value over PEER's; None if none."""
        theirs = self.byrep.get((row, peer), {})
        return median([kept(x / theirs[r]) for r, x in self.byrep.get((row, PA), {}).items()
                       if theirs.get(r, 0) > 0])


class Runs:
    """compare.sh's raw.txt: one line per run, "rep= wl= alloc=" and figures,
    or "fail=1" for a run that failed. Rows of the figures: (workload, key)."""

    def __init__(self, lines, allocs, workloads):
        self.allocs = allocs
        self.workloads = workloads
        self.has_pa = PA in allocs
        self.figures = Figures()
        self.keys = {}  # workload -> its figures' keys, in order of appearance
        self.failed = {}  # (workload, alloc) -> failed runs
        self.failures = 0
        for line in lines:
            f = parse_words(line)
            w, a, r = f.get("wl", ""), f.get("alloc", ""), int(number(f.get("rep", "0")))
            if "fail" in f:
                self.failed[w, a] = self.failed.get((w, a), 0) + 1
                self.failures += 1
                continue
            for k, text in f.items():
                if is_figure(k):
                    keys = self.keys.setdefault(w, [])
                    if k not in keys:
                        keys.append(k)
                    self.figures.add((w, k), a, r, number(text))

    def median(self, w, k, a):
        return self.figures.median((w, k), a)

    def best(self, w, k):
        return self.figures.best((w, k), self.allocs)

    def ratio(self, w, k, peer):
        return self.figures.ratio((w, k), peer)

    def best_ratio(self, w, k):
        """(best peer, pagealloc/best) for K on W, each None where there is none."""
        b = self.best(w, k)
        return b, (self.ratio(w, k, b) if self.has_pa and b is not None else None)


def compare_main(runs):
    """The three tables of /usr/bin/time's figures, each after a blank line."""
    out = []
    titles = ("wall time (s)", "CPU time, user+sys (s)", "peak RSS (MiB)")
    for k, title in zip(TIME_FIGURES, titles):
        out += ["", "### " + title, ""]
        out.append("Median of the repetitions; in brackets pagealloc/peer, "
                   "the median of the in-repetition ratios.")
        out.append("")
        out += table_head("workload", runs.allocs + ["best peer", "pagealloc/best"])
        for w in runs.workloads:
            cells = []
            for a in runs.allocs:
                x = runs.median(w, k, a)
                cell = fmt(x)
                if runs.has_pa and a != PA and x is not None:
                    r = runs.ratio(w, k, a)
                    if r is not None:
                        cell += " (%.2f)" % r
                if (w, a) in runs.failed:
                    cell += " FAILED x%d" % runs.failed[w, a]
                cells.append(cell)
            b, rb = runs.best_ratio(w, k)
            cells += [b or "-", "-" if rb is None else "**%.2f**" % rb]
            out.append("| wl-%s |%s" % (w, "".join(" %s |" % c for c in cells)))
    return out


def compare_detail(runs):
    """Per workload, the table of its own figures (if it printed any)."""
    out = []
    for w in runs.workloads:
        keys = [k for k in runs.keys.get(w, []) if k not in TIME_FIGURES]
        if not keys:
            continue
        out += ["", "### wl-" + w, ""]
        out += table_head("figure", runs.allocs + ["best peer", "pagealloc/best"])
        for k in keys:
            cells = [fmt(runs.median(w, k, a)) for a in runs.allocs]
            b, rb = runs.best_ratio(w, k)
            cells += [b or "-", "-" if rb is None else "%.2f" % rb]
            out.append("| %s |%s" % (k, "".join(" %s |" % c for c in cells)))
    return out


def compare_targets(runs):
    """One line per target, met or missed by how much, then the count."""
    if not runs.has_pa:
        return ["- pagealloc was not measured: no target can be judged."]
    out = []
    met = missed = 0

    def judge(ok):
        nonlocal met, missed
        if ok:
            met += 1
        else:
            missed += 1
        return ok

    for w in runs.workloads:
        if (w, PA) in runs.failed:
            out.append("- wl-%s: **FAILED** on pagealloc (%d run(s)); see runs/"
                       % (w, runs.failed[w, PA]))
            missed += 1
            continue
        b, rb = runs.best_ratio(w, "wall_s")
        if rb is not None:
            ok = judge(rb <= TIME_TARGET)
            out.append("- wl-%s time: pagealloc/%s = %.2f (target <= %.2f): %s"
                       % (w, b, rb, TIME_TARGET,
                          "met" if ok else "**missed** by " + pct(rb / TIME_TARGET)))
        b, rb = runs.best_ratio(w, "maxrss_mib")
        if rb is not None:
            ok = judge(rb <= RSS_TARGET)
            out.append("- wl-%s peak RSS: pagealloc %s MiB, best peer %s %s MiB, ratio %.2f "
                       "(target <= %.2f): %s"
                       % (w, fmt(runs.median(w, "maxrss_mib", PA)), b,
                          fmt(runs.median(w, "maxrss_mib", b)), rb, RSS_TARGET,
                          "met" if ok else "**missed** by " + pct(rb / RSS_TARGET)))
    for k in runs.keys.get("cycle", []):
        m = re.fullmatch(r"pause(\d+)_ratio", k)
        x = runs.median("cycle", k, PA) if m else None
        if x is None:
            continue
        ok = judge(x <= CYCLE_TARGET)
        out.append("- wl-cycle %s (RSS/live at the end of the pause after free phase %s): "
                   "pagealloc %.2f (target <= %.2f): %s"
                   % (k, m.group(1), x, CYCLE_TARGET,
                      "met" if ok else "**missed** by " + pct(x / CYCLE_TARGET)))
    for k in runs.keys.get("seed000", []):
        if not re.fullmatch(r"step\d+_mib", k):
            continue
        x, g = runs.median("seed000", k, PA), runs.median("seed000", k, "glibc")
        if x is None or g is None:
            continue
        ok = judge(x <= g)
        out.append("- wl-seed000 %s: pagealloc %.2f MiB, glibc %.2f MiB (target <= glibc): %s"
                   % (k, x, g, "met" if ok else
                      "**missed** by %.2f MiB (%s)" % (x - g, pct(x / g))))
    x = runs.median("turnover", "settled_ratio", PA)
    b = runs.best("turnover", "settled_ratio")
    if x is not None:
        y = runs.median("turnover", "settled_ratio", b) if b is not None else None
        ok = judge(x <= TURNOVER_TARGET and (y is None or x < y))
        out.append("- wl-turnover settled_ratio (RSS/live after the turnover and its pause): "
                   "pagealloc %.2f, best peer %s %s (target <= %.2f and below every peer): %s"
                   % (x, b or "-", "-" if y is None else "%.2f" % y, TURNOVER_TARGET,
                      "met" if ok else "**missed**"))
    out += ["", "**%d target(s) met, %d missed.**" % (met, missed)]
    return out


def ratios_dat(runs):
    """The ratio plot's data: per workload, pagealloc/best peer for wall time
    and peak RSS as the tables show them (2 decimals; 0 where there is none)."""
    out = []
    for w in runs.workloads:
        row = ["wl-" + w]
        for k in ("wall_s", "maxrss_mib"):
            rb = runs.best_ratio(w, k)[1]
            row.append("0" if rb is None else plain(float("%.2f" % rb)))
        out.append(" ".join(row))
    return out


def gnuplot(script, png):
    """Run gnuplot on SCRIPT, which draws PNG; True if it succeeded (if it
    failed, no PNG is left behind)."""
    try:
        ok = subprocess.run(["gnuplot"], input=script, text=True, check=False).returncode == 0
    except OSError:
        ok = False
    if not ok and os.path.exists(png):
        os.remove(png)
    return ok


def plot_traces(out, allocs, w, title, png):
    """RSS over time of repetition 1, every allocator, and the live bytes
    (glibc's run's); None if there is no trace, else whether gnuplot drew it."""
    series = []
    for a in allocs:
        f = "%s/traces/%s-%s-1.txt" % (out, w, a)
        if os.path.isfile(f) and os.path.getsize(f) > 0:
            series.append("'%s' using ($1/1000):($2/1048576) with lines lw 2 title '%s'" % (f, a))
    if not series:
        return None
    f = "%s/traces/%s-glibc-1.txt" % (out, w)
    if os.path.isfile(f) and os.path.getsize(f) > 0:
        series.append("'%s' using ($1/1000):($3/1048576) with lines dt 2 lc rgb 'black' "
                      "title 'live bytes'" % f)
    return gnuplot("\n".join([
        "set terminal pngcairo size 1000,560 noenhanced",
        "set output '%s'" % png,
        "set title '%s'" % title,
        "set xlabel 'time (s)'",
        "set ylabel 'RSS (MiB)'",
        "set key outside right",
        "set grid",
        "plot " + ",".join(series),
    ]) + "\n", png)


def plot_ratios(data, png):
    """pagealloc / best peer per workload, wall time and peak RSS, with the targets."""
    return gnuplot("\n".join([
        "set terminal pngcairo size 1000,480 noenhanced",
        "set output '%s'" % png,
        "set title 'pagealloc / best peer (median of in-repetition ratios; below 1 is better)'",
        "set style data histograms",
        "set style histogram clustered gap 1",
        "set style fill solid 0.8",
        "set xtics rotate by -30",
        "set grid ytics",
        "set yrange [0:*]",
        "plot '%s' using 2:xtic(1) title 'wall time', '' using 3 title 'peak RSS', "
        "%s with lines dt 2 lc rgb 'red' title 'time target %.1f', "
        "%s with lines dt 3 lc rgb 'black' title 'RSS target %.1f'"
        % (data, plain(TIME_TARGET), TIME_TARGET, plain(RSS_TARGET), RSS_TARGET),
    ]) + "\n", png)


def compare_plots(runs, out):
    """Write DIR/ratios.dat and draw the plots; (plot files, notes on failures)."""
    plots, notes = [], []
    if runs.has_pa:
        with open(out + "/ratios.dat", "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in ratios_dat(runs)))
    if shutil.which("gnuplot") is None:
        return plots, notes
    for w in ("cycle", "service"):
        png = "%s/compare-%s.png" % (out, w)
        drawn = plot_traces(out, runs.allocs, w, "wl-%s: RSS over time (repetition 1)" % w, png)
        if drawn:
            plots.append(png)
        elif drawn is not None:
            notes.append("gnuplot failed on the wl-%s plot" % w)
    if runs.has_pa:
        png = out + "/compare-ratios.png"
        if plot_ratios(out + "/ratios.dat", png):
            plots.append(png)
        else:
            notes.append("gnuplot failed on the ratio plot")
    return plots, notes


COMPARE_TARGETS = """\
pagealloc's median wall time <= {time:g}x the best peer's and its peak RSS <= the best peer's,
for every workload; wl-cycle RSS/live <= {cycle:g} at the end of each 5 s pause after a free
phase; wl-seed000 RSS <= glibc's at every step. Ratios: median of in-repetition ratios.
""".format(time=TIME_TARGET, cycle=CYCLE_TARGET)

COMPARE_MISSED = """\
Why each missed target is missed (profiled), what was tried, and what would close it:
docs/design/not-done.md (What is not done yet), with the measurements in docs/log/ (one dated
file per investigation). Single runs on this shared 2-vCPU VM move by 5-10% and more (wl-prodcons
is bimodal), so a ratio within that of its target can flip between runs.
"""

COMPARE_FIGURES = """\
wl-cycle: pauseN_ratio = RSS / live bytes at the end of pause N, settleN_s = seconds until
RSS/live <= {cycle:g} (the pause length if never). wl-seed000: RSS (MiB) at each point after
malloc_trim(0) where the allocator has one (glibc, pagealloc; not jemalloc, tcmalloc,
mimalloc). wl-service: steady = mean RSS over the second half. wl-threads: RSS while all
threads idle, at once (idle0) and after 2 s (idle), and after they exited (exit). wl-churn:
peak = RSS sampled every 50 ms, peak_live = the most bytes the threads held at once.
wl-turnover: RSS / live bytes after 9 keys in 10 are deleted (delete), after the survivors
turned over at a constant key count (turnover) and after a 2 s pause (settled).
""".format(cycle=CYCLE_TARGET)


def compare_report(runs, out, command, elapsed, about, plots, plot_notes):
    """compare.md: the run, the targets, the tables, the plots."""
    r = ["# libpagealloc and its peers on whole programs", ""]
    r.append("Generated by `%s` (compare.sh, %s s of runs); rerun it to regenerate."
             % (command, elapsed))
    r.append("Workloads: bench/workloads/ (each file's opening comment says what it does).")
    r.append("")
    r += about
    r += ["- note: " + n for n in plot_notes]
    if runs.failures:
        r.append("- **%d run(s) FAILED** (exit status or self-check): see %s/runs/"
                 % (runs.failures, out))
    r += ["", "## Targets", ""]
    r += COMPARE_TARGETS.splitlines() + [""]
    r += compare_targets(runs) + [""]
    r += COMPARE_MISSED.splitlines() + [""]
    r.append("## Time and memory (from /usr/bin/time)")
    r += compare_main(runs)
    r += ["", "## Each workload's own figures (medians; lower is better)", ""]
    r += COMPARE_FIGURES.splitlines()
    r += compare_detail(runs)
    if plots:
        r += ["", "## Plots", ""]
        for p in plots:
            name = os.path.basename(p)
            r.append("![%s](%s)" % (name[:-len(".png")], name))
    return r


# ---- bench-malloc.sh: malloc/free pairs, R rounds, and callgrind --------------


def human(size_text):
    """A byte count as bench-malloc labels it: 16 B, 1 KiB, 1.5 MiB."""
    b = number(size_text)
    if b >= 1048576:
        return plain(b / 1048576) + " MiB"
    if b >= 1024:
        return plain(b / 1024) + " KiB"
    return size_text + " B"


def case_label(case, size, threads):
    if case == "xthread":
        return "xthread 16..1024 B, malloc in 1, free in the other"
    if number(threads) > 1:
        return "%s %s, per thread of %s" % (case, human(size), threads)
    return "%s %s" % (case, human(size))


def pairs_table(lines, allocs):
    """ns per operation: per case (in the order first seen) and allocator the
    median over the rounds; then the best peer and the median over rounds of
    pagealloc/best taken inside each round."""
    order, figures = [], Figures()
    for line in lines:
        f = parse_words(line)
        key = (f.get("case", ""), f.get("size", ""), f.get("threads", ""))
        if key not in order:
            order.append(key)
        figures.add(key, f.get("alloc", ""), int(number(f.get("round", "0"))),
                    number(f.get("ns_per_op", "")))
    out = table_head("case", allocs + ["best peer", "pagealloc/best"])
    for key in order:
        cells = []
        for a in allocs:
            m = figures.median(key, a)
            cells.append("-" if m is None else "%.1f" % m)
        best = figures.best(key, allocs)
        r = figures.ratio(key, best) if best is not None else None
        cells += [best or "-", "-" if r is None else "%.2f" % r]
        out.append("| %s |%s" % (case_label(*key), "".join(" %s |" % c for c in cells)))
    return out


def callgrind_table(lines, allocs):
    """Instructions per malloc+free pair: per size (in the order first seen)
    and allocator, callgrind's total over the pairs; "failed" where it failed."""
    sizes, cells = [], {}
    for line in lines:
        f = parse_words(line)
        s, a = f.get("size", ""), f.get("alloc", "")
        if s not in sizes:
            sizes.append(s)
        ir, pairs = f.get("Ir", ""), number(f.get("pairs", "0"))
        if ir and pairs > 0:
            cells[s, a] = "%.1f" % (number(ir) / pairs)
        else:
            cells[s, a] = "failed"
    out = table_head("size", allocs, align_first="---:")
    for s in sizes:
        out.append("| %s B |%s" % (s, "".join(" %s |" % cells.get((s, a), "failed")
                                               for a in allocs)))
    return out


def callgrind_total(path):
    """The event total of a callgrind output: its "totals:" line where it has
    one (the events collected), else its "summary:" line; "" if neither."""
    totals = summary = ""
    for line in read_lines(path):
        words = line.split()
        if words[0] == "totals:" and len(words) > 1:
            totals = words[1]
        elif words[0] == "summary:" and len(words) > 1:
            summary = words[1]
    return totals or summary


MALLOC_PAIRS = """\
pair: malloc+free of one size, first byte written; per-thread figures for 2 threads;
xthread: ns per object. pagealloc/best: median over rounds of the in-round ratio.
"""


def malloc_report(pair_lines, allocs, rounds, about, cg_lines, pairs):
    """malloc.md: the run, ns per operation, instructions per pair (callgrind)."""
    r = ["# malloc: pagealloc and its peers", ""]
    r.append("Command: tools/bench-malloc.sh --rounds %s%s"
             % (rounds, "" if cg_lines is not None else " --no-callgrind"))
    r.append("")
    r += about
    r += ["", "## ns per operation (median of %s round(s), each one run with --reps 1)" % rounds,
          ""]
    r += MALLOC_PAIRS.splitlines() + [""]
    r += pairs_table(pair_lines, allocs)
    if cg_lines is not None:
        r += ["", "## instructions per malloc+free pair (callgrind, %s pairs in pair_loop)"
              % pairs, ""]
        r += callgrind_table(cg_lines, allocs)
    return r


# ---- bench-preload.sh: real programs, N rounds --------------------------------


def preload_table(lines, allocs, jobs):
    """Per job and allocator: over the rounds, the median of the job's wall
    time and CPU time (each summed over its programs) and of its peak RSS (the
    largest among them); "fails" if the job failed in any round."""
    wall, cpu, rss = {}, {}, {}
    bad = set()
    for line in lines:
        words = line.split()
        head = parse_words(" ".join(words[:4]))
        job, a, rnd = head.get("job", ""), head.get("alloc", ""), head.get("round", "")
        t = [number(w) for w in words[4:8]]
        t += [0.0] * (4 - len(t))  # wall, user, sys, maxrss_kib
        k = (job, a, rnd)
        wall[k] = wall.get(k, 0.0) + t[0]
        cpu[k] = cpu.get(k, 0.0) + (t[1] + t[2])
        rss[k] = max(rss.get(k, 0.0), t[3])
        if head.get("status") != "ok":
            bad.add((job, a))
    out = ["| program |%s" % "".join(" %s |" % a for a in allocs),
           "| --- |%s" % (" ---: |" * len(allocs))]
    for job in jobs:
        cells = []
        for a in allocs:
            keys = [k for k in wall if k[0] == job and k[1] == a]
            if (job, a) in bad:
                cells.append("fails")
            elif not keys:
                cells.append("-")
            else:
                cells.append("%.2f / %.2f / %.1f" % (
                    median([kept(wall[k]) for k in keys]),
                    median([kept(cpu[k]) for k in keys]),
                    median([rss[k] for k in keys]) / 1024))
        out.append("| %s |%s" % (job, "".join(" %s |" % c for c in cells)))
    return out


PRELOAD_CELLS = """\
each cell: wall s / CPU s (user + system) / peak RSS MiB, summed over the job's programs
(RSS: the largest). Jobs: tests/preload/matrix.sh.
"""


def preload_report(lines, allocs, jobs, about):
    """preload.md: the run (its date, machine and rounds), then the table."""
    r = ["# Real programs on each malloc (tools/bench-preload.sh)", ""]
    r += about
    r += PRELOAD_CELLS.splitlines() + [""]
    r += preload_table(lines, allocs, jobs)
    return r


# ---- command line --------------------------------------------------------------


def main(argv):
    parser = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="kind", required=True)

    p = sub.add_parser("compare", help="compare.sh's compare.md (and plots)")
    p.add_argument("--out", required=True, help="compare.sh's DIR: raw.txt, traces/")
    p.add_argument("--allocs", required=True, help="the allocators, in the columns' order")
    p.add_argument("--workloads", required=True, help="the workloads, in the rows' order")
    p.add_argument("--command", dest="command_line", metavar="CMD", required=True,
                   help="the command line that ran it")
    p.add_argument("--elapsed", required=True, help="seconds of runs")

    p = sub.add_parser("malloc", help="bench-malloc.sh's malloc.md")
    p.add_argument("--raw", required=True, help="malloc-pairs-raw.txt")
    p.add_argument("--allocs", required=True)
    p.add_argument("--rounds", required=True)
    p.add_argument("--callgrind", help="malloc-callgrind.txt (no callgrind table without)")
    p.add_argument("--pairs", default="?", help="pairs counted in each callgrind run")

    p = sub.add_parser("preload", help="bench-preload.sh's preload.md")
    p.add_argument("--raw", required=True, help="preload-raw.txt")
    p.add_argument("--allocs", required=True)
    p.add_argument("--jobs", required=True)

    p = sub.add_parser("callgrind-total", help="the event total of a callgrind output file")
    p.add_argument("file")

    args = parser.parse_args(argv)
    if args.kind == "callgrind-total":
        print(callgrind_total(args.file))
        return 0
    about = sys.stdin.read().splitlines() if not sys.stdin.isatty() else []
    if args.kind == "compare":
        runs = Runs(read_lines(args.out + "/raw.txt"), args.allocs.split(),
                    args.workloads.split())
        plots, notes = compare_plots(runs, args.out)
        report = compare_report(runs, args.out, args.command_line, args.elapsed, about,
                                plots, notes)
    elif args.kind == "malloc":
        cg = read_lines(args.callgrind) if args.callgrind else None
        report = malloc_report(read_lines(args.raw), args.allocs.split(), args.rounds, about,
                               cg, args.pairs)
    else:
        report = preload_report(read_lines(args.raw), args.allocs.split(), args.jobs.split(),
                                about)
    sys.stdout.write("".join(line + "\n" for line in report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
