"""Python frames read by the kernel (tracer/kernel/pyread.bpf.h) against the ptrace path's reader
(tracer/stacks/pystack.c), on every CPython here: 3.11 (Debian's, else pyenv's), 3.12 and 3.13
(pyenv's). A version this machine does not have is a SKIP, not a pass.

same_frames: tests/targets/py/sites.py under --charge alloc --exact-sizes, once with -e ptrace
(frames read live, at each call) and once with -e uprobe (frames read by the kernel at the event,
named later). The Python frames of every stack above 1% of the peak are identical, function, file
and line, and charged the same bytes (within 1% and 128 KiB: what is alive at the instant of each
run's peak differs by a few blocks); the kernel read frames (python.kernel_stacks) and none of its
reads failed.

same_frames_touch: sites.py under the touch view, where each site's bytearray is charged to the
memset that zero-fills it: its Python chain is the one the ptrace path reads at its malloc, with the
same bytes within 3%.

touch_list: tests/targets/py/ints.py under the touch view: the pages of a 12-million-int list are
charged through build_list's BUILD line, read by the fault path's reader.

The kernel path needs kernel uprobes and BPF: where ptfil says it cannot take them, the file skips.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, SRCDIR, Skip, check_near, cpython, heap_counters, heap_events_probe, heap_path, \
    kernel_path_lock, launch, main, missing, require_kernel_path

PYDIR = os.path.join(SRCDIR, "tests", "targets", "py")
SITES = os.path.join(PYDIR, "sites.py")
INTS = os.path.join(PYDIR, "ints.py")
SITES_STATUS = 3
# The same interpreter run twice allocates alike only with the same hash seed (dict and set sizes
# decide when pymalloc maps a new 1 MiB arena, charged to the stack of the moment), the same
# compiled modules (none written by the first run for the second) and the same addresses (run()'s
# fixed_addresses: sets hashed by id; 3.13 on the ptrace path against itself moved an arena between
# two import stacks in 1 run of 4 with randomization, in 0 of 6 without).
ENV = dict({k: v for k, v in os.environ.items() if k not in ("PTFIL_CHARGE", "PTFIL_HEAP_EVENTS")},
           PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")


def chains(doc):
    """Bytes charged by Python chain: each stack's Python frames as (function, file, line), innermost first."""
    out = {}
    for s in doc["stacks"]:
        key = tuple((f["function"], f["file"], f["line"]) for f in s["frames"] if f.get("kind") == "python")
        out[key] = out.get(key, 0) + s["charged_bytes"]
    return out


def python_counters(doc):
    return {k: v for k, v in doc["counters"].items() if k.startswith("python.")}


def run(python, args, target, status):
    r = launch([python, target], ptfil_args=("-i", "0", *args), env=ENV, fixed_addresses=True)
    assert r.returncode == status, (args, r.returncode, r.stderr.decode(errors="replace"))
    return r.json


def same_frames(minor):
    python = cpython(minor)
    live = run(python, ("--charge", "alloc", "-e", "ptrace", "--exact-sizes"), SITES, SITES_STATUS)
    kern = run(python, ("--charge", "alloc", "-e", "uprobe", "--exact-sizes"), SITES, SITES_STATUS)
    assert heap_path(live) == "ptrace" and heap_path(kern) == "uprobe", (heap_counters(live), heap_counters(kern))
    c = python_counters(kern)
    assert c.get("python.kernel_stacks", 0) > 0, c
    assert c.get("python.kernel_failed", 0) == 0, c
    peak = live["peak"]["charged_bytes"]
    a, b = chains(live), chains(kern)
    big = [k for k in set(a) | set(b) if max(a.get(k, 0), b.get(k, 0)) > peak / 100]
    assert big, "no stack above 1%% of the peak: %r" % sorted(a.items(), key=lambda kv: -kv[1])[:5]
    for k in big:
        assert k in a and k in b, "Python frames only on the %s path (%.1f MiB):\n  %s" % (
            "ptrace" if k in a else "kernel", max(a.get(k, 0), b.get(k, 0)) / MiB, "\n  ".join(map(str, k)))
        # Blocks alive for an instant (the peak is a moment of each run) differ by a few KiB.
        check_near("the stack at %s:%s" % (k[0][1], k[0][2]) if k else "the stacks without Python frames",
                   b[k], a[k], rel=0.01, slack=128 * 1024)


