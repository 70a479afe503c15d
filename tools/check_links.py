#!/usr/bin/env python3
"""check_links.py — every relative link of the repository's Markdown leads to a file.

    tools/check_links.py [ROOT]     (ROOT: the repository, by default this one)

Reads every tracked-looking .md file under ROOT (build*/ directories and
hidden ones skipped) and, in each, every inline link or image target
`](target)` that is not a URL (http:, https:, mailto:) or an anchor of the
same page (#...). The target's path, less any #anchor, must name a file or
directory relative to the linking file. A reverted change that deletes a
log page while the index still names it is the mistake this catches.

Prints one line per broken link (file:line: target) and exits 1 if there is
any; prints nothing and exits 0 otherwise. Python 3 standard library only.
tools/test.sh runs it with the layering check.
"""
import os
import re
import sys

LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def markdown_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and not d.startswith("build")
        )
        for name in sorted(filenames):
            if name.endswith(".md"):
                yield os.path.join(dirpath, name)


def broken_links(path):
    out = []
    with open(path, encoding="utf-8") as f:
        in_code = False
        for lineno, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            if in_code:
                continue
            for m in LINK.finditer(line):
                target = m.group(1)
                if target.startswith(("http:", "https:", "mailto:", "#")):
                    continue
                rel = target.split("#", 1)[0]
                if not rel:
                    continue
                full = os.path.normpath(os.path.join(os.path.dirname(path), rel))
                if not os.path.exists(full):
                    out.append((lineno, target))
    return out


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.normpath(root)
    bad = []
    for path in markdown_files(root):
        for lineno, target in broken_links(path):
            bad.append("%s:%d: %s" % (os.path.relpath(path, root), lineno, target))
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
