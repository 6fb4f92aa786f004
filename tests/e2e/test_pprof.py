#!/usr/bin/env python3
"""ptfil-view --pprof, checked with the real reader: go tool pprof (Debian's golang-go).

The seed scenario in C, a program with inlined calls and the NumPy demo are
traced, exported and read back with `go tool pprof -top`, `-traces` and
`-raw`: the totals of inuse_space, reserved_space and inuse_objects are the
snapshot's, the largest stack has the frames `ptfil-view --json` gives it
(inlined calls included, innermost first), Python frames are functions with
their file and line, modules are mappings with their build ids. The golden
process tree gives each sample its pid and command. The export is the same
bytes every time, is never written to a terminal, and a snapshot that
ptfil-view refuses leaves no output file behind (and an old one untouched).

Without go the test is skipped, unless CI=true: tools/install-deps.sh
installs golang-go, so in CI a missing go is a failure.
"""
import gzip
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import ON_CI, MiB, SRCDIR, VIEW, functions, launch, main, missing, target, view, view_json  # noqa: E402

PYTHON = "/usr/bin/python3"
# As the interpreter names it: the path normalized (a build directory gives SRCDIR as BUILDDIR/..).
NUMPY_DEMO = os.path.normpath(os.path.join(os.path.abspath(SRCDIR), "tests", "targets", "py", "numpy_demo.py"))
GOLDEN = os.path.join(SRCDIR, "tests", "golden")
REGRESS = os.path.join(SRCDIR, "tests", "fuzz", "regress")
TIMEOUT = 300

_tmp = tempfile.mkdtemp(prefix="ptfil-pprof-")
_runs = {}


def find_go():
    for p in (shutil.which("go"), "/usr/lib/go/bin/go"):
        if p and os.access(p, os.X_OK):
            return p
    return None


GO = find_go()


def go_env():
    """go as root in CI, offline: its caches and home in a scratch directory, no toolchain download."""
    env = dict(os.environ)
    home = os.path.join(_tmp, "home")
    os.makedirs(home, exist_ok=True)
    env.update(HOME=home, GOCACHE=os.path.join(home, "gocache"), GOPATH=os.path.join(home, "gopath"),
               GOFLAGS="", GOTOOLCHAIN="local", GOPROXY="off", GOTELEMETRY="off", PPROF_TMPDIR=home,
               PPROF_BINARY_PATH=home, LC_ALL="C")
    env.pop("DISPLAY", None)
    env.pop("BROWSER", None)
    return env


def pprof(*args):
    """go tool pprof ARGS, without symbolizing (the profile's own names are what is checked)."""
    r = subprocess.run([GO, "tool", "pprof", "-symbolize=none", *args], capture_output=True,
                       timeout=TIMEOUT, env=go_env())
    assert r.returncode == 0, "go tool pprof %s: status %d\n%s" % (" ".join(args), r.returncode,
                                                                 r.stderr.decode(errors="replace"))
    return r.stdout.decode(errors="replace")


def export(snap, *args, name=None):
    """ptfil-view --pprof ARGS SNAP -o FILE: the file's path."""
    out = os.path.join(_tmp, name or "p%d.pb.gz" % len(os.listdir(_tmp)))
    r = view("--pprof", *args, "-o", out, snap, timeout=60)
    assert r.returncode == 0 and not r.stderr, "ptfil-view --pprof %s %s: %d %s" % (
        " ".join(args), snap, r.returncode, r.stderr.decode(errors="replace"))
    return out


def total(prof, index, unit="B"):
    """The total of sample type index as go tool pprof -top gives it, in bytes (or a plain count)."""
    text = pprof("-top", "-sample_index=" + index, "-unit=" + unit, prof)
    m = re.search(r"of (\d+)(B?) total", text)
    assert m, "no total in go tool pprof -top:\n" + text
    return int(m.group(1))


def traces(prof, index="inuse_space", extra=()):
    """The samples of go tool pprof -traces: (value in bytes, labels, [frames innermost first])."""
    text = pprof("-traces", "-sample_index=" + index, "-unit=B", *extra, prof)
    out = []
    for block in text.split("-----------+-------------------------------------------------------")[1:]:
        labels, frames, value = {}, [], None
        for line in block.splitlines():
            if not line.strip():
                continue
            lm = re.match(r"^ {0,10}(\w+):  (.*)$", line)
            if value is None and lm:
                labels[lm.group(1)] = lm.group(2).strip()
                continue
            vm = re.match(r"^\s*(\d+)B\s+(.*)$", line)
            if value is None and vm:
                value = int(vm.group(1))
                frames.append(vm.group(2).strip())
            elif value is not None:
                frames.append(line.strip())
        if value is not None:
            out.append((value, labels, [re.sub(r" \(inline\)$", "", f) for f in frames]))
    assert out, "no samples in go tool pprof -traces:\n" + text
    return out


