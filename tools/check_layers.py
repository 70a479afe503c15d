#!/usr/bin/env python3
"""check_layers.py — every arrow of the source tree points down.

    tools/check_layers.py [ROOT]     (ROOT: the repository, by default this one)

The files of src/ and preload/ form modules: src/span.c and src/span.h are
the module "span", preload/new_delete.cc the module "new_delete", the public
header include/pagealloc.h the module "pagealloc". LAYERS below places every
module in a layer, from the API down to the system calls. An arrow runs from
a file to a module when the file

  * includes one of the module's files (#include "..."), or
  * names a function that a .c file of the module defines with external
    linkage, followed by "(" (a call, or a prototype declaring it: a header
    that declares another module's functions is an arrow to that module).

Function pointers handed down (the fork and sweep hooks of pages.h) are not
arrows: the lower module calls whatever it was given, and names nothing
above it.

The tree is layered when
  1. every module is in LAYERS (a new file must be given its place),
  2. every arrow goes to a module of the same layer or a lower one,
  3. the arrows between modules form no cycle (not even within a layer), and
  4. no file other than src/os.c makes a system call (SYSCALLS below).

Prints one line per violation, sorted, and exits 1 if there is any; prints
nothing and exits 0 otherwise. Python 3 standard library only.
tools/test_check_layers.py tests it; tools/test.sh runs both.
"""
import os
import re
import sys

# Top to bottom: (layer, modules). A file may reach its own layer and the
# layers below it, never one above.
LAYERS = [
    # The exported names, the statistics API, its report and the live file
    # that publishes both to `pagealloc stat`.
    ("api", ["malloc_names", "malloc_extras", "new_delete", "live", "malloc_stats", "stats_print"]),
    # The pa_ malloc family and the small-object path; orchestrates the rest.
    ("malloc", ["malloc"]),
    # The heap map: a walk over every chunk, span and large object, written
    # on request and at exit.
    ("heap map", ["heapmap"]),
    # Heaps of the program's own: their spans and large objects, under a
    # lock per heap (they hand spans to the central lists when deleted).
    ("heaps", ["heap"]),
    # Per-thread object caches: they embed the large slots and the span
    # spares and hand them down; the per-thread figures they count and the
    # exited threads' table.
    ("thread cache", ["tcache", "threadstats"]),
    # Background work of the malloc layer: stash decay, free pages in spans.
    ("sweep", ["sweep"]),
    # Per-class central lists; large objects (slots, stash, alloc, release).
    ("central lists, large objects", ["central", "large"]),
    # Span records and the message for a bad pointer.
    ("spans", ["span"]),
    # What spans are built from: the page map, record pools, the class
    # table, the stash mechanics.
    ("malloc tables", ["pagemap", "meta", "sizeclass_table", "stash"]),
    # The process-wide default page heap as the malloc layer sees it.
    ("pages", ["pages"]),
    # The machine's memory nodes: how the default heap splits per node.
    ("NUMA topology", ["node"]),
    ("page caches, scavenger", ["pagecache", "scavenger"]),
    ("page heap", ["pageheap"]),
    ("chunks", ["chunk"]),
    ("summaries", ["summary"]),
    # Guarded sampling: the guarded pool, its records and its SIGSEGV
    # handler (called by the malloc layer and the thread caches; it draws
    # its counts and stacks from the profiler).
    ("guarded sampling", ["guard"]),
    # Heap profiles: the sampler and its sites (called by the malloc layer and
    # the thread caches), and their encoding in pprof's format.
    ("profiles", ["prof"]),
    ("profile files, stacks", ["profwrite", "stack"]),
    # The limits a container sets: its cgroup's files (memory_limit=auto).
    ("container limits", ["cgroup"]),
    # Configuration, one-line messages, locks: used at every level above.
    ("services", ["config", "msg", "lock"]),
    # The only module that makes system calls.
    ("os", ["os"]),
    # Headers that include nothing of ours (vg.h: hidden.h): bit tricks,
    # geometry, the rseq asm, valgrind requests, and the public API's
    # declarations (include/pagealloc.h, not read for arrows: several layers
    # define its functions, and a call of one is an arrow to its definer).
    ("leaves", ["bits", "layout", "hidden", "rseq", "vg", "pagealloc"]),
]

