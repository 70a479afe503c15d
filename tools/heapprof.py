#!/usr/bin/env python3
"""Reading libpagealloc's heap profiles: the leak report, without Go.

A process on libpagealloc with PAGEALLOC_CONF=prof=on,prof_prefix=PREFIX
writes its sampled heap as pprof profiles (profile.proto, gzip-compressed),
named PREFIX.PID.SEQ.KIND.pb.gz: SEQ counts from 0001 in each process, KIND
is final (written at exit: every sampled object still live, the leak
candidates), peak, interval, signal or dump. `go tool pprof BINARY FILE`
reads them; this module reads them where Go is not installed, and is what
`pagealloc run --heap-profile DIR` prints its leak reports with. Standard
library only (Debian 12's python3, 3.11).

    heapprof.py leaks [--top N] FILE...   the leak candidates, one line a site
    heapprof.py top [--top N] FILE        the sites holding the most live bytes
    heapprof.py dump FILE                 every record of the file, decoded

How a profile is read, in three steps:

* decoding: the file is gzip (by its magic, 1f 8b) or a plain message,
  decoded by hand from protobuf's wire format (varints, 64- and 32-bit
  words, length-delimited fields); repeated numbers may come packed or one
  field each, as pprof accepts both. The objects below keep the message's
  fields under profile.proto's names, strings resolved through the string
  table.
* symbolizing: a Location that carries Lines (Function records) is named by
  them. Otherwise its address is taken back to the file of its Mapping (file
  offset = address - memory_start + file_offset; the file address is where
  the ELF PT_LOAD segment holding that offset is loaded), and all of one
  file's addresses go to one `addr2line -a -f -C -i -e FILE` (binutils),
  which names inlined frames too, innermost first. A frame addr2line cannot
  name, or every frame of a file when addr2line is missing or fails, is
  FILE+0xADDR (the file's base name and the file address); an address
  outside every mapping is its hex value.
* reporting: sites are aggregated by the first REPORT_DEPTH function names
  of their stacks (innermost first: the caller of malloc first, as the
  allocator trims its own frames), so that two call lines in one function
  make one site, and sorted by inuse_space, most first.

Values are the allocator's estimates (each sample weighted back by the
sampling period), so the report says "~" and "estimated". Bad input (not a
file, not gzip, not a profile) raises ProfileError; the command prints it in
one line and exits 1. tools/test_heapprof.py tests this module.
"""

import argparse
import gzip
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import zlib

GZIP_MAGIC = b"\x1f\x8b"

# Function names a leak report line shows, innermost first.
REPORT_DEPTH = 3

# Sites a report lists unless told otherwise (--top).
DEFAULT_TOP = 10

# What a final profile's live objects are, by KIND in the file's name.
WHEN = {
    "final": "at exit",
    "peak": "at the peak",
    "interval": "at an interval",
    "signal": "on a signal",
    "dump": "at a dump",
}

# addr2line -a's line before each address's frames.
ADDRESS_LINE = re.compile(r"0x[0-9a-fA-F]+")

NAME = re.compile(r"\.(\d+)\.(\d+)\.([a-z]+)\.pb(\.gz)?$")


class ProfileError(Exception):
    """The file is not a profile this module can read; the message says why."""


# ---- numbers as the reports write them -------------------------------------------


SIZE_UNITS = ("KiB", "MiB", "GiB")


def size(n):
    """Bytes as a report writes them: 512 B, 1.0 KiB, 40.1 MiB, 2048.0 GiB.

    The unit is the largest in which the figure, rounded to one decimal, is
    at least 1, and the next one up when the rounding reaches 1024.0, so that
    1048575 bytes is 1.0 MiB, not 1024.0 KiB."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n < 1024:
        return "%s%d B" % (sign, n)
    x, unit = n, None
    for u in SIZE_UNITS:
        x /= 1024
        unit = u
        if round(x, 1) < 1024:
            break
    return "%s%.1f %s" % (sign, x, unit)


def count(n):
    """An object count with thousands separators: 12,345."""
    return "{:,}".format(n)


# ---- protobuf's wire format --------------------------------------------------------


def varint(buf, pos):
    """The varint at POS in BUF and the position after it."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProfileError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProfileError("varint longer than 10 bytes")


def int64(u):
    """A varint read as int64: two's complement in 64 bits."""
    u &= (1 << 64) - 1
    return u - (1 << 64) if u >= 1 << 63 else u


