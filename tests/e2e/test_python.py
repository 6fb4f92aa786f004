"""Python frames read from outside the interpreter (tracer/stacks/pystack.c): each native eval-loop frame
is replaced by the Python lines it ran.

tests/targets/py/sites.py allocates a bytearray of a known size on each line marked "# SITE: NAME",
in every shape of call (nested, closure, method, generator, coroutine, recursion, a C builtin calling
back, comprehension, three threads), and keeps them all until it exits with status 3. The test
reads the marker lines from the source and checks, for each site, the bytes charged to the stacks
whose innermost Python frame is that line, and the whole Python chain above it. numpy_demo.py is
the README's NumPy demo: arrays charged to the lines that made them, OpenBLAS's thread buffers by
what is resident.

In the touch pass (PTFIL_CHARGE=touch) the Python frames of each fault are read by the kernel
(tracer/kernel/pyread.bpf.h): each site's bytearray is made resident by the interpreter's memset
that zero-fills it, under the site's line, 116 MiB in all, 27 MiB of it in the three threads, and
the peak is the interpreter's RssAnon high-water mark (kmem:rss_stat) within 1%. The tests of how
the ptrace path's reader reads (a version ptfil does not know, a cut deep stack, 3.13's
_Py_DebugOffsets) keep to the alloc view; tests/e2e/test_pykernel.py compares the two readers.
"""
import ast
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, SRCDIR, Attached, Skip, anon_watch, bare, check_anon_peak, check_near, check_view, cpython, \
    functions, heap_counters_zero, launch, main, missing, no_meaning_under_touch, stacks_through, touch_pseudo, \
    thp_setting, touch_view, view_output, workdir

PYTHON = "/usr/bin/python3"  # Debian 12's CPython 3.11 (PATH's python3 may be another one)
PYDIR = os.path.abspath(os.path.join(SRCDIR, "tests", "targets", "py"))
SITES = os.path.join(PYDIR, "sites.py")
NUMPY_DEMO = os.path.join(PYDIR, "numpy_demo.py")
SITES_STATUS = 3
ALLOCATORS = {"malloc", "__libc_malloc", "calloc", "__libc_calloc", "realloc", "__libc_realloc"}

with open(SITES) as _f:
    SOURCE = _f.read().splitlines()

# The bytes each site allocates, and the qualified name of the function holding the marker line.
SIZES = {"plain": 24, "closure": 5, "method": 20, "generator": 12, "async": 10, "recursion": 6,
         "callback": 8, "comprehension": 4, "thread_a": 7, "thread_b": 9, "thread_c": 11}
FUNCTION = {"plain": "plain_inner", "closure": "closure_outer.<locals>.inner", "method": "Holder.method",
            "generator": "chunks", "async": "decode", "recursion": "recurse", "callback": "callback",
            "comprehension": "comprehension", "thread_a": "worker_a", "thread_b": "worker_b",
            "thread_c": "worker_c"}
THREAD_SITES = ("thread_a", "thread_b", "thread_c")


def marker_lines():
    """{site name: line number} of the "# SITE: NAME" comments in sites.py."""
    out = {}
    for i, text in enumerate(SOURCE, 1):
        m = re.search(r"#\s*SITE:\s*(\w+)\s*$", text)
        if m:
            out[m.group(1)] = i
    assert set(out) == set(SIZES), "sites.py marks %s, the test knows %s" % (sorted(out), sorted(SIZES))
    return out


SITE_LINE = marker_lines()
RECURSION_DEPTH = int(re.search(r"^\s*recurse\((\d+)\)\s*$", "\n".join(SOURCE), re.M).group(1))


