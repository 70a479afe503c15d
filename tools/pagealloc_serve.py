"""pagealloc_serve.py — `pagealloc serve`: this machine's heaps for Prometheus
and for continuous profilers, over HTTP.

    pagealloc serve [--listen ADDR:PORT] [--profile-interval SECONDS]

One exporter per machine (or per container). Each request finds the
processes on libpagealloc afresh: the live files (src/live.h) in the
directories where processes keep them (live_dirs), each read with
pagealloc_stat's Live, which refuses a file its user cannot open and
removes a stale one (its process gone, a later process under its pid, or
one that exec'd). Between requests the server keeps only each process's
last profile time and which processes were late to answer, so a process
that exits is gone from the next answer.

    /                          an HTML page: the processes, their figures, links
    /metrics[?pid=N|comm=NAME] Prometheus's text exposition format (0.0.4)
    /debug/pprof/              an HTML page: each process's profile link
    /debug/pprof/heap?pid=N    the heap profile of process N now (pprof's
                               format, gzip'd), as `pagealloc profile` takes it;
                               ?comm=NAME: of the one process so named;
                               /debug/pprof/allocs the same, as in Go

What a process does for a request is what `pagealloc stat` and `pagealloc
profile` ask of it: its scavenger thread refreshes the figures and the story
(or writes a profile) into its own mapping; nothing runs on its malloc
paths. A scrape asks every process first and then waits for the answers
(at most pagealloc_stat.WAIT_S), so fifty processes cost one wait, not
fifty; a process that did not answer within the wait is not waited for at
the next scrape (Laggards), so one stuck process does not slow them all.
The figures come from the file's named figures; what only the story has
(the top size classes, the heap profile's estimates, the per-node heaps)
is read from the story's lines (story_figures), which src/stats_print.c
writes.

Safety: the server listens on loopback unless told otherwise (a warning
line otherwise); the only paths are the four above (and pprof's
/debug/pprof/symbol, which names nothing); the only parameters are pid, a
decimal process id of a process the server can read, and comm, a name only
compared with the processes' names: only a pid reaches the file system (as
/proc/PID/... and the live file's name); every refusal is an HTTP 4xx with
one line of text/plain saying why. A profile of the same process is taken
at most once per --profile-interval seconds (429 with Retry-After
otherwise): a scraper cannot make a service spend its time writing
profiles. Requests are served by threads (ThreadingHTTPServer), so a slow
profile does not hold up /metrics.
Python 3 standard library only.
"""
import html
import http.server
import os
import re
import socket
import sys
import threading
import time
import urllib.parse

import pagealloc_stat as stat

ME = "pagealloc serve"
DEFAULT_LISTEN = "127.0.0.1:9464"
DEFAULT_PROFILE_INTERVAL = 5.0
PROFILE_WAIT_S = 10  # as `pagealloc profile`'s wait
MAX_QUERY = 256  # bytes of query string; a pid needs a dozen
MAX_POST = 1 << 20  # bytes of a symbol request's addresses

USAGE = """usage: pagealloc serve [--listen ADDR:PORT] [--profile-interval SECONDS]

Serves the heaps of this machine's processes on libpagealloc (those whose
live file this user can open) over HTTP, until interrupted:
  /metrics                  Prometheus's text format: one series per process,
                            labels pid and comm (?pid=N or ?comm=NAME: those only)
  /debug/pprof/heap?pid=N   process N's heap profile now, pprof's format:
                            go tool pprof http://ADDR:PORT/debug/pprof/heap?pid=N
                            (?comm=NAME: the one process so named)
  /debug/pprof/             the processes, with their profile links
  /                         the processes, their figures and links
--listen: the address and port (default %s; [::1]:PORT for IPv6).
Listening beyond loopback prints a warning: anyone who can reach the port
reads the heaps' figures and profiles.
--profile-interval: the fewest seconds between two profiles of one process
(default %g); a request sooner gets 429 and Retry-After.
""" % (DEFAULT_LISTEN, DEFAULT_PROFILE_INTERVAL)


class Refusal(Exception):
    """An HTTP status and one line saying why."""

    def __init__(self, code, line, headers=None):
        super().__init__(line)
        self.code, self.line, self.headers = code, line, headers or {}


# ---- finding the processes ---------------------------------------------------------


