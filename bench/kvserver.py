#!/usr/bin/env python3
"""kvserver.py: a Redis-family server's memory under two key-value patterns,
servers or allocators alternating inside one run (Python 3 standard library).

  bench/kvserver.py defrag NAME=SERVER [NAME=SERVER ...] [--rounds 3]
        [--keys 1000000] [--value 256] [--watch-s 30] [--out DIR]

    Each SERVER (a valkey-server or redis-server binary: Valkey built with its
    bundled jemalloc, Valkey built on libpagealloc by tools/valkey/build-valkey.sh;
    "VAR=VALUE ... PATH" sets the server's environment, e.g. PAGEALLOC_CONF)
    runs with activedefrag yes, active-defrag-ignore-bytes 1mb and
    active-defrag-threshold-lower 5. The script SETs KEYS keys of VALUE-byte
    values, DELetes 9 keys in 10 (every key whose number does not end in 0),
    then watches RSS, used_memory, active_defrag_running/hits/misses and the server's CPU
    time every 0.25 s for WATCH_S seconds. Per run: RSS and used_memory of the
    empty server, after the SETs, after the DELs and at the end; seconds until
    RSS came within 5% of its final value (settle_s); the server's CPU seconds
    from the last DEL to the end (cpu_s, active defrag's work and the cron's);
    data_ratio = (RSS - empty RSS) / (used_memory - empty used_memory) at the
    end. Then every surviving key is read back and compared.

  bench/kvserver.py turnover SERVER NAME=PRELOAD [NAME=PRELOAD ...] [--rounds 3]
        [--keys 1000000] [--turns 300000] [--pause-s 2] [--out DIR]

    One SERVER binary, unchanged, on each allocator: PRELOAD is a malloc
    library for LD_PRELOAD, "-" for none (the server's own: Debian's
    redis-server links jemalloc), or "glibc" (a small shim, compiled here,
    that sends malloc and its family to glibc's __libc_* functions ahead of a
    linked jemalloc). The script SETs KEYS keys with values of 64..400 bytes
    (uniform), DELetes 9 in 10 picked at random, then turns the survivors
    over TURNS times at a constant key count (DEL a random live key, SET a new
    one with a fresh 64..400-byte value), and pauses PAUSE_S. Figures: RSS /
    used_memory after the DELs (delete_ratio), after the turnover
    (turnover_ratio) and after the pause (settled_ratio).

  bench/kvserver.py gets SERVER NAME=PRELOAD [NAME=PRELOAD ...] [--rounds 3]
        [--keys 16000000] [--value 100] [--settle-s 10] [--gets 4000000]
        [--clients 32] [--pipeline 16]

    Throughput with a large dataset: one SERVER binary on each allocator
    (PRELOAD as for turnover). A Lua script SETs KEYS keys "key:%012d" with
    VALUE-byte values, in chunks inside the server (nothing crosses the
    socket but the script); the script pauses SETTLE_S seconds (time for a
    scavenger to back the heap with huge pages); then redis-benchmark GETs
    GETS keys picked at random among all of them (-r KEYS: every GET hits).
    Figures: RSS and the kernel's AnonHugePages for the server before the
    GETs, redis-benchmark's requests per second, and the server's CPU
    microseconds per GET (user + system, from /proc: the figure the other
    programs on a shared machine move least).

Rounds alternate: in round r the servers (or allocators) run in an order
rotated by r. Each run's samples go to DIR (default bench-results/kvserver/)
as NAME-ROUND.txt; the medians per NAME are printed as a table and written
to DIR/summary.txt. The machine's load moves times (settle_s, cpu_s), not
memory.
"""
import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import time

PAGE = os.sysconf("SC_PAGESIZE")
TICK = os.sysconf("SC_CLK_TCK")
MIB = 1024.0 * 1024.0
BATCH = 2000  # commands per pipelined batch


# ---- a minimal RESP client ------------------------------------------------------

