#!/usr/bin/env python3
"""pagealloc_stat.py — the heap of a running process on libpagealloc.

    pagealloc_stat.py stat PID                   the story of its heap, now
    pagealloc_stat.py stat --json PID            its figures, one JSON object
    pagealloc_stat.py stat --watch SECONDS PID   one line per interval

The process publishes its heap in a live file (src/live.h has the layout
and the protocol): $XDG_RUNTIME_DIR/pagealloc/PID or
/dev/shm/pagealloc-UID/PID, mode 0600, kept current by its scavenger thread.
This reader maps the file, asks for a refresh (request, then a
process-shared FUTEX_WAKE on the file's wake word), waits at most 100 ms
for it (served), and copies the file under its sequence count.

Errors are one line on standard error and exit status 1: no such process;
a process of another user; a process that does not run on libpagealloc (no
live file: a program that never started the scavenger thread, such as a
short one, or one run with scavenger=off or live=off, has none); a stale
file (its process is gone, started after the file was made, or no longer
maps it) is removed, then reported as not running on libpagealloc.
Python 3 standard library only.
"""
import ctypes
import json
import mmap
import os
import re
import shutil
import struct
import sys
import time

ME = "pagealloc stat"
# struct pa_live_header (src/live.h): native order, no padding, 192 bytes.
HEADER = struct.Struct("=8sIIQQQQQQQIIIIQIIQQQQQQ40x")
FIELDS = ("magic version header_bytes file_bytes pid start_ticks seq update_ns request "
          "served nfigures figures_off text_off text_len story_ns wake pad "
          "profile_request profile_served profile_status "
          "map_request map_served map_status").split()
MAGIC = b"PALIVE\0\0"
VERSION = 2
FIGURE = struct.Struct("=24sQ")
WAIT_S = 0.1  # the writer's period (LIVE_PERIOD_NS): the longest a reader waits
READ_WAIT_S = 2  # the longest a read waits for a whole copy (Live.read)
SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "riscv64": 98, "ppc64le": 221, "s390x": 238}
FUTEX_WAKE = 1


def _offsets():
    """Byte offset of each header field."""
    offs, pos = {}, 0
    for name, code in zip(FIELDS, ["8s", "I", "I"] + ["Q"] * 7 + ["I"] * 4 + ["Q", "I", "I"] +
                          ["Q"] * 6):
        offs[name] = pos
        pos += struct.calcsize("=" + code)
    return offs


OFF = _offsets()


_LIBC = []


def libc():
    """The C library, loaded once (a load is ~0.2 ms: `pagealloc serve`
    wakes every process of a scrape)."""
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


class StatError(Exception):
    """One line for the user; exit status 1."""


def proc_uid(pid):
    """The effective uid of process pid, or None when there is no such process."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[2])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def proc_start_ticks(pid):
    """Field 22 of /proc/PID/stat (after the command's last ')'), or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    rest = text[text.rindex(b")") + 2:].split()
    return int(rest[22 - 3])


