"""pagealloc_cli.py — the `pagealloc` command: its subcommands and their usage.

    pagealloc run [options] [--] CMD [ARGS...]  pagealloc_run.py
    pagealloc stat [--json | --watch SECONDS] PID  pagealloc_stat.py
    pagealloc profile PID -o FILE               pagealloc_stat.py
    pagealloc map ...                           pagealloc_map.py
    pagealloc plot FILE.csv -o FILE.png|.svg    pagealloc_timeline.py
    pagealloc serve [--listen ADDR:PORT] ...    pagealloc_serve.py
    pagealloc version
    pagealloc help [COMMAND]

The entry is the generated `pagealloc` (tools/pagealloc.in), which puts this
directory first on sys.path and calls main(argv, preload_lib, version).
This module only dispatches: each subcommand's module is imported when that
subcommand runs, so that `pagealloc stat` starts about as fast as
pagealloc_stat.py alone (this one is small and imports os and sys only:
the entry writes no bytecode beside the modules, so each start compiles it).

Usage errors (an unknown command or option, a missing value) are one line,
"pagealloc CMD: WHAT", then that command's usage, on standard error, and
exit status 2. Errors found while doing the work are one line and exit
status 1, but in `run`: 2 before CMD starts, CMD's own status once it
started (pagealloc_run.py).
"""
import os
import sys

ME = "pagealloc"
TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))

OVERVIEW = """usage: pagealloc COMMAND [ARGS...]

Runs a program on libpagealloc and tells the story of its heap.

commands:
  run [options] [--] CMD [ARGS...]    CMD with malloc replaced by libpagealloc;
                                      the story of each process's heap at exit,
                                      a timeline of its memory (--timeline)
  stat [--json | --watch SECONDS] PID the heap of a running process, now
  profile PID -o FILE                 its heap profile now (pprof's format)
  map ...                             the heap's map, drawn
  plot FILE.csv -o FILE.png|.svg      draw a timeline saved by run --timeline
  serve [--listen ADDR:PORT]          every process's heap over HTTP: /metrics
                                      for Prometheus, /debug/pprof/heap?pid=N
                                      for pprof and continuous profilers
  version                             the version and the preload library
  help [COMMAND]                      this text, or COMMAND's

pagealloc help COMMAND, or pagealloc COMMAND --help, says more.
"""

VERSION_USAGE = """usage: pagealloc version

Prints the version and the preload library the command runs programs on.
"""

HELP_USAGE = """usage: pagealloc help [COMMAND]

Prints the overview, or COMMAND's usage (as pagealloc COMMAND --help does).
"""

class UsageError(Exception):
    """One line; the command's usage follows; exit status 2."""


class Failure(Exception):
    """One line; exit status 1."""


def err(line):
    sys.stderr.write("%s: %s\n" % (ME, line))


# ---- the modules of the other subcommands, imported when used --------------------


def load(module, what):
    """Import module from the tools directory, or raise Failure naming it."""
    try:
        return __import__(module)
    except ImportError as e:
        if e.name != module:
            raise
        raise Failure("%s needs %s.py, which is not in %s" % (what, module, TOOLS_DIR))


def usage_of(cmd, ctx):
    """The usage text of command cmd (None: no such command)."""
    if cmd == "run":
        return load("pagealloc_run", "pagealloc run").usage(ctx["preload_lib"])
    if cmd in ("stat", "profile"):
        return load("pagealloc_stat", "pagealloc " + cmd).USAGE
    if cmd == "map":
        return load("pagealloc_map", "the heap map").USAGE
    if cmd == "plot":
        return load("pagealloc_timeline", "the timeline").PLOT_USAGE
    if cmd == "serve":
        return load("pagealloc_serve", "pagealloc serve").USAGE
    if cmd == "version":
        return VERSION_USAGE
    if cmd == "help":
        return HELP_USAGE
    return None


# ---- the subcommands -------------------------------------------------------------------


def cmd_stat(cmd, args, ctx):
    mod = load("pagealloc_stat", "pagealloc " + cmd)
    return mod.main(["pagealloc_stat", cmd] + args)


def cmd_map(args, ctx):
    # As pagealloc_stat's: main takes a whole argv, the program and "map" first.
    return load("pagealloc_map", "the heap map").main(["pagealloc_map", "map"] + args)


def cmd_plot(args, ctx):
    return load("pagealloc_timeline", "the timeline").main_plot(args)


def cmd_serve(args, ctx):
    return load("pagealloc_serve", "pagealloc serve").main(args)


def cmd_version(args, ctx):
    if args in (["-h"], ["--help"]):
        sys.stdout.write(VERSION_USAGE)
        return 0
    if args:
        raise UsageError("unexpected argument '%s'" % args[0])
    print("pagealloc %s (preload library: %s)" % (ctx["version"], ctx["preload_lib"]))
    return 0


def cmd_help(args, ctx):
    if not args:
        sys.stdout.write(OVERVIEW)
        return 0
    if args[0] in ("-h", "--help"):
        sys.stdout.write(HELP_USAGE)
        return 0
    if len(args) > 1:
        raise UsageError("unexpected argument '%s'" % args[1])
    text = usage_of(args[0], ctx)
    if text is None:
        raise UsageError("unknown command '%s'" % args[0])
    sys.stdout.write(text)
    return 0


def cmd_run(args, ctx):
    return load("pagealloc_run", "pagealloc run").main(args, ctx["preload_lib"], load)


COMMANDS = {
    "run": cmd_run,
    "stat": lambda args, ctx: cmd_stat("stat", args, ctx),
    "profile": lambda args, ctx: cmd_stat("profile", args, ctx),
    "map": cmd_map,
    "plot": cmd_plot,
    "serve": cmd_serve,
    "version": cmd_version,
    "help": cmd_help,
}


def main(argv, preload_lib, version):
    ctx = {"preload_lib": preload_lib, "version": version}
    if not argv:
        sys.stderr.write(OVERVIEW)
        return 2
    cmd, args = argv[0], argv[1:]
    if cmd in ("-h", "--help"):
        cmd, args = "help", []
    elif cmd == "--version":
        cmd = "version"
    try:
        fn = COMMANDS.get(cmd)
        if fn is None:
            if cmd.startswith("-"):
                raise UsageError("unknown option '%s'" % cmd)
            raise UsageError("unknown command '%s'" % cmd)
        return fn(args, ctx)
    except UsageError as e:
        where = ME + " " + cmd if cmd in COMMANDS else ME
        sys.stderr.write("%s: %s\n" % (where, e))
        try:
            sys.stderr.write(usage_of(cmd, ctx) or OVERVIEW)
        except Failure:
            sys.stderr.write(OVERVIEW)
        return 2
    except Failure as e:
        err(str(e))
        return 1
    except KeyboardInterrupt:
        return 130