def launched(name, argv, ptfil_args=("-i", "0")):
    if name not in _runs:
        r = launch(argv, ptfil_args=ptfil_args)
        assert r.returncode == 0, "ptfil launch %s: %d\n%s" % (argv, r.returncode, r.stderr.decode(errors="replace"))
        _runs[name] = r
    return _runs[name]


def json_name(f):
    """A JSON frame as pprof names it: the function, or nothing (an address) when unknown."""
    return f["function"]


def check_totals(prof, stacks):
    assert total(prof, "inuse_space") == sum(s["charged_bytes"] for s in stacks), (
        total(prof, "inuse_space"), sum(s["charged_bytes"] for s in stacks))
    assert total(prof, "reserved_space") == sum(s["reserved_bytes"] for s in stacks)
    assert total(prof, "inuse_objects", unit="minimum") == sum(s["count"] for s in stacks)


def check_folded(prof):
    """The default profile reads as the user's code: no frame of Python's import system, at most one
    unnamed native frame of a module in a row."""
    lines = pprof("-traces", "-lines", "-unit=B", prof)
    assert "<frozen importlib._bootstrap" not in lines and "_find_and_load" not in lines, lines[:3000]
    for value, labels, frames in traces(prof):
        for a, b in zip(frames, frames[1:]):
            assert not (a == b and a.startswith("[") and a.endswith(".so]")), frames


def check_top_stack(prof, stacks, index="inuse_space"):
    """The largest sample is the largest JSON stack, frame for frame (named frames), innermost first."""
    key = {"inuse_space": "charged_bytes", "reserved_space": "reserved_bytes"}[index]
    samples = traces(prof, index)
    biggest = max(samples, key=lambda s: s[0])
    top = max(stacks, key=lambda s: s[key])
    assert biggest[0] == top[key], (biggest[0], top[key])
    want = [json_name(f) for f in top["frames"]]
    got = biggest[2]
    assert len(got) == len(want), "pprof: %s\nptfil-view --json: %s" % (got, want)
    for g, w in zip(got, want):
        if w is None:
            # A frame without a name: its module, or its address.
            assert re.match(r"^(\[.*\]|<unknown>|[0-9a-fx]+)$", g), (g, got, want)
        else:
            assert g == w, "pprof: %s\nptfil-view --json: %s" % (got, want)
    return biggest


def raw(prof):
    return pprof("-raw", prof)


# --- tests ------------------------------------------------------------------------------------------

def test_seed():
    r = launched("seed", [target("sparse_threads")])
    doc = r.json
    prof = export(r.snapshot)
    with open(prof, "rb") as f:
        head = f.read(2)
    assert head == b"\x1f\x8b", "not gzip: %r" % head
    gzip.open(prof).read()
    check_totals(prof, doc["stacks"])
    assert total(prof, "inuse_space") == doc["peak"]["charged_bytes"], doc["peak"]
    assert total(prof, "inuse_space") >= 50 * MiB
    biggest = check_top_stack(prof, doc["stacks"])
    assert "load_dataset" in biggest[2], biggest
    check_top_stack(prof, doc["stacks"], "reserved_space")
    # The default sample type is inuse_space: -top without -sample_index shows it.
    assert "Type: inuse_space" in pprof("-top", prof)
    # Every module a frame is in is a mapping, with its build id.
    text = raw(prof)
    exe = target("sparse_threads")
    ids = {f["module"]: f["build_id"] for s in doc["stacks"] for f in s["frames"] if f["module"]}
    assert exe in ids and ids[exe], ids
    mappings = text.split("Mappings")[-1]
    for module, build_id in ids.items():
        want = " %s %s" % (module, build_id) if build_id else " %s" % module
        assert want in mappings, "no mapping %r in go tool pprof -raw:\n%s" % (want, mappings)
    # Every sample says its kind.
    assert all(s[1].get("kind") for s in traces(prof)), traces(prof)[:3]