def fields(buf):
    """The fields of one message, in order: (number, wire type, value); the
    value is an int for the number types, a bytes object for wire type 2."""
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProfileError("field number 0")
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            if pos + 8 > end:
                raise ProfileError("truncated 64-bit field")
            value = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
        elif wire == 2:
            n, pos = varint(buf, pos)
            if pos + n > end:
                raise ProfileError("length-delimited field runs past its message")
            value = bytes(buf[pos:pos + n])
            pos += n
        elif wire == 5:
            if pos + 4 > end:
                raise ProfileError("truncated 32-bit field")
            value = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        else:
            raise ProfileError("wire type %d (groups are not in profile.proto)" % wire)
        yield number, wire, value


def numbers(wire, value):
    """The numbers of one occurrence of a repeated number field: one number
    when not packed, all of a packed run's otherwise."""
    if wire != 2:
        return [value]
    out = []
    pos = 0
    while pos < len(value):
        n, pos = varint(value, pos)
        out.append(n)
    return out


def scalar(wire, value, what):
    if wire == 2:
        raise ProfileError("%s: a number was expected, found bytes" % what)
    return value


def message(wire, value, what):
    if wire != 2:
        raise ProfileError("%s: a message was expected, found a number" % what)
    return value


# ---- the profile's records (profile.proto's names) -----------------------------------


class ValueType:
    def __init__(self, type="", unit=""):
        self.type = type
        self.unit = unit

    def __repr__(self):
        return "%s/%s" % (self.type, self.unit)


class Sample:
    def __init__(self):
        self.location_id = []  # innermost first
        self.value = []  # one per sample type
        self.label = []  # (key, str, num, num_unit)


class Line:
    def __init__(self, function_id=0, line=0, column=0):
        self.function_id = function_id
        self.line = line
        self.column = column


class Location:
    def __init__(self):
        self.id = 0
        self.mapping_id = 0
        self.address = 0
        self.line = []  # innermost first: the last is the caller the others were inlined into
        self.is_folded = False


class Function:
    def __init__(self):
        self.id = 0
        self.name = ""
        self.system_name = ""
        self.filename = ""
        self.start_line = 0


class Mapping:
    def __init__(self):
        self.id = 0
        self.memory_start = 0
        self.memory_limit = 0
        self.file_offset = 0
        self.filename = ""
        self.build_id = ""
        self.has_functions = False
        self.has_filenames = False
        self.has_line_numbers = False
        self.has_inline_frames = False


class Profile:
    """A decoded profile: lists of records in the file's order, strings
    resolved; locations, functions and mappings also by id."""

    def __init__(self):
        self.sample_type = []
        self.sample = []
        self.mapping = []
        self.location = []
        self.function = []
        self.string_table = []
        self.drop_frames = ""
        self.keep_frames = ""
        self.time_nanos = 0
        self.duration_nanos = 0
        self.period_type = None
        self.period = 0
        self.comment = []
        self.default_sample_type = ""
        self.locations = {}
        self.functions = {}
        self.mappings = {}

    def value_index(self, type):
        """The index of the sample type named TYPE in each sample's values."""
        for i, vt in enumerate(self.sample_type):
            if vt.type == type:
                return i
        raise ProfileError("no %s sample type (a heap profile has one)" % type)

    def mapping_of(self, loc):
        """The Mapping of a Location: by its mapping_id, else the one whose
        range holds its address; None if neither."""
        if loc.mapping_id:
            return self.mappings.get(loc.mapping_id)
        for m in self.mapping:
            if m.memory_start <= loc.address < m.memory_limit:
                return m
        return None


def decode_value_type(buf):
    vt = [0, 0]
    for number, wire, value in fields(buf):
        if number in (1, 2):
            vt[number - 1] = int64(scalar(wire, value, "ValueType"))
    return vt


def decode_sample(buf):
    s = Sample()
    for number, wire, value in fields(buf):
        if number == 1:
            s.location_id.extend(numbers(wire, value))
        elif number == 2:
            s.value.extend(int64(v) for v in numbers(wire, value))
        elif number == 3:
            lab = [0, 0, 0, 0]
            for n, w, v in fields(message(wire, value, "Label")):
                if 1 <= n <= 4:
                    lab[n - 1] = int64(scalar(w, v, "Label"))
            s.label.append(lab)
    return s