def live_dirs():
    """Where processes keep their live files (src/live.c: live_dir), for
    every user: $XDG_RUNTIME_DIR/pagealloc, /run/user/UID/pagealloc and
    /dev/shm/pagealloc-UID. Those this user cannot list are left out."""
    dirs = []
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        dirs.append(os.path.join(xdg, "pagealloc"))
    for base, pattern in (("/run/user", None), ("/dev/shm", "pagealloc-")):
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in sorted(names):
            if pattern is None and name.isdigit():
                dirs.append(os.path.join(base, name, "pagealloc"))
            elif pattern is not None and name.startswith(pattern) and name[len(pattern):].isdigit():
                dirs.append(os.path.join(base, name))
    return dirs


def live_pids():
    """The pids that have a live file this user can list (the file may be
    stale: Live decides)."""
    pids = set()
    for d in live_dirs():
        try:
            names = os.listdir(d)
        except OSError:
            continue
        pids.update(int(n) for n in names if n.isdigit() and 0 < len(n) <= 10)
    return sorted(pids)


def comm_of(pid):
    try:
        with open("/proc/%d/comm" % pid, "rb") as f:
            return f.read().rstrip(b"\n").decode(errors="replace")
    except OSError:
        return ""


def vm_hwm(pid):
    """The process's peak resident bytes (VmHWM of /proc/PID/status), or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class Proc:
    """One process's answer: pid, comm, header, figures, story."""

    def __init__(self, pid, h, figs, text):
        self.pid, self.h, self.figs, self.text = pid, h, figs, text
        self.comm = comm_of(pid)
        self.labels = labels_text([("pid", pid), ("comm", self.comm)])
        self.peak_rss = vm_hwm(pid)
        self.story = story_figures(text)


class Laggards:
    """The processes that did not answer within the wait at their last
    scrape, by (pid, start time). A scrape asks them too but does not wait
    for them (their last figures are reported, with their time): one process
    that cannot answer (stopped in a debugger, run under valgrind, its
    scavenger held up) does not make every scrape wait stat.WAIT_S. One that
    answers within a scrape's wait is waited for again."""

    def __init__(self):
        self.keys = set()
        self.lock = threading.Lock()

    def punctual(self, asked):
        """Those of asked (live, request, key) to wait for."""
        with self.lock:
            return [a for a in asked if a[2] not in self.keys]

    def note(self, asked):
        """After a scrape's wait: who answered (waited for again) and who
        did not."""
        with self.lock:
            for live, req, key in asked:
                if live.served(req):
                    self.keys.discard(key)
                else:
                    self.keys.add(key)
            if len(self.keys) > 1024:  # those that exited go
                self.keys = {k for k in self.keys if stat.proc_start_ticks(k[0]) == k[1]}


def snapshot(pids, laggards=None):
    """The processes of pids that run on libpagealloc and that this user can
    read, each refreshed now: every one is asked first, then the answers
    are awaited together (at most stat.WAIT_S; not those of laggards, a
    Laggards, which did not answer last time). A process that did not
    answer is left out when it is gone or its file is stale, else kept with
    its last figures (pagealloc_update_timestamp_seconds says how old); one
    that answered is kept (it was there to answer)."""
    asked = []
    for pid in pids:
        try:
            live = stat.Live(pid)
        except stat.StatError:
            continue
        if not live.alive():
            live.map.close()
            continue
        asked.append((live, live.ask(), (pid, live.header()["start_ticks"])))
    wait_for = laggards.punctual(asked) if laggards is not None else asked
    deadline = time.monotonic() + stat.WAIT_S
    while (any(not live.served(req) for live, req, _ in wait_for) and
           time.monotonic() < deadline):
        time.sleep(0.0005)
    if laggards is not None:
        laggards.note(asked)
    procs = []
    for live, req, _ in asked:
        try:
            if not live.served(req):
                live.unanswered()  # raises for a stale file
            h, figs, text = live.read()
            procs.append(Proc(live.pid, h, figs, text))
        except stat.StatError:
            pass
        finally:
            live.map.close()
    return procs


# ---- what only the story says (src/stats_print.c) ----------------------------------

CLASS_HEADER = "     size   spans  objects   cached         bytes  live / span"  # then more
CLASS_ROW = re.compile(r"^ +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +(?:([\d.]+)%|n/a)"
                       r"(?: +(\d+) +(\d+))?$")
