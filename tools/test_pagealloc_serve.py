#!/usr/bin/python3 -S
"""test_pagealloc_serve.py — the parts of pagealloc_serve.py that need no
process: what a request's parameters may be, what the story's lines give,
how the exposition writes a label, the --listen forms, which processes a
scrape waits for. The server against
real processes, Prometheus, pprof and promtool is tests/live/serve_check.py.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pagealloc_serve as ps  # noqa: E402

# A story as src/stats_print.c writes it, cut to the lines story_figures reads.
STORY = """heap profile        on, a sample per 0.06 MiB allocated (prof_sample)
  samples             17 live of 113 taken, from 4 sites (distinct stacks)
  estimated           live 1.06 MiB, allocated 98.11 MiB since the start
NUMA (2 nodes, pretend ones: numa_fake)
  node 0              1 CPU, no policy: 100.00 MiB mapped, 4.50 MiB in use, 95.00 MiB released; caches 0.47 MiB free, 1 refills
  node 1              1 CPU, memory of node 1: 0.00 MiB mapped, 0.00 MiB in use, 0.00 MiB released; caches 0.00 MiB free, 0 refills
top size classes by bytes (live / span = how full their spans are; partial: spans with a free slot,
  free in partial: the bytes of those slots, what moving objects could win back)
     size   spans  objects   cached         bytes  live / span  partial  free in partial
       64       8      999       25         63936       97.56%        2             1600
     4096       2        2        1          8192       50.00%        1             4096
      288       0        0        0             0  n/a        0                0
  small spans: 10, 3 of them partial, holding 0.01 MiB of free slots (pa_defrag_frag_bytes: what pa_defrag_move could win back)
top threads by bytes allocated (usable sizes; held = allocated - freed)
       tid  name                 allocated           freed            held  state
      4331  live_target                100671776       100663296            8480  live
"""


class ParamTest(unittest.TestCase):
    def refused(self, fn, arg, code, line):
        with self.assertRaises(ps.Refusal) as cm:
            fn(arg)
        self.assertEqual((cm.exception.code, cm.exception.line), (code, line))

    def test_pid_is_decimal_digits_of_a_possible_pid(self):
        self.assertEqual(ps.parse_pid("1"), 1)
        self.assertEqual(ps.parse_pid("4194304"), 4194304)
        for bad, shown in (("abc", "'abc'"), ("", "''"), ("0", "'0'"), ("-1", "'-1'"),
                           ("4194305", "'4194305'"), ("12345678", "'12345678'"),
                           (" 1", "' 1'"), ("1.0", "'1.0'"), ("../1", "'../1'"),
                           ("\u0661", "'\u0661'"), ("1\n", "'1?'")):
            self.refused(ps.parse_pid, bad, 400, "pid %s is not a process id (a decimal integer "
                         "from 1 to 4194304)" % shown)

    def test_comm_is_one_to_fifteen_printable_characters(self):
        self.assertEqual(ps.parse_comm("Web Content"), "Web Content")
        self.assertEqual(ps.parse_comm("../.."), "../..")  # only compared, never a path
        self.refused(ps.parse_comm, "", 400,
                     "comm '' is not a process name (1 to 15 printable characters)")
        self.refused(ps.parse_comm, "x" * 16, 400, "comm '%s' is not a process name (1 to 15 "
                     "printable characters)" % ("x" * 16))
        self.refused(ps.parse_comm, "a\tb", 400,
                     "comm 'a?b' is not a process name (1 to 15 printable characters)")

    def test_query_takes_the_named_parameters_once(self):
        self.assertEqual(ps.parse_query("", ("pid",)), {})
        self.assertEqual(ps.parse_query("pid=12", ("pid", "comm")), {"pid": "12"})
        self.assertEqual(ps.parse_query("comm=a%20b", ("pid", "comm")), {"comm": "a b"})
        for query, allowed, line in (
                ("x=1", ("pid",), "unknown parameter 'x' (this path takes: pid)"),
                ("pid=1", (), "unknown parameter 'pid' (this path takes: none)"),
                ("pid=1&pid=2", ("pid",), "parameter pid given twice"),
                ("pid", ("pid",), "malformed query string 'pid'"),
                ("&&", ("pid",), "malformed query string '&&'"),
                ("a=1&b=2&c=3&d=4&e=5", ("pid",), "malformed query string 'a=1&b=2&c=3&d=4&e=5'"),
                ("pid=" + "1" * 300, ("pid",), "query string over 256 bytes")):
            with self.assertRaises(ps.Refusal) as cm:
                ps.parse_query(query, allowed)
            self.assertEqual((cm.exception.code, cm.exception.line), (400, line), query)

    def test_listen_forms(self):
        self.assertEqual(ps.parse_listen("127.0.0.1:9464"), ("127.0.0.1", 9464))
        self.assertEqual(ps.parse_listen("[::1]:0"), ("::1", 0))
        self.assertEqual(ps.parse_listen(":80"), ("", 80))
        for bad in ("9464", "127.0.0.1", "host:65536", "::1:80", "[::1]", "a:b"):
            with self.assertRaises(ValueError, msg=bad):
                ps.parse_listen(bad)
        self.assertTrue(ps.is_loopback("127.0.0.1") and ps.is_loopback("::1"))
        self.assertFalse(ps.is_loopback("") or ps.is_loopback("0.0.0.0"))


class StoryTest(unittest.TestCase):
    def test_story_figures(self):
        f = ps.story_figures(STORY)
        self.assertEqual(f["prof"], {"on": 1, "samples_live": 17, "samples_total": 113,
                                     "sites": 4, "live": 1111491, "alloc": 102875791})
        self.assertEqual(f["classes"], [(64, 8, 999, 25, 63936, 0.9756, 2, 1600),
                                        (4096, 2, 2, 1, 8192, 0.5, 1, 4096),
                                        (288, 0, 0, 0, 0, None, 0, 0)])
        self.assertEqual(f["nodes"], [(0, 1, 104857600, 4718592, 99614720, 492831, 1),
                                      (1, 1, 0, 0, 0, 0, 0)])

    def test_a_story_without_the_partial_columns(self):
        f = ps.story_figures("     size   spans  objects   cached         bytes  live / span\n"
                             "       64       8      999       25         63936       97.56%\n")
        self.assertEqual(f["classes"], [(64, 8, 999, 25, 63936, 0.9756, None, None)])

    def test_thread_rows_are_not_classes(self):
        # The threads' table follows the classes' with five numbers too.
        f = ps.story_figures(STORY)
        self.assertNotIn(4331, [c[0] for c in f["classes"]])

    def test_empty_story(self):
        self.assertEqual(ps.story_figures(""), {"classes": [], "prof": {}, "nodes": []})


class Answer:
    """A Live's stand-in: served(req) says whether it answered."""

    def __init__(self, answered):
        self.answered = answered

    def served(self, req):
        return self.answered


