#!/usr/bin/python3 -S
"""serve_check.py — `pagealloc serve` read by Prometheus, go tool pprof and
promtool, and its refusals.

    serve_check.py PRELOAD_SO LIVE_TARGET PAGEALLOC CASE

live_target (tests/live/live_target.c) runs on the preload as
`live_target 8 262144 1000 64 4`: between its readies it allocates 8
blocks of 256 KiB and 1000 of 64 bytes, then frees 4 of the large blocks.
`pagealloc serve` (PAGEALLOC serve --listen 127.0.0.1:0: the port it
prints) reads it.

CASE prometheus: a real Prometheus (Debian's prometheus) on a free
  loopback port, a temporary storage directory and a scrape config with a
  1 s interval pointing at the server; its query API's
  pagealloc_heap_alloc_bytes{pid="PID"} becomes exactly `pagealloc stat
  --json PID`'s heap_alloc at each ready (labels pid, comm=live_target):
  up by 8*262144 + 64000, then down by exactly 4*262144; after a SIGKILL
  (the process leaves its live file) the series goes while the target is
  up (scrapes succeed), the exporter's own answer lacks it, and the stale
  file is removed.
CASE pprof: `go tool pprof -raw http://.../debug/pprof/heap?pid=PID` at
  prof_sample=64K after the allocations: Period 65536, pprof's four sample
  types, at least 1 MiB live in samples whose stacks hold an address of
  live_target's own mapping (its allocation sites); a second request at once
  gets 429 with Retry-After (--profile-interval 60); with
  --profile-interval 0 three profiles in a row are all served: by pid, by
  comm (live_target copied under a name of its own) and as allocs.
CASE exposition: `promtool check metrics` reads /metrics (numa_fake=2,
  prof on) with no output and status 0; the exposition's heap_alloc is
  stat --json's; it has both nodes' series, the 64-byte class's row as
  the story has it (1000 objects but the sampled ones, 64 bytes each) and
  the profile's estimates; /metrics?pid=PID has that process alone.
CASE errors: each refusal its status and one line of text/plain: an
  unknown path, pid=abc, pid=../.., a pid not on libpagealloc (this
  script's), no process, an unknown parameter, pid twice, no pid, a comm
  too long, a comm no process has, pid and comm, a comm two processes
  have (409), POST;
  another user's process (as root: the target runs as root and a second
  server runs as nobody via setpriv; not root: pid 1) is 403 and absent
  from that server's /metrics; after each, /metrics still answers 200.

Exit status 0 when all pass, 1 with a line per failure, 77 to skip.
"""
import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

preload, target, pagealloc, case = sys.argv[1:5]
NLARGE, LARGE, NSMALL, SMALL, NFREE = 8, 262144, 1000, 64, 4
WAIT_S = 30  # the longest any one expected state is waited for
failures = []
refusals = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what, flush=True)
    return ok


def skip(why):
    print("skip: " + why)
    sys.exit(77)


def need(*programs):
    for p in programs:
        if shutil.which(p) is None:
            skip("%s is not installed (tools/setup-deps.sh installs it)" % p)


# ---- the processes ---------------------------------------------------------------------


