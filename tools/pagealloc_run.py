"""pagealloc_run.py — `pagealloc run`: a program on libpagealloc, and its heap's story.

    pagealloc run [options] [--] CMD [ARGS...]

main(args, preload_lib, load) runs CMD with LD_PRELOAD=preload_lib and
PAGEALLOC_CONF=stats_print=on plus the options' keys, waits for it, then
prints the reports its processes left (each process writes its own, into
a private directory, named by pid), a line if a signal killed CMD, the
leak reports of --heap-profile (heapprof.py), the heap maps of --map
(pagealloc_map.py) and the timeline's plot (pagealloc_timeline.py), and
returns CMD's exit status, 128+N for signal N. load(module, what) imports
pagealloc_map or pagealloc_timeline, or raises the command's one-line
error (pagealloc_cli.load).

CMD starts with posix_spawnp: its signals are at their defaults (SIGPIPE
and SIGXFSZ too, which Python ignores), it stays in this process group, so
it keeps the terminal, and a Ctrl-C reaches it and this command alike; this
command ignores SIGINT, SIGQUIT, SIGTERM and SIGHUP until CMD has exited.
With --timeline it samples CMD meanwhile, waking on a pidfd so that CMD's
exit ends the wait at once.

Usage errors are one line, "pagealloc run: WHAT", then the usage, and exit
status 2; failures before CMD starts one line and 2; once CMD started, the
status is CMD's.
"""
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ME = "pagealloc"
HEAPPROF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "heapprof.py")

USAGE = """usage: pagealloc run [options] [--] CMD [ARGS...]

Runs CMD with LD_PRELOAD=%(lib)s
(malloc, free and the rest of the family replaced by libpagealloc) and
PAGEALLOC_CONF=stats_print=on, so that every process of CMD that used the heap
prints the story of its heap when it exits or is killed by SIGTERM, SIGINT,
SIGHUP or SIGQUIT. The reports are collected per process and printed to
standard error after CMD exits, in the order the processes finished. Exits
with CMD's exit status (128+N if a signal N killed it).

options (each also as --option=VALUE):
  --memory-limit SIZE|auto   soft limit on resident heap memory (e.g. 512M, 2G;
                             auto: the container's, from CMD's cgroup less
                             what is not heap, followed as it changes)
  --memory-limit-hard SIZE   hard limit on the heap's mapped memory: past it
                             malloc gives back cached memory, then fails
                             with ENOMEM
  --scavenge-percent N       the scavenger's CPU budget, %% of one core (1-100)
  --scavenge-delay-ms N      free memory is released after this many ms
                             (4x for a steady heap: its free memory up to
                             32 MiB plus 1/8 of the pages in use)
  --release dontneed|free    madvise used to release memory to the OS
  --thread-cache on|off      per-thread object caches
  --thread-cache-total SIZE  what all thread caches may hold together (e.g. 8M)
  --percpu-cache on|off|locked  per-CPU page caches
  --numa off|on|interleave   a page heap per memory node (on: only where
                             there are several), or pages interleaved
  --numa-fake N              pretend the CPUs are split over N nodes (tests)
  --stats-file PATH          keep the reports in PATH (%%p becomes the pid)
                             instead of printing them
  --heap-profile DIR         sample the heap (prof=on): each process writes
                             pprof heap profiles DIR/heap.PID.SEQ.KIND.pb.gz,
                             and after the reports the leak candidates of
                             each (what its final profile, written at exit,
                             still holds) are printed, from a symbolized copy
                             DIR/heap.PID.SEQ.final.sym.pb.gz (functions named
                             by addr2line, for go tool pprof); DIR is created
                             if need be
  --prof-sample SIZE         mean bytes between samples (prof_sample, e.g. 512K)
  --guard-all                every block up to guard_max (64K) on pages of its
                             own against a guard page (guard_sample=1): an
                             overflow, underflow or use after free faults and
                             is reported in one line with both stacks
                             (docs/guarded.md); slow, for debugging. CMD's
                             standard error then passes through this command,
                             and after CMD exits each such report is printed
                             again with its stacks symbolized (function,
                             file:line, by addr2line from binutils)
  --map FILE                 draw the heap's map at exit into FILE (.png or
                             .svg): CMD's own; each other process of CMD
                             into FILE with .PID before the extension
  --timeline FILE            sample CMD while it runs into FILE (CSV, a row
                             per sample): seconds since start, RSS, and the
                             heap's figures from its live file
  --timeline-ms N            the interval between samples (default 100)
  --plot FILE                draw the timeline into FILE (.png or .svg): RSS,
                             the live heap and what was released to the OS
                             in MiB, and the scavenger's CPU, against time
  --conf k=v,...             raw PAGEALLOC_CONF keys, applied last
  --quiet                    no report (stats_print=off)
  -h, --help                 this text

An existing PAGEALLOC_CONF comes first, so options override it, and an
existing LD_PRELOAD stays, after libpagealloc.
"""