class LaggardsTest(unittest.TestCase):
    def test_a_process_that_did_not_answer_is_not_waited_for_until_it_does(self):
        lag = ps.Laggards()
        quick, slow = (Answer(True), 1, (10, 500)), (Answer(False), 1, (11, 600))
        self.assertEqual(lag.punctual([quick, slow]), [quick, slow])  # first scrape: all
        lag.note([quick, slow])
        self.assertEqual(lag.punctual([quick, slow]), [quick])
        lag.note([quick, slow])  # asked, not waited for, still no answer
        self.assertEqual(lag.punctual([quick, slow]), [quick])
        answered = (Answer(True), 2, (11, 600))
        lag.note([quick, answered])
        self.assertEqual(lag.punctual([quick, answered]), [quick, answered])

    def test_a_later_process_under_a_laggards_pid_is_waited_for(self):
        lag = ps.Laggards()
        lag.note([(Answer(False), 1, (11, 600))])
        later = (Answer(False), 1, (11, 700))
        self.assertEqual(lag.punctual([later]), [later])


class ExpositionTest(unittest.TestCase):
    def test_families_and_escaped_labels(self):
        e = ps.Exposition()
        e.add("pagealloc_x_bytes", "gauge", "X.",
              ps.labels_text([("pid", 7), ("comm", 'a"b\\c\nd')]), 5)
        e.add("pagealloc_y_seconds_total", "counter", "Y.", "", 0.25)
        e.add("pagealloc_x_bytes", "gauge", "X.", ps.labels_text([("pid", 8), ("comm", "e")]), 2.0)
        self.assertEqual(e.text(), "# HELP pagealloc_x_bytes X.\n# TYPE pagealloc_x_bytes gauge\n"
                         'pagealloc_x_bytes{pid="7",comm="a\\"b\\\\c\\nd"} 5\n'
                         'pagealloc_x_bytes{pid="8",comm="e"} 2\n'
                         "# HELP pagealloc_y_seconds_total Y.\n"
                         "# TYPE pagealloc_y_seconds_total counter\n"
                         "pagealloc_y_seconds_total 0.25\n")

    def test_huge_page_figures_are_typed_and_unknown_ones_are_gauges(self):
        class Proc:
            labels = 'pid="9",comm="x"'
            figs = {"huge_bytes": 4 << 20, "huge_collapses": 3, "collapse_waits": 2,
                    "later_figure": 7, "stories": 5}
            h = {"update_ns": 2 * 10**9}
            peak_rss = None
            story = {"prof": {}, "classes": [], "nodes": []}
        text = ps.metrics([Proc()])
        self.assertIn("# TYPE pagealloc_huge_bytes gauge\n"
                      'pagealloc_huge_bytes{pid="9",comm="x"} 4194304\n', text)
        self.assertIn("# TYPE pagealloc_huge_collapses_total counter\n"
                      'pagealloc_huge_collapses_total{pid="9",comm="x"} 3\n', text)
        self.assertIn("# TYPE pagealloc_huge_collapse_waits_total counter\n"
                      'pagealloc_huge_collapse_waits_total{pid="9",comm="x"} 2\n', text)
        self.assertIn("# TYPE pagealloc_later_figure gauge\n"
                      'pagealloc_later_figure{pid="9",comm="x"} 7\n', text)
        self.assertNotIn("stories", text)


if __name__ == "__main__":
    unittest.main()