def decode_mapping(buf):
    m = Mapping()
    raw = {}
    for number, wire, value in fields(buf):
        if 1 <= number <= 10:
            raw[number] = scalar(wire, value, "Mapping")
    m.id = raw.get(1, 0)
    m.memory_start = raw.get(2, 0)
    m.memory_limit = raw.get(3, 0)
    m.file_offset = raw.get(4, 0)
    m.filename = int64(raw.get(5, 0))
    m.build_id = int64(raw.get(6, 0))
    m.has_functions = bool(raw.get(7))
    m.has_filenames = bool(raw.get(8))
    m.has_line_numbers = bool(raw.get(9))
    m.has_inline_frames = bool(raw.get(10))
    return m


def decode_location(buf):
    loc = Location()
    for number, wire, value in fields(buf):
        if number == 1:
            loc.id = scalar(wire, value, "Location")
        elif number == 2:
            loc.mapping_id = scalar(wire, value, "Location")
        elif number == 3:
            loc.address = scalar(wire, value, "Location")
        elif number == 4:
            ln = Line()
            for n, w, v in fields(message(wire, value, "Line")):
                if n == 1:
                    ln.function_id = scalar(w, v, "Line")
                elif n == 2:
                    ln.line = int64(scalar(w, v, "Line"))
                elif n == 3:
                    ln.column = int64(scalar(w, v, "Line"))
            loc.line.append(ln)
        elif number == 5:
            loc.is_folded = bool(scalar(wire, value, "Location"))
    return loc


def decode_function(buf):
    f = Function()
    raw = {}
    for number, wire, value in fields(buf):
        if 1 <= number <= 5:
            raw[number] = scalar(wire, value, "Function")
    f.id = raw.get(1, 0)
    f.name, f.system_name, f.filename = (int64(raw.get(n, 0)) for n in (2, 3, 4))
    f.start_line = int64(raw.get(5, 0))
    return f


def decode(buf):
    """A Profile from the bytes of a profile.proto message (not compressed)."""
    p = Profile()
    types = []
    period_type = None
    strings_of = {7: "drop_frames", 8: "keep_frames", 14: "default_sample_type"}
    string_fields = {}
    for number, wire, value in fields(buf):
        if number == 1:
            types.append(decode_value_type(message(wire, value, "sample_type")))
        elif number == 2:
            p.sample.append(decode_sample(message(wire, value, "sample")))
        elif number == 3:
            p.mapping.append(decode_mapping(message(wire, value, "mapping")))
        elif number == 4:
            p.location.append(decode_location(message(wire, value, "location")))
        elif number == 5:
            p.function.append(decode_function(message(wire, value, "function")))
        elif number == 6:
            text = message(wire, value, "string_table")
            try:
                p.string_table.append(text.decode("utf-8"))
            except UnicodeDecodeError:
                raise ProfileError("string %d is not UTF-8" % len(p.string_table))
        elif number in strings_of:
            string_fields[strings_of[number]] = int64(scalar(wire, value, strings_of[number]))
        elif number == 9:
            p.time_nanos = int64(scalar(wire, value, "time_nanos"))
        elif number == 10:
            p.duration_nanos = int64(scalar(wire, value, "duration_nanos"))
        elif number == 11:
            period_type = decode_value_type(message(wire, value, "period_type"))
        elif number == 12:
            p.period = int64(scalar(wire, value, "period"))
        elif number == 13:
            p.comment.extend(int64(v) for v in numbers(wire, value))

    if not p.string_table or p.string_table[0] != "":
        raise ProfileError("its string table does not start with the empty string")

    def s(i, what):
        if not 0 <= i < len(p.string_table):
            raise ProfileError("%s: string %d is not in the table (%d strings)"
                               % (what, i, len(p.string_table)))
        return p.string_table[i]

    p.sample_type = [ValueType(s(t, "sample_type"), s(u, "sample_type")) for t, u in types]
    if period_type is not None:
        p.period_type = ValueType(s(period_type[0], "period_type"),
                                  s(period_type[1], "period_type"))
    for name, i in string_fields.items():
        setattr(p, name, s(i, name))
    p.comment = [s(i, "comment") for i in p.comment]
    for sm in p.sample:
        if len(sm.value) != len(p.sample_type):
            raise ProfileError("a sample has %d values for %d sample types"
                               % (len(sm.value), len(p.sample_type)))
        sm.label = [(s(k, "label"), s(v, "label"), n, s(u, "label"))
                    for k, v, n, u in sm.label]
    for m in p.mapping:
        m.filename = s(m.filename, "mapping")
        m.build_id = s(m.build_id, "mapping")
        p.mappings[m.id] = m
    for f in p.function:
        f.name = s(f.name, "function")
        f.system_name = s(f.system_name, "function")
        f.filename = s(f.filename, "function")
        p.functions[f.id] = f
    for loc in p.location:
        p.locations[loc.id] = loc
    for sm in p.sample:
        for i in sm.location_id:
            if i not in p.locations:
                raise ProfileError("a sample names location %d, which is not there" % i)
    return p