PROF_ON = re.compile(r"^heap profile +(on|off),")
PROF_SAMPLES = re.compile(r"^  samples +(\d+) live of (\d+) taken, from (\d+) sites")
PROF_ESTIMATE = re.compile(r"^  estimated +live ([\d.]+) MiB, allocated ([\d.]+) MiB")
NODE_ROW = re.compile(r"^  node (\d+) +(\d+) CPUs?, [^:]*: ([\d.]+) MiB mapped, ([\d.]+) MiB in "
                      r"use, ([\d.]+) MiB released; caches ([\d.]+) MiB free, (\d+) refills")


def mib_bytes(text):
    """A story's "12.34" MiB in bytes (the story rounds to 0.01 MiB)."""
    return int(round(float(text) * 1048576))


def story_figures(text):
    """What the story adds to the figures: {"classes": [(size, spans,
    objects, cached, bytes, fullness or None, partial spans or None, bytes
    free in them or None)], "prof": {...}, "nodes": [(node, cpus, mapped,
    inuse, released, cache_free, refills)]}."""
    out = {"classes": [], "prof": {}, "nodes": []}
    in_classes = False
    for line in text.splitlines():
        # A regular expression only for a line that may be one of them:
        # each scrape reads fifty stories or so.
        if in_classes:
            m = CLASS_ROW.match(line)
            if m:
                g = m.groups()
                full = float(g[5]) / 100 if g[5] is not None else None
                out["classes"].append(tuple(int(x) for x in g[:5]) + (full,) + tuple(
                    int(x) if x is not None else None for x in g[6:8]))
                continue
            in_classes = False
        if line.startswith(CLASS_HEADER):
            in_classes = True
        elif line.startswith("heap profile"):
            m = PROF_ON.match(line)
            if m:
                out["prof"]["on"] = int(m.group(1) == "on")
        elif line.startswith("  samples"):
            m = PROF_SAMPLES.match(line)
            if m:
                out["prof"].update(samples_live=int(m.group(1)), samples_total=int(m.group(2)),
                                   sites=int(m.group(3)))
        elif line.startswith("  estimated"):
            m = PROF_ESTIMATE.match(line)
            if m:
                out["prof"].update(live=mib_bytes(m.group(1)), alloc=mib_bytes(m.group(2)))
        elif line.startswith("  node "):
            m = NODE_ROW.match(line)
            if m:
                g = m.groups()
                out["nodes"].append((int(g[0]), int(g[1]), mib_bytes(g[2]), mib_bytes(g[3]),
                                     mib_bytes(g[4]), mib_bytes(g[5]), int(g[6])))
    return out


# ---- the exposition ------------------------------------------------------------------

