#!/usr/bin/env python3
"""Tests of tools/report.py: the medians, ratios, targets and tables of the
benchmark reports, each from a small fixed input with the exact expected
result. Run: python3 tools/test_report.py (tools/test.sh does)."""

import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in tools/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

# compare.sh's raw.txt for two workloads, two repetitions, two peers. On
# wl-cycle pagealloc's time is exactly 1.1x jemalloc's in both repetitions
# (1.10/1.00, 1.32/1.20) and its RSS 0.9x glibc's; on wl-seed000 its time is
# 3x the best peer's and one step's RSS is above glibc's.
COMPARE_RAW = """\
rep=1 wl=cycle alloc=glibc wall_s=2.00 cpu_s=1.00 maxrss_mib=100.0 pause1_ratio=5.0 blocks=7
rep=1 wl=cycle alloc=jemalloc wall_s=1.00 cpu_s=0.50 maxrss_mib=120.0 pause1_ratio=9.0 blocks=7
rep=1 wl=cycle alloc=pagealloc wall_s=1.10 cpu_s=0.60 maxrss_mib=90.0 pause1_ratio=1.2 blocks=7
rep=1 wl=seed000 alloc=glibc wall_s=0.20 cpu_s=0.20 maxrss_mib=40.0 step128_mib=33.54 step256_mib=17.51
rep=1 wl=seed000 alloc=jemalloc wall_s=0.10 cpu_s=0.10 maxrss_mib=41.0 step128_mib=32.6 step256_mib=32.7
rep=1 wl=seed000 alloc=pagealloc wall_s=0.30 cpu_s=0.30 maxrss_mib=30.0 step128_mib=18.2 step256_mib=18.16
rep=2 wl=cycle alloc=jemalloc wall_s=1.20 cpu_s=0.70 maxrss_mib=121.0 pause1_ratio=9.5 blocks=7
rep=2 wl=cycle alloc=pagealloc wall_s=1.32 cpu_s=0.80 maxrss_mib=99.0 pause1_ratio=1.3 blocks=7
rep=2 wl=cycle alloc=glibc wall_s=2.40 cpu_s=1.20 maxrss_mib=110.0 pause1_ratio=6.0 blocks=7
rep=2 wl=seed000 alloc=jemalloc wall_s=0.10 cpu_s=0.10 maxrss_mib=43.0 step128_mib=32.6 step256_mib=32.7
rep=2 wl=seed000 alloc=pagealloc wall_s=0.30 cpu_s=0.30 maxrss_mib=30.0 step128_mib=18.2 step256_mib=18.16
rep=2 wl=seed000 alloc=glibc wall_s=0.20 cpu_s=0.20 maxrss_mib=42.0 step128_mib=33.54 step256_mib=17.51
"""
ALLOCS = ["glibc", "jemalloc", "pagealloc"]
WORKLOADS = ["cycle", "seed000"]


def compare_runs(raw=COMPARE_RAW, allocs=ALLOCS):
    return report.Runs(raw.splitlines(), allocs, WORKLOADS)