class Target:
    """live_target on the preload, stepped through its readies."""

    def __init__(self, conf, exe=target):
        env = dict(os.environ, LD_PRELOAD=preload, PAGEALLOC_CONF=conf)
        self.proc = subprocess.Popen([exe] + [str(v) for v in (
            NLARGE, LARGE, NSMALL, SMALL, NFREE)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env, text=True)
        self.pid = self.proc.pid
        self.expect("ready 0")
        deadline = time.monotonic() + WAIT_S
        while stat_json(self.pid) is None:  # its scavenger makes the file
            if time.monotonic() > deadline:
                sys.exit("live_target %d has no live file after %d s" % (self.pid, WAIT_S))
            time.sleep(0.05)

    def expect(self, line):
        got = self.proc.stdout.readline().strip()
        if got != line:
            sys.exit("live_target said '%s', want '%s'" % (got, line))

    def step(self, ready):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        self.expect(ready)

    def end(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def stat_json(pid):
    """`pagealloc stat --json PID`'s figures, or None when it fails."""
    r = subprocess.run([pagealloc, "stat", "--json", str(pid)], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


class Serve:
    """`pagealloc serve` on a port of its choosing (the one it prints)."""

    def __init__(self, *args, user_cmd=()):
        self.proc = subprocess.Popen(list(user_cmd) + [
            pagealloc, "serve", "--listen", "127.0.0.1:0"] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"pagealloc serve: listening on http://127\.0\.0\.1:(\d+)/ ", line)
        if not m:
            sys.exit("pagealloc serve said '%s' %s" % (line.strip(), self.proc.stderr.read()))
        self.base = "http://127.0.0.1:%s" % m.group(1)

    def get(self, path, method="GET"):
        """(status, headers, body bytes) of a request for path (sent as is)."""
        req = urllib.request.Request(self.base + path, method=method,
                                     data=b"" if method == "POST" else None)
        try:
            with urllib.request.urlopen(req, timeout=WAIT_S) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def end(self):
        self.proc.terminate()
        self.proc.wait()


def series(text, name, pid):
    """{labels text: value} of metric name's samples of process pid."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'^%s\{(pid="%d"[^}]*)\} (\S+)$' % (name, pid), line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


# ---- the cases ---------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, tmp, scrape):
        self.port = free_port()
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: pagealloc\n    static_configs:\n"
                    "      - targets: ['%s']\n" % scrape)
        self.log = open(os.path.join(tmp, "prometheus.log"), "w")
        self.proc = subprocess.Popen([
            "prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(tmp, "db"),
            "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.base = "http://127.0.0.1:%d" % self.port
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                with urllib.request.urlopen(self.base + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                sys.exit("prometheus did not get ready: %s" % open(self.log.name).read()[-2000:])
            time.sleep(0.2)

    def query(self, expr):
        """[(labels, value)] of an instant query."""
        url = self.base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            data = json.load(r)
        if data.get("status") != "success":
            sys.exit("query %s: %s" % (expr, data))
        return [(s["metric"], float(s["value"][1])) for s in data["data"]["result"]]

    def wait(self, expr, want, what):
        """Poll expr until its result is want ([(labels, value)] compared on
        the values and the pid and comm labels); a failure names the last."""
        deadline, got = time.monotonic() + WAIT_S, None
        while time.monotonic() < deadline:
            got = [({k: m.get(k) for k in ("pid", "comm")}, v) for m, v in self.query(expr)]
            if got == want:
                return True
            time.sleep(0.25)
        return check(False, "%s: %s is %s after %d s, want %s" % (what, expr, got, WAIT_S, want))

    def end(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


def case_prometheus(tmp):
    need("prometheus")
    t = Target("prof=off")
    serve = Serve()
    prom = Prometheus(tmp, serve.base[len("http://"):])
    try:
        expr = 'pagealloc_heap_alloc_bytes{pid="%d"}' % t.pid
        who = {"pid": str(t.pid), "comm": "live_target"}
        before = stat_json(t.pid)["heap_alloc"]
        prom.wait(expr, [(who, before)], "ready 0")
        t.step("ready 1")
        grown = stat_json(t.pid)["heap_alloc"]
        check(grown - before == NLARGE * LARGE + NSMALL * SMALL,
              "stat --json: heap_alloc grew by %d" % (grown - before))
        prom.wait(expr, [(who, grown)], "ready 1")
        t.step("ready 2")
        freed = stat_json(t.pid)["heap_alloc"]
        check(grown - freed == NFREE * LARGE, "stat --json: heap_alloc fell by %d" %
              (grown - freed))
        prom.wait(expr, [(who, freed)], "ready 2 (%d bytes freed)" % (NFREE * LARGE))
        path = [p for p in live_files(t.pid) if os.path.exists(p)]
        check(len(path) == 1, "live files of %d: %s" % (t.pid, path))
        t.end()  # SIGKILL: the file stays behind, stale
        prom.wait(expr, [], "after SIGKILL")
        # Gone because the exporter no longer reports it, not because a
        # scrape failed (that too makes every series stale for a moment).
        prom.wait('up{job="pagealloc"}', [({"pid": None, "comm": None}, 1)], "up after SIGKILL")
        check(prom.query(expr) == [], "%s is back after SIGKILL" % expr)
        _, _, body = serve.get("/metrics")
        check(series(body.decode(), "pagealloc_heap_alloc_bytes", t.pid) == {},
              "pid %d is still in the exporter's /metrics after SIGKILL" % t.pid)
        check(not any(os.path.exists(p) for p in path), "the stale file %s is still there" % path)
        print("ok: prometheus read heap_alloc %d, %d, %d of pid %d, then none" %
              (before, grown, freed, t.pid))
    finally:
        prom.end()
        serve.end()
        t.end()


def live_files(pid):
    uid = os.geteuid()
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return ([os.path.join(xdg, "pagealloc", str(pid))] if xdg else []) + [
        "/run/user/%d/pagealloc/%d" % (uid, pid), "/dev/shm/pagealloc-%d/%d" % (uid, pid)]


def renamed(tmp):
    """A copy of live_target under a name no other process has (its comm)."""
    exe = os.path.join(tmp, "lt%d" % os.getpid())
    shutil.copy(target, exe)
    return exe


def case_pprof(tmp):
    need("go")
    exe = renamed(tmp)
    t = Target("prof_sample=64K", exe)
    serve = Serve("--profile-interval", "60")
    try:
        t.step("ready 1")
        url = "%s/debug/pprof/heap?pid=%d" % (serve.base, t.pid)
        env = dict(os.environ, PPROF_TMPDIR=tmp, HOME=tmp)
        r = subprocess.run(["go", "tool", "pprof", "-raw", url], capture_output=True,
                           text=True, env=env)
        if not check(r.returncode == 0, "go tool pprof -raw %s: %s" % (url, r.stderr.strip())):
            return
        raw = r.stdout
        check("\nPeriod: 65536\n" in raw, "no Period 65536: %s" % raw[:200])
        check("\nalloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"
              in raw, "pprof's sample types missing: %s" % raw[:400])
        # Mappings: "N: start/limit/offset FILE ..."; locations "ID: ADDR M=N".
        ours = {m for m, f in re.findall(r"^(\d+): 0x\S+ (\S+)", raw, re.M) if f == exe}
        loc_map = dict(re.findall(r"^ +(\d+): 0x[0-9a-f]+ M=(\d+)", raw, re.M))
        inuse = 0
        for line in raw.split("\nLocations")[0].splitlines():
            m = re.match(r"^ +\d+ +\d+ +\d+ +(\d+): ([\d ]+)$", line)
            if m and any(loc_map.get(i) in ours for i in m.group(2).split()):
                inuse += int(m.group(1))
        check(bool(ours), "no mapping of %s in the profile" % exe)
        check(inuse >= 1 << 20, "%d bytes live at live_target's sites, want at least 1 MiB" %
              inuse)
        status, headers, body = serve.get("/debug/pprof/heap?pid=%d" % t.pid)
        check(status == 429 and headers.get("Retry-After", "").isdigit() and
              body.decode().startswith("a profile of process %d was taken " % t.pid) and
              body.count(b"\n") == 1, "second profile within 60 s: %d %s %r" %
              (status, headers.get("Retry-After"), body))
        again = Serve("--profile-interval", "0")
        try:
            for q in ("heap?pid=%d" % t.pid, "heap?comm=" + os.path.basename(exe),
                      "allocs?pid=%d" % t.pid):
                status, headers, body = again.get("/debug/pprof/" + q)
                check(status == 200 and len(gzip.decompress(body)) > 0 and
                      headers.get("Content-Disposition") ==
                      'attachment; filename="heap-%d.pb.gz"' % t.pid,
                      "profile %s with --profile-interval 0: %d" % (q, status))
        finally:
            again.end()
        print("ok: go tool pprof read %d bytes live at live_target's sites" % inuse)
    finally:
        serve.end()
        t.end()


def case_exposition(tmp):
    need("promtool")
    t = Target("prof_sample=64K,numa_fake=2")
    serve = Serve()
    try:
        t.step("ready 1")
        status, _, body = serve.get("/metrics")
        text = body.decode()
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True)
        check((r.returncode, r.stdout, r.stderr) == (0, "", ""),
              "promtool check metrics: status %d: %s%s" % (r.returncode, r.stdout, r.stderr))
        want = stat_json(t.pid)["heap_alloc"]
        got = series(text, "pagealloc_heap_alloc_bytes", t.pid)
        check(got == {'pid="%d",comm="live_target"' % t.pid: want},
              "heap_alloc series %s, want %d" % (got, want))
        nodes = series(text, "pagealloc_node_heap_mapped_bytes", t.pid)
        check(sorted(nodes) == ['pid="%d",comm="live_target",node="%d"' % (t.pid, n)
                                for n in (0, 1)], "node series: %s" % nodes)
        # The 64-byte class's row is the story's (`pagealloc stat PID`):
        # size, spans, objects, cached, bytes, live / span, partial spans,
        # free in them; its objects are the 1000 blocks but those the
        # profiler sampled (they live on pages of their own).
        story = subprocess.run([pagealloc, "stat", str(t.pid)], capture_output=True,
                               text=True).stdout
        row = [line.split() for line in story.splitlines()
               if re.match(r"^ +64 +\d+ +\d+ +\d+ +\d+ ", line)]
        key = 'pid="%d",comm="live_target",size="64"' % t.pid
        got = [series(text, "pagealloc_size_class_" + name, t.pid).get(key) for name in (
            "spans", "objects", "cached_objects", "bytes", "partial_spans",
            "partial_free_bytes")]
        check(len(row) == 1 and got == [float(v) for v in row[0][1:5] + row[0][6:8]],
              "the 64-byte class: %s, the story's %s" % (got, row))
        sampled = series(text, "pagealloc_profile_live_samples", t.pid).get(
            'pid="%d",comm="live_target"' % t.pid, 0)
        check(got[1] is not None and NSMALL - sampled <= got[1] <= NSMALL and
              got[3] == got[1] * SMALL, "the 64-byte class: %s objects, %s bytes; %s sampled" %
              (got[1], got[3], sampled))
        for name in ("pagealloc_profile_live_estimate_bytes", "pagealloc_profile_samples_total"):
            check(len(series(text, name, t.pid)) == 1, "no %s" % name)
        status, _, body = serve.get("/metrics?pid=%d" % t.pid)
        pids = set(re.findall(r'\{pid="(\d+)"', body.decode()))
        check(status == 200 and pids == {str(t.pid)}, "/metrics?pid=%d: %d, pids %s" %
              (t.pid, status, pids))
        print("ok: promtool check metrics passes; heap_alloc %d" % want)
    finally:
        serve.end()
        t.end()


def refused(serve, path, code, line, method="GET"):
    refusals.append(path)
    status, headers, body = serve.get(path, method)
    text = body.decode(errors="replace")
    check(status == code and text.startswith(line) and text.count("\n") == 1 and
          text.endswith("\n") and headers.get("Content-Type", "").startswith("text/plain"),
          "%s %s: %d %r, want %d '%s...'" % (method, path, status, text, code, line))
    status, _, _ = serve.get("/metrics")
    check(status == 200 and serve.proc.poll() is None,
          "after %s %s: /metrics answers %d" % (method, path, status))


def case_errors(tmp):
    t = Target("prof=off")
    exe = renamed(tmp)
    twin, pair = os.path.basename(exe), [Target("prof=off", exe) for _ in range(2)]
    twins = [x.pid for x in pair]
    serve = Serve()
    try:
        me = os.getpid()
        gone = subprocess.Popen(["true"])
        gone.wait()
        for path, code, line in (
                ("/nope", 404, "no such path '/nope'"),
                ("/../../etc/passwd", 404, "no such path '/../../etc/passwd'"),
                ("/metrics?pid=abc", 400, "pid 'abc' is not a process id"),
                ("/debug/pprof/heap?pid=abc", 400, "pid 'abc' is not a process id"),
                ("/debug/pprof/heap?pid=../../etc/passwd", 400,
                 "pid '../../etc/passwd' is not a process id"),
                ("/debug/pprof/heap?pid=%2e%2e%2f", 400, "pid '../' is not a process id"),
                ("/debug/pprof/heap?pid=%d" % me, 404,
                 "process %d does not run on libpagealloc" % me),
                ("/metrics?pid=%d" % me, 404, "process %d does not run on libpagealloc" % me),
                ("/debug/pprof/heap?pid=%d" % gone.pid, 404, "no process %d" % gone.pid),
                ("/debug/pprof/heap?file=../x", 400, "unknown parameter 'file'"),
                ("/debug/pprof/heap?pid=%d&pid=%d" % (t.pid, t.pid), 400,
                 "parameter pid given twice"),
                ("/debug/pprof/heap", 400, "want ?pid=N or ?comm=NAME"),
                ("/debug/pprof/heap?comm=%s" % ("x" * 16), 400,
                 "comm '%s' is not a process name" % ("x" * 16)),
                ("/debug/pprof/heap?comm=%2e%2e%2f%2e%2e", 404, "no process named '../..'"),
                ("/metrics?pid=%d&comm=live_target" % t.pid, 400, "pid or comm, not both"),
                ("/debug/pprof/heap?comm=%s" % twin, 409,
                 "2 processes are named '%s' (pids %d %d)" % (twin, *sorted(twins))),
                ("/?x=../", 400, "unknown parameter 'x'")):
            refused(serve, path, code, line)
        refused(serve, "/metrics", 405, "method 'POST' not allowed", "POST")
        other_user(serve, t.pid)
        status, _, body = serve.get("/metrics?pid=%d" % t.pid)
        check(status == 200 and series(body.decode(), "pagealloc_heap_alloc_bytes", t.pid),
              "the target's own /metrics?pid: %d" % status)
        print("ok: %d refusals, each one line; the server kept serving" % len(refusals))
    finally:
        serve.end()
        t.end()
        for x in pair:
            x.end()


def other_user(serve, target_pid):
    """Another user's process is refused (403) and absent from /metrics. As
    root (who reads every process) a second server runs as nobody and is
    asked for the target, root's; otherwise this user's server is asked for
    pid 1."""
    if os.geteuid() != 0:
        print("note: not root: another user's process is pid 1")
        other, who = serve, 1
    else:
        nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        probe = subprocess.run(nobody + [pagealloc, "version"], capture_output=True,
                               text=True) if shutil.which("setpriv") else None
        if probe is None or probe.returncode != 0:
            print("note: skipped another user's process: user nobody cannot run %s (%s)" % (
                pagealloc, "no setpriv" if probe is None else
                (probe.stderr.strip().splitlines() or ["status %d" % probe.returncode])[-1]))
            return
        other, who = Serve(user_cmd=nobody), target_pid
    try:
        for path in ("/debug/pprof/heap?pid=%d", "/metrics?pid=%d"):
            refused(other, path % who, 403, "process %d belongs to another user" % who)
        _, _, body = other.get("/metrics")
        check(series(body.decode(), "pagealloc_heap_alloc_bytes", who) == {},
              "another user's process %d is in /metrics" % who)
    finally:
        if other is not serve:
            other.end()


CASES = {"prometheus": case_prometheus, "pprof": case_pprof, "exposition": case_exposition,
         "errors": case_errors}
tmp = tempfile.mkdtemp(prefix="serve_check.")
try:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    CASES[case](tmp)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
if failures:
    print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