# The live file's figures: figure, metric, type, help. A figure in
# nanoseconds becomes seconds (the base unit). A figure this table does not
# name (a later library's) is exported as the gauge pagealloc_NAME.
FIGURES = (
    ("heap_sys", "pagealloc_heap_sys_bytes", "gauge",
     "Bytes of heap mapped from the OS (Go's HeapSys)."),
    ("heap_inuse", "pagealloc_heap_inuse_bytes", "gauge",
     "Bytes in pages of spans and large objects (Go's HeapInuse)."),
    ("heap_alloc", "pagealloc_heap_alloc_bytes", "gauge",
     "Bytes in live objects (Go's HeapAlloc)."),
    ("heap_idle", "pagealloc_heap_idle_bytes", "gauge",
     "Bytes in free pages, resident or not (Go's HeapIdle)."),
    ("heap_released", "pagealloc_heap_released_bytes", "gauge",
     "Bytes of free pages returned to the OS (Go's HeapReleased)."),
    ("span_released", "pagealloc_span_released_bytes", "gauge",
     "Bytes of free 4 KiB pages inside spans returned to the OS."),
    ("heap_usage", "pagealloc_heap_usage_bytes", "gauge",
     "Resident heap bytes: heap_sys - heap_released - span_released (heapUsage)."),
    ("max_fragmentation", "pagealloc_max_fragmentation_bytes", "gauge",
     "Bytes in use by the heap but not by live objects: heap_inuse - heap_alloc "
     "(maxFragmentation)."),
    ("live_objects", "pagealloc_live_objects", "gauge", "Live objects, small and large."),
    ("large_objects", "pagealloc_large_objects", "gauge", "Live objects over 32 KiB."),
    ("large_bytes", "pagealloc_large_object_bytes", "gauge", "Bytes in live objects over 32 KiB."),
    ("thread_caches", "pagealloc_thread_caches", "gauge", "Threads with a cache of free objects."),
    ("cached_bytes", "pagealloc_thread_cache_bytes", "gauge",
     "Bytes of free objects held by thread caches and central stashes."),
    ("stashed_bytes", "pagealloc_central_stash_bytes", "gauge",
     "Bytes of free objects in the central stashes (part of thread_cache_bytes)."),
    ("rss", "pagealloc_resident_memory_bytes", "gauge",
     "Resident bytes of the whole process (VmRSS)."),
    ("scavenger_cpu_ns", "pagealloc_scavenger_cpu_seconds_total", "counter",
     "CPU time of the scavenger thread."),
    ("released_total", "pagealloc_scavenger_released_bytes_total", "counter",
     "Bytes returned to the OS over the process's life."),
    ("release_calls", "pagealloc_scavenger_madvise_calls_total", "counter",
     "madvise calls that returned them."),
    ("cache_free", "pagealloc_page_cache_free_bytes", "gauge",
     "Bytes of free pages in the per-CPU page caches."),
    ("metadata", "pagealloc_metadata_bytes", "gauge",
     "Bytes of page heap bitmaps and summaries, outside heap_sys."),
    ("memory_limit", "pagealloc_memory_limit_bytes", "gauge",
     "The soft memory limit (memory_limit); 0: none."),
    ("limit_overruns", "pagealloc_memory_limit_overruns_total", "counter",
     "Allocations that left resident memory over the limit with nothing free to release."),
    ("updates", "pagealloc_live_file_updates_total", "counter",
     "Refreshes of the live file, this scrape's included."),
    ("partial_spans", "pagealloc_partial_spans", "gauge",
     "Spans of small objects with a free slot."),
    ("partial_free_bytes", "pagealloc_partial_free_bytes", "gauge",
     "Bytes of the free slots in partial spans: what moving objects could win back "
     "(pa_defrag_frag_bytes)."),
    ("huge_bytes", "pagealloc_huge_bytes", "gauge",
     "Heap bytes in 2 MiB huge pages the scavenger collapsed and has not split since."),
    ("huge_collapses", "pagealloc_huge_collapses_total", "counter",
     "Huge pages the scavenger collapsed (MADV_COLLAPSE)."),
    ("huge_splits", "pagealloc_huge_splits_total", "counter",
     "Collapsed huge pages split by a release of part of them."),
    ("huge_freed", "pagealloc_huge_freed_total", "counter",
     "Collapsed huge pages released whole."),
    ("collapse_failures", "pagealloc_huge_collapse_failures_total", "counter",
     "Collapses the kernel refused."),
    ("collapse_waits", "pagealloc_huge_collapse_waits_total", "counter",
     "Collapse steps that waited for a busy program."),
)
FIGURE_ROWS = {f[0]: f for f in FIGURES}
SKIPPED_FIGURES = {"stories"}  # the live file's own bookkeeping

CLASS_METRICS = (
    (4, "pagealloc_size_class_bytes", "Bytes in live objects of the size class"),
    (1, "pagealloc_size_class_spans", "Spans of the size class"),
    (2, "pagealloc_size_class_objects", "Live objects of the size class"),
    (3, "pagealloc_size_class_cached_objects", "Free objects of the size class in thread caches"),
    (5, "pagealloc_size_class_span_fullness_ratio",
     "Live bytes of the size class over its spans' bytes"),
    (6, "pagealloc_size_class_partial_spans", "Spans of the size class with a free slot"),
    (7, "pagealloc_size_class_partial_free_bytes",
     "Bytes of the free slots in the size class's partial spans"),
)
TOP_NOTE = " (the ten classes with the most bytes, as the heap's story lists them)."
PROF_METRICS = (
    ("on", "pagealloc_profile_enabled", "gauge", "1 when the heap profiler samples (prof=on)."),
    ("live", "pagealloc_profile_live_estimate_bytes", "gauge",
     "The heap profile's estimate of live bytes (to 0.01 MiB)."),
    ("alloc", "pagealloc_profile_allocated_estimate_bytes_total", "counter",
     "The heap profile's estimate of bytes allocated since the start (to 0.01 MiB)."),
    ("samples_live", "pagealloc_profile_live_samples", "gauge", "Live sampled allocations."),
    ("samples_total", "pagealloc_profile_samples_total", "counter", "Sampled allocations."),
    ("sites", "pagealloc_profile_sites", "gauge", "Distinct sampled stacks."),
)
NODE_METRICS = (
    (1, "pagealloc_node_cpus", "gauge", "CPUs of the NUMA node's heap."),
    (2, "pagealloc_node_heap_mapped_bytes", "gauge",
     "Bytes mapped by the node's heap (to 0.01 MiB)."),
    (3, "pagealloc_node_heap_inuse_bytes", "gauge",
     "Bytes in use in the node's heap (to 0.01 MiB)."),
    (4, "pagealloc_node_heap_released_bytes", "gauge",
     "Bytes the node's heap returned to the OS (to 0.01 MiB)."),
    (5, "pagealloc_node_page_cache_free_bytes", "gauge",
     "Bytes free in the node's per-CPU page caches (to 0.01 MiB)."),
    (6, "pagealloc_node_page_cache_refills_total", "counter",
     "Groups of 64 pages the node's page caches took from its heap."),
)