class Numbers(unittest.TestCase):
    def test_median_of_an_odd_count_is_the_middle_value(self):
        self.assertEqual(report.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(report.median([7.5]), 7.5)

    def test_median_of_an_even_count_is_the_mean_of_the_middle_two(self):
        self.assertEqual(report.median([4.0, 1.0, 3.0, 2.0]), 2.5)
        self.assertEqual(report.median([0.3, 0.1]), 0.2)

    def test_median_of_nothing_is_none(self):
        self.assertIsNone(report.median([]))

    def test_kept_rounds_a_computed_ratio_to_6_significant_digits(self):
        self.assertGreater(18.513 / 16.83, 1.1)  # binary fractions
        self.assertEqual(report.kept(18.513 / 16.83), 1.1)
        self.assertEqual(report.kept(0.3 / 0.1), 3.0)
        self.assertEqual(report.kept(2 / 3), 0.666667)
        self.assertEqual(report.kept(4.0), 4.0)

    def test_fmt_gives_about_three_significant_digits(self):
        cases = [(None, "-"), (1037.4, "1037"), (100.0, "100"), (15.84, "15.8"),
                 (10.0, "10.0"), (0.236, "0.24"), (0.0, "0.00")]
        for x, want in cases:
            self.assertEqual(report.fmt(x), want, x)

    def test_pct_says_how_far_above_one(self):
        self.assertEqual(report.pct(1.1), "+10%")
        self.assertEqual(report.pct(0.8), "-20%")
        self.assertEqual(report.pct(1.001), "+0%")

    def test_plain_drops_the_point_of_an_integer(self):
        self.assertEqual(report.plain(1.0), "1")
        self.assertEqual(report.plain(1.5), "1.5")
        self.assertEqual(report.plain(1.1), "1.1")

    def test_number_reads_the_leading_number_like_awk(self):
        self.assertEqual(report.number("0.67"), 0.67)
        self.assertEqual(report.number("12abc"), 12.0)
        self.assertEqual(report.number("abc"), 0.0)
        self.assertEqual(report.number(""), 0.0)


class RawLines(unittest.TestCase):
    def test_parse_words_keeps_key_value_words_in_order(self):
        f = report.parse_words("rep=2 wl=cycle alloc=glibc wall_s=0.67 junk trim=yes")
        self.assertEqual(list(f.items()), [("rep", "2"), ("wl", "cycle"), ("alloc", "glibc"),
                                           ("wall_s", "0.67"), ("trim", "yes")])

    def test_figures_are_keys_in_s_mib_or_ratio_but_not_rates(self):
        for key, want in [("wall_s", True), ("step128_mib", True), ("pause1_ratio", True),
                          ("mops_per_s", False), ("blocks", False), ("trim", False)]:
            self.assertEqual(report.is_figure(key), want, key)

    def test_runs_collect_values_per_workload_figure_and_allocator(self):
        runs = compare_runs()
        self.assertEqual(runs.figures.vals[("cycle", "wall_s"), "pagealloc"], [1.10, 1.32])
        self.assertEqual(runs.figures.byrep[("seed000", "step256_mib"), "glibc"],
                         {1: 17.51, 2: 17.51})
        self.assertEqual(runs.keys["cycle"], ["wall_s", "cpu_s", "maxrss_mib", "pause1_ratio"])
        self.assertEqual(runs.failures, 0)

    def test_a_failed_run_is_counted_and_gives_no_figures(self):
        runs = compare_runs(COMPARE_RAW + "rep=3 wl=cycle alloc=pagealloc fail=1 rc=1\n")
        self.assertEqual(runs.failed, {("cycle", "pagealloc"): 1})
        self.assertEqual(runs.failures, 1)
        self.assertEqual(runs.median("cycle", "wall_s", "pagealloc"), 1.21)


class Ratios(unittest.TestCase):
    def test_best_peer_has_the_lowest_median_and_is_never_pagealloc(self):
        runs = compare_runs()
        self.assertEqual(runs.best("cycle", "wall_s"), "jemalloc")
        self.assertEqual(runs.best("cycle", "maxrss_mib"), "glibc")
        self.assertIsNone(runs.best("cycle", "no_such_s"))

    def test_ratio_is_the_median_of_the_in_repetition_ratios(self):
        runs = compare_runs()
        self.assertEqual(runs.ratio("cycle", "wall_s", "jemalloc"), 1.1)
        self.assertEqual(runs.ratio("cycle", "maxrss_mib", "glibc"), 0.9)
        # 0.60/0.50 = 1.2 and 0.80/0.70 = 1.142857: their mean
        self.assertEqual(runs.ratio("cycle", "cpu_s", "jemalloc"), (1.2 + 1.14286) / 2)

    def test_ratio_skips_a_repetition_without_both_figures(self):
        raw = ("rep=1 wl=cycle alloc=glibc wall_s=2.0\nrep=1 wl=cycle alloc=pagealloc wall_s=1.0\n"
               "rep=2 wl=cycle alloc=glibc wall_s=0\nrep=2 wl=cycle alloc=pagealloc wall_s=1.0\n"
               "rep=3 wl=cycle alloc=pagealloc wall_s=1.0\n")
        runs = report.Runs(raw.splitlines(), ["glibc", "pagealloc"], ["cycle"])
        self.assertEqual(runs.ratio("cycle", "wall_s", "glibc"), 0.5)
        self.assertIsNone(runs.ratio("cycle", "wall_s", None))


class Targets(unittest.TestCase):
    def test_targets_met_and_missed_with_the_figure(self):
        self.assertEqual(report.compare_targets(compare_runs()), [
            "- wl-cycle time: pagealloc/jemalloc = 1.10 (target <= 1.10): met",
            "- wl-cycle peak RSS: pagealloc 94.5 MiB, best peer glibc 105 MiB, ratio 0.90 "
            "(target <= 1.00): met",
            "- wl-seed000 time: pagealloc/jemalloc = 3.00 (target <= 1.10): **missed** by +173%",
            "- wl-seed000 peak RSS: pagealloc 30.0 MiB, best peer glibc 41.0 MiB, ratio 0.73 "
            "(target <= 1.00): met",
            "- wl-cycle pause1_ratio (RSS/live at the end of the pause after free phase 1): "
            "pagealloc 1.25 (target <= 1.25): met",
            "- wl-seed000 step128_mib: pagealloc 18.20 MiB, glibc 33.54 MiB (target <= glibc): met",
            "- wl-seed000 step256_mib: pagealloc 18.16 MiB, glibc 17.51 MiB (target <= glibc): "
            "**missed** by 0.65 MiB (+4%)",
            "",
            "**5 target(s) met, 2 missed.**",
        ])

    def test_turnover_target_wants_at_most_2x_live_and_below_every_peer(self):
        def lines(pa_ratio):
            raw = "".join("rep=%d wl=turnover alloc=%s settled_ratio=%s\n" % (r, a, x)
                          for r in (1, 2)
                          for a, x in (("glibc", 3.0), ("jemalloc", 1.9), ("pagealloc", pa_ratio)))
            runs = report.Runs(raw.splitlines(), ALLOCS, ["turnover"])
            return report.compare_targets(runs)
        self.assertEqual(lines(1.5)[0],
                         "- wl-turnover settled_ratio (RSS/live after the turnover and its pause): "
                         "pagealloc 1.50, best peer jemalloc 1.90 (target <= 2.00 and below every "
                         "peer): met")
        self.assertEqual(lines(1.95)[0],
                         "- wl-turnover settled_ratio (RSS/live after the turnover and its pause): "
                         "pagealloc 1.95, best peer jemalloc 1.90 (target <= 2.00 and below every "
                         "peer): **missed**")
        self.assertEqual(lines(1.95)[-1], "**0 target(s) met, 1 missed.**")

    def test_a_workload_that_failed_on_pagealloc_misses_its_targets(self):
        runs = compare_runs(COMPARE_RAW + "rep=3 wl=seed000 alloc=pagealloc fail=1 rc=134\n")
        lines = report.compare_targets(runs)
        self.assertIn("- wl-seed000: **FAILED** on pagealloc (1 run(s)); see runs/", lines)
        self.assertEqual(lines[-1], "**4 target(s) met, 2 missed.**")

    def test_without_pagealloc_no_target_is_judged(self):
        runs = compare_runs(allocs=["glibc", "jemalloc"])
        self.assertEqual(report.compare_targets(runs),
                         ["- pagealloc was not measured: no target can be judged."])


class Tables(unittest.TestCase):
    def test_compare_main_table(self):
        lines = report.compare_main(compare_runs())
        self.assertEqual("\n".join(lines[:13]), """
### wall time (s)

Median of the repetitions; in brackets pagealloc/peer, the median of the in-repetition ratios.

| workload | glibc | jemalloc | pagealloc | best peer | pagealloc/best |
|---|---:|---:|---:|---:|---:|
| wl-cycle | 2.20 (0.55) | 1.10 (1.10) | 1.21 | jemalloc | **1.10** |
| wl-seed000 | 0.20 (1.50) | 0.10 (3.00) | 0.30 | jemalloc | **3.00** |

### CPU time, user+sys (s)

Median of the repetitions; in brackets pagealloc/peer, the median of the in-repetition ratios.""")
        self.assertEqual(lines[-2:], [
            "| wl-cycle | 105 (0.90) | 120 (0.78) | 94.5 | glibc | **0.90** |",
            "| wl-seed000 | 41.0 (0.73) | 42.0 (0.71) | 30.0 | glibc | **0.73** |",
        ])

    def test_compare_main_marks_failed_runs(self):
        runs = compare_runs(COMPARE_RAW + "rep=3 wl=seed000 alloc=jemalloc fail=1 rc=1\n")
        self.assertEqual(report.compare_main(runs)[8],
                         "| wl-seed000 | 0.20 (1.50) | 0.10 (3.00) FAILED x1 | 0.30 | jemalloc "
                         "| **3.00** |")

    def test_compare_detail_table_has_each_workloads_own_figures(self):
        self.assertEqual(report.compare_detail(compare_runs()), [
            "", "### wl-cycle", "",
            "| figure | glibc | jemalloc | pagealloc | best peer | pagealloc/best |",
            "|---|---:|---:|---:|---:|---:|",
            "| pause1_ratio | 5.50 | 9.25 | 1.25 | glibc | 0.23 |",
            "", "### wl-seed000", "",
            "| figure | glibc | jemalloc | pagealloc | best peer | pagealloc/best |",
            "|---|---:|---:|---:|---:|---:|",
            "| step128_mib | 33.5 | 32.6 | 18.2 | jemalloc | 0.56 |",
            "| step256_mib | 17.5 | 32.7 | 18.2 | glibc | 1.04 |",
        ])

    def test_ratio_plot_data_is_the_tables_best_peer_ratios(self):
        self.assertEqual(report.ratios_dat(compare_runs()),
                         ["wl-cycle 1.1 0.9", "wl-seed000 3 0.73"])

    def test_malloc_pairs_table(self):
        raw = """\
round=1 alloc=pagealloc case=pair size=16 threads=1 ns_per_op=5.00 min=5 max=5 iters=1 reps=1
round=1 alloc=pagealloc case=pair-mt size=1536 threads=2 ns_per_op=8.00 min=8 max=8 iters=1 reps=1
round=1 alloc=pagealloc case=xthread size=0 threads=2 ns_per_op=9.00 min=9 max=9 iters=1 reps=1
round=1 alloc=glibc case=pair size=16 threads=1 ns_per_op=10.00 min=10 max=10 iters=1 reps=1
round=1 alloc=glibc case=pair-mt size=1536 threads=2 ns_per_op=4.00 min=4 max=4 iters=1 reps=1
round=2 alloc=pagealloc case=pair size=16 threads=1 ns_per_op=6.00 min=6 max=6 iters=1 reps=1
round=2 alloc=glibc case=pair size=16 threads=1 ns_per_op=8.00 min=8 max=8 iters=1 reps=1
round=2 alloc=pagealloc case=pair-mt size=2097152 threads=2 ns_per_op=7.00 min=7 max=7 iters=1 reps=1
"""
        self.assertEqual(report.pairs_table(raw.splitlines(), ["pagealloc", "glibc"]), [
            "| case | pagealloc | glibc | best peer | pagealloc/best |",
            "|---|---:|---:|---:|---:|",
            "| pair 16 B | 5.5 | 9.0 | glibc | 0.62 |",
            "| pair-mt 1.5 KiB, per thread of 2 | 8.0 | 4.0 | glibc | 2.00 |",
            "| xthread 16..1024 B, malloc in 1, free in the other | 9.0 | - | - | - |",
            "| pair-mt 2 MiB, per thread of 2 | 7.0 | - | - | - |",
        ])

    def test_callgrind_table_and_total(self):
        raw = ["alloc=pagealloc size=16 pairs=100000 Ir=7900013",
               "alloc=glibc size=16 pairs=100000 Ir=14100013",
               "alloc=pagealloc size=64 failed: valgrind: no such file",
               "alloc=glibc size=64 pairs=100000 Ir=14100013"]
        self.assertEqual(report.callgrind_table(raw, ["pagealloc", "glibc"]), [
            "| size | pagealloc | glibc |",
            "|---:|---:|---:|",
            "| 16 B | 79.0 | 141.0 |",
            "| 64 B | failed | 141.0 |",
        ])
        with tempfile.NamedTemporaryFile("w", suffix=".out") as f:
            f.write("events: Ir\nfl=x.c\n3 12\nsummary: 900\ntotals: 790\n")
            f.flush()
            self.assertEqual(report.callgrind_total(f.name), "790")

    def test_preload_table_sums_a_jobs_programs_then_takes_medians(self):
        raw = """\
round=1 job=sort alloc=glibc status=ok 0.10 0.05 0.01 2048
round=1 job=sort alloc=glibc status=ok 0.20 0.10 0.02 4096
round=1 job=sort alloc=pagealloc status=ok 0.30 0.20 0.00 3072
round=2 job=sort alloc=glibc status=ok 0.40 0.30 0.00 1024
round=2 job=sort alloc=pagealloc status=fail 0.30 0.20 0.00 3072
round=1 job=gzip alloc=glibc status=ok 1.00 0.90 0.10 10240
"""
        self.assertEqual(report.preload_table(raw.splitlines(), ["glibc", "pagealloc"],
                                              ["sort", "gzip", "xz"]), [
            "| program | glibc | pagealloc |",
            "| --- | ---: | ---: |",
            "| sort | 0.35 / 0.24 / 2.5 | fails |",
            "| gzip | 1.00 / 1.00 / 10.0 | - |",
            "| xz | - | - |",
        ])


if __name__ == "__main__":
    unittest.main()
