#!/usr/bin/env python3
"""The layout of tracer/ as README.md ("Layout") draws it: folders in data-flow order, each using
only the folders before it. Fails when a file includes a later folder's header, or when an object
of libtracer.a calls a function defined in a later folder (a call through a declaration written by
hand, which the include check cannot see). symbols/ and common/ use no tracer/ code at all.

Usage: tests/check_layout.py   (PTFIL_SRCDIR, PTFIL_BUILDDIR as for the other tests)
"""
import os
import re
import subprocess
import sys

SRCDIR = os.environ.get("PTFIL_SRCDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILDDIR = os.environ.get("PTFIL_BUILDDIR") or SRCDIR

# Lowest first. "tracer" is the top: launch, attach, the loop and the process lifecycle.
ORDER = ["core", "stacks", "memory", "ptrace", "kernel", "output", "tracer"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"tracer/([^"]+)"', re.M)


def folder_of(rel):
    """The tracer/ folder of a path relative to tracer/ ("memory/ledger.h" -> "memory")."""
    head = rel.split("/")[0]
    return head if "/" in rel and head in ORDER else "tracer"


def include_violations():
    bad = []
    for top in ("tracer", "symbols", "common"):
        for root, _, files in os.walk(os.path.join(SRCDIR, top)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(root, f)
                rel = os.path.relpath(path, SRCDIR)
                text = open(path, encoding="utf-8", errors="replace").read()
                for m in INCLUDE.finditer(text):
                    line = text.count("\n", 0, m.start()) + 1
                    if top != "tracer":
                        bad.append("%s:%d: %s/ includes tracer/%s" % (rel, line, top, m.group(1)))
                        continue
                    mine = folder_of(os.path.relpath(path, os.path.join(SRCDIR, "tracer")))
                    theirs = folder_of(m.group(1))
                    if ORDER.index(theirs) > ORDER.index(mine):
                        bad.append("%s:%d: tracer/%s/ includes tracer/%s, a later folder" %
                                   (rel, line, mine, m.group(1)))
    return bad


def call_violations():
    """Undefined symbols of each folder's objects that a later folder's objects define."""
    objs = {}
    tracer_build = os.path.join(BUILDDIR, "tracer")
    if not os.path.isdir(tracer_build):
        return [], "no build in %s" % BUILDDIR
    for root, _, files in os.walk(tracer_build):
        for f in files:
            if f.startswith("libtracer_a-") and f.endswith(".o"):
                rel = os.path.relpath(os.path.join(root, f), tracer_build)
                objs[os.path.join(root, f)] = folder_of(rel)
    if not objs:
        return [], "no objects of libtracer.a in %s" % tracer_build
    defined, undefined = {}, {}
    for path, folder in objs.items():
        out = subprocess.run(["nm", "-P", path], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            name, kind = parts[0], parts[1]
            if kind == "U":
                undefined.setdefault(path, set()).add(name)
            elif kind in "TDBR":
                defined[name] = path
    bad = []
    for path, names in undefined.items():
        mine = objs[path]
        for name in sorted(names):
            where = defined.get(name)
            if where and ORDER.index(objs[where]) > ORDER.index(mine):
                bad.append("%s calls %s, defined in %s (tracer/%s/ after tracer/%s/)" %
                           (os.path.relpath(path, BUILDDIR), name, os.path.relpath(where, BUILDDIR),
                            objs[where], mine))
    return bad, None


def main():
    bad = include_violations()
    calls, why = call_violations()
    bad += calls
    for b in bad:
        print(b)
    if why:
        print("calls not checked: %s" % why)
    if bad:
        print("FAIL: %d layout violation%s (README.md, Layout)" % (len(bad), "" if len(bad) == 1 else "s"))
        return 1
    print("PASS: tracer/ folders use only the folders before them: %s" % " < ".join(ORDER))
    return 0


if __name__ == "__main__":
    sys.exit(main())
