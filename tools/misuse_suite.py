#!/usr/bin/env python3
"""misuse_suite.py — run the heap-misuse suite (tools/misuse/, built from a hardened_malloc checkout) on an allocator.

    misuse_suite.py --dir BUILD/misuse [--preload LIB.so] [--mode default|guard_all]
                    [--expect tools/misuse/expected.txt] [--verbose]

Each program runs once, with LD_PRELOAD=LIB (none: the C library's malloc)
and, in guard_all mode, PAGEALLOC_CONF=guard_sample=1 (what `pagealloc run
--guard-all` sets). Its end is one of:

  caught       a misuse program that died of a signal or a non-zero status
               with the allocator's message on stderr (libpagealloc's
               "pagealloc: ..." line, glibc's "free(): invalid pointer", ...)
  missed       a misuse program that exited with nothing on stderr (some
               return 1 when they read stale data back)
  crash        a program that died of a signal with nothing on stderr, or a
               benign one that died of a signal
  false-alarm  a benign program with anything on stderr (the allocator
               stopped or warned about correct code)
  check-failed a benign program that exited non-zero with nothing said: its
               own check of a property failed (calloc_overflow: errno ENOMEM;
               uninitialized_read_*: a fresh block reads zero, which
               hardened_malloc promises and the C standard does not)
  ok           a benign program that exited 0, stderr empty

The misuse programs are the 30 that hardened_malloc's own test expects to
be stopped (SIGABRT or SIGSEGV), less its malloc_object_size extension; the
benign ones are the rest that use only standard functions. Prints one line
per program, then the tally. With --expect the outcome of each program must
be the file's for the mode (lines "PROGRAM DEFAULT GUARD_ALL"), else exit 1.
"""
import argparse
import os
import resource
import signal
import subprocess
import sys

MISUSE = """double_free_large double_free_large_delayed double_free_small
double_free_small_delayed unaligned_free_large unaligned_free_small
read_after_free_large write_after_free_large write_after_free_large_reuse
write_after_free_small write_after_free_small_reuse read_zero_size
write_zero_size invalid_free_protected invalid_free_unprotected
invalid_free_small_region invalid_free_small_region_far uninitialized_free
uninitialized_realloc uninitialized_malloc_usable_size overflow_large_1_byte
overflow_large_8_byte overflow_small_1_byte overflow_small_8_byte
delete_type_size_mismatch invalid_aligned_sized_delete_small
invalid_aligned_sized_delete_large unaligned_malloc_usable_size_small
invalid_malloc_usable_size_small invalid_malloc_usable_size_small_quarantine""".split()

BENIGN = """aligned_sized_delete_small aligned_sized_delete_small_min_align
aligned_sized_delete_large free_sized_small free_sized_large calloc_overflow
calloc_zeroed impossibly_large_malloc large_array_growth malloc_zero_different
realloc_init uninitialized_read_small uninitialized_read_large mallinfo
mallinfo2 malloc_info""".split()

MODES = ("default", "guard_all")


def no_core():
    """In the child: no core file from the programs that abort."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_one(path, env, timeout):
    try:
        p = subprocess.run([path], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=timeout, preexec_fn=no_core)
    except subprocess.TimeoutExpired:
        return None, b"(timed out)"
    return p.returncode, p.stderr


def outcome(misuse, code, stderr):
    said = stderr.strip() != b""
    if code is None:
        return "crash"
    if misuse:
        if said and code != 0:
            return "caught"
        return "crash" if code < 0 else "missed"
    if said:
        return "false-alarm"
    if code < 0:
        return "crash"
    return "ok" if code == 0 else "check-failed"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="the built programs (BUILD/misuse)")
    ap.add_argument("--preload", default="", help="the allocator's shared library")
    ap.add_argument("--mode", choices=MODES, default="default")
    ap.add_argument("--conf", default="", help="PAGEALLOC_CONF keys to add")
    ap.add_argument("--expect", help="the outcomes each program must have")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--verbose", action="store_true", help="print each program's stderr")
    a = ap.parse_args()

    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if a.preload:
        env["LD_PRELOAD"] = a.preload
    conf = [c for c in (env.get("PAGEALLOC_CONF", ""), a.conf) if c]
    if a.mode == "guard_all":
        conf.append("guard_sample=1")
    if conf:
        env["PAGEALLOC_CONF"] = ",".join(conf)

    want = {}
    if a.expect:
        with open(a.expect) as f:
            for line in f:
                fields = line.split("#")[0].split()
                if fields:
                    want[fields[0]] = dict(zip(MODES, fields[1:]))

    tally = {}
    wrong = []
    for name in MISUSE + BENIGN:
        code, stderr = run_one(os.path.join(a.dir, name), env, a.timeout)
        end = outcome(name in MISUSE, code, stderr)
        kind = "misuse" if name in MISUSE else "benign"
        tally[kind, end] = tally.get((kind, end), 0) + 1
        how = "exit %d" % code if code is not None and code >= 0 else (
            "killed by %s" % signal.Signals(-code).name if code is not None else "timed out")
        first = stderr.decode(errors="replace").strip().split("\n")[0]
        print("%-44s %-11s %-20s %s" % (name, end, how, first[:160]))
        if a.verbose and stderr.strip():
            sys.stdout.write("    " + stderr.decode(errors="replace").replace("\n", "\n    ") + "\n")
        if a.expect:
            exp = want.get(name, {}).get(a.mode)
            if exp != end:
                wrong.append("%s: %s, expected %s" % (name, end, exp))
    t = lambda kind, end: tally.get((kind, end), 0)
    print("misuse: %d of %d caught, %d missed, %d crashed; benign: %d of %d ok, %d false alarms,"
          " %d crashed, %d failed their own check" % (
              t("misuse", "caught"), len(MISUSE), t("misuse", "missed"), t("misuse", "crash"),
              t("benign", "ok"), len(BENIGN), t("benign", "false-alarm"), t("benign", "crash"),
              t("benign", "check-failed")))
    for w in wrong:
        print("misuse_suite: " + w, file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
