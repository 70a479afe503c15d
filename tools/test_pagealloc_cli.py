#!/usr/bin/env python3
"""Tests of the `pagealloc` command (tools/pagealloc.in, tools/pagealloc_cli.py,
tools/pagealloc_run.py, tools/pagealloc_timeline.py), run as the build tree
generates it.

    test_pagealloc_cli.py PAGEALLOC LIVE_TARGET [TestClass...]

UsageTest: each usage error is one exact line, then the command's usage,
  on stderr, exit status 2; help CMD and CMD --help print the same usage;
  version names the preload library.
RunTest: run's environment (PAGEALLOC_CONF and LD_PRELOAD composed in
  order), CMD's exit status, 128+N and the one line for a death by signal
  N (SIGSEGV, SIGPIPE at its default), 127 for a missing CMD; SIGINT,
  SIGTERM, SIGHUP and SIGQUIT sent to the command alone leave it waiting,
  and a Ctrl-C (SIGINT to the process group) kills CMD only; --map's files,
  by pid, with a stand-in pagealloc_map module, and (once pagealloc_map.py
  is there) CMD's map drawn at exit.
LiveReadTest: pagealloc_stat's Live.read waits for a writer holding the
  sequence count odd past the writer's period, and names the file and the
  wait when it never leaves it even.
TimelineTest: run --timeline of tests/live/live_target.c: the header, time
  increasing, RSS nonzero on every row, and heap_alloc, live_objects,
  large_objects and large_bytes growing between its two readies by exactly
  what it allocated (8 blocks of 256 KiB and 1000 of 64 bytes); --plot's PNG
  is 900x560 with the series' colours; `pagealloc plot` redraws the CSV as
  SVG; the plot's ticks.
Run: python3 tools/test_pagealloc_cli.py build/pagealloc build/live_target.
"""

import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True  # no __pycache__ in tools/
TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
import pagealloc_run  # noqa: E402
import pagealloc_draw  # noqa: E402
import pagealloc_timeline  # noqa: E402
import pagealloc_stat  # noqa: E402

PAGEALLOC = LIVE_TARGET = None
HANG_S = 60  # a guard against hangs, not a timing assertion


def pagealloc(*args, env=None, stdin=subprocess.DEVNULL):
    """(status, stdout, stderr) of the command."""
    p = subprocess.run([PAGEALLOC] + list(args), env=env, stdin=stdin, capture_output=True,
                       text=True, timeout=HANG_S)
    return p.returncode, p.stdout, p.stderr


