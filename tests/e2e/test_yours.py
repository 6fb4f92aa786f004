#!/usr/bin/env python3
"""Reports that read like the user's own code (issue 27): each stack headed by its frame of the
user's code, "your lines at the peak", Python's import machinery folded into "[import MODULE]",
runs of unnamed native frames folded, and the end of the run naming the lines that held the peak.

The programs: tests/targets/py/seed_pandas.py (the seed's data script: pandas DataFrames built in
functions, a copy kept, a matplotlib plot; Debian's python3-pandas and python3-matplotlib),
the NumPy demo (make demo) and a C++ program (heap_cxx: fill_vector's 7.6 MiB vector and
build_nodes' list nodes, through libstdc++).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import PTFIL, SRCDIR, main, missing, run, target, view_output, workdir

PYTHON = "/usr/bin/python3"
PY = os.path.join(os.path.abspath(SRCDIR), "tests", "targets", "py")
SEED = os.path.normpath(os.path.join(PY, "seed_pandas.py"))
NUMPY_DEMO = os.path.normpath(os.path.join(PY, "numpy_demo.py"))
IMPORT_SYSTEM = ("<frozen importlib._bootstrap", "_find_and_load", "_call_with_frames_removed")


def needs(*modules):
    for m in modules:
        if run([PYTHON, "-c", "import " + m], timeout=60).returncode != 0:
            raise missing("%s cannot import %s (tools/install-deps.sh installs it)" % (PYTHON, m))


def line_of(path, pattern):
    return next(i for i, t in enumerate(open(path).read().splitlines(), 1) if re.search(pattern, t))


def stacks(text):
    """The text report's stacks at the peak: a list of their lines, header first."""
    body = text.split(" stacks at the peak, by charged bytes:\n", 1)[1].split("\n\n", 1)[0]
    out = []
    for l in body.splitlines():
        if re.match(r"#\d+ ", l):
            out.append([l])
        elif out and not l.startswith("..."):
            out[-1].append(l)
    return out


def share(header):
    return float(re.search(r"([0-9.]+)%", header).group(1))