def site_chains(doc, lines):
    """Per site of sites.py (its "# SITE:" line), the Python chains of the stacks whose innermost Python
    frame is that line, with the bytes charged to each."""
    out = {}
    for s in doc["stacks"]:
        py = [(f["function"], f["file"], f["line"]) for f in s["frames"] if f.get("kind") == "python"]
        if py and py[0][1] == SITES and py[0][2] in lines:
            site = out.setdefault(lines[py[0][2]], {})
            site[tuple(py)] = site.get(tuple(py), 0) + s["charged_bytes"]
    return out


def same_frames_touch(minor):
    """The touch view's stacks are page faults, not malloc calls: each site's bytearray is charged to the
    memset that zero-fills it. Its Python chain must be the one the ptrace path reads at its malloc."""
    python = cpython(minor)
    lines = {i: m.group(1) for i, l in enumerate(open(SITES), 1) for m in [re.search(r"# SITE: (\w+)$", l.rstrip())] if m}
    live = site_chains(run(python, ("--charge", "alloc", "-e", "ptrace"), SITES, SITES_STATUS), lines)
    doc = run(python, ("--charge", "touch"), SITES, SITES_STATUS)
    assert doc["view"] == "touch", doc["view"]
    touch = site_chains(doc, lines)
    assert python_counters(doc).get("python.kernel_failed", 0) == 0, python_counters(doc)
    assert sorted(live) == sorted(set(lines.values())), "sites missing on ptrace: %r" % sorted(live)
    for site, chains in live.items():
        big = max(chains, key=chains.get)
        got = touch.get(site, {})
        assert big in got, "%s: the ptrace path's chain is not under touch:\n  %s\ntouch has:\n  %s" % (
            site, "\n  ".join(map(str, big)), "\n  ".join(str(list(c)) for c in got))
        check_near("%s under touch" % site, got[big], chains[big], rel=0.03)


def touch_list(minor):
    python = cpython(minor)
    doc = run(python, ("--charge", "touch"), INTS, 0)
    assert doc["view"] == "touch", doc["view"]
    line = [i for i, l in enumerate(open(INTS), 1) if l.rstrip().endswith("# BUILD")][0]
    through = sum(s["charged_bytes"] for s in doc["stacks"]
                  if any(f.get("kind") == "python" and f["function"] == "build_list" and f["line"] == line
                         and f["file"] == INTS for f in s["frames"]))
    c = python_counters(doc)
    assert c.get("python.kernel_stacks", 0) > 0, c
    assert c.get("python.no_thread_state", 0) == 0, c
    assert through >= 100 * MiB, "%.1f MiB charged through build_list (ints.py:%d), expected 100 or more; %r" % (
        through / MiB, line, c)


def test_same_frames_311(): same_frames(11)
def test_same_frames_312(): same_frames(12)
def test_same_frames_313(): same_frames(13)
def test_same_frames_touch_311(): same_frames_touch(11)
def test_same_frames_touch_312(): same_frames_touch(12)
def test_same_frames_touch_313(): same_frames_touch(13)
def test_touch_list_311(): touch_list(11)
def test_touch_list_312(): touch_list(12)
def test_touch_list_313(): touch_list(13)


if __name__ == "__main__":
    kernel_path_lock()
    status, message = heap_events_probe()
    require_kernel_path(status, message, "test_pykernel.py")
    main([test_same_frames_311, test_same_frames_312, test_same_frames_313,
          test_same_frames_touch_311, test_same_frames_touch_312, test_same_frames_touch_313,
          test_touch_list_311, test_touch_list_312, test_touch_list_313])
