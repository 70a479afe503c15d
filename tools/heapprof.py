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
    heapprof.py symbolize IN OUT          a copy of IN with its functions named
                                          in it (gzip), for go tool pprof

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
* writing (symbolize): the names addr2line gives go into a copy of the
  profile as pprof's own symbolizer would put them (Lines, Functions, the
  mappings' has_* flags), everything else kept. Debian's Go 1.19 pprof
  names functions from DWARF DW_AT_name only, so it cannot name C++
  members of a namespace or class (their out-of-line DIE has no name) nor
  gcc -O2's main (in .text.startup): it shows them as [binary]. It reads a
  symbolized profile's names as they are.
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

# addr2line's second line of a frame: FILE:LINE, "??:0" or "FILE:?" where it
# does not know, and " (discriminator N)" after some.
FILE_LINE = re.compile(r"(.*):(\d+|\?)(?: \(discriminator \d+\))?")

NAME = re.compile(r"\.(\d+)\.(\d+)\.([a-z]+)(\.sym)?\.pb(\.gz)?$")


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


# ---- writing a profile ----------------------------------------------------------------


def put_varint(n):
    """N as a varint; a negative N as int64 (two's complement, 10 bytes)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def put_num(number, n):
    """A number field (wire type 0); nothing when N is 0, as proto3 leaves
    out a field at its default."""
    if not n:
        return b""
    return put_varint(number << 3) + put_varint(n)


def put_bytes(number, payload):
    """A length-delimited field (wire type 2): a message, a string, or a
    packed run of numbers."""
    return put_varint(number << 3 | 2) + put_varint(len(payload)) + payload


def put_packed(number, values):
    """A repeated number field, packed (proto3's form); nothing when empty."""
    if not values:
        return b""
    return put_bytes(number, b"".join(put_varint(v) for v in values))


class Strings:
    """A profile's string table while it is encoded: the table read stays as
    it was, at the same indices (a string there twice is written by its first
    index); strings not in it are added at its end."""

    def __init__(self, table):
        self.table = list(table) or [""]
        self.index = {}
        for i, text in enumerate(self.table):
            self.index.setdefault(text, i)

    def __call__(self, text):
        i = self.index.get(text)
        if i is None:
            i = self.index[text] = len(self.table)
            self.table.append(text)
        return i


def encode(profile):
    """The bytes of a profile.proto message (not compressed) for PROFILE:
    every field this module decodes, in field-number order, repeated numbers
    packed; the string table is the one read, strings the records need and
    it lacks added at its end."""
    p = profile
    s = Strings(p.string_table)

    def value_type(vt):
        return put_num(1, s(vt.type)) + put_num(2, s(vt.unit))

    out = [put_bytes(1, value_type(vt)) for vt in p.sample_type]
    for sm in p.sample:
        msg = put_packed(1, sm.location_id) + put_packed(2, sm.value)
        for k, v, n, u in sm.label:
            msg += put_bytes(3, put_num(1, s(k)) + put_num(2, s(v)) + put_num(3, n) +
                             put_num(4, s(u)))
        out.append(put_bytes(2, msg))
    for m in p.mapping:
        out.append(put_bytes(3, put_num(1, m.id) + put_num(2, m.memory_start) +
                             put_num(3, m.memory_limit) + put_num(4, m.file_offset) +
                             put_num(5, s(m.filename)) + put_num(6, s(m.build_id)) +
                             put_num(7, m.has_functions) + put_num(8, m.has_filenames) +
                             put_num(9, m.has_line_numbers) +
                             put_num(10, m.has_inline_frames)))
    for loc in p.location:
        msg = put_num(1, loc.id) + put_num(2, loc.mapping_id) + put_num(3, loc.address)
        for ln in loc.line:
            msg += put_bytes(4, put_num(1, ln.function_id) + put_num(2, ln.line) +
                             put_num(3, ln.column))
        msg += put_num(5, loc.is_folded)
        out.append(put_bytes(4, msg))
    for f in p.function:
        out.append(put_bytes(5, put_num(1, f.id) + put_num(2, s(f.name)) +
                             put_num(3, s(f.system_name)) + put_num(4, s(f.filename)) +
                             put_num(5, f.start_line)))
    tail = (put_num(7, s(p.drop_frames)) + put_num(8, s(p.keep_frames)) +
            put_num(9, p.time_nanos) + put_num(10, p.duration_nanos))
    if p.period_type is not None:
        tail += put_bytes(11, value_type(p.period_type))
    tail += put_num(12, p.period) + put_packed(13, [s(c) for c in p.comment])
    tail += put_num(14, s(p.default_sample_type))
    # The string table last but for the fields after it, once every string is in.
    table = b"".join(put_bytes(6, text.encode("utf-8")) for text in s.table)
    return b"".join(out) + table + tail


def write_profile(path, profile):
    """PROFILE, gzip-compressed, to PATH (through a temporary file in its
    directory, renamed: a file under PATH is whole). ProfileError if it
    cannot be written."""
    data = gzip.compress(encode(profile), mtime=0)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ProfileError("cannot write %s: %s" % (path, e.strerror or e))


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


def addr2line_frames(path, addresses, demangle=True):
    """addr2line's frames for each file address: {address: [(name, file,
    line), ...]}, innermost first; name and file None where it did not know
    them, line 0. Names are demangled (-C) unless DEMANGLE is false, which
    gives the symbols' own (mangled) names. {} when addr2line is missing or
    fails."""
    tool = shutil.which("addr2line")
    if tool is None or not addresses:
        return {}
    text = "".join("0x%x\n" % a for a in addresses)
    cmd = [tool, "-a", "-f"] + (["-C"] if demangle else []) + ["-i", "-e", path]
    try:
        r = subprocess.run(cmd, input=text, capture_output=True, text=True,
                           errors="replace", check=False)
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
        name = None if lines[i] == "??" else lines[i]
        where = FILE_LINE.fullmatch(lines[i + 1]) if i + 1 < len(lines) else None
        file, line = None, 0
        if where:
            if where.group(1) != "??":
                file = where.group(1)
            if where.group(2) != "?":
                line = int(where.group(2))
        frames.append((name, file, line))
        i += 2
    if len(out) != len(set(addresses)):
        return {}
    return out


def addr2line(path, addresses):
    """addr2line's demangled function names for each file address:
    {address: [name, ...]}, innermost first, None for a name it did not
    know. {} when addr2line is missing or fails."""
    return {a: [f[0] for f in frames]
            for a, frames in addr2line_frames(path, addresses).items()}


def file_addresses(profile):
    """Where a profile's locations without Lines are in their files:
    ({filename: {location id: file address}}, {location id: fallback name}).
    The fallback is FILE+0xADDR (base name, file address; file offset where
    no PT_LOAD segment holds it), or the address in hex for a location in no
    mapping; only locations whose file address is known are in the first."""
    by_file = {}
    fallback = {}
    segments_of = {}  # filename -> its PT_LOAD segments, None if not ELF
    for loc in profile.location:
        if loc.line:
            continue
        m = profile.mapping_of(loc)
        if m is None or not m.filename:
            fallback[loc.id] = "0x%x" % loc.address
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
        fallback[loc.id] = "%s+0x%x" % (os.path.basename(m.filename), addr)
    return by_file, fallback


class Symbolizer:
    """Names for a profile's locations: {location id: [function name, ...]},
    innermost first (inlined frames before the function they sit in), and
    the same frames with their files and lines: {location id: [(name, file,
    line), ...]} (file None and line 0 where not known)."""

    def __init__(self, profile, use_addr2line=True):
        self.profile = profile
        self.use_addr2line = use_addr2line
        self.names = {}
        self.frames = {}
        self._symbolize()
        self.names = {i: [f[0] for f in fr] for i, fr in self.frames.items()}

    def _symbolize(self):
        p = self.profile
        for loc in p.location:
            if loc.line:
                self.frames[loc.id] = [self._frame(ln) for ln in loc.line]
        by_file, fallback = file_addresses(p)
        for loc_id, name in fallback.items():
            self.frames[loc_id] = [(name, None, 0)]
        if not self.use_addr2line:
            return
        for path, addrs in by_file.items():
            found = addr2line_frames(path, sorted(set(addrs.values())))
            for loc_id, addr in addrs.items():
                frames = found.get(addr)
                if not frames or all(name is None for name, _, _ in frames):
                    continue
                self.frames[loc_id] = [(n, f, l) if n is not None else (fallback[loc_id], None, 0)
                                       for n, f, l in frames]

    def _frame(self, ln):
        f = self.profile.functions.get(ln.function_id)
        if f is None:
            return ("function#%d" % ln.function_id, None, 0)
        return (f.name or f.system_name or "function#%d" % f.id, f.filename or None, ln.line)

    def stack(self, sample):
        """A sample's function names, innermost first."""
        out = []
        for i in sample.location_id:
            out.extend(self.names[i])
        return out

    def stack_frames(self, sample):
        """A sample's (name, file, line) frames, innermost first."""
        out = []
        for i in sample.location_id:
            out.extend(self.frames[i])
        return out


def symbolize(profile):
    """Names PROFILE's locations in the profile itself, as `pprof -symbolize`
    would: each location without Lines that addr2line names gets one Line
    per frame, innermost first (inlined frames before the function they were
    inlined into), each naming a Function: name as `addr2line -C` gives it,
    system_name the symbol's own (mangled) name, filename, start_line 0; one
    Function per (name, system_name, filename). A mapping any of whose
    locations was named says so (has_functions, has_filenames,
    has_line_numbers, has_inline_frames): pprof then takes its names from
    the profile and does not look them up again; a mapping none of whose
    locations was named keeps its flags false, so pprof still tries. A
    frame addr2line could not name within a named location is named as the
    leak report names it, FILE+0xADDR. Everything else stays as it was.
    Returns the number of locations named."""
    p = profile
    functions = {(f.name, f.system_name, f.filename): f for f in p.function}
    next_id = max((f.id for f in p.function), default=0) + 1
    named = 0
    by_file, fallback = file_addresses(p)
    for path, addrs in by_file.items():
        wanted = sorted(set(addrs.values()))
        found = addr2line_frames(path, wanted)
        if not found:
            continue
        mangled = addr2line_frames(path, wanted, demangle=False)
        for loc_id, addr in sorted(addrs.items()):
            frames = found.get(addr)
            if not frames or all(name is None for name, _, _ in frames):
                continue
            system = mangled.get(addr)
            if system is None or len(system) != len(frames):
                system = frames
            loc = p.locations[loc_id]
            m = p.mapping_of(loc)
            loc.line = []
            for (name, file, line), (system_name, _, _) in zip(frames, system):
                if name is None:
                    name = system_name = fallback[loc_id]
                elif system_name is None:
                    system_name = name
                key = (name, system_name, file or "")
                f = functions.get(key)
                if f is None:
                    f = functions[key] = Function()
                    f.id = next_id
                    next_id += 1
                    f.name, f.system_name, f.filename = key
                    p.function.append(f)
                    p.functions[f.id] = f
                loc.line.append(Line(f.id, line))
                m.has_filenames |= bool(file)
                m.has_line_numbers |= line != 0
            m.has_functions = True
            m.has_inline_frames = True
            named += 1
    return named


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
            stack = report_stack(symbolizer.stack_frames(sm), depth)
        site = by_stack.get(stack)
        if site is None:
            site = by_stack[stack] = Site(stack)
        for t, i in idx.items():
            setattr(site, t, getattr(site, t) + sm.value[i])
    return sorted(by_stack.values(),
                  key=lambda s: (-s.inuse_space, -s.inuse_objects, s.stack))


# A C function called from Go (cgo) has, between it and the Go function that
# called it, cgo's plumbing: the C wrapper cgo writes (_cgo_HASH_Cfunc_f),
# the runtime's switch to the thread's stack (runtime.asmcgocall, cgocall)
# and the Go stub (pkg._Cfunc_f); and a block from the Go package's Calloc
# has its C side (gopa_calloc, pkg.sysCalloc). A leak report leaves them out.
CGO_PLUMBING = re.compile(r"_cgo_[0-9a-f]+_C2?func_.*|runtime\.(asmcgocall|cgocall)(\.abi0)?"
                          r"|.*\._C2?func_.*|gopa_calloc|.*/pagealloc/go\.sysCalloc")

GO_CLOSURE = re.compile(r".*\.func\d+")

# The outermost frame a leak report shows: C's main (the C library's frames
# below it, __libc_start_call_main..., say nothing about who holds the
# memory), or Go's (runtime.main, runtime.goexit below it).
OUTERMOST = ("main", "main.main")


def report_stack(frames, depth):
    """A leak report's site: the first DEPTH names of a sample's frames
    ((name, file, line), innermost first), cgo's plumbing left out (and
    the closure cgo wraps a call passing a Go pointer in, and a function's
    frame repeated under its name for what was inlined into it), up to
    main; a Go function (its file ends in .go) with its file's base name and
    line: "main.load (load.go:42)"."""
    names = []
    for i, (name, file, line) in enumerate(frames):
        if CGO_PLUMBING.fullmatch(name):
            continue
        # cgo's check of a Go pointer passed to C wraps the call in a
        # closure, F.func1, on F's own line.
        nxt = frames[i + 1] if i + 1 < len(frames) else None
        if nxt and GO_CLOSURE.fullmatch(name) and name.rsplit(".", 1)[0] == nxt[0] \
                and (file, line) == nxt[1:]:
            continue
        # A Go function inlined into another is named by addr2line as the
        # one it sits in, at the inlined one's file: one frame.
        if nxt and name == nxt[0] and file != nxt[1]:
            continue
        if file and file.endswith(".go") and line:
            names.append("%s (%s:%d)" % (name, os.path.basename(file), line))
        else:
            names.append(name)
        if name in OUTERMOST or len(names) == depth:
            break
    return tuple(names)


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
    sym = sub.add_parser("symbolize", help="write a copy of a profile with its functions "
                         "named (by addr2line), which go tool pprof shows as they are")
    sym.add_argument("files", nargs=1, metavar="IN")
    sym.add_argument("out", metavar="OUT")
    args = parser.parse_args(argv)
    if getattr(args, "top", 1) < 1:
        parser.error("--top must be at least 1")

    if args.command == "symbolize":
        path = args.files[0]
        try:
            profile = read(path)
        except ProfileError as e:
            print("heapprof.py: %s: not a heap profile: %s" % (path, e), file=sys.stderr)
            return 1
        symbolize(profile)
        try:
            write_profile(args.out, profile)
        except ProfileError as e:
            print("heapprof.py: %s" % e, file=sys.stderr)
            return 1
        return 0

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
