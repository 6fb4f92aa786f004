"""Runs an end-to-end test file again on the kernel path: make check's log compiler for tests/e2e/uprobe/*.kpy.

Usage: run_uprobe.py [TEST...] tests/e2e/uprobe/NAME.kpy

A .kpy file names, on its first line that is not a comment, a test file of tests/e2e (the directory
above it) and optionally the test functions to run of it (all when none is named). This script sets
PTFIL_HEAP_EVENTS=uprobe, so that every ptfil the test starts takes the kernel path (uprobes and a BPF
ring buffer) instead of ptrace breakpoints for the malloc family, and runs that file with the same
Python, in this process (its exit status is the test's: 0, 1, or 77 for a skip).

Before that it asks ptfil once whether the kernel path works here (ptfiltest.heap_events_probe: ptfil
launch --heap-events=uprobe -- /bin/true), remembered in $PTFIL_BUILDDIR/tests/e2e/uprobe-probe.cache
for as long as the ptfil binary, the user and the capabilities are the same. Where ptfil says it
cannot use kernel uprobes (not root and no CAP_BPF + CAP_PERFMON, an old kernel, ptfil built without
BPF) the test is skipped (77) with ptfil's reason, unless PTFIL_REQUIRE_UPROBE=1 (then it fails).
Under PTFIL_REQUIRE_UPROBE=1 a file whose tests all skipped fails too (ptfiltest.main): the pass
must check something. A test that skips prints SKIP: NAME: why either way.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ptfiltest  # noqa: E402


def read_kpy(path):
    """(test file, [test names]) from a .kpy file."""
    with open(path) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if words:
                return words[0], words[1:]
    raise SystemExit("run_uprobe.py: %s names no test file" % path)


def main():
    # automake puts KPY_LOG_FLAGS before the file: test names may come on either side of it.
    kpys = [a for a in sys.argv[1:] if a.endswith(".kpy")]
    if len(kpys) != 1:
        raise SystemExit("usage: run_uprobe.py [TEST...] tests/e2e/uprobe/NAME.kpy [TEST...]")
    kpy = kpys[0]
    given = [a for a in sys.argv[1:] if a != kpy]
    name, tests = read_kpy(kpy)
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(kpy))), name)
    if not os.path.isfile(script):
        raise SystemExit("run_uprobe.py: %s names %s, which does not exist" % (kpy, script))
    cache_dir = os.path.join(ptfiltest.BUILDDIR, "tests", "e2e")
    os.makedirs(cache_dir, exist_ok=True)
    status, message = ptfiltest.heap_events_probe_cached(os.path.join(cache_dir, "uprobe-probe.cache"))
    ptfiltest.require_kernel_path(status, message, "%s on the kernel path" % name)
    os.environ[ptfiltest.HEAP_EVENTS_ENV] = "uprobe"
    # Test names given on the command line (make check KPY_LOG_FLAGS=NAME) replace the file's.
    tests = given or tests
    print("%s with %s=uprobe%s" % (name, ptfiltest.HEAP_EVENTS_ENV, ": " + " ".join(tests) if tests else ""),
          flush=True)
    ptfiltest.kernel_path_lock()
    os.execv(sys.executable, [sys.executable, script] + tests)


if __name__ == "__main__":
    main()