def label_value(v):
    return v.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def labels_text(pairs):
    """'k1="v1",k2="v2"' of [(k, v)], each value escaped."""
    return ",".join('%s="%s"' % (k, label_value(str(v))) for k, v in pairs)


def number(v):
    if isinstance(v, float) and not v.is_integer():
        return repr(v)
    return str(int(v))


class Exposition:
    """Families in the order first named; samples under their family."""

    def __init__(self):
        self.families = {}

    def add(self, name, kind, help_text, labels, value):
        """A sample of family name; labels as labels_text writes them."""
        fam = self.families.setdefault(name, (kind, help_text, []))
        fam[2].append("%s{%s} %s" % (name, labels, number(value)) if labels else
                      "%s %s" % (name, number(value)))

    def text(self):
        out = []
        for name, (kind, help_text, samples) in self.families.items():
            out.append("# HELP %s %s" % (name, help_text))
            out.append("# TYPE %s %s" % (name, kind))
            out.extend(samples)
        return "\n".join(out) + "\n"


def metrics(procs, scrape_s=None):
    """The exposition of procs (a snapshot), as text."""
    e = Exposition()
    e.add("pagealloc_processes", "gauge",
          "Processes on libpagealloc whose live file this exporter read.", "", len(procs))
    for p in procs:
        who = p.labels
        for name, value in p.figs.items():
            if name in SKIPPED_FIGURES:
                continue
            _, metric, kind, help_text = FIGURE_ROWS.get(
                name, (name, "pagealloc_" + name, "gauge", "The live file's figure %s." % name))
            e.add(metric, kind, help_text, who, value / 1e9 if name.endswith("_ns") else value)
        e.add("pagealloc_update_timestamp_seconds", "gauge",
              "When the process last refreshed its live file (a process that did not answer "
              "this scrape keeps older figures).", who, p.h["update_ns"] / 1e9)
        if p.peak_rss is not None:
            e.add("pagealloc_resident_memory_peak_bytes", "gauge",
                  "Peak resident bytes of the whole process (VmHWM).", who, p.peak_rss)
    for p in procs:
        for key, metric, kind, help_text in PROF_METRICS:
            if key in p.story["prof"]:
                e.add(metric, kind, help_text, p.labels, p.story["prof"][key])
    for idx, metric, help_text in CLASS_METRICS:
        for p in procs:
            for row in p.story["classes"]:
                if row[idx] is not None:
                    e.add(metric, "gauge", help_text + TOP_NOTE,
                          '%s,size="%d"' % (p.labels, row[0]), row[idx])
    for idx, metric, kind, help_text in NODE_METRICS:
        for p in procs:
            for row in p.story["nodes"]:
                e.add(metric, kind, help_text, '%s,node="%d"' % (p.labels, row[0]), row[idx])
    if scrape_s is not None:
        e.add("pagealloc_scrape_duration_seconds", "gauge",
              "Seconds this exporter took to read the processes for this answer.", "",
              round(scrape_s, 6))
    return e.text()


# ---- requests -------------------------------------------------------------------------