def test_deterministic_and_stdout():
    r = launched("seed", [target("sparse_threads")])
    a = export(r.snapshot)
    b = export(r.snapshot)
    with open(a, "rb") as f, open(b, "rb") as g:
        da, db = f.read(), g.read()
    assert da == db, "two exports of one snapshot differ"
    # "-o -" and no -o write the same bytes to a pipe.
    for args in (["-o", "-"], []):
        out = view("--pprof", *args, r.snapshot, timeout=60)
        assert out.returncode == 0 and out.stdout == da, (args, out.returncode, out.stderr)
    # A terminal is refused with one line and gets nothing.
    master, slave = pty.openpty()
    try:
        p = subprocess.run([VIEW, "--pprof", r.snapshot], stdout=slave, stderr=subprocess.PIPE, timeout=60)
        os.close(slave)
        slave = -1
        os.set_blocking(master, False)
        try:
            written = os.read(master, 65536)
        except OSError:
            written = b""
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert p.returncode == 2 and written == b"", (p.returncode, written[:80])
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "terminal" not in err or "--output" in err, err


def test_inlined():
    r = launched("inlined", [target("inlined")])
    doc = r.json
    stacks = doc["stacks"]
    assert any(f["inlined"] for s in stacks for f in s["frames"]), "no inlined frame in the snapshot"
    prof = export(r.snapshot)
    check_totals(prof, stacks)
    # The 48 MiB table: fill_rows inlined into make_table, one location, both functions, innermost first.
    top = check_top_stack(prof, stacks)[2]
    assert "fill_rows" in top and top.index("fill_rows") + 1 == top.index("make_table"), top
    samples = traces(prof)
    # Every stack with an inlined call reads the same in pprof: one location, several functions.
    for s in stacks:
        if not any(f["inlined"] for f in s["frames"]) or not s["charged_bytes"]:
            continue
        want = [json_name(f) for f in s["frames"]]
        assert any(len(t[2]) == len(want) and all(w is None or g == w for g, w in zip(t[2], want))
                   for t in samples), "no pprof trace for %s" % want
    text = raw(prof)
    locs = text.split("Locations")[1].split("Mappings")[0]
    multi = re.findall(r"^\s+\d+: 0x[0-9a-f]+ M=\d+ .*\n(?:\s{10,}\S.*\n)+", locs, re.M)
    assert multi, "no location with inlined lines in go tool pprof -raw:\n" + locs
    # The golden fixture with source lines: native frames by file:line, inlined ones inside one location.
    gold = os.path.join(GOLDEN, "srclines.snap")
    gdoc = view_json(gold)
    gprof = export(gold)
    check_totals(gprof, gdoc["stacks"])
    check_top_stack(gprof, gdoc["stacks"])
    lines = pprof("-traces", "-lines", "-unit=B", gprof)
    for s in gdoc["stacks"]:
        for f in s["frames"]:
            if f["function"] and f["file"] and f["line"]:
                assert re.search(re.escape(f["function"]) + r" \S*" + re.escape(os.path.basename(f["file"]))
                                 + ":" + str(f["line"]), lines), (f, lines)


def test_python_numpy():
    r = subprocess.run([PYTHON, "-c", "import numpy"], capture_output=True, timeout=60)
    if r.returncode != 0:
        raise missing("%s cannot import numpy (tools/install-deps.sh installs python3-numpy)" % PYTHON)
    run = launched("numpy", [PYTHON, NUMPY_DEMO])
    doc = run.json
    # Frame for frame as JSON gives them with --raw-frames; folded by default, the totals the same.
    check_top_stack(export(run.snapshot, "--raw-frames"), doc["stacks"])
    prof = export(run.snapshot)
    check_totals(prof, doc["stacks"])
    check_folded(prof)
    lines = pprof("-traces", "-lines", "-unit=B", prof)
    src = open(NUMPY_DEMO).read().splitlines()
    for fn, pat in (("load", r"return np.ones"), ("scale", r"return a \* 0.5")):
        line = next(i for i, t in enumerate(src, 1) if re.search(pat, t))
        assert re.search(r"\b%s %s:%d\b" % (fn, re.escape(NUMPY_DEMO), line), lines), (fn, line, lines[:3000])


def test_python_golden():
    gold = os.path.join(GOLDEN, "python.snap")
    gdoc = view_json(gold)
    gprof = export(gold, "--raw-frames")
    check_totals(gprof, gdoc["stacks"])
    check_top_stack(gprof, gdoc["stacks"])
    folded = export(gold)
    check_totals(folded, gdoc["stacks"])
    check_folded(folded)
    assert "[import numpy]" in pprof("-traces", "-unit=B", folded)
    lines = pprof("-traces", "-lines", "-unit=B", gprof)
    py = [f for s in gdoc["stacks"] for f in s["frames"] if f["kind"] == "python" and f["function"]]
    assert py
    for f in py:
        want = "%s %s:%d" % (f["function"], f["file"], f["line"]) if f["line"] else f["function"]
        assert want in lines, (want, lines[:3000])
    # Python frames have no mapping: their functions are the qualified names with their files.
    text = raw(gprof)
    assert any(("M=0" in l or "M=" not in l) and py[0]["function"] in l for l in text.splitlines()), text