class UsageTest(unittest.TestCase):
    def test_usage_errors_are_one_line_then_the_usage(self):
        cases = [  # (args, first line, the usage's first line)
            (["bogus"], "pagealloc: unknown command 'bogus'", "usage: pagealloc COMMAND"),
            (["--bogus"], "pagealloc: unknown option '--bogus'", "usage: pagealloc COMMAND"),
            (["run", "--bogus", "true"], "pagealloc run: unknown option '--bogus'",
             "usage: pagealloc run"),
            (["run", "-x", "true"], "pagealloc run: unknown option '-x'", "usage: pagealloc run"),
            (["run", "--memory-limit"], "pagealloc run: --memory-limit needs a value",
             "usage: pagealloc run"),
            (["run", "--timeline"], "pagealloc run: --timeline needs a value",
             "usage: pagealloc run"),
            (["run", "--release", "a,b", "true"], "pagealloc run: --release 'a,b': no commas "
             "allowed", "usage: pagealloc run"),
            (["run", "--quiet=yes", "true"], "pagealloc run: --quiet takes no value",
             "usage: pagealloc run"),
            (["run", "--heap-profile=", "true"], "pagealloc run: --heap-profile needs a "
             "directory", "usage: pagealloc run"),
            (["run", "--timeline-ms", "0", "true"], "pagealloc run: --timeline-ms '0': want a "
             "whole number of milliseconds, at least 1", "usage: pagealloc run"),
            (["run", "--plot", "t.jpg", "true"], "pagealloc run: --plot 't.jpg': want a name "
             "ending in .png or .svg", "usage: pagealloc run"),
            (["run", "--quiet"], "pagealloc run: no command to run", "usage: pagealloc run"),
            (["help", "bogus"], "pagealloc help: unknown command 'bogus'",
             "usage: pagealloc help"),
            (["version", "x"], "pagealloc version: unexpected argument 'x'",
             "usage: pagealloc version"),
            (["stat", "--bogus", "1"], "pagealloc stat: unknown option '--bogus'",
             "usage: pagealloc stat PID"),
            (["plot", "t.csv"], "pagealloc plot: want FILE.csv and -o FILE",
             "usage: pagealloc plot"),
            (["plot", "t.csv", "-o", "t.gif"], "pagealloc plot: -o 't.gif': want a name ending "
             "in .png or .svg", "usage: pagealloc plot"),
        ]
        for args, line, usage in cases:
            status, out, err = pagealloc(*args)
            lines = err.splitlines()
            self.assertEqual((status, lines[0]), (2, line), args)
            self.assertTrue(lines[1].startswith(usage), (args, lines[1]))
            self.assertEqual(out, "", args)

    def test_no_command_is_the_overview_on_stderr(self):
        status, out, err = pagealloc()
        self.assertEqual((status, out), (2, ""))
        self.assertTrue(err.startswith("usage: pagealloc COMMAND [ARGS...]\n"), err)
        for cmd in ("run", "stat", "profile", "map", "plot", "serve", "version", "help"):
            self.assertIn("\n  %s " % cmd, err)

    def test_help_cmd_is_cmd_help(self):
        for cmd in ("run", "stat", "profile", "plot", "serve", "version", "help"):
            s1, out1, err1 = pagealloc("help", cmd)
            s2, out2, err2 = pagealloc(cmd, "--help")
            self.assertEqual((s1, err1, s2, err2), (0, "", 0, ""), cmd)
            self.assertEqual(out1, out2, cmd)
            self.assertTrue(out1.startswith("usage: pagealloc "), (cmd, out1[:40]))
            self.assertRegex(out1, r"pagealloc %s\b" % cmd)
        for args in (["help"], ["--help"], ["-h"]):
            status, out, _ = pagealloc(*args)
            self.assertEqual(status, 0)
            self.assertTrue(out.startswith("usage: pagealloc COMMAND"))

    def test_version_names_the_library(self):
        status, out, _ = pagealloc("version")
        self.assertEqual(status, 0)
        self.assertRegex(out, r"^pagealloc \d+\.\d+\.\d+ \(preload library: /.*"
                         r"libpagealloc-preload\.so\)\n$")