def read(path):
    """The Profile in the file at PATH, gzip-compressed or not."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ProfileError(e.strerror or str(e))
    if not data:
        raise ProfileError("empty file")
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise ProfileError("bad gzip data (%s)" % e)
    return decode(data)


# ---- symbolizing ------------------------------------------------------------------------


def load_segments(path):
    """The PT_LOAD segments of the ELF file at PATH as (offset, vaddr,
    filesz, memsz); None if it cannot be read or is not ELF."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF":
                return None
            cls, data = head[4], head[5]
            if cls not in (1, 2) or data not in (1, 2):
                return None
            e = "<" if data == 1 else ">"
            if cls == 2:
                phoff, = struct.unpack_from(e + "Q", head, 32)
                phentsize, phnum = struct.unpack_from(e + "HH", head, 54)
                form, size_needed = e + "IIQQQQQQ", 56
            else:
                phoff, = struct.unpack_from(e + "I", head, 28)
                phentsize, phnum = struct.unpack_from(e + "HH", head, 42)
                form, size_needed = e + "IIIIIIII", 32
            if phentsize < size_needed:
                return None
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return None
    segments = []
    for i in range(phnum):
        if (i + 1) * phentsize > len(table):
            break
        ph = struct.unpack_from(form, table, i * phentsize)
        if cls == 2:
            p_type, _, offset, vaddr, _, filesz, memsz, _ = ph
        else:
            p_type, offset, vaddr, _, filesz, memsz, _, _ = ph
        if p_type == 1:  # PT_LOAD
            segments.append((offset, vaddr, filesz, memsz))
    return segments


def file_address(segments, offset):
    """The file address (ELF virtual address) of file offset OFFSET: where
    the PT_LOAD segment holding it loads it. None if no segment holds it."""
    for limit in (2, 3):  # by the bytes in the file first, then by memsz
        for seg in segments:
            if seg[0] <= offset < seg[0] + seg[limit]:
                return offset - seg[0] + seg[1]
    return None


def addr2line(path, addresses):
    """addr2line's frames for each file address: {address: [name, ...]},
    innermost first, None for a name it did not know. {} when addr2line is
    missing or fails."""
    tool = shutil.which("addr2line")
    if tool is None or not addresses:
        return {}
    text = "".join("0x%x\n" % a for a in addresses)
    try:
        r = subprocess.run([tool, "-a", "-f", "-C", "-i", "-e", path], input=text,
                           capture_output=True, text=True, errors="replace", check=False)
    except OSError:
        return {}
    if r.returncode != 0:
        return {}
    # Each address: its "0x..." line, then pairs of lines (function, file:line),
    # one pair per frame, innermost first.
    out = {}
    frames = None
    lines = r.stdout.splitlines()
    i = 0
    while i < len(lines):
        if ADDRESS_LINE.fullmatch(lines[i]):
            frames = out.setdefault(int(lines[i], 16), [])
            i += 1
            continue
        if frames is None:
            return {}
        frames.append(None if lines[i] == "??" else lines[i])
        i += 2  # past the file:line line
    if len(out) != len(set(addresses)):
        return {}
    return out


