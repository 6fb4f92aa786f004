"""Runs an end-to-end test file again in the touch view: make check's log compiler for tests/e2e/touch/*.tpy.

Usage: run_touch.py [TEST...] tests/e2e/touch/NAME.tpy [TEST...]

A .tpy file names, on its first line that is not a comment, a test file of tests/e2e (the directory
above it) and optionally the test functions to run of it (all when none is named). This script sets
PTFIL_CHARGE=touch, so that every ptfil the test starts charges each resident page to the stack that
made it resident (the fault path: BPF on the kernel's page-fault tracepoints) instead of to the
stack that allocated it, and runs that file with the same Python, in this process (its exit status
is the test's: 0, 1, or 77 for a skip). The test files ask ptfiltest.charge_view() which view they
check, and say what touch means where it differs (ptfiltest: "the two views").

Before that it asks ptfil once whether the fault path works here (ptfil launch --charge touch --
/bin/true), remembered in $PTFIL_BUILDDIR/tests/e2e/touch-probe.cache for as long as the ptfil
binary, the user and the capabilities are the same. Where ptfil says it cannot charge memory to
the code that made it resident (not root and no CAP_BPF + CAP_PERFMON, a kernel without BTF, ptfil
built without BPF) the test is skipped (77) with ptfil's reason, unless CI=true or
PTFIL_REQUIRE_UPROBE=1 (then it fails: CI runs as root, where the fault path must work).
"""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ptfiltest  # noqa: E402


def read_tpy(path):
    """(test file, [test names]) from a .tpy file."""
    with open(path) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if words:
                return words[0], words[1:]
    raise SystemExit("run_touch.py: %s names no test file" % path)


def fault_path_probe(timeout=60):
    """("ok", ""), ("unavailable", ptfil's message) when ptfil says the fault path cannot run here, or
    ("broken", what happened) when ptfil failed otherwise or its snapshot is not in the touch view."""
    d = ptfiltest.workdir()
    try:
        snap = os.path.join(d, "probe.gz")
        env = {k: v for k, v in os.environ.items() if k != ptfiltest.CHARGE_ENV}
        try:
            rc, _, err = ptfiltest.run_ptfil(["launch", "-q", "-i", "0", "--charge", "touch", "-o", snap, "--",
                                              "/bin/true"], env=env, timeout=timeout)
        except AssertionError as e:
            return "broken", str(e)
        if rc != 0:
            if ptfiltest.FAULT_PATH_REFUSED in err:
                return "unavailable", err.strip()
            return "broken", "ptfil launch --charge touch -- /bin/true: exit status %d: %s" % (
                rc, " / ".join(err.strip().splitlines()[:2]))
        try:
            view = ptfiltest.view_json(snap).get("view")
        except (AssertionError, ValueError) as e:
            return "broken", "the probe's snapshot: %s" % e
        if view != "touch":
            return "broken", "ptfil launch --charge touch -- /bin/true wrote a snapshot of view %r" % view
        return "ok", ""
    finally:
        shutil.rmtree(d, ignore_errors=True)


def probe_cached(cache):
    key = ptfiltest._probe_key()
    try:
        with open(cache) as f:
            lines = f.read().split("\n", 2)
        if len(lines) == 3 and lines[0] == key and lines[1] in ("ok", "unavailable"):
            return lines[1], lines[2]
    except OSError:
        pass
    status, message = fault_path_probe()
    if status != "broken":
        tmp = "%s.%d" % (cache, os.getpid())
        try:
            with open(tmp, "w") as f:
                f.write("%s\n%s\n%s" % (key, status, message))
            os.rename(tmp, cache)
        except OSError:
            pass
    return status, message


def main():
    # automake puts TPY_LOG_FLAGS before the file: test names may come on either side of it.
    tpys = [a for a in sys.argv[1:] if a.endswith(".tpy")]
    if len(tpys) != 1:
        raise SystemExit("usage: run_touch.py [TEST...] tests/e2e/touch/NAME.tpy [TEST...]")
    tpy = tpys[0]
    given = [a for a in sys.argv[1:] if a != tpy]
    name, tests = read_tpy(tpy)
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(tpy))), name)
    if not os.path.isfile(script):
        raise SystemExit("run_touch.py: %s names %s, which does not exist" % (tpy, script))
    cache_dir = os.path.join(ptfiltest.BUILDDIR, "tests", "e2e")
    os.makedirs(cache_dir, exist_ok=True)
    status, message = probe_cached(os.path.join(cache_dir, "touch-probe.cache"))
    required = ptfiltest.ON_CI or os.environ.get(ptfiltest.REQUIRE_UPROBE_ENV) == "1"
    if status == "unavailable" and not required:
        print("SKIP: %s in the touch view: the fault path (--charge touch) is not available here: %s" % (
            name, message))
        sys.exit(77)
    if status != "ok":
        print("FAIL: %s in the touch view: ptfil cannot charge in the touch view (--charge touch)%s: %s" % (
            name, " and CI requires it" if status == "unavailable" else "", message))
        sys.exit(1)
    os.environ[ptfiltest.CHARGE_ENV] = "touch"
    tests = given or tests
    print("%s with %s=touch%s" % (name, ptfiltest.CHARGE_ENV, ": " + " ".join(tests) if tests else ""), flush=True)
    os.execv(sys.executable, [sys.executable, script] + tests)


if __name__ == "__main__":
    main()