class RunTest(unittest.TestCase):
    def test_environment_is_composed_in_order(self):
        lib = pagealloc("version")[1].split("preload library: ")[1].rstrip(")\n")
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, PAGEALLOC_CONF="scavenge_percent=5", LD_PRELOAD="")
            status, out, _ = pagealloc(
                "run", "--memory-limit", "1G", "--memory-limit-hard=2G", "--guard-all",
                "--stats-file=%s/s.%%p" % d,
                "--conf", "live=on,prof_sample=1M", "--thread-cache", "off", "--numa=on",
                "--numa-fake", "2", "--",
                "sh", "-c", 'printf "%s\\n%s\\n" "$PAGEALLOC_CONF" "$LD_PRELOAD"', env=env)
        self.assertEqual(status, 0)
        self.assertEqual(out.splitlines(), [
            "scavenge_percent=5,stats_print=on,stats_file=%s/s.%%p,memory_limit=1G,"
            "memory_limit_hard=2G,guard_sample=1,thread_cache=off,numa=on,numa_fake=2,live=on,"
            "prof_sample=1M" % d, lib])

    def test_exit_status_and_signals(self):
        cases = [  # (CMD, status, the last line of stderr)
            (["sh", "-c", "exit 3"], 3, None),
            (["bash", "-c", "kill -SEGV $$"], 139, "pagealloc: bash was killed by signal 11 "
             "(SIGSEGV)"),
            (["sh", "-c", "echo x >&2; kill -TERM $$"], 143, "pagealloc: sh was killed by "
             "signal 15 (SIGTERM)"),
            (["/nonexistent/cmd"], 127, "pagealloc: /nonexistent/cmd: No such file or "
             "directory"),
        ]
        for cmd, want, line in cases:
            status, _, err = pagealloc("run", "--quiet", "--", *cmd)
            self.assertEqual(status, want, cmd)
            if line is not None:
                self.assertEqual(err.splitlines()[-1], line, cmd)

    def test_failures_before_cmd_starts_are_one_line_status_2(self):
        self.assertEqual(pagealloc("run", "--heap-profile", "/proc/none", "true"), (
            2, "", "pagealloc: --heap-profile: cannot create or write to the directory "
            "'/proc/none'\n"))
        with tempfile.TemporaryDirectory() as d:
            csv = os.path.join(d, "no", "t.csv")
            self.assertEqual(pagealloc("run", "--timeline", csv, "true"), (
                2, "", "pagealloc: --timeline %s: No such file or directory\n" % csv))

    def test_sigpipe_is_at_its_default(self):
        # yes writes into a pipe whose reader is gone: killed by SIGPIPE, as
        # in the shell, not an EPIPE error (Python ignores SIGPIPE itself).
        p = subprocess.Popen([PAGEALLOC, "run", "--quiet", "--", "yes"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdout.read(10)
        p.stdout.close()
        err = p.stderr.read().decode()
        p.stderr.close()
        self.assertEqual(p.wait(HANG_S), 141)
        self.assertEqual(err, "pagealloc: yes was killed by signal 13 (SIGPIPE)\n")

    def start_target(self, *run_args, session=False):
        p = subprocess.Popen([PAGEALLOC, "run"] + list(run_args) +
                             ["--", LIVE_TARGET, "8", "262144", "1000", "64"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=session)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        self.assertEqual(p.stdout.readline(), "ready 0\n")
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            self.child_pid = int(f.read().split()[0])
        return p

    def test_signals_to_the_command_alone_leave_it_waiting(self):
        p = self.start_target("--quiet")
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            p.send_signal(sig)
        p.stdin.write("go\n")
        p.stdin.flush()
        self.assertEqual(p.stdout.readline(), "ready 1\n")
        out, err = p.communicate("go\n", timeout=HANG_S)
        self.assertEqual((p.returncode, out, err), (0, "", ""))

    def test_ctrl_c_kills_cmd_only(self):
        # A terminal's Ctrl-C: SIGINT to the whole process group.
        p = self.start_target("--quiet", session=True)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=HANG_S)
        self.assertEqual(p.returncode, 130)
        self.assertEqual(err, "pagealloc: %s was killed by signal 2 (SIGINT)\n" % LIVE_TARGET)

    def test_run_map_draws_cmd_at_exit(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "heap.png")
            p = self.start_target("--quiet", "--map", out)
            out_text, err = p.communicate("go\ngo\n", timeout=HANG_S)
            self.assertEqual((p.returncode, out_text), (0, "ready 1\n"))
            self.assertEqual(err, "pagealloc: heap map of process %d in %s\n" %
                             (self.child_pid, out))
            w, h, _ = pagealloc_draw.read_png(out)  # a whole PNG (CRCs, rows)
            self.assertGreater(w * h, 0)

    def test_map_files_by_pid(self):
        # draw_maps with a stand-in pagealloc_map: CMD's map into FILE, the
        # others into FILE.PID.EXT, a line for each.
        drawn = []

        class FakeMap:
            @staticmethod
            def draw_file(src, out):
                drawn.append((os.path.basename(src), out))

        with tempfile.TemporaryDirectory() as d:
            for pid in (41, 40, 7):
                open(os.path.join(d, "map.%d.map" % pid), "w").close()
            err = []
            real, pagealloc_run.err = pagealloc_run.err, err.append
            try:
                pagealloc_run.draw_maps({"map": "out/heap.png"}, d, 40, "prog", FakeMap)
            finally:
                pagealloc_run.err = real
        self.assertEqual(sorted(drawn), [("map.40.map", "out/heap.png"),
                                         ("map.41.map", "out/heap.41.png"),
                                         ("map.7.map", "out/heap.7.png")])
        self.assertEqual(sorted(err), ["heap map of process 40 in out/heap.png",
                                       "heap map of process 41 in out/heap.41.png",
                                       "heap map of process 7 in out/heap.7.png"])


def complete_rows(path):
    """The timeline's complete lines (header first)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return []
    return text[:text.rfind("\n") + 1].splitlines()


class LiveReadTest(unittest.TestCase):
    """Live.read copies the figures under the sequence count: it waits for
    a writer that holds the count odd (one descheduled on a loaded machine)
    past the writer's period, and says so after READ_WAIT_S."""

    def live(self, seq):
        ps = pagealloc_stat
        off = ps.HEADER.size
        buf = bytearray(off + ps.FIGURE.size)
        h = dict.fromkeys(ps.FIELDS, 0)
        h.update(magic=ps.MAGIC, nfigures=1, figures_off=off, seq=seq)
        ps.HEADER.pack_into(buf, 0, *[h[f] for f in ps.FIELDS])
        ps.FIGURE.pack_into(buf, off, b"heap_sys", 42)
        live = ps.Live.__new__(ps.Live)
        live.map, live.path = buf, "x"
        return live

    def test_waits_for_the_writer_to_leave_the_count_even(self):
        live = self.live(seq=3)
        t = threading.Timer(0.3, lambda: struct.pack_into("=Q", live.map,
                                                          pagealloc_stat.OFF["seq"], 4))
        t.start()
        self.addCleanup(t.cancel)
        h, figs, text = live.read()
        self.assertEqual((h["seq"], figs, text), (4, {"heap_sys": 42}, ""))

    def test_a_count_left_odd_is_an_error_after_the_wait(self):
        live = self.live(seq=5)
        saved = pagealloc_stat.READ_WAIT_S
        pagealloc_stat.READ_WAIT_S = 0.05
        self.addCleanup(setattr, pagealloc_stat, "READ_WAIT_S", saved)
        with self.assertRaisesRegex(pagealloc_stat.StatError,
                                    "^x: the writer never left a whole copy in 0.05 s$"):
            live.read()


class TimelineTest(unittest.TestCase):
    def wait_rows(self, path, n):
        deadline = time.monotonic() + HANG_S
        while len(complete_rows(path)) < n:
            self.assertLess(time.monotonic(), deadline, "%s: fewer than %d lines" % (path, n))
            time.sleep(0.01)
        return complete_rows(path)

    def test_timeline_of_live_target(self):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        csv, png, svg = (os.path.join(d.name, n) for n in ("t.csv", "t.png", "t.svg"))
        # prof=off: a sampled small block is a span of its own and would
        # count as a large object (tests/live/stat.sh).
        p = subprocess.Popen([PAGEALLOC, "run", "--quiet", "--conf", "prof=off", "--timeline",
                              csv, "--timeline-ms", "50", "--plot", png, "--", LIVE_TARGET, "8",
                              "262144", "1000", "64"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        self.assertEqual(p.stdout.readline(), "ready 0\n")
        # Three rows sampled after the ready: the last was refreshed after
        # it, or at worst read after the writer's own period (100 ms).
        before = self.wait_rows(csv, len(complete_rows(csv)) + 4)[-1]
        p.stdin.write("go\n")
        p.stdin.flush()
        self.assertEqual(p.stdout.readline(), "ready 1\n")
        after = self.wait_rows(csv, len(complete_rows(csv)) + 4)[-1]
        out, err = p.communicate("go\n", timeout=HANG_S)
        self.assertEqual((p.returncode, out, err), (0, "", "pagealloc: timeline plotted in %s\n"
                                                   % png))

        rows = pagealloc_timeline.read_csv(csv)
        self.assertEqual(complete_rows(csv)[0], ",".join(pagealloc_timeline.COLUMNS))
        self.assertEqual(complete_rows(csv)[0].split(",")[:7], [
            "time_s", "rss", "heap_sys", "heap_inuse", "heap_alloc", "heap_idle",
            "heap_released"])
        self.assertGreaterEqual(len(rows), 8)
        times = [r["time_s"] for r in rows]
        self.assertEqual(times, sorted(set(times)), "time is not increasing")
        self.assertTrue(all(r["rss"] > 0 for r in rows))
        names = complete_rows(csv)[0].split(",")
        b = dict(zip(names, before.split(",")))
        a = dict(zip(names, after.split(",")))
        grew = {k: int(a[k]) - int(b[k]) for k in ("heap_alloc", "live_objects", "large_objects",
                                                   "large_bytes")}
        self.assertEqual(grew, {"heap_alloc": 8 * 262144 + 1000 * 64, "live_objects": 1008,
                                "large_objects": 8, "large_bytes": 8 * 262144})
        # Once the live file is there, every row has its figures until the
        # target removes the file on its way out (a sample may fall between
        # that and the exit: seen once in a loaded CI run).
        have = [i for i, r in enumerate(rows) if r["heap_alloc"] is not None]
        self.assertTrue(all(r["heap_sys"] is not None for r in rows[have[0]:have[-1] + 1]))

        w, h, pix = pagealloc_draw.read_png(png)
        self.assertEqual((w, h), (pagealloc_timeline.WIDTH, pagealloc_timeline.HEIGHT))
        colours = set(r[i:i + 3] for r in pix for i in range(0, len(r), 3))
        for _, _, colour in pagealloc_timeline.SERIES:
            self.assertIn(bytes.fromhex(colour[1:]), colours, colour)

        # Redrawn from the CSV, as SVG: a polyline per series, the title.
        self.assertEqual(pagealloc("plot", csv, "-o", svg), (0, "", ""))
        root = ET.parse(svg).getroot()
        ns = "{http://www.w3.org/2000/svg}"
        strokes = set(pl.get("stroke") for pl in root.iter(ns + "polyline"))
        for _, _, colour in pagealloc_timeline.SERIES:
            self.assertIn(colour, strokes)
        self.assertIn("t.csv", [t.text for t in root.iter(ns + "text")])

    def test_rows_before_the_live_file_have_empty_heap_columns(self):
        with tempfile.TemporaryDirectory() as d:
            csv = os.path.join(d, "t.csv")
            status, _, _ = pagealloc("run", "--quiet", "--conf", "live=off", "--timeline", csv,
                                     "--timeline-ms", "20", "--", "sleep", "0.2")
            self.assertEqual(status, 0)
            rows = pagealloc_timeline.read_csv(csv)
        self.assertGreaterEqual(len(rows), 2)
        for r in rows:
            self.assertGreater(r["rss"], 0)
            self.assertEqual([r[k] for k in pagealloc_timeline.FIGURES],
                             [None] * len(pagealloc_timeline.FIGURES))

    def test_columns_are_the_live_file_s_figures(self):
        # Every figure the library publishes (src/live.c's figure_names, in
        # its order) is a column, but rss, which the kernel gives.
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "live.c")
        with open(src) as f:
            text = f.read()
        body = text[text.index("figure_names[] = {"):]
        body = body[:body.index("};")]
        names = re.findall(r'"([a-z_0-9]+)"', body)
        self.assertEqual(list(pagealloc_timeline.FIGURES), [n for n in names if n != "rss"])

    def test_ticks(self):
        cases = [  # (highest value, at most n intervals, the ticks)
            (95.3, 6, [0, 20, 40, 60, 80, 100]),
            (1.84, 8, [0, 0.5, 1.0, 1.5, 2.0]),
            (0.3, 3, [0, 0.1, 0.2, 0.30000000000000004]),
            (0, 6, [0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]),
            (3.0, 3, [0, 1, 2, 3]),
        ]
        for hi, n, want in cases:
            self.assertEqual(pagealloc_timeline.nice_ticks(hi, n), want, (hi, n))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: test_pagealloc_cli.py PAGEALLOC LIVE_TARGET [TestClass...]")
    PAGEALLOC, LIVE_TARGET = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:])