# System calls and their libc wrappers: named in code outside src/os.c, a
# violation. (pthread_create is not one: scavenger.c starts its thread.)
SYSCALLS = [
    "syscall", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mlock",
    "open", "openat", "read", "write", "pread", "pwrite", "close", "ioctl", "fcntl",
    "futex", "membarrier", "rseq", "getcpu", "sched_getcpu", "sched_yield",
    "sched_getaffinity", "getrlimit", "setrlimit", "prlimit", "clock_gettime",
    "nanosleep", "getpid", "gettid", "kill", "tgkill", "raise", "sigaction",
    "sigprocmask", "pthread_sigmask", "mbind", "set_mempolicy", "get_mempolicy",
    "move_pages", "getrandom", "sysconf", "prctl",
]
SYSCALL_EXEMPT = {"src/os.c"}
# An asm statement (up to its ";") whose text holds the syscall instruction.
ASM = re.compile(r"\b(?:__asm__|asm)\b")

IDENT_CALL = re.compile(r"(?<![\w.>])([A-Za-z_]\w*)\s*\(")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "_Alignof", "_Static_assert",
            "__attribute__", "__typeof__", "typeof", "defined", "__builtin_expect"}


def strip(text):
    """text with comments, string and character literals blanked (newlines
    kept, so line numbers hold). Preprocessor lines are kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_preprocessor(code):
    """code with preprocessor lines (and their continuations) blanked."""
    lines = code.split("\n")
    cont = False
    for k, line in enumerate(lines):
        if cont or line.lstrip().startswith("#"):
            cont = line.endswith("\\")
            lines[k] = ""
    return "\n".join(lines)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def matching_paren(code, open_pos):
    depth = 0
    for j in range(open_pos, len(code)):
        if code[j] == "(":
            depth += 1
        elif code[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def definitions(code):
    """(name, is_static) of the functions a C file defines at file scope."""
    code = without_preprocessor(code)
    found = []
    depth = 0
    start = 0  # where the current file-scope declaration began
    i = 0
    while i < len(code):
        c = code[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif c == ";" and depth == 0:
            start = i + 1
        elif depth == 0 and (c.isalpha() or c == "_") and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
            m = re.match(r"[A-Za-z_]\w*", code[i:])
            name = m.group(0)
            after = i + len(name)
            k = after
            while k < len(code) and code[k].isspace():
                k += 1
            if k < len(code) and code[k] == "(" and name not in KEYWORDS:
                close = matching_paren(code, k)
                if close > 0:
                    rest = code[close + 1:].lstrip()
                    if rest.startswith("{"):
                        head = code[start:i]
                        found.append((name, re.search(r"\bstatic\b", head) is not None))
                    i = close + 1
                    continue
            i = after
            continue
        i += 1
    return found


def module_of(path):
    """The module of a repository-relative path: its base name, no extension."""
    return os.path.splitext(os.path.basename(path))[0]


def source_files(root):
    files = []
    for d, exts in (("src", (".c", ".h")), ("preload", (".c", ".h", ".cc"))):
        full = os.path.join(root, d)
        if not os.path.isdir(full):
            continue
        for name in sorted(os.listdir(full)):
            if name.endswith(exts):
                files.append(d + "/" + name)
    return files


def resolve_include(root, path, name):
    """The repository-relative file that #include "name" in path means, or None."""
    here = os.path.dirname(path)
    for d in (here, "src", "include"):
        cand = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand.replace(os.sep, "/")
    return None