def parse_query(query, allowed):
    """{name: value} of a query string with only the parameters in allowed,
    each at most once; a Refusal (400) otherwise."""
    if len(query) > MAX_QUERY:
        raise Refusal(400, "query string over %d bytes" % MAX_QUERY)
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query),
                                       max_num_fields=4)
    except ValueError:
        raise Refusal(400, "malformed query string %s" % shown(query))
    out = {}
    for name, value in pairs:
        if name not in allowed:
            raise Refusal(400, "unknown parameter %s (this path takes: %s)" %
                          (shown(name), ", ".join(allowed) or "none"))
        if name in out:
            raise Refusal(400, "parameter %s given twice" % name)
        out[name] = value
    return out


def shown(text):
    """A client's text, quoted, printable and short, for a one-line reason."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    return "'%s'" % (text[:40] + "..." if len(text) > 40 else text)


def parse_pid(value):
    """The pid of a parameter: decimal digits only, 1 to 2**22 (pid_max's
    ceiling), or a Refusal (400)."""
    if not re.fullmatch(r"[0-9]{1,7}", value) or not 0 < int(value) <= 4194304:
        raise Refusal(400, "pid %s is not a process id (a decimal integer from 1 to 4194304)" %
                      shown(value))
    return int(value)


def parse_comm(value):
    """A process name (/proc/PID/comm: 1 to 15 printable characters), or a
    Refusal (400). It is only compared with the processes' names."""
    if not 0 < len(value) <= 15 or not value.isprintable():
        raise Refusal(400, "comm %s is not a process name (1 to 15 printable characters)" %
                      shown(value))
    return value


def chosen(q):
    """The pids a request's pid or comm names (a readable process's, or a
    Refusal), or every process's with a live file when it names neither."""
    if "pid" in q and "comm" in q:
        raise Refusal(400, "pid or comm, not both")
    if "pid" in q:
        pid = parse_pid(q["pid"])
        readable(pid).map.close()
        return [pid]
    if "comm" in q:
        name = parse_comm(q["comm"])
        pids = [pid for pid, comm in listed_pids() if comm == name]
        if not pids:
            raise Refusal(404, "no process named %s on libpagealloc that this server can read" %
                          shown(name))
        return pids
    return live_pids()


def readable(pid):
    """A Live of pid, or a Refusal: 404 for no process or one not on
    libpagealloc, 403 for another user's."""
    uid = stat.proc_uid(pid)
    if uid is None:
        raise Refusal(404, "no process %d" % pid)
    me = os.geteuid()
    if me != 0 and uid != me:
        raise Refusal(403, "process %d belongs to another user (uid %d); this server runs as "
                      "uid %d" % (pid, uid, me))
    try:
        live = stat.Live(pid)
    except stat.StatError as e:
        raise Refusal(404, str(e))
    if not live.alive():
        live.map.close()
        raise Refusal(404, "no process %d (it exited)" % pid)
    return live


class Profiles:
    """Each process's last profile time; at most one profile per process per
    interval seconds (a process is its pid and start time: a new process
    under an old pid is not held back)."""

    def __init__(self, interval):
        self.interval = interval
        self.last = {}
        self.lock = threading.Lock()

    def take(self, pid):
        """The heap profile of pid now (gzip'd pprof bytes), or a Refusal."""
        live = readable(pid)
        try:
            key = (pid, live.header()["start_ticks"])
            now = time.monotonic()
            with self.lock:
                since = now - self.last.get(key, -1e18)
                if since < self.interval:
                    wait = self.interval - since
                    raise Refusal(429, "a profile of process %d was taken %.1f s ago; the next in "
                                  "%.1f s (--profile-interval %g)" %
                                  (pid, since, wait, self.interval),
                                  {"Retry-After": str(int(wait) + 1)})
                self.last = {k: t for k, t in self.last.items()
                             if now - t < self.interval and k[0] != pid}
                self.last[key] = now
            try:
                path = live.fetch("profile", "profile", PROFILE_WAIT_S)
            except stat.StatError as e:
                raise Refusal(503, str(e))
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as e:
                raise Refusal(503, "%s: %s" % (path, e.strerror))
            finally:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        finally:
            live.map.close()


def mib(v):
    return "%.1f" % (v / 1048576)