# Options of run that take a value, and the PAGEALLOC_CONF key of each that
# is one (None: the command's own).
VALUE_OPTIONS = {
    "--memory-limit": "memory_limit",
    "--memory-limit-hard": "memory_limit_hard",
    "--scavenge-percent": "scavenge_percent",
    "--scavenge-delay-ms": "scavenge_delay_ms",
    "--release": "release",
    "--thread-cache": "thread_cache",
    "--thread-cache-total": "thread_cache_total",
    "--percpu-cache": "percpu_cache",
    "--numa": "numa",
    "--numa-fake": "numa_fake",
    "--prof-sample": "prof_sample",
    "--stats-file": None,
    "--conf": None,
    "--heap-profile": None,
    "--map": None,
    "--timeline": None,
    "--timeline-ms": None,
    "--plot": None,
}
FLAGS = ("--quiet", "--guard-all", "-h", "--help")
# Options whose value is a path of ours, never a PAGEALLOC_CONF value.
PATH_OPTIONS = ("--map", "--timeline", "--plot", "--timeline-ms")


class UsageError(Exception):
    """One line; the usage follows; exit status 2."""


class Failure(Exception):
    """One line; exit status 2 (CMD did not start)."""


def err(line):
    sys.stderr.write("%s: %s\n" % (ME, line))


def usage(preload_lib):
    return USAGE % {"lib": preload_lib}


def parse(args):
    """run's options: (opts dict, CMD list); UsageError for a bad one."""
    o = {"conf": "", "raw": "", "stats_file": None, "quiet": False, "prof_dir": None,
         "map": None, "timeline": None, "timeline_ms": 100, "plot": None, "help": False,
         "guard": False}
    i = 0
    while i < len(args):
        opt, val, has_val = args[i], None, False
        if opt.startswith("--") and "=" in opt:
            opt, val = opt.split("=", 1)
            has_val = True
        if opt == "--":
            i += 1
            break
        if opt in VALUE_OPTIONS:
            if not has_val:
                if i + 1 >= len(args):
                    raise UsageError("%s needs a value" % opt)
                i += 1
                val = args[i]
            if "," in val and opt not in ("--conf",) + PATH_OPTIONS:
                raise UsageError("%s '%s': no commas allowed" % (opt, val))
            key = VALUE_OPTIONS[opt]
            if key:
                o["conf"] += ",%s=%s" % (key, val)
            elif opt == "--stats-file":
                o["stats_file"] = val
            elif opt == "--conf":
                o["raw"] += "," + val
            elif opt == "--heap-profile":
                if not val:
                    raise UsageError("--heap-profile needs a directory")
                o["prof_dir"] = val
            elif opt == "--timeline-ms":
                if not val.isdigit() or int(val) < 1:
                    raise UsageError("--timeline-ms '%s': want a whole number of "
                                     "milliseconds, at least 1" % val)
                o["timeline_ms"] = int(val)
            else:  # --map, --timeline, --plot
                if not val:
                    raise UsageError("%s needs a file name" % opt)
                if opt != "--timeline" and not val.lower().endswith((".png", ".svg")):
                    raise UsageError("%s '%s': want a name ending in .png or .svg" % (opt, val))
                o[opt[2:]] = val
        elif opt in FLAGS:
            if has_val:
                raise UsageError("%s takes no value" % opt)
            if opt == "--quiet":
                o["quiet"] = True
            elif opt == "--guard-all":
                o["conf"] += ",guard_sample=1"
                o["guard"] = True
            else:
                o["help"] = True
                return o, []
        elif opt.startswith("-") and opt != "-":
            raise UsageError("unknown option '%s'" % opt)
        else:
            break
        i += 1
    return o, args[i:]