def find_cycle(graph, nodes):
    """A cycle through the strongly connected nodes, as a list a, b, ..., a,
    starting at the smallest name and following the smallest next name."""
    first = min(nodes)
    path, seen = [first], {first}

    def walk(node):
        for nxt in sorted(graph.get(node, ())):
            if nxt not in nodes:
                continue
            if nxt == first and len(path) > 1:
                path.append(first)
                return True
            if nxt not in seen:
                seen.add(nxt)
                path.append(nxt)
                if walk(nxt):
                    return True
                path.pop()
        return False

    walk(first)
    return path


def strongly_connected(graph):
    """Tarjan's algorithm: the components of more than one module."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(root, layers=LAYERS):
    """The violation lines for the tree at root (empty: layered)."""
    rank, layer_name = {}, {}
    for k, (name, mods) in enumerate(layers):
        for m in mods:
            rank[m] = k
            layer_name[m] = name
    problems = []
    files = source_files(root)
    texts, raws = {}, {}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            raws[f] = fh.read()
        texts[f] = strip(raws[f])  # as long as the raw text, offset for offset

    # Functions with external linkage, by the module whose .c defines them;
    # and each file's own functions (static ones shadow other modules').
    defined_in, own = {}, {}
    for f in files:
        if not f.endswith(".c"):
            continue
        own[f] = set()
        for name, is_static in definitions(texts[f]):
            own[f].add(name)
            if not is_static:
                defined_in.setdefault(name, module_of(f))

    graph = {}
    for f in files:
        mod = module_of(f)
        if mod not in rank:
            problems.append("%s: module %s is in no layer (LAYERS, tools/check_layers.py)" % (f, mod))
            continue
        graph.setdefault(mod, set())
        code = texts[f]

        def arrow(target, where, what):
            if target == mod:
                return
            graph[mod].add(target)
            if target in rank and rank[target] < rank[mod]:
                problems.append("%s:%d: %s: %s (%s) is above %s (%s)" % (
                    f, where, what, target, layer_name[target], mod, layer_name[mod]))

        for m in INCLUDE.finditer(code):
            name = raws[f][m.start(1):m.end(1)]  # the stripped text blanks it
            line = line_of(code, m.start())
            target_path = resolve_include(root, f, name)
            if target_path is None:
                problems.append('%s:%d: #include "%s": no such file' % (f, line, name))
                continue
            target = module_of(target_path)
            if target not in rank:
                problems.append('%s:%d: #include "%s": module %s is in no layer' % (f, line, name, target))
                continue
            arrow(target, line, '#include "%s"' % name)

        body = without_preprocessor(code)
        mine = own.get(f, set())
        for m in IDENT_CALL.finditer(body):
            name = m.group(1)
            target = defined_in.get(name)
            if target is None or name in mine:
                continue
            arrow(target, line_of(body, m.start()), "%s()" % name)

        if f not in SYSCALL_EXEMPT:
            for m in IDENT_CALL.finditer(body):
                if m.group(1) in SYSCALLS and m.group(1) not in mine:
                    problems.append("%s:%d: system call %s() outside src/os.c" % (
                        f, line_of(body, m.start()), m.group(1)))
            for m in ASM.finditer(code):
                end = code.find(";", m.end())
                # The instruction is in a string: look at the raw text.
                if re.search(r"\bsyscall\b", raws[f][m.start():end if end >= 0 else None]):
                    problems.append("%s:%d: syscall instruction outside src/os.c" % (
                        f, line_of(code, m.start())))

    for comp in strongly_connected(graph):
        problems.append("cycle: " + " -> ".join(find_cycle(graph, comp)))
    return sorted(set(problems), key=sort_key)


def sort_key(line):
    """Cycles last; the others by file, then line number."""
    m = re.match(r"([^:]+):(\d+):", line)
    if line.startswith("cycle: "):
        return (1, line, 0, "")
    if m:
        return (0, m.group(1), int(m.group(2)), line)
    return (0, line.split(":")[0], 0, line)


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(root)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