def function_spans():
    """{qualified name: (first line, last line)} of every function of sites.py, as CPython names them."""
    spans = {}

    comprehensions = {ast.ListComp: "<listcomp>", ast.SetComp: "<setcomp>", ast.DictComp: "<dictcomp>",
                      ast.GeneratorExp: "<genexpr>"}

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                spans[name] = (child.lineno, child.end_lineno)
                walk(child, name + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            elif type(child) in comprehensions:
                spans[prefix + comprehensions[type(child)]] = (child.lineno, child.end_lineno)
                walk(child, prefix)
            else:
                walk(child, prefix)
    walk(ast.parse("\n".join(SOURCE)), "")
    spans["<module>"] = (1, len(SOURCE))
    return spans


SPANS = function_spans()


def expected_chain(site, minor):
    """The Python functions of a site's stack, outermost first, for CPython 3.<minor>. "ASYNCIO" stands
    for one or more frames of the asyncio package (the event loop running the coroutine)."""
    top = ["<module>", "main"]
    return {
        "plain": top + ["plain_outer", "plain_inner"],
        "closure": top + ["closure_outer", "closure_outer.<locals>.inner"],
        "method": top + ["Holder.method"],
        "generator": top + ["consume", "chunks"],
        "async": top + ["ASYNCIO", "fetch", "decode"],
        "recursion": top + ["recurse"] * (RECURSION_DEPTH + 1),
        "callback": top + ["apply_callbacks", "callback"],
        # 3.12 inlines comprehensions (PEP 709): 3.11 runs them as a function of their own.
        "comprehension": top + ["comprehension"] + (["comprehension.<locals>.<listcomp>"] if minor < 12 else []),
    }.get(site) or (top + ["run_threads", "Thread.start"] +  # the stack that started the thread, then its own
                    ["Thread._bootstrap", "Thread._bootstrap_inner", "Thread.run", FUNCTION[site]])


# --- reading stacks ---------------------------------------------------------------------------------

def py_frames(stack):
    return [f for f in stack["frames"] if f.get("kind") == "python"]


def label(f):
    if f.get("kind") == "python":
        return "%s (%s:%s)" % (f["function"], f["file"], f["line"])
    return "%s [%s]" % (f["function"], os.path.basename(f.get("module") or "?"))


def show(stack, depth=None):
    frames = stack["frames"][:depth]
    more = ["... %d more" % (len(stack["frames"]) - len(frames))] if len(frames) < len(stack["frames"]) else []
    return "charged=%d reserved=%d %s:\n      %s" % (stack["charged_bytes"], stack["reserved_bytes"], stack["kind"],
                                                    "\n      ".join([label(f) for f in frames] + more))


def site_function(site, minor):
    """The qualified name of the function running a site's line: 3.11 runs a comprehension as a
    function of its own, 3.12 inlines it (PEP 709)."""
    if site == "comprehension" and minor < 12:
        return "comprehension.<locals>.<listcomp>"
    return FUNCTION[site]


def site_stacks(doc, site, minor):
    """The peak stacks whose innermost Python frame is the site's marker line."""
    want = (site_function(site, minor), SITES, SITE_LINE[site])
    out = []
    for s in doc["stacks"]:
        py = py_frames(s)
        if py and (py[0]["function"], py[0]["file"], py[0]["line"]) == want:
            out.append(s)
    return out


def top_stacks(doc, n=14):
    return "\n".join("  " + show(s, 16) for s in doc["stacks"][:n])


def check_chain(site, stack, minor):
    """The Python frames of stack, outermost first, are the site's expected chain; every frame in
    sites.py is at a line of its own function that calls the next frame inward."""
    py = list(reversed(py_frames(stack)))
    names = [f["function"] for f in py]
    want = expected_chain(site, minor)
    msg = "%s: Python frames %s, expected %s\n  %s" % (site, names, want, show(stack))
    if "ASYNCIO" in want:
        i = want.index("ASYNCIO")
        tail = len(want) - i - 1
        middle = py[i:len(py) - tail]
        assert names[:i] == want[:i] and names[len(py) - tail:] == want[i + 1:] and middle, msg
        assert all("/asyncio/" in f["file"] for f in middle), msg
    else:
        assert names == want, msg
    for k, f in enumerate(py):
        assert isinstance(f["line"], int) and f["line"] > 0, msg
        if f["file"] == SITES:
            assert names[k] in SPANS, "%s: %s is no function of sites.py\n  %s" % (site, names[k], show(stack))
            first, last = SPANS[names[k]]
            assert first <= f["line"] <= last, "%s: %s at line %d, outside its lines %d-%d\n  %s" % (
                site, names[k], f["line"], first, last, show(stack))
            if k + 1 < len(py):
                callee = names[k + 1].split(".")[-1]
                if not callee.startswith("<"):
                    assert callee in SOURCE[f["line"] - 1], "%s: %s at line %d, which does not call %s: %r\n  %s" % (
                        site, names[k], f["line"], callee, SOURCE[f["line"] - 1], show(stack))
    assert py[-1]["line"] == SITE_LINE[site], msg
    if site in THREAD_SITES:
        # A thread's stack: the main thread's call that started it, then its own code only (nothing of
        # another worker's), the two parts joined by a "[new thread]" frame.
        assert [f["function"] for f in py if f["file"] == SITES] == ["<module>", "main", "run_threads", FUNCTION[site]], msg
        assert all(f["file"].endswith("/threading.py") for f in py[3:-1]), msg
        fr = stack["frames"]
        mark = [i for i, f in enumerate(fr) if f["function"] == "[new thread]"]
        start = next(i for i, f in enumerate(fr) if f.get("function") == "Thread.start")
        boot = max(i for i, f in enumerate(fr) if f.get("function") == "Thread._bootstrap")
        assert len(mark) == 1 and boot < mark[0] < start, msg


def check_sites(doc, minor, native):
    """Every site: charged its size, its Python chain, malloc innermost; in default mode no native
    frame outward of the innermost Python frame, with --native the interpreter's frames outermost."""
    for site, mib in sorted(SIZES.items()):
        stacks = site_stacks(doc, site, minor)
        assert stacks, "%s: no stack has %s (%s:%d) as innermost Python frame; the top stacks:\n%s" % (
            site, site_function(site, minor), SITES, SITE_LINE[site], top_stacks(doc))
        check_near("%s (%s line %d)" % (site, site_function(site, minor), SITE_LINE[site]),
                   sum(s["charged_bytes"] for s in stacks), mib * MiB)
        big = max(stacks, key=lambda s: s["charged_bytes"])
        assert big["frames"][0]["kind"] == "native" and big["frames"][0]["function"] in ALLOCATORS, \
            "%s: innermost frame is not an allocator\n  %s" % (site, show(big))
        for s in stacks:
            check_chain(site, s, minor)
            fr = s["frames"]
            first_py = next(i for i, f in enumerate(fr) if f["kind"] == "python")
            last_py = max(i for i, f in enumerate(fr) if f["kind"] == "python")
            outward = [f["function"] for f in fr[last_py + 1:]]
            if not native:
                assert not outward, "%s: native frames outward of the Python frames\n  %s" % (site, show(s))
            elif site in THREAD_SITES:
                # The thread's own native start, then the creator's stack, Py_RunMain outermost.
                mark = [f["function"] for f in fr].index("[new thread]")
                boot = max(i for i, f in enumerate(fr) if f.get("function") == "Thread._bootstrap")
                inner = [f["function"] for f in fr[boot + 1:mark]]
                assert "start_thread" in inner, "%s: no start_thread between Thread._bootstrap and [new thread]\n  %s" % (
                    site, show(s))
                assert "Py_RunMain" in outward or "main" in outward, show(s)
            else:
                assert "Py_RunMain" in outward or "main" in outward, \
                    "%s: neither Py_RunMain nor main outward of <module>\n  %s" % (site, show(s))
            if native and site == "callback":
                # map's own C frames lie between the function that called map and the callback.
                i = max(i for i, f in enumerate(fr) if f.get("function") == "callback")
                j = next(i for i, f in enumerate(fr) if f.get("function") == "apply_callbacks")
                assert any(f["kind"] == "native" for f in fr[i + 1:j]), \
                    "callback: no native frame between callback and apply_callbacks\n  %s" % show(s)
            assert first_py > 0, "%s: no native frame inside the innermost Python frame\n  %s" % (site, show(s))


def thread_parts(frames):
    """A stack cut at its "[new thread]" frames: the thread's own frames, then each stack that started
    a thread of those before it (innermost first)."""
    parts = [[]]
    for f in frames:
        if f["kind"] == "native" and f["function"] == "[new thread]":
            parts.append([])
        else:
            parts[-1].append(f)
    return parts


def check_python_outermost(doc, what):
    """Default mode: in every stack, and in every stack that started a thread, no native frame lies
    outward of a Python frame."""
    for key in ("stacks", "live_at_end"):
        for s in doc[key]:
            for part in thread_parts(s["frames"]):
                kinds = [f["kind"] for f in part]
                if "python" in kinds:
                    first = kinds.index("python")
                    assert all(k == "python" for k in kinds[first:]), "%s: %s stack with a native frame " \
                        "outward of a Python frame\n  %s" % (what, key, show(s))


def check_frame_fields(doc, what):
    """Every Python frame of the document has a name, a file and a line, and no address."""
    for key in ("stacks", "live_at_end"):
        for s in doc[key]:
            for f in py_frames(s):
                ok = f["function"] and f["file"] and isinstance(f["line"], int) and f["line"] > 0
                assert ok and f["module"] is None and f["offset"] is None, "%s: Python frame %r\n  %s" % (
                    what, f, show(s, 16))


# --- runs -------------------------------------------------------------------------------------------

_runs = {}


def run_sites(python=PYTHON, ptfil_args=(), env=None, key=None):
    """ptfil launch -i 0 ARGS -- python sites.py: the Run, checked to have exited as the target does."""
    key = key or (python, tuple(ptfil_args))
    if key not in _runs:
        with anon_watch() as watch:
            r = launch([python, SITES], ptfil_args=("-i", "0", *ptfil_args), env=env)
        assert r.returncode == SITES_STATUS, "ptfil %s -- %s sites.py: status %d, stderr:\n%s" % (
            " ".join(ptfil_args), python, r.returncode, r.stderr.decode(errors="replace"))
        r.watch = watch
        _runs[key] = r
    return _runs[key]


def own_py_frames(stack):
    """The Python frames of a stack's own part, before "[new thread]"."""
    names = [f.get("function") for f in stack["frames"]]
    own = stack["frames"][:names.index("[new thread]")] if "[new thread]" in names else stack["frames"]
    return [f for f in own if f["kind"] == "python"]


def zero_filled(doc, thread=None):
    """The bytes made resident by the interpreter's memset under its eval loop or the Python frames it
    ran (a zeroed bytearray), in
    any thread, or only in started threads (thread=True) or the main one (False)."""
    return sum(s["charged_bytes"] for s in doc["stacks"] if "memset" in (functions(s)[0] or "")
               and ("_PyEval_EvalFrameDefault" in functions(s) or py_frames(s))
               and (thread is None or ("[new thread]" in functions(s)) == thread))


def check_touch_sites(r, minor=11, python=True):
    """Under touch: sites.py's totals, and each site's bytearray charged through its marker line (the
    interpreter's memset zero-filling it, under the Python frames the kernel read at each fault); with
    python=False (PTFIL_NO_PYTHON), native frames only."""
    doc = r.json
    check_view(doc)
    heap_counters_zero(doc)
    own = [s for s in doc["stacks"] if own_py_frames(s)]
    if python:
        for site, mib in sorted(SIZES.items()):
            stacks = [s for s in site_stacks(doc, site, minor) if "memset" in (functions(s)[0] or "")]
            check_near("%s (%s line %d), zero-filled" % (site, site_function(site, minor), SITE_LINE[site]),
                       sum(s["charged_bytes"] for s in stacks), mib * MiB)
        assert doc["counters"].get("python.kernel_failed", 0) == 0, doc["counters"]
    else:
        assert not own, "Python frames of its own in a touch stack\n  %s" % show(own[0])
    check_near("the sites' bytearrays, zero-filled", zero_filled(doc), sum(SIZES.values()) * MiB)
    check_near("the threads' bytearrays", zero_filled(doc, thread=True), sum(SIZES[t] for t in THREAD_SITES) * MiB)
    check_anon_peak(doc, r.watch)


def numpy_available():
    return subprocess.run([PYTHON, "-c", "import numpy"], capture_output=True, timeout=60).returncode == 0


# --- tests ------------------------------------------------------------------------------------------

def test_sites_default():
    if touch_view():
        check_touch_sites(run_sites())
        return
    doc = run_sites().json
    check_sites(doc, 11, native=False)
    check_python_outermost(doc, "default mode")
    check_frame_fields(doc, "default mode")


def test_report_text():
    """ptfil-view's report lists a Python stack as its allocating call, then its Python frames from the
    innermost outwards at the site's file and line; a thread's stack shows its own Python frames and,
    past "[new thread]", the frames of the call that started it."""
    r = run_sites()
    if touch_view():
        # The report says its view, and the sites' stacks as resident pages, the memset that wrote them first.
        out = view_output("--top", "20", "--depth", "2", r.snapshot, timeout=60).decode()
        assert "\nview     touch: memory charged to the code that made it resident" in out, out
        blocks = out.split("\n#")[1:]
        assert blocks and "resident, " in blocks[0].splitlines()[0], out
        # The innermost frame (marked) is the memset; the stack is headed by the site's own line.
        arrows = [next(l for l in b.splitlines() if l.startswith("    \u2192 ")) for b in blocks[:3]]
        assert any("memset" in a for a in arrows), out
        assert any(l.startswith("      your code: ") and "(%s:" % SITES in l for l in blocks[0].splitlines()), out
        return

    def report(depth):
        out = view_output("--top", "20", "--depth", str(depth), r.snapshot, timeout=60).decode()
        return out, out.split("\n#")

    def block_of(site, depth):
        out, blocks = report(depth)
        want = "      %s (%s:%d)" % (FUNCTION[site], SITES, SITE_LINE[site])
        found = [b.splitlines() for b in blocks if want in b.splitlines()]
        assert found, "%s: no stack in the report shows %s\n%s" % (site, want.strip(), out)
        return found[0], want

    # Two frames deep: headed by the site's line (the program's own code), the allocating call, the
    # native frames counted, the call the site made, then the program's own frames, all of them.
    b, want = block_of("plain", 2)
    assert b[1] == "      your code: " + want.strip(), b
    assert b[2].startswith("    \u2192 malloc (") and re.match(r"      \.\.\. \d+ more$", b[3]), b
    at = b.index(want)
    assert b[at + 1].startswith("      plain_outer (%s:" % SITES), b
    assert not [l for l in b[at:] if l.startswith("      ... ")], b
    for site in THREAD_SITES:
        # Deep enough for the whole thread: its own frames, "[new thread]", the starter's call.
        b, want = block_of(site, 40)
        mark = b.index("      [new thread]")
        assert b.index(want) < mark, b
        assert [l for l in b[:mark] if "(%s:" % SITES in l and "your code:" not in l] == [want], b
        assert any(l.startswith("      Thread.start (") for l in b[mark:]), b
        assert any(l.startswith("      run_threads (%s:" % SITES) for l in b[mark:]), b


def test_sites_machine_thp():
    """sites.py under the machine's transparent huge pages, when that is "always" (every other test runs
    its targets as under "madvise", ptfiltest.py says why): a huge page is charged as what it is, so
    each site's bytearray is charged within a huge page at each of its ends (where CPython writes the
    NUL first, or a neighbour sharing the merged mapping did), and under touch the peak is still the
    interpreter's own anonymous residency at its peak, as the kernel counted it."""
    if thp_setting() != "always":
        raise Skip("transparent huge pages are %r here, not always: the other tests cover this" % thp_setting())
    with anon_watch() as watch:
        r = launch([PYTHON, SITES], ptfil_args=("-i", "0"), machine_thp=True)
    assert r.returncode == SITES_STATUS, (r.returncode, r.stderr.decode(errors="replace"))
    doc = r.json
    check_view(doc)
    for site, mib in sorted(SIZES.items()):
        check_near("%s (%s line %d), huge pages on" % (site, site_function(site, 11), SITE_LINE[site]),
                   sum(s["charged_bytes"] for s in site_stacks(doc, site, 11)), mib * MiB, rel=0, slack=4 * MiB)
    if touch_view():
        check_anon_peak(doc, watch)


def test_sites_native():
    if touch_view():
        check_touch_sites(run_sites(ptfil_args=("--native",)))
        return
    doc = run_sites(ptfil_args=("--native",)).json
    check_sites(doc, 11, native=True)
    check_frame_fields(doc, "--native")
    evals = [s for key in ("stacks", "live_at_end") for s in doc[key]
             if "_PyEval_EvalFrameDefault" in [f["function"] for f in s["frames"]]]
    assert not evals, "--native: _PyEval_EvalFrameDefault left in place of its Python frames\n  %s" % show(evals[0])
    # The Python frames are the same as in default mode, line for line.
    plain = run_sites().json
    for site in SIZES:
        a = sorted([label(f) for f in py_frames(s)] for s in site_stacks(plain, site, 11))
        b = sorted([label(f) for f in py_frames(s)] for s in site_stacks(doc, site, 11))
        assert a == b, "%s: Python frames differ with --native:\n  %s\n  %s" % (site, a, b)


def test_no_python_env():
    env = dict(os.environ, PTFIL_NO_PYTHON="1")
    doc = run_sites(env=env, key="no-python").json
    py = [s for key in ("stacks", "live_at_end") for s in doc[key] if py_frames(s)]
    assert not py, "PTFIL_NO_PYTHON=1: Python frames still read\n  %s" % show(py[0])
    if touch_view():
        check_touch_sites(run_sites(env=env, key="no-python"), python=False)
        return
    check_native_only(doc)


def check_native_only(doc):
    """Native stacks only: the sites' bytearrays (alike in native frames, so sharing stacks) are all
    charged through PyByteArray_Resize, each stack through the eval loop."""
    arrays = stacks_through(doc, "PyByteArray_Resize")
    check_near("stacks through PyByteArray_Resize", sum(s["charged_bytes"] for s in arrays),
               sum(SIZES.values()) * MiB)
    for s in arrays:
        if s["charged_bytes"] >= MiB:
            assert "_PyEval_EvalFrameDefault" in [f["function"] for f in s["frames"]], show(s)


def test_output_and_status_unchanged():
    b = bare([PYTHON, SITES])
    assert b.returncode == SITES_STATUS, (b.returncode, b.stderr)
    assert b.stdout == b"sites: %d buffers, %d MiB\n" % (len(SIZES), sum(SIZES.values())), b.stdout
    for key in ((), ("--native",)):
        r = run_sites(ptfil_args=key)
        assert (r.returncode, r.stdout) == (b.returncode, b.stdout), (key, r.returncode, r.stdout, b.stdout)
    assert run_sites().json["process"]["exit_status"] == SITES_STATUS


def test_counters():
    c = run_sites().json["counters"]
    py = {k: v for k, v in c.items() if k.startswith("python.")}
    assert c.get("python.minor_version") == 11, py
    assert c.get("python.group_mismatches") == 0, py
    assert c.get("python.stacks", 0) > 0 and c.get("python.reads", 0) > 0, py
    assert c.get("python.frames", 0) >= c["python.stacks"], py
    for k in ("python.native_us", "python.python_us"):
        assert k in c, py


def elf_file_offset(path, vaddr):
    """The file offset of virtual address vaddr in a 64-bit little-endian ELF file, through its PT_LOAD headers."""
    with open(path, "rb") as f:
        eh = f.read(64)
        assert eh[:4] == b"\x7fELF" and eh[4] == 2 and eh[5] == 1, "%s is not ELF64 LE" % path
        phoff, = struct.unpack_from("<Q", eh, 32)
        phentsize, phnum = struct.unpack_from("<HH", eh, 54)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack("<IIQQQQQQ", f.read(56))
            if p_type == 1 and p_vaddr <= vaddr < p_vaddr + p_filesz:
                return vaddr - p_vaddr + p_offset
    raise AssertionError("%#x is in no PT_LOAD of %s" % (vaddr, path))


CUT_FRAME = "[outer Python frames not read: more than 256]"


def test_deep_stack_cut_marked():
    # deep.py recurses 300 calls deep and allocates 8 MiB at the bottom: ptfil reads the innermost 256
    # Python frames, and a frame of its own stands outward of them for the frames it did not read.
    no_meaning_under_touch("how deep ptfil reads Python frames (the ptrace path's reader; test_pykernel.py "
                           "compares the kernel's with it)")
    script = os.path.join(PYDIR, "deep.py")
    bottom = [i for i, text in enumerate(open(script).read().splitlines(), 1) if "# BOTTOM" in text][0]
    r = launch([PYTHON, script])
    assert r.returncode == 0 and b"deep done" in r.stdout, (r.returncode, r.stdout, r.stderr)
    doc = r.json
    big = [s for s in stacks_through(doc, "descend") if s["charged_bytes"] >= 8 * MiB]
    assert len(big) == 1, [(s["charged_bytes"], functions(s)[:4]) for s in stacks_through(doc, "descend")]
    frames = big[0]["frames"]
    names = [f["function"] for f in frames]
    assert names.count(CUT_FRAME) == 1, names[:5] + ["..."] + names[-5:]
    cut = names.index(CUT_FRAME)
    python = [f for f in frames if f["kind"] == "python"]
    assert len(python) == 256, "%d Python frames read, expected 256" % len(python)
    assert all(f["function"] == "descend" for f in python), sorted({f["function"] for f in python})
    assert python[0]["line"] == bottom, python[0]
    # The marker comes after every Python frame read, where the outer ones would have been.
    assert all(i < cut for i, f in enumerate(frames) if f["kind"] == "python"), names
    assert doc["counters"].get("python.cut", 0) >= 1, doc["counters"]
    # A shallow stack has no such frame.
    assert all(CUT_FRAME not in functions(s) for s in doc["stacks"] if "descend" not in functions(s)), \
        [functions(s)[:4] for s in doc["stacks"] if CUT_FRAME in functions(s)]


def test_unknown_version():
    # A copy of python3.11 whose Py_Version says 3.99: ptfil must not guess at its frames.
    no_meaning_under_touch("whether ptfil reads the Python frames of a version it does not know (the ptrace path's "
                           "reader; test_pykernel.py compares the kernel's with it)")
    d = workdir()
    try:
        exe = os.path.join(d, "python3.11")
        shutil.copy2(os.path.realpath(PYTHON), exe)
        nm = subprocess.run(["nm", "-D", exe], capture_output=True, text=True, timeout=60)
        addr = [int(l.split()[0], 16) for l in nm.stdout.splitlines() if l.split()[-1:] == ["Py_Version"]]
        assert len(addr) == 1, "no Py_Version in nm -D %s: %s" % (exe, nm.stderr)
        off = elf_file_offset(exe, addr[0])
        with open(exe, "r+b") as f:
            f.seek(off)
            old, = struct.unpack("<I", f.read(4))
            assert old >> 16 == 0x030B, "Py_Version of %s is %#x, not 3.11" % (PYTHON, old)
            f.seek(off)
            f.write(struct.pack("<I", 0x036300F0))
        env = dict(os.environ, PYTHONHOME="/usr")
        b = subprocess.run([exe, SITES], capture_output=True, timeout=120, env=env)
        assert b.returncode == SITES_STATUS, (b.returncode, b.stderr)
        r = launch([exe, SITES], env=env)
        err = r.stderr.decode(errors="replace")
        assert (r.returncode, r.stdout) == (b.returncode, b.stdout), (r.returncode, r.stdout, err)
        warnings = [l for l in err.splitlines() if "Python frames are not read in" in l]
        assert len(warnings) == 1 and "3.99" in warnings[0], err
        doc = r.json
        py = [s for key in ("stacks", "live_at_end") for s in doc[key] if py_frames(s)]
        assert not py, "Python frames read from an unknown version\n  %s" % show(py[0])
        check_native_only(doc)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def other_version(minor):
    exe = cpython(minor)
    r = run_sites(python=exe)
    if touch_view():
        check_touch_sites(r, minor)
        return
    doc = r.json
    assert doc["counters"].get("python.minor_version") == minor, doc["counters"]
    assert doc["counters"].get("python.group_mismatches") == 0, doc["counters"]
    check_sites(doc, minor, native=False)
    check_python_outermost(doc, "3.%d" % minor)
    check_frame_fields(doc, "3.%d" % minor)


def test_python312():
    other_version(12)


def test_python313():
    other_version(13)


def python_frames_by_site(doc, minor):
    """Per site, the Python frames (function, file, line) of each of its peak stacks, sorted."""
    return {site: sorted(tuple((f["function"], f["file"], f["line"]) for f in py_frames(s))
                         for s in site_stacks(doc, site, minor))
            for site in SIZES}


def test_python313_debug_offsets():
    # The generic reader, which takes 3.13's layout from its own _Py_DebugOffsets (as it must for 3.14
    # and later), forced on 3.13: every peak stack of every site has the Python frames the compiled-in
    # reader gives on the same program, frame for frame.
    no_meaning_under_touch("which layout reads 3.13's Python frames (the ptrace path's reader; test_pykernel.py "
                           "compares the kernel's with it)")
    exe = cpython(13)
    compiled = run_sites(python=exe, env=dict(os.environ, PTFIL_PY_LAYOUT="compiled"), key=(exe, "compiled")).json
    generic = run_sites(python=exe, env=dict(os.environ, PTFIL_PY_LAYOUT="debug-offsets"), key=(exe, "generic")).json
    assert compiled["counters"].get("python.layout_debug_offsets") == 0, compiled["counters"]
    assert generic["counters"].get("python.layout_debug_offsets") == 1, generic["counters"]
    # By default 3.13 is read with the compiled-in layout (its _Py_DebugOffsets agree with it).
    assert run_sites(python=exe).json["counters"].get("python.layout_debug_offsets") == 0
    for doc in (compiled, generic):
        assert doc["counters"].get("python.minor_version") == 13, doc["counters"]
        assert doc["counters"].get("python.group_mismatches") == 0, doc["counters"]
    check_sites(generic, 13, native=False)
    check_python_outermost(generic, "3.13 through _Py_DebugOffsets")
    check_frame_fields(generic, "3.13 through _Py_DebugOffsets")
    a, b = python_frames_by_site(compiled, 13), python_frames_by_site(generic, 13)
    for site in SIZES:
        assert a[site] and a[site] == b[site], "%s: compiled-in reader\n  %s\nthrough _Py_DebugOffsets\n  %s" % (
            site, "\n  ".join(map(str, a[site])), "\n  ".join(map(str, b[site])))


def test_numpy_demo():
    if not numpy_available():
        raise missing("%s cannot import numpy (tools/install-deps.sh installs python3-numpy)" % PYTHON)
    src = open(NUMPY_DEMO).read().splitlines()
    line_of = lambda pattern: next(i for i, t in enumerate(src, 1) if re.search(pattern, t))
    b = bare([PYTHON, NUMPY_DEMO])
    with anon_watch() as watch:
        r = launch([PYTHON, NUMPY_DEMO])
    assert (r.returncode, r.stdout) == (b.returncode, b.stdout) == (0, b.stdout), (r.returncode, r.stdout, b.stdout)
    doc = r.json
    check_view(doc)
    if touch_view():
        # The arrays' pages charged through the lines that filled them (Python frames read by the
        # kernel at each fault); the total is the interpreter's RssAnon (OpenBLAS's threads included),
        # and OpenBLAS's sparse buffers are in the alloc view beside it, charged what is resident.
        heap_counters_zero(doc)
        check_anon_peak(doc, watch)
        n = int(re.search(r"^N = (\d+)", "\n".join(src), re.M).group(1))
        for fn, pattern in (("load", r"return np\.ones"), ("scale", r"return a \* ")):
            line = line_of(pattern)
            through = sum(s["charged_bytes"] for s in doc["stacks"] if any(
                (f["function"], f["file"], f["line"]) == (fn, NUMPY_DEMO, line) for f in py_frames(s)))
            assert through >= 0.95 * n * n * 8, "%s (line %d): %.1f MiB charged through it, expected %.1f\n%s" % (
                fn, line, through / MiB, n * n * 8 / MiB, top_stacks(doc))
        blas = [s for s in doc["other_view_stacks"] if s["reserved_bytes"] >= 16 * MiB and
                any("openblas" in (f.get("module") or "") for f in s["frames"])]
        assert blas and all(s["sparse"] and s["charged_bytes"] < s["reserved_bytes"] / 4 for s in blas), \
            "\n".join(show(s) for s in doc["other_view_stacks"][:8])
        return
    check_python_outermost(doc, "numpy_demo")
    check_frame_fields(doc, "numpy_demo")
    n = int(re.search(r"^N = (\d+)", "\n".join(src), re.M).group(1))
    nbytes = n * n * 8

    def openblas(s):
        return any("openblas" in (f.get("module") or "") for f in s["frames"])

    # Each array, charged to the line that made it (OpenBLAS's work buffer under multiply aside).
    for fn, pattern in (("load", r"return np\.ones"), ("scale", r"return a \* "), ("multiply", r"return a @ a")):
        line = line_of(pattern)
        through = [s for s in doc["stacks"] if not openblas(s) and any(
            (f["function"], f["file"], f["line"]) == (fn, NUMPY_DEMO, line) for f in py_frames(s))]
        check_near("%s (numpy_demo.py:%d)" % (fn, line), sum(s["charged_bytes"] for s in through), nbytes)
    # OpenBLAS's buffers are charged what is resident: most of what they reserve never is.
    blas = [s for s in doc["stacks"] if openblas(s)]
    assert blas, "no stack with an OpenBLAS frame\n" + top_stacks(doc)
    sizable = [s for s in blas if s["reserved_bytes"] >= 16 * MiB]
    assert sizable, "no OpenBLAS buffer reserved 16 MiB or more\n" + "\n".join(show(s) for s in blas)
    for s in sizable:
        assert s["charged_bytes"] < s["reserved_bytes"] / 4 and s["sparse"], show(s)
    imp = line_of(r"^import numpy")
    if (os.cpu_count() or 1) > 1:
        # A buffer of an OpenBLAS worker thread: the thread's own stack from start_thread, under
        # "[new thread]" and the stack that started it, in `import numpy as np`.
        workers = [s for s in sizable if "start_thread" in [f["function"] for f in s["frames"]]]
        assert workers, "no OpenBLAS worker thread buffer\n" + "\n".join(show(s) for s in sizable)
        for s in workers:
            fn = [f["function"] for f in s["frames"]]
            assert "[new thread]" in fn and fn.index("start_thread") < fn.index("[new thread]"), show(s)
            assert not [f for f in s["frames"][:fn.index("[new thread]")] if f["kind"] == "python"], show(s)
            assert "blas_thread_init" in fn[fn.index("[new thread]"):], show(s)
            py = py_frames(s)
            assert (py[-1]["function"], py[-1]["file"], py[-1]["line"]) == ("<module>", NUMPY_DEMO, imp), show(s)
    peak = doc["peak"]
    assert peak["charged_bytes"] <= peak["rss_bytes"] < peak["reserved_bytes"], peak
    # What importing numpy allocated hangs under the import line, through importlib's frames.
    under_import = []
    for s in doc["stacks"]:
        py = py_frames(s)
        if any(f["function"] == "<module>" and "/numpy/" in f["file"] for f in py):
            assert (py[-1]["function"], py[-1]["file"], py[-1]["line"]) == ("<module>", NUMPY_DEMO, imp), \
                "numpy's module code run from elsewhere than numpy_demo.py:%d\n  %s" % (imp, show(s))
            assert any(f["file"] == "<frozen importlib._bootstrap>" for f in py), show(s)
            under_import.append(s)
    assert under_import, "no stack under numpy_demo.py:%d (import numpy)\n%s" % (imp, top_stacks(doc))
    # OpenBLAS starts its threads while numpy is imported: in the main thread, under the import line.
    starts = [s for s in doc["stacks"] if "blas_thread_init" in [f["function"] for f in s["frames"]]]
    for s in starts:
        py = py_frames(s)
        assert py and (py[-1]["function"], py[-1]["line"]) == ("<module>", imp), show(s)


SERVE = os.path.join(PYDIR, "serve.py")


def test_attach():
    """ptfil attach to a Python program already running: its allocations after the attach carry their
    Python frames (hold <- serve <- main <- <module>, at the marked lines), and after the detach it
    runs on to its own end."""
    with open(SERVE) as f:
        lines = {m.group(1): i for i, line in enumerate(f, 1) for m in [re.search(r"# SITE: (\w+)", line)] if m}
    with Attached([PYTHON, SERVE]) as a:
        a.attach()
        time.sleep(1)
        a.signal(signal.SIGINT)
        rc, err = a.finish()
        assert rc == 0 and "detached from process %d" % a.pid in err, (rc, err)
        status, out = a.target_finish()
        doc = a.json()
    assert (status, out) == (4, b"ready\nheld True\nbye\n"), (status, out)
    check_view(doc)
    if touch_view():
        # hold()'s bytearrays zero-filled after the attach, tens of MiB in a second, charged under
        # hold's line (Python frames read by the kernel); what was resident before, [before attach].
        heap_counters_zero(doc)
        held = sum(s["charged_bytes"] for s in doc["stacks"]
                   if py_frames(s) and (py_frames(s)[0]["function"], py_frames(s)[0]["line"]) == ("hold", lines["hold"]))
        assert 8 * MiB <= held <= 200 * MiB, "%.1f MiB under hold (serve.py:%d)\n%s" % (
            held / MiB, lines["hold"], top_stacks(doc))
        assert touch_pseudo(doc, "[before attach]"), top_stacks(doc)
        return
    held = [s for s in doc["stacks"] if py_frames(s) and py_frames(s)[0]["function"] == "hold"]
    assert held, show(doc["stacks"][0])
    top = max(held, key=lambda s: s["charged_bytes"])
    chain = [(f["function"], f["line"]) for f in reversed(py_frames(top))]
    assert chain == [("<module>", chain[0][1]), ("main", chain[1][1]), ("serve", lines["serve"]), ("hold", lines["hold"])], chain
    assert all(f["file"] == SERVE for f in py_frames(top)), py_frames(top)
    # About a second of 256 KiB a tick, charged to hold(): tens of MiB, never more than was made.
    assert 8 * MiB <= top["charged_bytes"] <= 200 * MiB, top["charged_bytes"]
    assert doc["counters"].get("python.minor_version") == 11, doc["counters"]


if __name__ == "__main__":
    main([test_sites_default, test_report_text, test_sites_machine_thp, test_sites_native, test_no_python_env, test_output_and_status_unchanged,
          test_counters, test_unknown_version, test_python312, test_python313, test_python313_debug_offsets, test_numpy_demo, test_attach, test_deep_stack_cut_marked])