PAGE_HEAD = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title>
<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:right}
td.l,th.l{text-align:left}</style></head><body>
<h1>%s</h1>
"""
PAGE_TAIL = "</body></html>\n"


def page_index(procs, host):
    title = "pagealloc serve on %s" % html.escape(host)
    out = [PAGE_HEAD % (title, title),
           "<p>%d processes on libpagealloc. <a href=\"/metrics\">/metrics</a> (Prometheus), "
           "<a href=\"/debug/pprof/\">/debug/pprof/</a> (heap profiles). Figures in MiB.</p>\n" %
           len(procs),
           "<table><tr><th>pid</th><th class=\"l\">comm</th><th>RSS</th><th>heapUsage</th>"
           "<th>heap_inuse</th><th>heap_alloc</th><th>maxFragmentation</th><th>released</th>"
           "<th>scavenger CPU s</th><th class=\"l\">links</th></tr>\n"]
    for p in procs:
        f = p.figs
        out.append("<tr><td>%d</td><td class=\"l\">%s</td>%s<td>%.3f</td><td class=\"l\">"
                   "<a href=\"/metrics?pid=%d\">metrics</a> "
                   "<a href=\"/debug/pprof/heap?pid=%d\">profile</a></td></tr>\n" % (
                       p.pid, html.escape(p.comm),
                       "".join("<td>%s</td>" % mib(f.get(k, 0)) for k in (
                           "rss", "heap_usage", "heap_inuse", "heap_alloc", "max_fragmentation",
                           "heap_released")),
                       f.get("scavenger_cpu_ns", 0) / 1e9, p.pid, p.pid))
    out.append("</table>\n" + PAGE_TAIL)
    return "".join(out)


def page_pprof(pids):
    title = "/debug/pprof/"
    out = [PAGE_HEAD % (title, title),
           "<p>The heap profile of a process now: <code>go tool pprof "
           "http://HOST:PORT/debug/pprof/heap?pid=N</code></p>\n<table>"
           "<tr><th>pid</th><th class=\"l\">comm</th><th class=\"l\">profile</th></tr>\n"]
    for pid, comm in pids:
        out.append("<tr><td>%d</td><td class=\"l\">%s</td><td class=\"l\">"
                   "<a href=\"heap?pid=%d\">heap?pid=%d</a></td></tr>\n" %
                   (pid, html.escape(comm), pid, pid))
    out.append("</table>\n" + PAGE_TAIL)
    return "".join(out)


def listed_pids():
    """(pid, comm) of each process whose live file is readable and not
    stale, without asking any of them for a refresh."""
    out = []
    for pid in live_pids():
        try:
            live = stat.Live(pid)
        except stat.StatError:
            continue
        try:
            if live.alive():
                out.append((pid, comm_of(pid)))
        finally:
            live.map.close()
    return out


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "pagealloc-serve"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass  # no line per request: a scrape a second would fill the log

    def send(self, code, ctype, body, headers=None):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self):
        try:
            self.route()
        except Refusal as r:
            self.send(r.code, "text/plain; charset=utf-8", r.line + "\n", r.headers)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # a bug here: one line to the client and the log, serve on
            line = "".join(c if c.isprintable() else "?" for c in "%s: %s" % (type(e).__name__, e))
            sys.stderr.write("%s: %s %s: %s\n" % (ME, self.command, shown(self.path), line))
            self.send(500, "text/plain; charset=utf-8", "internal error: %s\n" % line)

    do_HEAD = do_GET

    def route(self):
        path, _, query = self.path.partition("?")
        path = path.partition("#")[0]
        if path == "/metrics":
            q = parse_query(query, ("pid", "comm"))
            t0 = time.monotonic()
            pids = chosen(q)
            procs = snapshot(pids, self.server.laggards)
            if "pid" in q and not procs:
                raise Refusal(404, "process %d exited or did not answer" % pids[0])
            self.send(200, "text/plain; version=0.0.4; charset=utf-8",
                      metrics(procs, time.monotonic() - t0))
        elif path in ("/debug/pprof/heap", "/debug/pprof/allocs"):
            # allocs: the same profile, as Go serves it (a puller's
            # "memory" profile defaults to that path).
            q = parse_query(query, ("pid", "comm"))
            if not q:
                raise Refusal(400, "want ?pid=N or ?comm=NAME: the process whose heap profile "
                              "to take (/debug/pprof/ lists them)")
            pids = chosen(q)
            if len(pids) > 1:
                raise Refusal(409, "%d processes are named %s (pids %s): ask by pid" % (
                    len(pids), shown(q["comm"]), " ".join(str(p) for p in pids)))
            data = self.server.profiles.take(pids[0])
            self.send(200, "application/octet-stream", data,
                      {"Content-Disposition": "attachment; filename=\"heap-%d.pb.gz\"" %
                       pids[0]})
        elif path == "/debug/pprof/symbol":
            # go tool pprof asks here for the names of addresses its local
            # binaries did not name; this server names none (a Go server's
            # "num_symbols: 0"), so pprof keeps what it found itself.
            parse_query(query, ())
            self.send(200, "text/plain; charset=utf-8", "num_symbols: 0\n"
                      if self.command != "POST" else "")
        elif path in ("/debug/pprof/", "/debug/pprof"):
            parse_query(query, ())
            self.send(200, "text/html; charset=utf-8", page_pprof(listed_pids()))
        elif path == "/":
            parse_query(query, ())
            self.send(200, "text/html; charset=utf-8",
                      page_index(snapshot(live_pids(), self.server.laggards),
                                 self.headers.get("Host", "")))
        else:
            raise Refusal(404, "no such path %s (there are /, /metrics, /debug/pprof/, "
                          "/debug/pprof/heap?pid=N and /debug/pprof/allocs?pid=N)" % shown(path))

    def do_POST(self):
        # Only pprof's symbol requests; their body (addresses) is read and
        # dropped, at most MAX_POST bytes of it.
        try:
            n = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            n = -1
        if self.path.partition("?")[0] != "/debug/pprof/symbol":
            self.do_other()
        elif not 0 <= n <= MAX_POST:
            self.send(413, "text/plain; charset=utf-8",
                      "a body of 0 to %d bytes, with its Content-Length\n" % MAX_POST)
            self.close_connection = True
        else:
            self.rfile.read(n)
            self.do_GET()

    def do_other(self):
        self.send(405, "text/plain; charset=utf-8", "method %s not allowed: GET or HEAD\n" %
                  shown(self.command), {"Allow": "GET, HEAD"})

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_other


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


class Server6(Server):
    address_family = socket.AF_INET6


def parse_listen(text):
    """(host, port) of ADDR:PORT ([V6ADDR]:PORT), or a ValueError."""
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d{1,5})|([^:\[\]]*):(\d{1,5})", text)
    if not m:
        raise ValueError
    host = m.group(1) if m.group(1) is not None else m.group(3)
    port = int(m.group(2) or m.group(4))
    if port > 65535:
        raise ValueError
    return host, port


def is_loopback(host):
    return host in ("localhost", "::1") or host.startswith("127.")


def main(args):
    listen, interval = DEFAULT_LISTEN, DEFAULT_PROFILE_INTERVAL
    args = list(args)
    try:
        while args:
            a = args.pop(0)
            if a in ("-h", "--help"):
                sys.stdout.write(USAGE)
                return 0
            if a == "--listen":
                listen = args.pop(0)
                parse_listen(listen)
            elif a == "--profile-interval":
                interval = float(args.pop(0))
                if not 0 <= interval < 1e9:
                    raise ValueError
            else:
                sys.stderr.write("%s: unknown argument '%s'\n%s" % (ME, a, USAGE))
                return 2
    except (ValueError, IndexError):
        sys.stderr.write("%s: want --listen ADDR:PORT and --profile-interval SECONDS (at least "
                         "0)\n%s" % (ME, USAGE))
        return 2
    host, port = parse_listen(listen)
    try:
        server = (Server6 if ":" in host else Server)((host, port), Handler)
    except OSError as e:
        sys.stderr.write("%s: cannot listen on %s: %s\n" % (ME, listen, e.strerror or e))
        return 1
    server.profiles = Profiles(interval)
    server.laggards = Laggards()
    bound = server.server_address
    where = "[%s]:%d" % bound[:2] if ":" in bound[0] else "%s:%d" % bound[:2]
    if not is_loopback(host):
        sys.stderr.write("%s: warning: listening on %s, beyond loopback: whoever reaches it reads "
                         "the heaps' figures and profiles of this user's processes\n" % (ME, where))
    print("%s: listening on http://%s/ (/metrics, /debug/pprof/heap?pid=N)" % (ME, where),
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        return 130
    finally:
        server.server_close()
    return 0