def prof_start(o, tmp):
    """--heap-profile: make DIR absolute (the processes may change
    directory), note which final profiles it holds and when the run began,
    and add the keys."""
    d = o["prof_dir"]
    try:
        os.makedirs(d, exist_ok=True)
    except OSError:
        pass
    if not os.path.isdir(d) or not os.access(d, os.W_OK):
        raise Failure("--heap-profile: cannot create or write to the directory '%s'" % d)
    d = os.path.abspath(d)
    if "," in d:
        raise Failure("--heap-profile '%s': no commas allowed" % d)
    o["prof_dir"] = d
    # The run's start as the file system stamps it: a file made now.
    try:
        fd, mark = tempfile.mkstemp(prefix="pagealloc-prof.", dir=tmp)
    except OSError:
        raise Failure("cannot create a file in %s" % tmp)
    o["prof_mark_ns"] = os.fstat(fd).st_mtime_ns
    os.close(fd)
    os.unlink(mark)
    o["prof_before"] = set(n for n in os.listdir(d) if is_final(n))
    o["conf"] += ",prof=on,prof_prefix=%s/heap" % d


def is_final(name):
    return name.startswith("heap.") and name.endswith(".final.pb.gz")


def prof_finals(o):
    """The final profiles of this run: names not there before it, or
    rewritten since it began (a pid used again); per pid the newest SEQ; in
    the order they were written, which is the order the processes exited."""
    d = o["prof_dir"]
    found = []
    for name in os.listdir(d):
        if not is_final(name):
            continue
        try:
            mtime = os.stat(os.path.join(d, name)).st_mtime_ns
        except OSError:
            continue
        if name in o["prof_before"] and mtime <= o["prof_mark_ns"]:
            continue
        parts = name.split(".")
        if len(parts) != 6 or not parts[1].isdigit() or not parts[2].isdigit():
            continue
        found.append((mtime, name, int(parts[1]), int(parts[2])))
    found.sort()
    newest = {}
    for pos, (_, name, pid, seq) in enumerate(found):
        if pid not in newest or seq > newest[pid][1]:
            newest[pid] = (pos, seq, name)
    return [name for _, _, name in sorted(newest.values())]


def leak_reports(o):
    """Each final profile is symbolized into a copy beside it,
    heap.PID.SEQ.final.sym.pb.gz, with the names addr2line gives: go tool
    pprof (Debian's Go 1.19) cannot name C++ members of a namespace or class
    nor gcc -O2's main itself, and reads the copy's names as they are. The
    report is the copy's (the same lines) and points at it; if it cannot be
    written, the report is the raw profile's."""
    finals = prof_finals(o)
    if not finals:
        err("no process left a final heap profile in %s (a Go program leaves one only when "
            "its main ends with pagealloc.Exit)" % o["prof_dir"])
        return
    if not os.path.isfile(HEAPPROF):
        err("the leak report needs %s (missing); the heap profiles are in %s" %
            (HEAPPROF, o["prof_dir"]))
        return
    sys.stderr.flush()
    for name in finals:
        raw = os.path.join(o["prof_dir"], name)
        sym = raw[:-len(".pb.gz")] + ".sym.pb.gz"
        py = [sys.executable or "python3", "-S", HEAPPROF]
        if subprocess.call(py + ["symbolize", "--", raw, sym], stdout=2) == 0:
            subprocess.call(py + ["leaks", "--", sym], stdout=2)
        else:
            subprocess.call(py + ["leaks", "--", raw], stdout=2)