class Symbolizer:
    """Names for a profile's locations: {location id: [function name, ...]},
    innermost first (inlined frames before the function they sit in)."""

    def __init__(self, profile, use_addr2line=True):
        self.profile = profile
        self.use_addr2line = use_addr2line
        self.names = {}
        self._symbolize()

    def _symbolize(self):
        p = self.profile
        by_file = {}  # filename -> {location id: file address}
        segments_of = {}  # filename -> its PT_LOAD segments, None if not ELF
        for loc in p.location:
            if loc.line:
                self.names[loc.id] = [self._function_name(ln) for ln in loc.line]
                continue
            m = p.mapping_of(loc)
            if m is None or not m.filename:
                self.names[loc.id] = ["0x%x" % loc.address]
                continue
            offset = loc.address - m.memory_start + m.file_offset
            if m.filename not in segments_of:
                segments_of[m.filename] = load_segments(m.filename)
            segments = segments_of[m.filename]
            addr = file_address(segments, offset) if segments else None
            if addr is None:
                addr = offset
            else:
                by_file.setdefault(m.filename, {})[loc.id] = addr
            self.names[loc.id] = ["%s+0x%x" % (os.path.basename(m.filename), addr)]
        if not self.use_addr2line:
            return
        for path, addrs in by_file.items():
            found = addr2line(path, sorted(set(addrs.values())))
            for loc_id, addr in addrs.items():
                frames = found.get(addr)
                if not frames:
                    continue
                fallback = self.names[loc_id][0]
                self.names[loc_id] = [f if f is not None else fallback for f in frames]

    def _function_name(self, ln):
        f = self.profile.functions.get(ln.function_id)
        if f is None:
            return "function#%d" % ln.function_id
        return f.name or f.system_name or "function#%d" % f.id

    def stack(self, sample):
        """A sample's function names, innermost first."""
        out = []
        for i in sample.location_id:
            out.extend(self.names[i])
        return out


# ---- reports ---------------------------------------------------------------------------


class Site:
    def __init__(self, stack):
        self.stack = stack
        self.alloc_objects = self.alloc_space = 0
        self.inuse_objects = self.inuse_space = 0


def sites(profile, symbolizer, depth=None):
    """The profile's sites, aggregated by the first DEPTH names of their
    stacks (all of them when None), most live bytes first (then most live
    objects, then by name)."""
    idx = {t: profile.value_index(t)
           for t in ("alloc_objects", "alloc_space", "inuse_objects", "inuse_space")}
    by_stack = {}
    for sm in profile.sample:
        stack = tuple(symbolizer.stack(sm))
        if depth is not None:
            # The C library's frames below main (__libc_start_call_main...)
            # say nothing about who holds the memory.
            if "main" in stack:
                stack = stack[:stack.index("main") + 1]
            stack = stack[:depth]
        site = by_stack.get(stack)
        if site is None:
            site = by_stack[stack] = Site(stack)
        for t, i in idx.items():
            setattr(site, t, getattr(site, t) + sm.value[i])
    return sorted(by_stack.values(),
                  key=lambda s: (-s.inuse_space, -s.inuse_objects, s.stack))


def describe(path):
    """(pid, kind) from a profile's file name PREFIX.PID.SEQ.KIND.pb.gz;
    (None, None) for another name."""
    m = NAME.search(os.path.basename(path))
    if not m:
        return None, None
    return int(m.group(1)), m.group(3)


def stack_text(stack):
    return " <- ".join(stack) if stack else "(no stack)"


def leak_report(path, profile, symbolizer, top=DEFAULT_TOP):
    """The leak report's lines for the profile read from PATH."""
    pid, kind = describe(path)
    who = "pid %d" % pid if pid is not None else path
    when = WHEN.get(kind, "when written")
    all_sites = [s for s in sites(profile, symbolizer, REPORT_DEPTH)
                 if s.inuse_objects or s.inuse_space]
    if not all_sites:
        return ["==== pagealloc: no leak candidates of %s: no sampled object live %s (%s)"
                % (who, when, path)]
    space = sum(s.inuse_space for s in all_sites)
    objects = sum(s.inuse_objects for s in all_sites)
    lines = ["==== pagealloc: leak candidates of %s in %s (live sampled objects %s: ~%s in "
             "%s objects, estimated)" % (who, path, when, size(space), count(objects))]
    for s in all_sites[:top]:
        lines.append("%s in %s %s from %s"
                     % (size(s.inuse_space), count(s.inuse_objects),
                        "object" if s.inuse_objects == 1 else "objects", stack_text(s.stack)))
    if len(all_sites) > top:
        rest = all_sites[top:]
        lines.append("... and %s in %s objects from %d more sites"
                     % (size(sum(s.inuse_space for s in rest)),
                        count(sum(s.inuse_objects for s in rest)), len(rest)))
    binary = profile.mapping[0].filename if profile.mapping else "BINARY"
    lines.append("look at it: go tool pprof -http=: %s %s"
                 % (shlex.quote(binary), shlex.quote(path)))
    return lines