def proc_exited(pid):
    """Whether process pid is gone or a zombie (it exited; its parent has
    not reaped it yet)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return text[text.rindex(b")") + 2:].split()[0] in (b"Z", b"X")


def maps_file(pid, st):
    """Whether process pid maps the file whose stat is st (None: cannot tell)."""
    want = "%x:%x %d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    try:
        with open("/proc/%d/maps" % pid) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 5:
                    maj, mnr = parts[3].split(":")
                    if "%x:%x %s" % (int(maj, 16), int(mnr, 16), parts[4]) == want:
                        return True
    except OSError:
        return None
    return False


def candidates(pid, uid):
    """Where process pid of user uid keeps its live file (src/live.c: live_dir)."""
    out = []
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.geteuid() == uid:
        out.append(os.path.join(xdg, "pagealloc", str(pid)))
    out.append("/run/user/%d/pagealloc/%d" % (uid, pid))
    out.append("/dev/shm/pagealloc-%d/%d" % (uid, pid))
    return out


def not_libpagealloc(pid):
    return StatError("process %d does not run on libpagealloc (it has no live file; a program "
                     "that never started the scavenger thread, a short one or one with "
                     "scavenger=off or live=off, publishes none)" % pid)


class Live:
    """The live file of one process, mapped."""

    def __init__(self, pid):
        self.pid = pid
        uid = proc_uid(pid)
        if uid is None:
            # What a crashed process of ours left under this pid is stale.
            for path in candidates(pid, os.geteuid()):
                try:
                    os.unlink(path)
                except OSError:
                    pass
            raise StatError("no process %d" % pid)
        me = os.geteuid()
        if me != 0 and uid != me:
            raise StatError("process %d belongs to another user (uid %d): only its user and "
                            "root can read its heap" % (pid, uid))
        self.path = next((p for p in candidates(pid, uid) if os.path.exists(p)), None)
        if self.path is None:
            raise not_libpagealloc(pid)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except PermissionError:
            raise StatError("%s: not readable: process %d belongs to another user" %
                            (self.path, pid))
        try:
            self.st = os.fstat(fd)
            if self.st.st_size < HEADER.size:
                self.stale("too short")
            self.map = mmap.mmap(fd, self.st.st_size)
        finally:
            os.close(fd)
        h = self.header()
        if h["magic"] != MAGIC:
            self.stale("no magic")
        if h["version"] != VERSION:
            raise StatError("%s: layout version %d, this reader knows %d" %
                            (self.path, h["version"], VERSION))
        start = proc_start_ticks(pid)
        if start is None:
            self.stale("process gone", gone=True)
        if h["pid"] != pid or h["start_ticks"] != start:
            self.stale("left by an earlier process %d" % pid)

    def stale(self, why, gone=False):
        """Remove the file of a process that is not there to remove it."""
        try:
            os.unlink(self.path)
        except OSError:
            pass
        if gone:
            raise StatError("no process %d" % self.pid)
        raise not_libpagealloc(self.pid)

    def header(self):
        return dict(zip(FIELDS, HEADER.unpack_from(self.map, 0)))

    def _u64(self, name):
        return struct.unpack_from("=Q", self.map, OFF[name])[0]

    def ask(self, what="request"):
        """Ask for a refresh (or with "profile_request", a heap profile; with
        "map_request", a heap map) and wake the writer: the request to wait
        for."""
        req = (self._u64(what) + 1) & (2**64 - 1)
        struct.pack_into("=Q", self.map, OFF[what], req)
        wake = (struct.unpack_from("=I", self.map, OFF["wake"])[0] + 1) & 0xFFFFFFFF
        struct.pack_into("=I", self.map, OFF["wake"], wake)
        nr = SYS_FUTEX.get(os.uname().machine)
        if nr is not None:
            try:
                word = ctypes.c_uint32.from_buffer(self.map, OFF["wake"])
                libc().syscall(
                    nr, ctypes.c_void_p(ctypes.addressof(word)), FUTEX_WAKE, 1, None, None, 0)
                del word
            except (OSError, AttributeError, TypeError):
                pass  # the writer's next wake serves it
        return req

    def fetch(self, kind, what, wait_s):
        """Ask the process's own thread to write kind ("profile": a heap
        profile, PATH.pb.gz; "map": a heap map, PATH.map) beside its live
        file, and wait up to wait_s s for it: the file's path. `what` names
        it in the StatError raised when it does not come."""
        req = self.ask(kind + "_request")
        deadline, polls = time.monotonic() + wait_s, 0
        while (self._u64(kind + "_served") - req) & (2**64 - 1) >= 2**63:
            polls += 1
            if polls % 50 == 0 and not self.alive():
                raise StatError("process %d exited before it wrote its %s" % (self.pid, what))
            if time.monotonic() >= deadline:
                if maps_file(self.pid, self.st) is False:
                    raise StatError("process %d no longer runs on libpagealloc (it exec'd)" %
                                    self.pid)
                raise StatError("process %d did not write its %s within %d s" %
                                (self.pid, what, wait_s))
            time.sleep(0.002)
        status = self._u64(kind + "_status")
        if status != 0:
            raise StatError("process %d could not write its %s: %s" %
                            (self.pid, what, os.strerror(status)))
        return self.path + (".pb.gz" if kind == "profile" else ".map")

    def served(self, req):
        return (self._u64("served") - req) & (2**64 - 1) < 2**63

    def refresh(self):
        """Ask and wait up to WAIT_S: True when served, False when the writer
        did not answer (its figures are then as old as its last refresh)."""
        req = self.ask()
        deadline = time.monotonic() + WAIT_S
        while not self.served(req):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)
        return True

    def read(self):
        """(header, figures, text), copied whole under the sequence count.
        The writer holds the count odd for microseconds, but a loaded
        machine may take its CPU away meanwhile: the reader waits up to
        READ_WAIT_S."""
        deadline = time.monotonic() + READ_WAIT_S
        while True:
            seq = self._u64("seq")
            if not seq & 1:
                h = self.header()
                figs = {}
                for i in range(h["nfigures"]):
                    name, value = FIGURE.unpack_from(self.map,
                                                     h["figures_off"] + i * FIGURE.size)
                    figs[name.rstrip(b"\0").decode()] = value
                text = bytes(self.map[h["text_off"]:h["text_off"] + h["text_len"]])
                if self._u64("seq") == seq:
                    return h, figs, text.decode(errors="replace")
            if time.monotonic() >= deadline:
                raise StatError("%s: the writer never left a whole copy in %g s" %
                                (self.path, READ_WAIT_S))
            if seq & 1:
                time.sleep(0.0001)

    def unanswered(self):
        """The writer did not answer: stale if the process no longer maps
        the file (it exec'd), else a note for the figures' age."""
        if maps_file(self.pid, self.st) is False:
            self.stale("not mapped")
        age = time.time() - self.header()["update_ns"] / 1e9
        return "pagealloc stat: process %d did not answer within %d ms; its figures are from " \
               "%.1f s ago\n" % (self.pid, WAIT_S * 1000, age)

    def alive(self):
        return (proc_start_ticks(self.pid) == self.header()["start_ticks"] and
                not proc_exited(self.pid))


def cmd_stat(pid):
    live = Live(pid)
    note = "" if live.refresh() else live.unanswered()
    _, _, text = live.read()
    sys.stderr.write(note)
    sys.stdout.write(text)
    return 0


def cmd_profile(pid, out):
    """The heap profile of the running process, into OUT: the process's own
    background thread writes it beside its live file (PATH.pb.gz), this
    moves it. Profiles take milliseconds; the wait is up to 10 s."""
    src = Live(pid).fetch("profile", "profile", 10)
    try:
        shutil.move(src, out)
    except OSError as e:
        raise StatError("%s: %s" % (out, e.strerror or e))
    print("heap profile of process %d in %s (go tool pprof %s)" % (pid, out, out))
    return 0


def smaps_rollup_bytes(pid, key):
    """A "KEY: N kB" figure of /proc/PID/smaps_rollup in bytes, or None."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def limit_source(figs, text):
    """Where memory_limit comes from, in words: "none", "memory_limit=SIZE",
    "auto from cgroup vN FILE" (the limit file that binds, from the story's
    memory_limit line), "auto: no memory cgroup found"."""
    if not figs.get("memory_limit_auto"):
        return "memory_limit=SIZE" if figs.get("memory_limit") else "none"
    m = re.search(r"\(auto from cgroup v(\d) (.+?)(?:: no limit\)| \d)", text)
    if m:
        return "auto from cgroup v%s %s" % (m.group(1), m.group(2))
    return "auto: no memory cgroup found"


def cmd_json(pid):
    live = Live(pid)
    note = "" if live.refresh() else live.unanswered()
    h, figs, text = live.read()
    out = {"pid": pid, "time": h["update_ns"] / 1e9}
    out.update(figs)
    # The kernel's huge pages for the whole process, beside the heap's own
    # huge_bytes: read here, not in the process (smaps_rollup walks every
    # page table under the mmap lock, which the scavenger thread must not).
    out["anon_huge_bytes"] = smaps_rollup_bytes(pid, "AnonHugePages")
    if "memory_pressure" in figs:
        if figs["memory_pressure"] == 2**64 - 1:
            out["memory_pressure"] = None  # not read
        out["memory_limit_source"] = limit_source(figs, text)
    sys.stderr.write(note)
    print(json.dumps(out, sort_keys=False))
    return 0


def mib(v):
    return "%.1f" % (v / 1048576)


def cmd_watch(pid, interval):
    live = Live(pid)
    cols = ("time", "rss", "heap_sys", "inuse", "alloc", "released", "frag", "scav_cpu%")
    print("%-12s %9s %9s %9s %9s %9s %9s %9s   (MiB; scav_cpu%%: of one CPU)" % cols)
    prev = None
    while True:
        if not live.alive():
            print("process %d exited" % pid)
            return 0
        if not live.refresh() and not live.alive():
            print("process %d exited" % pid)
            return 0
        try:
            h, f, _ = live.read()
        except StatError:
            # A process that exits while its thread writes leaves the
            # sequence count odd for good.
            if not live.alive():
                print("process %d exited" % pid)
                return 0
            raise
        t = h["update_ns"] / 1e9
        cpu = ""
        if prev is not None and t > prev[0]:
            cpu = "%.2f" % ((f["scavenger_cpu_ns"] - prev[1]) / 1e9 / (t - prev[0]) * 100)
        prev = (t, f["scavenger_cpu_ns"])
        print("%-12s %9s %9s %9s %9s %9s %9s %9s" % (
            time.strftime("%H:%M:%S", time.localtime(t)) + ".%02d" % (int(t * 100) % 100),
            mib(f["rss"]), mib(f["heap_sys"]), mib(f["heap_inuse"]), mib(f["heap_alloc"]),
            mib(f["heap_released"]), mib(f["max_fragmentation"]), cpu or "-"), flush=True)
        time.sleep(interval)


USAGE = """usage: pagealloc stat PID
       pagealloc stat --json PID
       pagealloc stat --watch SECONDS PID
       pagealloc profile PID -o FILE

stat: the story of the heap of running process PID (on libpagealloc,
preloaded or linked), as at exit. --json: its figures as one JSON object.
--watch: one line per SECONDS (time, RSS, heap_sys, heap_inuse, heap_alloc,
heap_released, maxFragmentation in MiB, the scavenger's CPU) until it exits.
profile: the heap profile of running process PID now (pprof's format, as
pa_prof_dump writes it), into FILE: go tool pprof FILE.
"""


def main(argv):
    args = argv[1:]
    if args and args[0] == "profile":
        # profile PID -o FILE
        if args[1:] in (["-h"], ["--help"]):
            sys.stdout.write(USAGE)
            return 0
        try:
            rest = args[1:]
            out = None
            if "-o" in rest:
                i = rest.index("-o")
                out = rest[i + 1]
                del rest[i:i + 2]
            if len(rest) != 1 or not out:
                raise ValueError
            pid = int(rest[0])
            if pid <= 0:
                raise ValueError
        except (ValueError, IndexError):
            sys.stderr.write("pagealloc profile: want PID -o FILE\n%s" % USAGE)
            return 2
        try:
            return cmd_profile(pid, out)
        except StatError as e:
            sys.stderr.write("pagealloc profile: %s\n" % e)
            return 1
    if args and args[0] == "stat":
        args = args[1:]
    mode, interval = "stat", None
    try:
        while args and args[0].startswith("-"):
            a = args.pop(0)
            if a == "--json":
                mode = "json"
            elif a == "--watch":
                mode = "watch"
                interval = float(args.pop(0))
                if interval < 0:
                    raise ValueError
            elif a in ("-h", "--help"):
                sys.stdout.write(USAGE)
                return 0
            else:
                sys.stderr.write("%s: unknown option '%s'\n%s" % (ME, a, USAGE))
                return 2
        if len(args) != 1:
            raise ValueError
        pid = int(args[0])
        if pid <= 0:
            raise ValueError
    except (ValueError, IndexError):
        sys.stderr.write("%s: want a PID (and SECONDS after --watch)\n%s" % (ME, USAGE))
        return 2
    try:
        if mode == "json":
            return cmd_json(pid)
        if mode == "watch":
            return cmd_watch(pid, interval)
        return cmd_stat(pid)
    except StatError as e:
        sys.stderr.write("%s: %s\n" % (ME, e))
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv))