class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"-":
            raise RuntimeError("server error: " + rest.decode())
        if kind in (b"+", b":"):
            return rest
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            return [self._reply() for _ in range(int(rest))]
        raise RuntimeError("unexpected reply %r" % line[:40])

    def pipeline(self, commands):
        """Send every command, then read every reply; returns the replies."""
        out = []
        for c in commands:
            out.append(b"*%d\r\n" % len(c))
            for a in c:
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return [self._reply() for _ in commands]

    def call(self, *args):
        return self.pipeline([[a if isinstance(a, bytes) else str(a).encode() for a in args]])[0]

    def info(self, section="memory"):
        text = self.call("INFO", section).decode()
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


    def pipeline_simple(self, commands):
        """pipeline() for commands whose replies are one line each (SET, DEL):
        counts the replies, fails on an error or any other reply."""
        out = []
        for c in commands:
            out.append(b"*%d\r\n" % len(c))
            for a in c:
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        while self.buf.count(b"\r\n") < len(commands):
            self._fill()
        lines = self.buf.split(b"\r\n", len(commands))
        self.buf = lines.pop()
        bad = [x for x in lines if x[:1] not in (b"+", b":")]
        if bad:
            raise RuntimeError("server replied %r" % bad[0][:80])


def run_batched(client, commands):
    batch = []
    for c in commands:
        batch.append(c)
        if len(batch) == BATCH:
            client.pipeline_simple(batch)
            batch = []
    if batch:
        client.pipeline_simple(batch)


# ---- the server process -------------------------------------------------------------