def top_report(path, profile, symbolizer, top=DEFAULT_TOP):
    """The sites holding the most live bytes, whole stacks, as a table;
    sites with nothing live are left out."""
    all_sites = [s for s in sites(profile, symbolizer) if s.inuse_objects or s.inuse_space]
    space = sum(s.inuse_space for s in all_sites)
    lines = ["%s: %s in %s live objects (estimated), %d sites holding them"
             % (path, size(space), count(sum(s.inuse_objects for s in all_sites)),
                len(all_sites))]
    lines.append("%10s %6s %12s %10s %12s  %s"
                 % ("inuse", "%", "objects", "alloc", "objects", "stack"))
    for s in all_sites[:top]:
        share = 100.0 * s.inuse_space / space if space else 0.0
        lines.append("%10s %5.1f%% %12s %10s %12s  %s"
                     % (size(s.inuse_space), share, count(s.inuse_objects),
                        size(s.alloc_space), count(s.alloc_objects), stack_text(s.stack)))
    return lines


def dump(profile):
    """Every record of the profile, one per line, for reading by eye."""
    p = profile
    lines = ["sample_type: %s" % " ".join(map(repr, p.sample_type)),
             "period_type: %r period: %d" % (p.period_type, p.period),
             "time_nanos: %d duration_nanos: %d" % (p.time_nanos, p.duration_nanos)]
    if p.default_sample_type:
        lines.append("default_sample_type: %s" % p.default_sample_type)
    for c in p.comment:
        lines.append("comment: %s" % c)
    lines.append("samples: %d" % len(p.sample))
    for sm in p.sample:
        labels = "".join(" %s=%s" % (k, v or "%d%s" % (n, u)) for k, v, n, u in sm.label)
        lines.append("  values %s locations %s%s"
                     % (" ".join(map(str, sm.value)), " ".join(map(str, sm.location_id)), labels))
    lines.append("mappings: %d" % len(p.mapping))
    for m in p.mapping:
        lines.append("  %d: 0x%x-0x%x offset 0x%x %s build_id %s"
                     % (m.id, m.memory_start, m.memory_limit, m.file_offset,
                        m.filename or "-", m.build_id or "-"))
    lines.append("locations: %d" % len(p.location))
    for loc in p.location:
        at = "".join(" %s:%d" % (p.functions[ln.function_id].name
                                 if ln.function_id in p.functions
                                 else "function#%d" % ln.function_id, ln.line)
                     for ln in loc.line)
        lines.append("  %d: 0x%x mapping %d%s" % (loc.id, loc.address, loc.mapping_id, at))
    lines.append("functions: %d" % len(p.function))
    for f in p.function:
        lines.append("  %d: %s %s %s:%d" % (f.id, f.name, f.system_name, f.filename, f.start_line))
    lines.append("strings: %d" % len(p.string_table))
    return lines


# ---- the command -----------------------------------------------------------------------


def main(argv):
    parser = argparse.ArgumentParser(prog="heapprof.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    leaks = sub.add_parser("leaks", help="the leak candidates of final profiles")
    leaks.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N")
    leaks.add_argument("files", nargs="+", metavar="FILE")
    top = sub.add_parser("top", help="the sites holding the most live bytes")
    top.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N")
    top.add_argument("files", nargs=1, metavar="FILE")
    d = sub.add_parser("dump", help="every record of a profile")
    d.add_argument("files", nargs=1, metavar="FILE")
    args = parser.parse_args(argv)
    if getattr(args, "top", 1) < 1:
        parser.error("--top must be at least 1")

    status = 0
    for i, path in enumerate(args.files):
        try:
            profile = read(path)
            if args.command == "dump":
                lines = dump(profile)
            elif args.command == "top":
                lines = top_report(path, profile, Symbolizer(profile), args.top)
            else:
                lines = leak_report(path, profile, Symbolizer(profile), args.top)
        except ProfileError as e:
            print("heapprof.py: %s: not a heap profile: %s" % (path, e), file=sys.stderr)
            status = 1
            continue
        if i:
            print()
        print("\n".join(lines))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
