"""Shared helpers for ptfil's end-to-end tests: run a target under ptfil, read its snapshot as JSON.

Every run has a timeout and runs in its own session, so a hung ptfil and its
traced child are killed together (the child also dies with ptfil: PTRACE_O_EXITKILL).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback

MiB = 1024 * 1024
SRCDIR = os.environ.get("PTFIL_SRCDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILDDIR = os.environ.get("PTFIL_BUILDDIR") or SRCDIR
PTFIL = os.path.join(BUILDDIR, "ptfil")
VIEW = os.path.join(BUILDDIR, "ptfil-view")
TARGETS = os.path.join(BUILDDIR, "tests", "targets")
TIMEOUT = 120


def target(name):
    return os.path.join(TARGETS, name)


class Run:
    """One finished ptfil launch: its exit status, output, and the snapshot as ptfil-view --json shows it."""

    def __init__(self, proc, snapshot, stdout, stderr):
        self.returncode = proc.returncode
        self.stdout = stdout
        self.stderr = stderr
        self.snapshot = snapshot
        self._json = None

    @property
    def json(self):
        if self._json is None:
            self._json = view_json(self.snapshot)
        return self._json


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def workdir():
    d = tempfile.mkdtemp(prefix="ptfil-test-")
    return d


def launch(argv, ptfil_args=("-i", "0"), stdin_data=None, timeout=TIMEOUT, env=None):
    """Runs ptfil launch on argv; returns a Run. Raises on timeout (after killing everything)."""
    d = workdir()
    snap = os.path.join(d, "snap.gz")
    cmd = [PTFIL, "launch", "-q", "-o", snap, *ptfil_args, "--", *argv]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)
    try:
        out, err = proc.communicate(stdin_data, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise AssertionError("ptfil launch %r timed out after %ss" % (argv, timeout))
    return Run(proc, snap, out, err)


def bare(argv, stdin_data=None, timeout=TIMEOUT):
    """Runs argv untraced, for comparison; returns CompletedProcess."""
    return subprocess.run(argv, input=stdin_data, capture_output=True, timeout=timeout)


def view_json(path):
    r = subprocess.run([VIEW, "--json", path], capture_output=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("ptfil-view --json %s failed (%d): %s" % (path, r.returncode, r.stderr.decode()))
    return json.loads(r.stdout)


def functions(stack):
    """The function names of a JSON stack, innermost first (None for unknown frames)."""
    return [f.get("function") for f in stack["frames"]]


def stacks_through(doc, function, key="stacks"):
    """The stacks of doc[key] that pass through a frame named function."""
    return [s for s in doc[key] if function in functions(s)]


def charged_through(doc, function, key="stacks"):
    return sum(s["charged_bytes"] for s in stacks_through(doc, function, key))


def reserved_through(doc, function, key="stacks"):
    return sum(s["reserved_bytes"] for s in stacks_through(doc, function, key))


def near(actual, expected, rel=0.03, slack=0):
    return abs(actual - expected) <= expected * rel + slack


def check_near(what, actual, expected, rel=0.03, slack=0):
    assert near(actual, expected, rel, slack), "%s: %.2f MiB, expected %.2f MiB (within %d%%)" % (
        what, actual / MiB, expected / MiB, rel * 100)


def ptrace_refused():
    """True when this machine refuses ptrace to us: the one honest reason to skip (exit 77)."""
    d = workdir()
    r = subprocess.run([PTFIL, "launch", "-q", "-o", os.path.join(d, "s.gz"), "--", "/bin/true"],
                       capture_output=True, timeout=60)
    shutil.rmtree(d, ignore_errors=True)
    return r.returncode != 0 and b"cannot trace" in r.stderr


def main(tests):
    """Runs the test functions given, prints one line each and a summary; exits 1 on any failure, 77 if ptrace is refused."""
    if ptrace_refused():
        print("SKIP: ptrace is not permitted here")
        sys.exit(77)
    passed = failed = 0
    only = sys.argv[1:]
    for t in tests:
        if only and t.__name__ not in only:
            continue
        try:
            t()
        except Exception:
            failed += 1
            print("FAIL: %s" % t.__name__)
            traceback.print_exc()
        else:
            passed += 1
            print("PASS: %s" % t.__name__)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)