class Server:
    def __init__(self, binary, port, log, extra=(), env=None):
        self.port = port
        self.proc = subprocess.Popen(
            [binary, "--port", str(port), "--save", "", "--appendonly", "no",
             "--bind", "127.0.0.1", "--protected-mode", "no"] + list(extra),
            stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 20
        while True:
            try:
                self.client = Client(port)
                self.client.call("PING")
                break
            except (ConnectionError, OSError):
                if self.proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("%s did not start (see %s)" % (binary, log.name))
                time.sleep(0.05)

    def rss(self):
        with open("/proc/%d/statm" % self.proc.pid) as f:
            return int(f.read().split()[1]) * PAGE

    def cpu_s(self):
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime

    def used(self):
        return int(self.client.info()["used_memory"])

    def stop(self):
        try:
            self.client.call("SHUTDOWN", "NOSAVE")
        except (ConnectionError, OSError, RuntimeError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def key(i):
    return b"key:%08d" % i


# ---- defrag -------------------------------------------------------------------------------

DEFRAG_ARGS = ["--activedefrag", "yes", "--active-defrag-ignore-bytes", "1mb",
               "--active-defrag-threshold-lower", "5"]


def defrag_run(name, server, rnd, a, out):
    # SERVER may start with VAR=VALUE words: the server's environment.
    words = server.split()
    env = dict(os.environ)
    env.update(w.split("=", 1) for w in words[:-1])
    log = open(os.path.join(out, "%s-%d.log" % (name, rnd)), "w")
    s = Server(words[-1], free_port(), log, DEFRAG_ARGS, env=env)
    try:
        time.sleep(1)
        r = {"empty_rss": s.rss(), "empty_used": s.used()}
        value = b"v" * a.value
        run_batched(s.client, ([b"SET", key(i), value] for i in range(a.keys)))
        r["full_rss"], r["full_used"] = s.rss(), s.used()
        run_batched(s.client, ([b"DEL", key(i)] for i in range(a.keys) if i % 10 != 0))
        t0, cpu0 = time.time(), s.cpu_s()
        samples = []
        while True:
            t = time.time() - t0
            st = s.client.info("all")
            samples.append((t, s.rss(), int(st["used_memory"]), int(st["active_defrag_running"]),
                            int(st.get("active_defrag_hits", 0)), int(st.get("active_defrag_misses", 0)),
                            s.cpu_s() - cpu0))
            if t >= a.watch_s:
                break
            time.sleep(0.25)
        if s.client.call("DBSIZE") != str(a.keys // 10).encode():
            raise RuntimeError("%s: DBSIZE is not %d" % (name, a.keys // 10))
        # Every survivor's value intact after the moves.
        for lo in range(0, a.keys, 10 * BATCH):
            got = s.client.pipeline([[b"GET", key(i)] for i in range(lo, min(a.keys, lo + 10 * BATCH), 10)])
            if any(v != value for v in got):
                raise RuntimeError("%s: a value changed after active defrag" % name)
        # The allocator's own account at the end (libpagealloc: its heap story).
        with open(os.path.join(out, "%s-%d.malloc-stats.txt" % (name, rnd)), "wb") as f:
            f.write(s.client.call("MEMORY", "MALLOC-STATS"))
    finally:
        s.stop()
        log.close()
    with open(os.path.join(out, "%s-%d.txt" % (name, rnd)), "w") as f:
        f.write("# t_s rss_bytes used_memory defrag_running defrag_hits defrag_misses cpu_s\n")
        for x in samples:
            f.write("%.2f %d %d %d %d %d %.2f\n" % x)
    end = samples[-1]
    r["delete_rss"], r["end_rss"], r["end_used"], r["cpu_s"] = samples[0][1], end[1], end[2], end[6]
    r["hits"], r["misses"] = end[4], end[5]
    r["settle_s"] = next(x[0] for x in samples if x[1] <= end[1] * 1.05)
    r["rss_at_15s"] = next((x[1] for x in samples if x[0] >= 15), end[1])
    r["data_ratio"] = (end[1] - r["empty_rss"]) / max(1, end[2] - r["empty_used"])
    return r


DEFRAG_COLUMNS = [("empty_rss", "MiB"), ("empty_used", "MiB"), ("full_rss", "MiB"),
                  ("delete_rss", "MiB"), ("rss_at_15s", "MiB"), ("end_rss", "MiB"),
                  ("end_used", "MiB"), ("data_ratio", "x"), ("settle_s", "s"), ("cpu_s", "s"),
                  ("hits", ""), ("misses", "")]


# ---- turnover ---------------------------------------------------------------------------

GLIBC_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
extern void *__libc_malloc(size_t), *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t), *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t), *__libc_pvalloc(size_t);
extern void __libc_free(void *);
void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
void *calloc(size_t n, size_t s) { return __libc_calloc(n, s); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { return __libc_memalign(a, n); }
void *valloc(size_t n) { return __libc_valloc(n); }
void *pvalloc(size_t n) { return __libc_pvalloc(n); }
int posix_memalign(void **out, size_t a, size_t n)
{
	void *p = __libc_memalign(a, n);
	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}
size_t malloc_usable_size(void *p)
{
	static size_t (*f)(void *);
	if (f == NULL)
		f = (size_t(*)(void *))dlsym(dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD), "malloc_usable_size");
	return f(p);
}
"""


def glibc_shim(out):
    """A preload library that puts glibc's malloc ahead of a linked jemalloc."""
    src, so = os.path.join(out, "glibc_shim.c"), os.path.join(out, "glibc_shim.so")
    with open(src, "w") as f:
        f.write(GLIBC_SHIM)
    subprocess.check_call(["cc", "-O2", "-shared", "-fPIC", "-o", so, src, "-ldl"])
    return so


def preloaded_server(name, binary, preload, rnd, out):
    """SERVER started with PRELOAD (None: none) in its environment, and its
    log (NAME-ROUND.log in out), which the caller closes."""
    env = dict(os.environ)
    if preload:
        env["LD_PRELOAD"] = preload
    log = open(os.path.join(out, "%s-%d.log" % (name, rnd)), "w")
    return Server(binary, free_port(), log, env=env), log


def turnover_run(name, binary, preload, rnd, a, out):
    s, log = preloaded_server(name, binary, preload, rnd, out)
    rng = random.Random(a.seed)
    # One value per size, shared: what the server copies is what counts.
    values = [b"x" * n for n in range(401)]
    r = {}
    try:
        run_batched(s.client, ([b"SET", key(i), values[rng.randint(64, 400)]]
                               for i in range(a.keys)))
        live = list(range(a.keys))
        rng.shuffle(live)
        doomed, live = live[a.keys // 10:], live[:a.keys // 10]
        run_batched(s.client, ([b"DEL", key(i)] for i in doomed))
        r["delete_rss"], r["delete_used"] = s.rss(), s.used()
        nxt = a.keys

        def turns():
            nonlocal nxt
            for _ in range(a.turns):
                j = rng.randrange(len(live))
                yield [b"DEL", key(live[j])]
                live[j] = nxt
                nxt += 1
                yield [b"SET", key(live[j]), values[rng.randint(64, 400)]]
        run_batched(s.client, turns())
        r["turnover_rss"], r["turnover_used"] = s.rss(), s.used()
        time.sleep(a.pause_s)
        r["settled_rss"], r["settled_used"] = s.rss(), s.used()
        if s.client.call("DBSIZE") != str(a.keys // 10).encode():
            raise RuntimeError("%s: DBSIZE is not %d" % (name, a.keys // 10))
    finally:
        s.stop()
        log.close()
    for stage in ("delete", "turnover", "settled"):
        r[stage + "_ratio"] = r[stage + "_rss"] / r[stage + "_used"]
    return r


TURNOVER_COLUMNS = [("delete_rss", "MiB"), ("delete_used", "MiB"), ("delete_ratio", "x"),
                    ("turnover_rss", "MiB"), ("turnover_used", "MiB"), ("turnover_ratio", "x"),
                    ("settled_rss", "MiB"), ("settled_ratio", "x")]


# ---- gets ----------------------------------------------------------------------------------

FILL_CHUNK = 200000  # keys per script: each one stays well inside lua-time-limit
FILL_SCRIPT = b"""local v = string.rep('x', tonumber(ARGV[3]))
for i = tonumber(ARGV[1]), tonumber(ARGV[2]) - 1 do
  redis.call('SET', string.format('key:%012d', i), v)
end
return 1"""


def anon_huge(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1]) * 1024
    return 0


def gets_run(name, binary, preload, rnd, a, out):
    s, log = preloaded_server(name, binary, preload, rnd, out)
    r = {}
    try:
        t0 = time.time()
        for lo in range(0, a.keys, FILL_CHUNK):
            hi = min(lo + FILL_CHUNK, a.keys)
            if s.client.call("EVAL", FILL_SCRIPT, 0, lo, hi, a.value) != b"1":
                raise RuntimeError("%s: the fill script failed" % name)
        r["fill_s"] = time.time() - t0
        if s.client.call("DBSIZE") != str(a.keys).encode():
            raise RuntimeError("%s: DBSIZE is not %d" % (name, a.keys))
        time.sleep(a.settle_s)
        r["rss"], r["used"], r["huge"] = s.rss(), s.used(), anon_huge(s.proc.pid)
        r["huge_pct"] = 100.0 * r["huge"] / r["rss"]
        cpu0 = s.cpu_s()
        bench = subprocess.run(
            ["redis-benchmark", "-p", str(s.port), "-t", "get", "-r", str(a.keys),
             "-n", str(a.gets), "-c", str(a.clients), "-P", str(a.pipeline), "-q", "--csv"],
            check=True, capture_output=True, text=True).stdout
        r["cpu_us_per_get"] = (s.cpu_s() - cpu0) * 1e6 / a.gets
        rows = [l for l in bench.splitlines() if l.startswith('"GET"')]
        if not rows:
            raise RuntimeError("%s: redis-benchmark printed no GET line: %r" % (name, bench))
        r["gets_per_s"] = float(rows[0].split(",")[1].strip('"'))
        v = s.client.call("GET", "key:%012d" % (a.keys - 1))
        if v != b"x" * a.value:
            raise RuntimeError("%s: the last key reads back wrong" % name)
    finally:
        s.stop()
        log.close()
    return r


GETS_COLUMNS = [("fill_s", "s"), ("rss", "MiB"), ("used", "MiB"), ("huge", "MiB"),
                ("huge_pct", "%"), ("gets_per_s", ""), ("cpu_us_per_get", "us")]


# ---- the run -------------------------------------------------------------------------------

def named(pairs):
    out = []
    for p in pairs:
        if "=" not in p:
            sys.exit("kvserver: %r is not NAME=PATH" % p)
        out.append(tuple(p.split("=", 1)))
    return out


def table(results, names, columns, rounds):
    head = "| | " + " | ".join("%s (%s)" % (c, u) if u else c for c, u in columns) + " |"
    lines = [head, "|---" * (len(columns) + 1) + "|"]
    for n in names:
        cells = []
        for c, u in columns:
            m = statistics.median(r[c] for r in results[n])
            cells.append("%.2f" % (m / MIB) if u == "MiB" else
                         "%.0f" % m if u == "" else "%.2f" % m)
        lines.append("| %s | %s |" % (n, " | ".join(cells)))
    lines.append("")
    lines.append("Medians of %d round(s), alternating." % rounds)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    d = sub.add_parser("defrag")
    d.add_argument("servers", nargs="+", metavar="NAME=SERVER")
    d.add_argument("--value", type=int, default=256)
    d.add_argument("--watch-s", type=float, default=30)
    t = sub.add_parser("turnover")
    t.add_argument("server")
    t.add_argument("preloads", nargs="+", metavar="NAME=PRELOAD")
    t.add_argument("--turns", type=int, default=300000)
    t.add_argument("--pause-s", type=float, default=2)
    t.add_argument("--seed", type=int, default=7)
    g = sub.add_parser("gets")
    g.add_argument("server")
    g.add_argument("preloads", nargs="+", metavar="NAME=PRELOAD")
    g.add_argument("--value", type=int, default=100)
    g.add_argument("--settle-s", type=float, default=10)
    g.add_argument("--gets", type=int, default=4000000)
    g.add_argument("--clients", type=int, default=32)
    g.add_argument("--pipeline", type=int, default=16)
    for p in (d, t, g):
        p.add_argument("--rounds", type=int, default=3)
        p.add_argument("--keys", type=int, default=16000000 if p is g else 1000000)
        p.add_argument("--out", default="bench-results/kvserver")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    if a.mode == "defrag":
        runs = named(a.servers)
        columns = DEFRAG_COLUMNS
    else:
        runs = []
        for n, p in named(a.preloads):
            runs.append((n, None if p == "-" else glibc_shim(a.out) if p == "glibc" else p))
        columns = TURNOVER_COLUMNS if a.mode == "turnover" else GETS_COLUMNS
    names = [n for n, _ in runs]
    results = {n: [] for n in names}
    for rnd in range(a.rounds):
        for k in range(len(runs)):
            n, x = runs[(k + rnd) % len(runs)]
            r = (defrag_run(n, x, rnd, a, a.out) if a.mode == "defrag" else
                 turnover_run(n, a.server, x, rnd, a, a.out) if a.mode == "turnover" else
                 gets_run(n, a.server, x, rnd, a, a.out))
            results[n].append(r)
            print("round %d %s: %s" % (rnd + 1, n, " ".join(
                "%s=%.2f" % (c, r[c] / MIB if u == "MiB" else r[c]) for c, u in columns)),
                flush=True)
    lines = ["kvserver.py " + " ".join(sys.argv[1:]), ""] + table(results, names, columns, a.rounds)
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
