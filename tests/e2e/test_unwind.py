"""Unwinding that stops at the first frame shared with the last unwind (tracer/stacks/unwind.c, "splicing").

With PTFIL_UNWIND_VERIFY=1 ptfil unwinds every spliced stack a second time in full and counts
the stacks that differ (unwind.splice_mismatches). Deep interpreter stacks splice most: CPython
allocating from nested Python functions, and NumPy with its OpenBLAS threads when installed.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, bare, check_near, launch, main

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

NESTED = r"""
import json
def leaf(n):
    return [bytearray(300 + i % 11) for i in range(n)]
def mid(k):
    out = []
    for i in range(k):
        out.append(leaf(40))
        out.append({str(j): [j] * 20 for j in range(40)})
    return out
def recurse(d, k):
    return mid(k) if d == 0 else [recurse(d - 1, k)]
keep = []
for r in range(30):
    keep.append(recurse(r % 9, 15))
    json.dumps(str(r))
big = bytearray(24 << 20)
print(len(keep), len(big))
"""

NUMPY = "import numpy as np; a = np.ones((1000, 1000)); b = a @ a; print(b[0, 0])"


def run_verified(argv):
    # Native stacks only: these tests check the unwinder, whose frames Python frames would replace.
    # The check unwinds each spliced stack again from the thread itself, which only a stopped thread
    # allows: the ptrace path, whichever pass this is (on the kernel path the thread ran on after its
    # stack was copied, and a second unwind past the copy reads another moment's stack).
    env = dict(os.environ, PTFIL_UNWIND_VERIFY="1", PTFIL_NO_PYTHON="1", PTFIL_HEAP_EVENTS="ptrace")
    r = launch(argv, env=env)
    assert r.returncode == 0, r.stderr
    c = r.json["counters"]
    return r, c


def test_python_splices_match_full_unwinds():
    r, c = run_verified([PYTHON, "-c", NESTED])
    assert c["unwind.splices"] > 100, c
    assert c["unwind.spliced_frames"] > 10 * c["unwind.splices"], c
    assert c["unwind.splice_mismatches"] == 0, c
    b = bare([PYTHON, "-c", NESTED])
    assert r.stdout == b.stdout == b"30 25165824\n", (r.stdout, b.stdout)
    # The 24 MiB bytearray is the top stack, through the interpreter's frames to the script's code.
    top = r.json["stacks"][0]
    check_near("bytearray", top["charged_bytes"], 24 * MiB)
    f = [x["function"] for x in top["frames"]]
    assert f[0] == "malloc" and "PyByteArray_Resize" in f and "PyEval_EvalCode" in f, f
    assert f.index("PyByteArray_Resize") < f.index("_PyEval_EvalFrameDefault") < f.index("PyEval_EvalCode"), f


def test_numpy_threads_splices_match():
    probe = bare([PYTHON, "-c", "import numpy"])
    assert probe.returncode == 0, "python3-numpy is missing: tools/install-deps.sh installs it"
    r, c = run_verified([PYTHON, "-c", NUMPY])
    assert c["unwind.splices"] > 100, c
    assert c["unwind.splice_mismatches"] == 0, c
    assert r.stdout == b"1000.0\n", r.stdout


def test_verify_off_by_default():
    r = launch([PYTHON, "-c", "print(1)"])
    assert "unwind.splice_mismatches" not in r.json["counters"], r.json["counters"]


if __name__ == "__main__":
    main([test_python_splices_match_full_unwinds, test_numpy_threads_splices_match, test_verify_off_by_default])