def signal_name(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return "SIG?"


def wait_child(pid, sampler):
    """Wait for CMD (pid) to exit, sampling it meanwhile when sampler is not
    None; the wait status."""
    if sampler is None:
        return os.waitpid(pid, 0)[1]
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            sampler.sample()
            # Until the next sample is due, or CMD exits.
            while True:
                timeout = sampler.next_due()
                if timeout > 0 and pidfd is not None:
                    select.select([pidfd], [], [], timeout)
                elif timeout > 0:
                    time.sleep(min(timeout, 0.01))
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    return status
                if sampler.next_due() <= 0:
                    break
    finally:
        if pidfd is not None:
            os.close(pidfd)


def draw_maps(o, mapdir, child, cmd0, mod):
    """After the run: each process's map file (mapdir/map.PID.map) drawn
    by mod (pagealloc_map); CMD's own into --map FILE, the others into
    FILE.PID.EXT."""
    names = sorted(n for n in os.listdir(mapdir) if n.startswith("map.") and n.endswith(".map"))
    base, ext = os.path.splitext(o["map"])
    drew_child = False
    for name in names:
        pid = name[len("map."):-len(".map")]
        out = o["map"] if pid == str(child) else "%s.%s%s" % (base, pid, ext)
        try:
            mod.draw_file(os.path.join(mapdir, name), out)
        except (OSError, ValueError) as e:
            err("heap map of process %s not drawn: %s" % (pid, e))
            continue
        drew_child = drew_child or pid == str(child)
        err("heap map of process %s in %s" % (pid, out))
    if not drew_child:
        err("%s left no heap map (a process that never used the heap writes none)" % cmd0)


# ---- guarded reports, symbolized -----------------------------------------------

# The allocator's one-line reports that carry stacks (src/guard.c): frames
# FILE+0xOFFSET, OFFSET the file address addr2line takes.
REPORT = re.compile(r"^pagealloc: .*\ballocated at ")
STACK = re.compile(r"(allocated|freed) at ((?:[^\s,;]+\+0x[0-9a-f]+|0x[0-9a-f]+|\(no stack\))"
                   r"(?: (?:[^\s,;]+\+0x[0-9a-f]+|0x[0-9a-f]+))*)")
FRAME = re.compile(r"([^\s,;]+)\+0x([0-9a-f]+)$")


class StderrTee(threading.Thread):
    """Copies CMD's standard error (the read end rfd of its pipe) to this
    command's as it comes, byte for byte, and keeps the allocator's reports
    that carry stacks (lines)."""

    def __init__(self, rfd):
        super().__init__(daemon=True)
        self.rfd = rfd
        self.lines = []

    def run(self):
        out = sys.stderr.buffer
        part = b""
        while True:
            try:
                data = os.read(self.rfd, 65536)
            except OSError:
                break
            if not data:
                break
            out.write(data)
            out.flush()
            part += data
            *whole, part = part.split(b"\n")
            for line in whole:
                text = line.decode(errors="replace")
                if REPORT.match(text):
                    self.lines.append(text)
        os.close(self.rfd)


def object_paths(program, env):
    """{base name: path} of the objects a report's frames may name: the
    program, the libraries ldd says it loads (LD_PRELOAD included)."""
    paths = {}
    if program:
        paths[os.path.basename(program)] = program
    try:
        r = subprocess.run(["ldd", program], env=env, capture_output=True, text=True,
                           errors="replace", timeout=30, check=False)
        out = r.stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)(?: => (\S+))? \(0x", line)
        if m:
            path = m.group(2) or m.group(1)
            if os.path.isabs(path):
                paths.setdefault(os.path.basename(m.group(1)), path)
                paths.setdefault(os.path.basename(path), path)
    return paths


def symbolized(line, paths, heapprof):
    """The report LINE with each stack one frame a line, as a sanitizer
    prints them: "#N FUNCTION FILE:LINE (OBJECT+0xOFFSET)", inlined frames
    included, innermost first."""
    frames = {}  # (object, offset) -> [(name, file, line)]
    for m in STACK.finditer(line):
        for tok in m.group(2).split():
            f = FRAME.match(tok)
            if f:
                frames.setdefault(f.group(1), set()).add(int(f.group(2), 16))
    named = {}
    for obj, offsets in frames.items():
        path = paths.get(obj)
        if path is None:
            continue
        for off, fr in heapprof.addr2line_frames(path, sorted(offsets)).items():
            named[obj, off] = fr
    head = STACK.split(line)[0].rstrip(" ,;")
    out = [head.replace("pagealloc: ", "pagealloc: symbolized: ", 1)]
    for m in STACK.finditer(line):
        out.append("  %s at:" % m.group(1))
        n = 0
        for tok in m.group(2).split():
            f = FRAME.match(tok)
            fr = named.get((f.group(1), int(f.group(2), 16))) if f else None
            for name, file, lno in fr or [(None, None, 0)]:
                where = "%s:%d" % (file, lno) if file and lno else file or "??"
                if tok == "(no stack)":
                    out.append("    (no stack)")
                    continue
                out.append("    #%d %s %s (%s)" % (n, name or "??", where, tok))
                n += 1
    return "\n".join(out) + "\n"


def main(args, preload_lib, load):
    try:
        return run(args, preload_lib, load)
    except UsageError as e:
        sys.stderr.write("%s run: %s\n%s" % (ME, e, usage(preload_lib)))
        return 2
    except Failure as e:
        err(str(e))
        return 2


def run(args, lib, load):
    o, cmd = parse(args)
    if o["help"]:
        sys.stdout.write(usage(lib))
        return 0
    if not cmd:
        raise UsageError("no command to run")
    if not os.path.isfile(lib):
        raise Failure("%s not found: build it first (cmake --build build)" % lib)
    timeline_mod = None
    if o["timeline"] or o["plot"]:
        timeline_mod = load("pagealloc_timeline", "the timeline")
    map_mod = load("pagealloc_map", "the heap map") if o["map"] else None
    if o["guard"]:
        o["heapprof"] = load("heapprof", "symbolizing the reports")
    tmp = os.environ.get("TMPDIR") or "/tmp"
    if "," in tmp:
        tmp = "/tmp"
    made = []  # directories to remove at the end
    try:
        return run_with(o, cmd, lib, tmp, made, timeline_mod, map_mod)
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


def run_with(o, cmd, lib, tmp, made, timeline_mod, map_mod):
    if o["prof_dir"] is not None:
        prof_start(o, tmp)
    report_dir = None
    if o["quiet"]:
        stats = "stats_print=off"
    elif o["stats_file"] is not None:
        stats = "stats_print=on,stats_file=%s" % o["stats_file"]
    else:
        try:
            report_dir = tempfile.mkdtemp(prefix="pagealloc.", dir=tmp)
        except OSError:
            raise Failure("cannot create a directory for the reports in %s" % tmp)
        made.append(report_dir)
        stats = "stats_print=on,stats_file=%s/%%p" % report_dir
    mapdir = None
    if o["map"]:
        try:
            mapdir = tempfile.mkdtemp(prefix="pagealloc-map.", dir=tmp)
        except OSError:
            raise Failure("cannot create a directory for the heap maps in %s" % tmp)
        made.append(mapdir)
        o["conf"] += ",map_prefix=%s/map" % mapdir
    sampler = None
    if timeline_mod is not None:
        try:
            sampler = timeline_mod.Sampler(o["timeline"], o["timeline_ms"] / 1000.0)
        except OSError as e:
            raise Failure("--timeline %s: %s" % (o["timeline"], e.strerror or e))

    env = dict(os.environ)
    prev = env.get("PAGEALLOC_CONF", "")
    env["PAGEALLOC_CONF"] = prev + ("," if prev else "") + stats + o["conf"] + o["raw"]
    ld = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = lib + (" " + ld if ld else "")

    # CMD runs in the foreground, in this process group, so it keeps the
    # terminal, stdin and the default SIGINT/SIGQUIT dispositions. A Ctrl-C
    # reaches it and this command alike: this command waits for it, then
    # prints what it reported.
    caught = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, lambda *_: None) for s in caught}
    # With --guard-all CMD's standard error comes through a pipe, so that
    # the reports with stacks can be symbolized after it exits.
    tee = None
    actions = []
    if o["guard"]:
        rfd, wfd = os.pipe()
        actions = [(os.POSIX_SPAWN_DUP2, wfd, 2), (os.POSIX_SPAWN_CLOSE, rfd)]
    try:
        try:
            pid = os.posix_spawnp(cmd[0], cmd, env, file_actions=actions, setsigdef=caught + (
                signal.SIGPIPE, signal.SIGXFSZ))
        except OSError as e:
            err("%s: %s" % (cmd[0], e.strerror or e))
            return 127 if e.errno == 2 else 126
        finally:
            if actions:
                os.close(wfd)
                tee = StderrTee(rfd)
                tee.start()
        if sampler is not None:
            sampler.start(pid)
        status = wait_child(pid, sampler)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    code = os.waitstatus_to_exitcode(status)
    if tee is not None:
        # A process CMD left behind may hold the pipe: wait a moment only.
        tee.join(2)
        if tee.lines:
            heapprof = o["heapprof"]
            paths = object_paths(shutil.which(cmd[0]) or cmd[0], env)
            paths.setdefault(os.path.basename(lib), lib)
            for line in list(tee.lines):
                sys.stderr.write(symbolized(line, paths, heapprof))
            sys.stderr.flush()
    if code < 0:
        err("%s was killed by signal %d (%s)" % (cmd[0], -code, signal_name(-code)))
        code = 128 - code
    if sampler is not None:
        sampler.close()
        if o["plot"]:
            try:
                timeline_mod.plot(sampler.rows, o["plot"], title="pagealloc run -- " +
                                  " ".join(cmd))
                err("timeline plotted in %s" % o["plot"])
            except (OSError, ValueError) as e:
                err("--plot %s: %s" % (o["plot"], getattr(e, "strerror", None) or e))
    if report_dir is not None:
        # Oldest first: the order in which the processes finished.
        names = os.listdir(report_dir)
        names.sort(key=lambda n: (os.stat(os.path.join(report_dir, n)).st_mtime_ns, n))
        for n in names:
            with open(os.path.join(report_dir, n), "rb") as f:
                data = f.read()
            sys.stderr.buffer.write(data)
        sys.stderr.flush()
    elif o["stats_file"] is not None and not o["quiet"]:
        err("heap reports in %s (%%p: the process id)" % o["stats_file"])
    if o["prof_dir"] is not None:
        leak_reports(o)
    if mapdir is not None:
        draw_maps(o, mapdir, pid, cmd[0], map_mod)
    return code