def your_lines(text):
    """"your lines at the peak" as (bytes text, share, what) rows."""
    body = text.split("\nyour lines at the peak", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return [re.match(r"\s*(\S+ \S+)\s+([0-9.]+)%\s+(.*)$", l).groups() for l in body if not l.lstrip().startswith("...")]


class Run:
    def __init__(self, r, snapshot):
        self.returncode, self.stdout, self.stderr, self.snapshot = r.returncode, r.stdout, r.stderr, snapshot


def launch(argv, ptfil_args=()):
    """ptfil launch -o SNAP ARGS -- argv, its summary on stderr kept (no -q unless given)."""
    snap = os.path.join(workdir(), "snap.gz")
    return Run(run([PTFIL, "launch", "-o", snap, *ptfil_args, "--", *argv], timeout=300), snap)


def folded_total(args):
    return sum(int(l.rsplit(" ", 1)[1]) for l in view_output("--folded", *args).decode().splitlines())


def test_seed_pandas_script():
    needs("pandas", "matplotlib")
    d = workdir()
    png = os.path.join(d, "plot.png")
    bare = run([PYTHON, SEED, png], timeout=120)
    assert bare.returncode == 0, bare.stderr
    r = launch([PYTHON, SEED, png], ptfil_args=())
    assert r.returncode == 0, r.stderr
    assert r.stdout == bare.stdout, (r.stdout, bare.stdout)
    text = view_output(r.snapshot).decode()
    # No import-system frame anywhere in the report; "[import pandas]" where the script imports it.
    for name in IMPORT_SYSTEM:
        assert name not in text, name
    imp = line_of(SEED, r"^import pandas")
    assert re.search(r"\[import pandas\]\n\s+<module> \(%s:%d\)" % (re.escape(SEED), imp),
                     view_output("--top", "0", r.snapshot).decode()), "no [import pandas] at seed_pandas.py:%d" % imp
    # Every stack above 1% of the peak is headed by a line of the script, in its function.
    mine = {"load", "enrich", "summarize", "plot", "main", "<module>"}
    big = [s for s in stacks(text) if share(s[0]) >= 1.0]
    assert len(big) >= 5, text
    for s in big:
        head = s[1] if not s[1].lstrip().startswith("sparse") else s[2]
        m = re.match(r"\s+your code: (\S+) \((.*):(\d+)\)$", head)
        assert m and m.group(2) == SEED and m.group(1) in mine, (head, s)
    # The largest own line is summarize's join, where the script was built to peak.
    rows = your_lines(text)
    join = line_of(SEED, r"pd\.concat")
    assert rows[0][2] == "summarize (%s:%d)" % (SEED, join), rows
    assert {"load", "enrich", "summarize"} <= {w.split(" ")[0] for _, _, w in rows}, rows
    # The end of the run names the same line first, and the command that makes the page.
    err = r.stderr.decode()
    assert "ptfil: your lines at the peak: summarize (seed_pandas.py:%d) " % join in err, err
    assert "ptfil-view --html -o " in err, err
    # Folding changes no total: the flame graph's bytes with and without it, and the peak.
    assert folded_total([r.snapshot]) == folded_total(["--raw-frames", r.snapshot])
    html = view_output("--html", r.snapshot).decode()
    assert "_find_and_load" not in html and "[import pandas]" in html and "your code: " in html
    # The raw frames are still in the snapshot.
    raw = view_output("--top", "0", "--depth", "200", "--raw-frames", r.snapshot).decode()
    assert "_find_and_load (<frozen importlib._bootstrap>" in raw


def test_numpy_demo():
    needs("numpy")
    r = launch([PYTHON, NUMPY_DEMO], ptfil_args=("-q",))
    assert r.returncode == 0, r.stderr
    text = view_output(r.snapshot).decode()
    for name in IMPORT_SYSTEM:
        assert name not in text, name
    assert "[import numpy]" in text, text
    # A run of a module's frames without names is one frame.
    assert not re.search(r"_multiarray_umath\S* \+ 0x[0-9a-f]+\)?\n\s+_multiarray_umath", text), text
    assert re.search(r"\[_multiarray_umath\u2026so, \d+ frames\]", text), text
    rows = your_lines(text)
    top = {w.split(" ")[0] for _, _, w in rows[:3]}
    assert {"load", "scale"} <= top, rows
    assert folded_total([r.snapshot]) == folded_total(["--raw-frames", r.snapshot])


def test_native_program_names_its_own_functions_first():
    r = launch([target("heap_cxx")], ptfil_args=())
    assert r.returncode == 0, r.stderr
    text = view_output(r.snapshot).decode()
    first, second = stacks(text)[:2]
    # The program's functions head the stacks, not operator new, std::vector or libc.
    got = {re.match(r"\s+your code: (\S+) ", s[1]).group(1) for s in (first, second)}
    assert got == {"fill_vector", "build_nodes"}, (first, second)
    rows = your_lines(text)
    assert {w.split(" ")[0] for _, _, w in rows[:2]} == {"fill_vector", "build_nodes"}, rows
    err = r.stderr.decode()
    assert re.search(r"your lines at the peak: (fill_vector|build_nodes) \(heap_cxx\.cc:\d+\)", err), err


def test_max_peak_names_the_largest_own_line():
    r = launch([target("heap_cxx")], ptfil_args=("--max-peak", "4M"))
    assert r.returncode == 97, (r.returncode, r.stderr)
    err = r.stderr.decode()
    assert re.search(r"over the budget of 4\.0 MiB \(--max-peak\); your largest line: "
                     r"fill_vector \(heap_cxx\.cc:\d+\) 7\.\d MiB", err), err


def test_own_paths_named_by_the_user():
    """--own: the user says what their code is; here the C++ program's code is not, so no line is."""
    r = launch([target("heap_cxx")], ptfil_args=("-q",))
    assert r.returncode == 0, r.stderr
    text = view_output("--own", "/nonexistent/src", r.snapshot).decode()
    assert "your code is what --own names" in text
    assert "      your code: " not in text
    rows = your_lines(text)
    assert len(rows) == 1 and rows[0][2].startswith("(in no frame of your code"), rows
    # Naming the program's own directory gives its functions back.
    here = os.path.dirname(target("heap_cxx"))
    text = view_output("--own", here, r.snapshot).decode()
    assert "your code: fill_vector" in text, text


if __name__ == "__main__":
    main([test_seed_pandas_script, test_numpy_demo, test_native_program_names_its_own_functions_first,
          test_max_peak_names_the_largest_own_line, test_own_paths_named_by_the_user])
