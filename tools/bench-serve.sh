#!/usr/bin/env bash
# tools/bench-serve.sh — what `pagealloc serve` (tools/pagealloc_serve.py)
# takes to answer a scrape, and what being scraped costs a process:
# docs/benchmarks.md §15.
#
#   tools/bench-serve.sh [--procs N] [--rounds R] [--build B] [--no-callgrind]
#
# On the build B (default build/, built first):
#  1. scrape: N (default 50) live_targets on the preload, each holding 8
#     blocks of 256 KiB and 1000 of 64 bytes; `pagealloc serve` on a
#     loopback port; R rounds (default 5) of 20 GETs of /metrics, one after
#     another: each answer's time as the client sees it (connect to last
#     byte) and the exporter's own pagealloc_scrape_duration_seconds; the
#     median and the slowest of all; the exporter's CPU time per scrape.
#  2. cost to the scraped: wl-small preloaded under callgrind
#     (--separate-threads=yes), once unscraped and once scraped by the
#     server every 0.1 s: the instructions of the program's own thread and
#     of the scavenger thread (which answers the live file's requests), and
#     the refreshes it made (live_refresh's calls: the file's first figures,
#     then one per scrape it answered; under valgrind, which runs one thread
#     at a time, fewer than the scrapes: an unanswered scrape reports the
#     last figures) with their instructions each.
set -euo pipefail
cd "$(dirname "$0")/.."
procs=50
rounds=5
build=build
callgrind=1
while [ $# -gt 0 ]; do
	case $1 in
	--procs) procs=$2 && shift ;;
	--rounds) rounds=$2 && shift ;;
	--build) build=$2 && shift ;;
	--no-callgrind) callgrind=0 ;;
	*) echo "usage: $0 [--procs N] [--rounds R] [--build B] [--no-callgrind]" >&2 && exit 2 ;;
	esac
	shift
done
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j 2 >/dev/null
b=$(cd "$build" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

/usr/bin/python3 -S - "$b" "$procs" "$rounds" "$callgrind" "$tmp" <<'EOF'
import os, re, statistics, subprocess, sys, time, urllib.request

b, procs, rounds, callgrind, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    sys.argv[4] == "1", sys.argv[5]
pre = os.path.join(b, "libpagealloc-preload.so")


def serve():
    s = subprocess.Popen([os.path.join(b, "pagealloc"), "serve", "--listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, text=True)
    port = re.search(r"127\.0\.0\.1:(\d+)/", s.stdout.readline()).group(1)
    return s, "http://127.0.0.1:%s/metrics" % port


def get(url):
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return time.perf_counter() - t0, text


def cpu_s(pid):
    """User + system CPU seconds of process pid (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def figure(text, name, pid=None):
    sel = r'\{pid="%d"[^}]*\}' % pid if pid else ""
    m = re.search(r"^%s%s (\S+)$" % (name, sel), text, re.M)
    return float(m.group(1)) if m else None


print("== 1. a scrape of %d processes (%d rounds of 20 GETs of /metrics)" % (procs, rounds))
env = dict(os.environ, LD_PRELOAD=pre, PAGEALLOC_CONF="prof=off")
targets = []
for _ in range(procs):
    t = subprocess.Popen([os.path.join(b, "live_target"), "8", "262144", "1000", "64"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    assert t.stdout.readline().strip() == "ready 0"
    t.stdin.write("go\n")
    t.stdin.flush()
    assert t.stdout.readline().strip() == "ready 1"
    targets.append(t)
s, url = serve()
try:
    deadline = time.monotonic() + 10
    while figure(get(url)[1], "pagealloc_processes") < procs and time.monotonic() < deadline:
        time.sleep(0.1)  # each file comes with its scavenger's start
    client, server = [], []
    cpu0 = cpu_s(s.pid)
    for _ in range(rounds):
        for _ in range(20):
            dt, text = get(url)
            n = figure(text, "pagealloc_processes")
            if n < procs:
                sys.exit("a scrape saw %d processes, want at least %d" % (n, procs))
            client.append(dt)
            server.append(figure(text, "pagealloc_scrape_duration_seconds"))
    cpu = (cpu_s(s.pid) - cpu0) / len(client)
    print("  processes in the answer: %d (this user's on libpagealloc; others may run)" % n)
    print("  answer as the client sees it: median %.1f ms, slowest %.1f ms (%d GETs)" %
          (statistics.median(client) * 1e3, max(client) * 1e3, len(client)))
    print("  the exporter's reading: median %.1f ms, slowest %.1f ms" %
          (statistics.median(server) * 1e3, max(server) * 1e3))
    print("  the exporter's CPU time: %.1f ms a scrape (user + system, all its threads)" %
          (cpu * 1e3))
    print("  the answer: %d bytes, %d lines" % (len(text), text.count("\n")))
finally:
    s.terminate()
    for t in targets:
        t.kill()
        t.wait()
    s.wait()

if not callgrind:
    sys.exit(0)
print("== 2. instructions of wl-small under callgrind, unscraped and scraped every 0.1 s")


def threads(prefix):
    """{"program": instructions of the busiest thread (the one that ran
    main), "scavenger": of the thread that ran scav_main, "other": the rest
    (the loader's), "refresh": (instructions, calls) of live_refresh}."""
    out = {"program": 0, "scavenger": 0, "other": 0, "refresh": (0, 0)}
    files = []
    for f in sorted(os.listdir(tmp)):
        if f.startswith(prefix + "-"):
            text = open(os.path.join(tmp, f)).read()
            files.append((int(re.search(r"^summary: (\d+)", text, re.M).group(1)), text, f))
    busiest = max(files)[2] if files else None
    for total, text, f in files:
        kind = "scavenger" if re.search(r"^fn=scav_main$", text, re.M) else \
            "program" if f == busiest else "other"
        out[kind] += total
        if kind == "scavenger":
            out["refresh"] = inclusive(os.path.join(tmp, f), text, "live_refresh")
    return out


def inclusive(path, text, fn):
    """(inclusive instructions, calls) of function fn in a callgrind file."""
    calls = sum(int(c) for c in re.findall(r"^cfn=%s\ncalls=(\d+) " % fn, text, re.M))
    r = subprocess.run(["callgrind_annotate", "--inclusive=yes", path], capture_output=True,
                       text=True).stdout
    m = re.search(r"^\s*([\d,]+) .*:%s " % fn, r, re.M)
    return (int(m.group(1).replace(",", "")) if m else 0), calls


for scraped in (False, True):
    prefix = "cg-%s" % ("scraped" if scraped else "alone")
    # Names in full on every line: with compressed names, a thread's file
    # may refer to a name another thread's file defined.
    p = subprocess.Popen(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                          "--compress-strings=no",
                          "--callgrind-out-file=%s/%s" % (tmp, prefix),
                          os.path.join(b, "wl-small")], env=dict(os.environ, LD_PRELOAD=pre),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if scraped:
        s, url = serve()
        while p.poll() is None:
            get(url)
            time.sleep(0.1)
        s.terminate()
        s.wait()
    p.wait()
    t = threads(prefix)
    ins, calls = t["refresh"]
    print("  %-9s program's thread %s, scavenger thread %s, loader %s; refreshes %d%s" % (
        "scraped" if scraped else "unscraped", format(t["program"], ","),
        format(t["scavenger"], ","), format(t["other"], ","), calls,
        " of %s instructions each (live_refresh, inclusive)" % format(ins // calls, ",")
        if calls else ""))
EOF