def test_tree_and_pid():
    gold = os.path.join(GOLDEN, "tree.snap")
    doc = view_json(gold)
    prof = export(gold)
    tree = doc["combined_peak_stacks"]
    check_totals(prof, tree)
    assert total(prof, "inuse_space") == doc["tree"]["combined_peak_bytes"]
    samples = traces(prof)
    pids = {p["pid"]: p["command"] for p in doc["tree"]["processes"]}
    for value, labels, frames in samples:
        assert "pid" in labels and "command" in labels, labels
        pid = int(labels["pid"].strip("[]"))
        assert pid in pids and pids[pid] and labels["command"].strip("[]") == pids[pid], (labels, pids)
    # --pid: one process alone, no labels of a tree.
    child = next(p["pid"] for p in doc["tree"]["processes"] if p["file"])
    cprof = export(gold, "--pid", str(child))
    cdoc = view_json(os.path.join(GOLDEN, next(p["file"] for p in doc["tree"]["processes"] if p["pid"] == child)))
    check_totals(cprof, cdoc["stacks"])
    assert all("pid" not in t[1] for t in traces(cprof))
    # --live: what was live at the end; --diff: the after side, byte for byte.
    lprof = export(gold, "--live")
    check_totals(lprof, doc["live_at_end"])
    d = export(os.path.join(GOLDEN, "python_after.snap"), "--diff", os.path.join(GOLDEN, "python.snap"))
    with open(d, "rb") as f, open(export(os.path.join(GOLDEN, "python_after.snap")), "rb") as g:
        assert f.read() == g.read(), "--diff --pprof is not the after side's profile"


def test_touch_view():
    """A touch snapshot: the same sample types (servers know them), the view in a comment, kind touch."""
    gold = os.path.join(GOLDEN, "touch.snap")
    doc = view_json(gold)
    assert doc["view"] == "touch"
    prof = export(gold)
    check_totals(prof, doc["stacks"])
    check_top_stack(prof, doc["stacks"])
    top = pprof("-top", prof)
    assert "Type: inuse_space" in top, top
    assert "view touch: memory charged to the code that made it resident (its first write to each page)" in top, top
    kinds = {labels.get("kind", "").strip("[]") for _, labels, _ in traces(prof)}
    assert kinds == {"touch", "pseudo"}, kinds
    # An alloc snapshot says its view the same way.
    aprof = export(os.path.join(GOLDEN, "heap_chain.snap"))
    assert "view alloc: memory charged to the code that allocated it" in pprof("-top", aprof)


def test_hostile_refused():
    files = [os.path.join(REGRESS, n) for n in sorted(os.listdir(REGRESS))]
    assert files
    refused = 0
    for path in files:
        out = os.path.join(_tmp, "hostile.pb.gz")
        if os.path.exists(out):
            os.unlink(out)
        r = view("--pprof", "-o", out, path, timeout=60)
        if r.returncode == 0:
            continue  # a regression input ptfil-view now reads (the fuzz test says which must be refused)
        refused += 1
        assert r.returncode == 1 and r.stderr.decode().count("\n") == 1, (path, r.returncode, r.stderr)
        assert not os.path.exists(out), "%s: an output file was created" % path
        # An existing file stays as it was.
        with open(out, "wb") as f:
            f.write(b"old")
        r = view("--pprof", "-o", out, path, timeout=60)
        assert r.returncode == 1
        with open(out, "rb") as f:
            assert f.read() == b"old", path
        os.unlink(out)
        left = [n for n in os.listdir(_tmp) if n.startswith("hostile.pb.gz")]
        assert not left, left
    assert refused >= len(files) // 2, "only %d of %d hostile files refused" % (refused, len(files))


TESTS = [test_seed, test_deterministic_and_stdout, test_inlined, test_python_numpy, test_python_golden,
         test_tree_and_pid, test_touch_view, test_hostile_refused]

if __name__ == "__main__":
    if not GO:
        if ON_CI:
            print("FAIL: go is not installed (tools/install-deps.sh installs golang-go)")
            sys.exit(1)
        print("SKIP: go is not installed (tools/install-deps.sh installs golang-go): go tool pprof reads the export")
        sys.exit(77)
    try:
        main(TESTS)
    finally:
        shutil.rmtree(_tmp, ignore_errors=True)
