"""Shared helpers for ptfil's end-to-end tests: run a target under ptfil, read its snapshot as JSON.

Every run has a timeout and runs in its own session, so a hung ptfil and its
traced child are killed together (the child also dies with ptfil: PTRACE_O_EXITKILL).

A test that cannot run on this machine raises Skip("why"): main() prints "SKIP: test: why" and counts
it apart, never as a pass; a file whose tests all skipped exits 77, automake's SKIP. What CI installs
(tools/install-deps.sh, .ci/run) is not a reason to skip there: `raise missing("why")` is a skip on a
developer's machine and a failure under CI=true.
"""
import ctypes
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
import unittest

MiB = 1024 * 1024
SRCDIR = os.environ.get("PTFIL_SRCDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILDDIR = os.environ.get("PTFIL_BUILDDIR") or SRCDIR
PTFIL = os.path.join(BUILDDIR, "ptfil")
VIEW = os.path.join(BUILDDIR, "ptfil-view")
TARGETS = os.path.join(BUILDDIR, "tests", "targets")
TIMEOUT = 120


def target(name):
    return os.path.join(TARGETS, name)


# The sizes the tests expect are counted in 4 KiB pages. With transparent huge pages "always", one
# write into a large enough anonymous region (a thread's stack, calloc's untouched gigabyte, two
# workers' merged blocks, the last page of a bytearray where CPython writes its NUL) makes 2 MiB
# resident, and a target reaches more than it was built for, or charges it to a neighbour. So this
# test process and everything it starts (ptfil, the targets: prctl's setting is inherited across fork
# and exec) run as under "madvise", whatever the machine's setting: huge pages only where a program
# asks for them (touch.c's huge_pages). Linux 6.18's PR_THP_DISABLE_EXCEPT_ADVISED; an older kernel
# refuses it and the machine's setting stands. launch(machine_thp=True) runs under the machine's own.
_PR_SET_THP_DISABLE = 41
_PR_THP_DISABLE_EXCEPT_ADVISED = 1 << 1
_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl(_PR_SET_THP_DISABLE, ctypes.c_ulong(1), ctypes.c_ulong(_PR_THP_DISABLE_EXCEPT_ADVISED),
            ctypes.c_ulong(0), ctypes.c_ulong(0))


def _machine_thp():
    """preexec_fn: the child runs under the machine's huge-page setting again."""
    _libc.prctl(_PR_SET_THP_DISABLE, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))


def thp_setting():
    """The machine's transparent huge page setting: "always", "madvise", "never" (or None)."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return next((w[1:-1] for w in f.read().split() if w.startswith("[")), None)
    except OSError:
        return None


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


def launch(argv, ptfil_args=("-i", "0"), stdin_data=None, timeout=TIMEOUT, env=None, fixed_addresses=False,
           machine_thp=False):
    """Runs ptfil launch on argv; returns a Run. Raises on timeout (after killing everything).
    fixed_addresses: ptfil and the program run without address space randomization (setarch -R),
    so that a program whose allocations depend on its addresses (hashes of ids) allocates alike.
    machine_thp: under the machine's transparent huge page setting, not as under "madvise"."""
    d = workdir()
    snap = os.path.join(d, "snap.gz")
    cmd = [PTFIL, "launch", "-q", "-o", snap, *ptfil_args, "--", *argv]
    if fixed_addresses:
        cmd = ["setarch", os.uname().machine, "-R", *cmd]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env=env, preexec_fn=_machine_thp if machine_thp else None)
    try:
        out, err = proc.communicate(stdin_data, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise AssertionError("ptfil launch %r timed out after %ss" % (argv, timeout))
    return Run(proc, snap, out, err)


def launched(argv, ptfil_args=("-i", "0"), timeout=TIMEOUT, env=None):
    """launch() of a program that must run to a clean end (exit status 0): (the Run, its snapshot's JSON)."""
    r = launch(argv, ptfil_args=ptfil_args, timeout=timeout, env=env)
    assert r.returncode == 0, (argv, r.returncode, r.stderr.decode(errors="replace"))
    return r, r.json


def bare(argv, stdin_data=None, timeout=TIMEOUT):
    """Runs argv untraced, for comparison; returns CompletedProcess."""
    return subprocess.run(argv, input=stdin_data, capture_output=True, timeout=timeout)


def run(argv, input=None, stdin=None, env=None, cwd=None, timeout=TIMEOUT, pass_fds=()):
    """Runs argv to its end in a session of its own, with stdout and stderr captured (bytes), and returns
    the CompletedProcess. Its stdin is input (bytes), else the file stdin, else /dev/null. On timeout
    the whole session is killed and AssertionError raised; once it is done, so is whatever it left
    running in its session."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else stdin or subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd, pass_fds=pass_fds,
                            start_new_session=True)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        raise AssertionError("%s timed out after %ss" % (" ".join(map(str, argv)), timeout)) from None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def ptfil(*args, **kw):
    """run() of ptfil ARGS (no -q or -o added): the CompletedProcess."""
    return run([PTFIL, *map(str, args)], **kw)


def view(*args, **kw):
    """run() of ptfil-view ARGS: the CompletedProcess, whatever its exit status."""
    return run([VIEW, *map(str, args)], **kw)


def view_output(*args, **kw):
    """The stdout of ptfil-view ARGS, which must exit 0 and say nothing on stderr."""
    r = view(*args, **kw)
    assert r.returncode == 0, "ptfil-view %s failed (%d): %s" % (" ".join(map(str, args)), r.returncode,
                                                               r.stderr.decode(errors="replace"))
    assert r.stderr == b"", r.stderr
    return r.stdout


def view_json(path):
    r = view("--json", path, timeout=60)
    if r.returncode != 0:
        raise AssertionError("ptfil-view --json %s failed (%d): %s" % (path, r.returncode, r.stderr.decode()))
    return json.loads(r.stdout)


def functions(stack):
    """The function names of a JSON stack, innermost first (None for unknown frames)."""
    return [f.get("function") for f in stack["frames"]]


def own_functions(stack):
    """The function names of a thread's own frames: those before the "[new thread]" frame, after which
    ptfil puts the stack that started the thread."""
    f = functions(stack)
    return f[:f.index("[new thread]")] if "[new thread]" in f else f


def starter_functions(stack):
    """The function names of the stack that started the thread (after "[new thread]"), or []."""
    f = functions(stack)
    return f[f.index("[new thread]") + 1:] if "[new thread]" in f else []


def stacks_through(doc, function, key="stacks"):
    """The stacks of doc[key] that pass through a frame named function."""
    return [s for s in doc[key] if function in functions(s)]


def charged_through(doc, function, key="stacks"):
    return sum(s["charged_bytes"] for s in stacks_through(doc, function, key))


def other_through(doc, function):
    """What the alloc view beside a touch view (other_view_stacks) charges through function."""
    return charged_through(doc, function, "other_view_stacks")


def reserved_through(doc, function, key="stacks"):
    return sum(s["reserved_bytes"] for s in stacks_through(doc, function, key))


def near(actual, expected, rel=0.03, slack=0):
    return abs(actual - expected) <= expected * rel + slack


def check_near(what, actual, expected, rel=0.03, slack=0):
    assert near(actual, expected, rel, slack), "%s: %.2f MiB, expected %.2f MiB (within %d%%)" % (
        what, actual / MiB, expected / MiB, rel * 100)


def glibc_usable(n):
    """malloc_usable_size of the block glibc's malloc returns for n bytes, below its mmap threshold
    (x86-64): a chunk of n plus its 8-byte size word, rounded up to 16 and at least 32, less that word."""
    return max(32, (n + 8 + 15) & ~15) - 8


def glibc_mmapped_usable(n, page=4096):
    """malloc_usable_size of a block of n bytes that glibc gives a mapping of its own (n at or above the
    mmap threshold): the mapping, n and the chunk's 16-byte header rounded up to pages, less that header."""
    return page_round(n + 16, page) - 16


def usable_sizes(doc):
    """True when the snapshot charged glibc's blocks at their usable size, as every path does unless
    --exact-sizes (memory/alloc.h: the one charging rule)."""
    return doc["counters"].get("heap.usable_size_blocks", 0) > 0


def malloc_bytes(doc, n, count=1):
    """What count blocks of n bytes from glibc's malloc family are charged in doc: n each, or their usable size."""
    return count * (glibc_usable(n) if usable_sizes(doc) else n)


def ptrace_refused():
    """True when this machine refuses ptrace to us: the one honest reason to skip (exit 77)."""
    d = workdir()
    r = ptfil("launch", "-q", "-o", os.path.join(d, "s.gz"), "--", "/bin/true", timeout=60)
    shutil.rmtree(d, ignore_errors=True)
    return r.returncode != 0 and b"cannot trace" in r.stderr


class Skip(unittest.SkipTest):
    """Raised by a test that cannot run here, with the reason: main() prints "SKIP: NAME: reason" and
    counts it apart from passes and failures; in a unittest file it is unittest's own skip."""


# CI (.ci/run) sets CI=true; what tools/install-deps.sh and .ci/run install must be there.
ON_CI = os.environ.get("CI") == "true"


def missing(why):
    """What to raise when a test lacks something that CI installs: a Skip here, an AssertionError under
    CI=true, where its absence means the CI script did not install it."""
    if ON_CI:
        return AssertionError("%s (CI=true: CI installs it, so this is a failure, not a skip)" % why)
    return Skip(why)


def cpython(minor):
    """The CPython 3.<minor> to test: Debian's /usr/bin/python3.<minor>, else the newest that pyenv has
    ($PYENV_ROOT or ~/.pyenv). Raises Skip when there is none: Debian 12 packages 3.11 alone, and CI
    cannot build another (the README says which versions CI checks)."""
    debian = "/usr/bin/python3.%d" % minor
    if os.access(debian, os.X_OK):
        return debian
    found = []
    for root in filter(None, [os.environ.get("PYENV_ROOT"), os.path.expanduser("~/.pyenv")]):
        found += glob.glob(os.path.join(root, "versions", "3.%d.*" % minor, "bin", "python3.%d" % minor))
    found = [p for p in found if os.access(p, os.X_OK)]
    if not found:
        raise Skip("no CPython 3.%d here: neither %s nor a pyenv 3.%d.x" % (minor, debian, minor))

    def version(path):
        return [int(x) if x.isdigit() else -1 for x in path.split("/versions/")[1].split("/")[0].split(".")]
    return max(found, key=version)


def exit_status(passed, failed, skipped):
    """1 on any failure, 77 (automake's SKIP) when every test that ran skipped, else 0."""
    if failed:
        return 1
    return 77 if skipped and not passed else 0


def main(tests):
    """Runs the test functions given (those named on the command line, if any), prints PASS, FAIL or
    SKIP for each and a summary; exits 1 on any failure, 77 if ptrace is refused or every test skipped."""
    if ptrace_refused():
        print("SKIP: ptrace is not permitted here")
        sys.exit(77)
    only = sys.argv[1:]
    unknown = [n for n in only if n not in {t.__name__ for t in tests}]
    if unknown:
        print("FAIL: %s has no test named %s" % (os.path.basename(sys.argv[0]), ", ".join(unknown)))
        sys.exit(1)
    passed = failed = skipped = 0
    for t in tests:
        if only and t.__name__ not in only:
            continue
        try:
            t()
        except Skip as e:
            skipped += 1
            print("SKIP: %s: %s" % (t.__name__, e))
        except Exception:
            failed += 1
            print("FAIL: %s" % t.__name__)
            traceback.print_exc()
        else:
            passed += 1
            print("PASS: %s" % t.__name__)
        sys.stdout.flush()
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    status = exit_status(passed, failed, skipped)
    if status == 77 and kernel_path_required():
        print("FAIL: every test skipped on the kernel path, which %s=1 requires to be checked" % REQUIRE_UPROBE_ENV)
        status = 1
    sys.exit(status)


def unittest_main(name, programs=()):
    """main() for the files written as unittest.TestCase classes: checks that the programs they run were
    built, runs the cases (those named on the command line, if any), prints a summary; exits as main()
    does (a skip is unittest's: raise Skip or self.skipTest)."""
    for path in programs:
        if not os.access(path, os.X_OK):
            print("%s: %s not found; set PTFIL_BUILDDIR" % (name, path), file=sys.stderr)
            sys.exit(1)
    result = unittest.main(exit=False, verbosity=1).result
    skipped = len(result.skipped)
    failed = len(result.failures) + len(result.errors) + len(getattr(result, "unexpectedSuccesses", []))
    passed = result.testsRun - failed - skipped
    print("%s: %d passed, %d failed, %d skipped" % (name, passed, failed, skipped))
    if not result.testsRun:
        print("FAIL: %s ran no test" % name)
        sys.exit(1)
    sys.exit(exit_status(passed, failed, skipped))


# --- attach mode and process trees (test_attach.py, test_forks.py) ------------------------------
import re
import threading
import time


def proc_status(pid, field):
    """The value of field in /proc/PID/status ("State" -> "T (stopped)"), or None when the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                name, _, value = line.partition(":")
                if name == field:
                    return value.strip()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def vmrss_bytes(pid):
    v = proc_status(pid, "VmRSS")
    assert v and v.endswith(" kB"), "no VmRSS for %d: %r" % (pid, v)
    return int(v.split()[0]) * 1024


def rss_anon_bytes(pid):
    """The RssAnon of a live process (/proc/PID/status), in bytes: what the touch view's total is."""
    v = proc_status(pid, "RssAnon")
    assert v and v.endswith(" kB"), "no RssAnon for %d: %r" % (pid, v)
    return int(v.split()[0]) * 1024


def wait_until(predicate, timeout, what):
    """Polls predicate every 50 ms until it is true; raises AssertionError naming what after timeout seconds."""
    deadline = time.time() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.time() >= deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(0.05)


def file_stamp(path):
    """What changes each time ptfil writes the snapshot path (it writes a file beside it and renames it
    into place): (inode, mtime in ns, size), or None while there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def wait_snapshot(path, ready=None, what="the snapshot", timeout=30, since=None):
    """Waits, instead of a sleep tuned to ptfil's checkpoint (it rewrites a snapshot whose peak grew at
    most once a second), for a snapshot at path written after the file_stamp since (any, by default)
    for which ready(its JSON) holds: returns a true value, or None without raising AssertionError (a
    check). Reads the file only when it changed; returns that JSON. On timeout, AssertionError naming
    what it waited for and what the last snapshot read gave."""
    deadline = time.time() + timeout
    seen, last = since, "no snapshot written"
    while True:
        stamp = file_stamp(path)
        if stamp is not None and stamp != seen:
            seen = stamp
            try:
                doc = view_json(path)
                ok = ready(doc) if ready else True
                if ok is None or ok:
                    return doc
                last = "the last one read did not have it"
            except AssertionError as e:
                last = "the last one read: %s" % e
        if time.time() >= deadline:
            raise AssertionError("timed out after %ss waiting for %s at %s; %s" % (timeout, what, path, last))
        time.sleep(0.05)


def exec_mappings(pid):
    """The bytes of every executable mapping (r-xp in /proc/PID/maps) of pid, read through /proc/PID/mem:
    {(start, end, path): bytes}. Compared before an attach and after the detach, they show any int3 left in."""
    with open("/proc/%d/maps" % pid) as f:
        lines = f.read().splitlines()
    out = {}
    fd = os.open("/proc/%d/mem" % pid, os.O_RDONLY)
    try:
        for line in lines:
            fields = line.split(None, 5)
            if fields[1] != "r-xp":
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            data = os.pread(fd, end - start, start)
            assert len(data) == end - start, "short read of %s in %d" % (line, pid)
            out[(start, end, fields[5] if len(fields) > 5 else "")] = data
    finally:
        os.close(fd)
    return out


def mapping_differences(before, after, same_set=True):
    """What changed between two exec_mappings(): a list of readable lines, empty when the code is intact.
    With same_set false, mappings present on one side only are ignored (a library loaded meanwhile)."""
    diffs = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a is None or b is None:
            if same_set:
                diffs.append("%x-%x %s: %s" % (key[0], key[1], key[2], "appeared" if a is None else "vanished"))
            continue
        if a == b:
            continue
        at = [i for i in range(len(a)) if a[i] != b[i]]
        int3 = sum(1 for i in at if b[i] == 0xCC)
        diffs.append("%x-%x %s: %d bytes differ (%d now int3), first at +%#x: %02x -> %02x" % (
            key[0], key[1], key[2], len(at), int3, at[0], a[at[0]], b[at[0]]))
    return diffs


def snapshot_stem(snap):
    return snap[:-3] if snap.endswith(".gz") else snap


def child_snapshots(snap):
    """The per-process snapshots written beside snap (STEM.CHILDPID.gz), keyed by the text between STEM.
    and .gz (a pid, if all is well); live-state files (STEM.live-N.gz) are left out."""
    stem = snapshot_stem(snap)
    out = {}
    for path in glob.glob(glob.escape(stem) + ".*.gz"):
        middle = path[len(stem) + 1:-3]
        if not middle.startswith("live-"):
            out[middle] = path
    return out


def live_snapshot(snap, n):
    """The path of the n-th live-state file (kill -USR1 of ptfil) for the snapshot path snap."""
    return "%s.live-%d.gz" % (snapshot_stem(snap), n)


class Lines:
    """Collects the lines of a binary pipe in a thread, so that a test can wait for one with a timeout."""

    def __init__(self, f):
        self.lines = []
        self.eof = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(f,), daemon=True)
        self._thread.start()

    def _read(self, f):
        try:
            for line in iter(f.readline, b""):
                with self._cond:
                    self.lines.append(line)
                    self._cond.notify_all()
        except (OSError, ValueError):
            pass
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    def wait_for(self, match, timeout, n=1):
        """Waits until n lines satisfy match(line as str); returns the n-th. Raises AssertionError on
        end of file or timeout, with what was read."""
        deadline = time.time() + timeout
        with self._cond:
            while True:
                found = [s for s in (x.decode(errors="replace").rstrip("\n") for x in self.lines) if match(s)]
                if len(found) >= n:
                    return found[n - 1]
                left = deadline - time.time()
                if self.eof or left <= 0:
                    raise AssertionError("%s before the expected line; read so far:\n%s" % (
                        "end of output" if self.eof else "timed out after %ss" % timeout, self.text()))
                self._cond.wait(min(left, 0.5))

    def text(self):
        with self._cond:
            return b"".join(self.lines).decode(errors="replace")

    def data(self):
        with self._cond:
            return b"".join(self.lines)

    def join(self, timeout):
        self._thread.join(timeout)
        return not self._thread.is_alive()


class Attached:
    """A target started untraced in its own session (stdin and stdout piped to the test), then ptfil attach
    to it, also in its own session. Use it as a context manager: on leaving, whatever still runs (ptfil,
    the target and everything in their process groups) is killed with SIGKILL and waited for, so no
    traced or stopped process outlives the test, whether it passed or failed.

        with Attached([target("attach_loop"), "100"]) as a:   # waits for the target's "ready"
            a.attach()                                      # waits for "attached to process PID"
            a.signal(signal.SIGINT)
            rc, err = a.finish()
    """

    def __init__(self, argv, ready="ready", timeout=TIMEOUT):
        self.dir = workdir()
        self.snap = os.path.join(self.dir, "snap.gz")
        self.argv = list(argv)
        self.timeout = timeout
        self.ptfil = None
        self.err = None
        self.ptfil_started = None
        self.tracers = []  # the pids of ptfil's tracing processes seen (TracerPid once attached)
        self._target_err = open(os.path.join(self.dir, "target.stderr"), "wb")
        self.target = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=self._target_err, start_new_session=True)
        self.pid = self.target.pid
        self.out = Lines(self.target.stdout)
        if ready:
            try:
                self.wait_output(ready)
            except BaseException:
                self.cleanup()
                raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False

    # --- ptfil ---
    def attach(self, *options, interval="50", wait=True):
        """Starts ptfil attach -o SNAP -i INTERVAL OPTIONS PID; with wait, returns once it says it is attached."""
        cmd = [PTFIL, "attach", "-o", self.snap]
        if interval is not None:
            cmd += ["-i", str(interval)]
        cmd += [*options, str(self.pid)]
        self.ptfil_started = time.time()
        with open(os.path.join(self.dir, "ptfil.stdout"), "wb") as out:
            self.ptfil = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE,
                                          start_new_session=True)
        self.err = Lines(self.ptfil.stderr)
        if wait:
            self.wait_attached()

    def wait_attached(self, timeout=60):
        pattern = re.compile(r"attached to process %d\b" % self.pid)
        try:
            line = self.err.wait_for(lambda s: pattern.search(s), timeout)
            # ptfil's tracing process, in a process group of its own (not ptfil's): cleanup kills it too.
            tracer = self.status("TracerPid")
            if tracer and tracer != "0":
                self.tracers.append(int(tracer))
            return line
        except AssertionError as e:
            raise AssertionError("ptfil attach %d did not say it was attached (exit status %r): %s" % (
                self.pid, self.ptfil.poll(), e)) from None

    def wait_stderr(self, pattern, timeout=60, n=1):
        """Waits for the n-th line of ptfil's stderr that matches the regular expression pattern."""
        rx = re.compile(pattern)
        return self.err.wait_for(lambda s: rx.search(s), timeout, n)

    def signal(self, sig):
        """Sends sig to the ptfil process alone (not to its group)."""
        os.kill(self.ptfil.pid, sig)

    def finish(self, timeout=60):
        """Waits for ptfil to exit; returns (exit status, its stderr). Kills everything on timeout."""
        try:
            self.ptfil.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            err = self.err.text()
            self.cleanup()
            raise AssertionError("ptfil did not exit within %ss; stderr so far:\n%s" % (timeout, err))
        self.err.join(5)
        return self.ptfil.returncode, self.err.text()

    def json(self, path=None):
        return view_json(path or self.snap)

    # --- the target ---
    def send(self, text):
        self.target.stdin.write(text.encode() + b"\n")
        self.target.stdin.flush()

    def wait_output(self, line, timeout=60):
        """Waits for the target to print exactly this line on stdout."""
        return self.out.wait_for(lambda s: s == line, timeout)

    def running(self):
        return self.target.poll() is None

    def status(self, field):
        return proc_status(self.pid, field)

    def state(self):
        """The one-letter state of the target (R, S, T, t, Z...), or None when it is gone."""
        s = self.status("State")
        return s.split()[0] if s else None

    def target_finish(self, timeout=None):
        """Closes the target's stdin, waits for it to exit; returns (exit status, all its stdout as bytes)."""
        try:
            self.target.stdin.close()
        except OSError:
            pass
        try:
            self.target.wait(timeout=timeout or self.timeout)
        except subprocess.TimeoutExpired:
            out = self.out.text()
            self.cleanup()
            raise AssertionError("the target %r did not finish; its output so far:\n%s" % (self.argv, out))
        self.out.join(10)
        return self.target.returncode, self.out.data()

    def target_stderr(self):
        self._target_err.flush()
        with open(self._target_err.name, "rb") as f:
            return f.read()

    def cleanup(self):
        """Kills ptfil's and the target's process groups (SIGKILL also ends a stopped or traced process)
        and waits for both; then the groups of ptfil's tracing processes, if still there."""
        for p in (self.ptfil, self.target):
            if p is None:
                continue
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                p.kill()
            except OSError:
                pass
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        for pid in self.tracers:
            try:
                if proc_status(pid, "Name") == "ptfil" and os.getpgid(pid) == pid:  # not a pid reused since
                    os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for f in (self.target.stdin, self._target_err):
            try:
                if f:
                    f.close()
            except OSError:
                pass
        # A pipe a reader thread still reads is closed only once the thread has seen its end.
        for lines, f in ((self.out, self.target.stdout), (self.err, self.ptfil and self.ptfil.stderr)):
            if lines is not None and lines.join(5):
                f.close()


# --- heap events: the kernel path (uprobes, BPF) and the ptrace path (issue 14) -----------------
# PTFIL_HEAP_EVENTS=auto|uprobe|ptrace is the default of ptfil's --heap-events. The tests of make check
# run once as they are and once more under PTFIL_HEAP_EVENTS=uprobe (tests/e2e/uprobe/, run_uprobe.py).
HEAP_EVENTS_ENV = "PTFIL_HEAP_EVENTS"
# Set to 1 (CI, as root) so that a kernel path that is not there fails instead of skipping.
REQUIRE_UPROBE_ENV = "PTFIL_REQUIRE_UPROBE"
UPROBE_REFUSED = "cannot use kernel uprobes"
PTRACE_FALLBACK = "ptfil: heap events through ptrace:"


def run_ptfil(args, env=None, timeout=TIMEOUT, stdin_data=None, prefix=(), cwd=None, pass_fds=()):
    """run() of `ptfil ARGS` as it is (no -q, no -o added): (exit status, stdout, stderr as str).
    prefix: a command ptfil runs under (setpriv ...)."""
    r = run([*prefix, PTFIL, *args], input=stdin_data, env=env, cwd=cwd, timeout=timeout, pass_fds=pass_fds)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def kernel_path_required():
    """True in the kernel-path pass (run_uprobe.py: PTFIL_HEAP_EVENTS=uprobe) under PTFIL_REQUIRE_UPROBE=1
    (CI), where that pass must check something rather than skip."""
    return os.environ.get(HEAP_EVENTS_ENV) == "uprobe" and os.environ.get(REQUIRE_UPROBE_ENV) == "1"


def heap_events_probe(timeout=60):
    """Whether ptfil takes the kernel path here, found by `ptfil launch --heap-events=uprobe -- /bin/true`:
    ("ok", ""); ("unavailable", ptfil's message) when ptfil says it cannot use kernel uprobes (no
    capability, a kernel without uprobe_multi links, ptfil built without BPF): a reason to skip;
    ("broken", what happened) for anything else (a ptfil that does not know --heap-events, a crash, a
    snapshot that does not say heap_events.uprobe = 1): a reason to fail."""
    d = workdir()
    try:
        snap = os.path.join(d, "probe.gz")
        env = {k: v for k, v in os.environ.items() if k != HEAP_EVENTS_ENV}
        try:
            # The alloc view: the touch view alone takes no heap events at all.
            rc, _, err = run_ptfil(["launch", "-q", "-i", "0", "--charge=alloc", "--heap-events=uprobe", "-o", snap, "--",
                                    "/bin/true"],
                                   env=env, timeout=timeout)
        except AssertionError as e:
            return "broken", str(e)
        if rc != 0:
            if UPROBE_REFUSED in err:
                return "unavailable", err.strip()
            # The first lines say it (a usage error is followed by the whole help).
            return "broken", "ptfil launch --heap-events=uprobe -- /bin/true: exit status %d: %s" % (
                rc, " / ".join(err.strip().splitlines()[:2]))
        try:
            c = view_json(snap)["counters"]
        except (AssertionError, ValueError) as e:
            return "broken", "the probe's snapshot: %s" % e
        if c.get("heap_events.uprobe") != 1 or c.get("heap_events.ptrace"):
            return "broken", "ptfil launch --heap-events=uprobe -- /bin/true: the snapshot's counters say " \
                "heap_events.uprobe=%r, heap_events.ptrace=%r" % (c.get("heap_events.uprobe"), c.get("heap_events.ptrace"))
        return "ok", ""
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _probe_key():
    """What the probe's answer depends on: this ptfil binary, and who runs it with which capabilities."""
    st = os.stat(PTFIL)
    caps = proc_status(os.getpid(), "CapEff") or "?"
    return "%s %d %d %d %d %s" % (PTFIL, st.st_ino, st.st_mtime_ns, st.st_size, os.geteuid(), caps)


def heap_events_probe_cached(cache):
    """heap_events_probe(), remembered in the file cache for as long as ptfil, the user and the capabilities
    are the same (one probe per make check, not one per test)."""
    key = _probe_key()
    try:
        with open(cache) as f:
            lines = f.read().split("\n", 2)
        if len(lines) == 3 and lines[0] == key and lines[1] in ("ok", "unavailable"):
            return lines[1], lines[2]
    except OSError:
        pass
    status, message = heap_events_probe()
    if status != "broken":  # a broken ptfil is asked again next time
        tmp = "%s.%d" % (cache, os.getpid())
        try:
            with open(tmp, "w") as f:
                f.write("%s\n%s\n%s" % (key, status, message))
            os.rename(tmp, cache)
        except OSError:
            pass
    return status, message


def require_kernel_path(status, message, what):
    """Exits 77 (skip) when the kernel path is unavailable here, unless PTFIL_REQUIRE_UPROBE=1, then 1;
    exits 1 with the reason when the probe found ptfil broken."""
    if status == "ok":
        return
    if status == "unavailable" and os.environ.get(REQUIRE_UPROBE_ENV) != "1":
        print("SKIP: %s: the kernel path (--heap-events=uprobe) is not available here: %s" % (what, message))
        sys.exit(77)
    print("FAIL: %s: ptfil cannot take the kernel path (--heap-events=uprobe)%s: %s" % (
        what, " and %s=1 asks for it" % REQUIRE_UPROBE_ENV if status == "unavailable" else "", message))
    sys.exit(1)


def heap_counters(doc):
    """The heap-events counters of a snapshot document: path (uprobe/ptrace), kernel records, lost, back-pressure."""
    c = doc["counters"]
    return {k: v for k, v in c.items() if k.startswith(("heap_events.", "kernel."))}


def heap_path(doc):
    """"uprobe" or "ptrace": the path the snapshot says the main process took; raises if it says neither or both."""
    c = doc["counters"]
    u, p = c.get("heap_events.uprobe", 0), c.get("heap_events.ptrace", 0)
    assert (u, p) in ((1, 0), (0, 1)), "the snapshot says heap_events.uprobe=%r, heap_events.ptrace=%r: %r" % (
        c.get("heap_events.uprobe"), c.get("heap_events.ptrace"), heap_counters(doc))
    return "uprobe" if u else "ptrace"


def stack_signature(doc, n=10, key="stacks"):
    """The first n stacks of doc[key] as (kind, function names, charged bytes, count), for comparing two
    runs of one program (kernel path against ptrace path)."""
    return [(s["kind"], tuple(functions(s)), s["charged_bytes"], s["count"]) for s in doc[key][:n]]


# --- code bytes of a library in a running process, against its file -----------------------------
import struct


def elf_symbols(path, names):
    """{name: (vaddr, size, file offset)} of the defined symbols names in the .dynsym (or .symtab) of a
    64-bit little-endian ELF file."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "%s is not ELF64 LE" % path
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 54)
    loads = []
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((p_vaddr, p_filesz, p_offset))
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = {}
    for want_type in (11, 2):  # SHT_DYNSYM, then SHT_SYMTAB
        for sh in sections:
            if sh[1] != want_type:
                continue
            strtab = sections[sh[6]]
            off, size, entsize = sh[4], sh[5], sh[9] or 24
            for k in range(size // entsize):
                st_name, st_info, _, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", data, off + k * entsize)
                if st_shndx == 0 or st_value == 0:
                    continue
                end = data.index(b"\0", strtab[4] + st_name)
                name = data[strtab[4] + st_name:end].decode(errors="replace")
                if name in names and name not in out:
                    for v, fs, o in loads:
                        if v <= st_value < v + fs:
                            out[name] = (st_value, st_size, st_value - v + o)
                            break
    missing = set(names) - set(out)
    assert not missing, "%s: no symbol %s" % (path, ", ".join(sorted(missing)))
    return out


def mapped_library(pid, basename_prefix):
    """(path, load base) of the first library of pid whose file name starts with basename_prefix
    ("libc.so"): the path from /proc/PID/maps, the base the start of its mapping at file offset 0."""
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split(None, 5)
            if len(fields) < 6:
                continue
            path = fields[5].strip()
            if os.path.basename(path).startswith(basename_prefix) and int(fields[2], 16) == 0:
                return path, int(fields[0].split("-")[0], 16)
    raise AssertionError("no %s mapped in process %d" % (basename_prefix, pid))


def function_bytes(pid, path, base, names, n=None):
    """{name: (bytes in the process, bytes of the file)} of each function names of the library path loaded
    at base in pid: its first n bytes, or all of it (its symbol size) when n is None. The process's are
    read through /proc/PID/mem, the file's from /proc/PID/root + path at the symbol's file offset."""
    syms = elf_symbols(path, names)
    out = {}
    fd = os.open("/proc/%d/mem" % pid, os.O_RDONLY)
    try:
        with open(path, "rb") as f:
            for name, (vaddr, size, offset) in syms.items():
                length = n or max(size, 1)
                mem = os.pread(fd, length, base + vaddr)
                f.seek(offset)
                out[name] = (mem, f.read(length))
    finally:
        os.close(fd)
    return out


def code_differences(fb, allow_int3=False):
    """Readable lines for each function of function_bytes() whose bytes in the process differ from its file's:
    with allow_int3, a byte that reads int3 (0xcc, a kernel uprobe's) where the file has another is no
    difference (the kernel may probe a site past the entry, as free+3)."""
    out = []
    for name, (mem, file) in sorted(fb.items()):
        at = [i for i in range(min(len(mem), len(file))) if mem[i] != file[i] and not (allow_int3 and mem[i] == 0xCC)]
        if at or len(mem) != len(file):
            out.append("%s: %d bytes differ, first at +%#x: file %s, process %s" % (
                name, len(at), at[0] if at else 0, file[:16].hex(), mem[:16].hex()))
    return out


def int3_offsets(fb, name):
    """The offsets at which function name of function_bytes() reads int3 in the process but not in its file."""
    mem, file = fb[name]
    return [i for i in range(min(len(mem), len(file))) if mem[i] == 0xCC and file[i] != 0xCC]


def kernel_path_lock():
    """Holds (until this process and what it execs end) the lock that makes the test files on the
    kernel path run one at a time under make -j: a second ptfil's uprobes on the same libc functions
    would be run by the kernel for a process that left the kernel path for breakpoints (a signal
    stack above its stack, docs/heap-events.md), and its kernel return probes bring back the SIGILL
    that leaving was for. Two ptfils at once on the kernel path is a documented limit, not what
    these tests measure. Returns the lock's file descriptor (inheritable across exec)."""
    import fcntl
    d = os.path.join(BUILDDIR, "tests", "e2e")
    os.makedirs(d, exist_ok=True)
    fd = os.open(os.path.join(d, "kernel-path.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.set_inheritable(fd, True)
    return fd


# --- the two views: --charge touch and --charge alloc (issue 24) -----------------------------------
# PTFIL_CHARGE=alloc|touch is the default of ptfil's --charge. make check runs every test with alloc
# (AM_TESTS_ENVIRONMENT) and the memory tests once more with touch (tests/e2e/touch/, run_touch.py).
CHARGE_ENV = "PTFIL_CHARGE"
FAULT_PATH_REFUSED = "cannot charge memory to the code that made it resident"


def charge_view():
    """The view the tests' ptfil runs charge in: "touch" under PTFIL_CHARGE=touch (the touch pass),
    else "alloc" (make check sets alloc; under auto, unset, a C program would get touch and a
    Python one alloc: the suite does not run so)."""
    return "touch" if os.environ.get(CHARGE_ENV) == "touch" else "alloc"


def touch_view():
    return charge_view() == "touch"


def no_meaning_under_touch(why):
    """Skips the calling test in the touch pass, where what it checks does not exist: raises
    Skip("... has no meaning under touch: why"). Only for what truly has none (malloc-family stops,
    block counts and sizes): wherever the touch view says something, the test asserts it."""
    if touch_view():
        raise Skip("what this test checks has no meaning under touch: %s" % why)


def check_view(doc):
    """The snapshot is in the view the pass asked for."""
    assert doc.get("view") == charge_view(), "the snapshot's view is %r, expected %r (%s=%s)" % (
        doc.get("view"), charge_view(), CHARGE_ENV, os.environ.get(CHARGE_ENV))


def page_round(n, page=4096):
    return (n + page - 1) // page * page


def heap_counters_zero(doc):
    """Under touch no malloc-family call is followed at all: heap.* and the breakpoint stops are 0."""
    c = doc["counters"]
    bad = {k: c.get(k, 0) for k in ("heap.allocs", "heap.frees", "heap.usable_size_blocks", "stops.bp_entry",
                                    "stops.bp_return") if c.get(k, 0)}
    assert not bad, "under touch no malloc-family call stops or is counted: %r" % bad


def touch_pseudo(doc, name):
    """The stacks of doc whose innermost frame is the pseudo frame name ("[before attach]")."""
    return [s for s in doc["stacks"] if functions(s)[:1] == [name]]


# The anonymous resident memory of a process at its peak, measured apart from ptfil: the kernel's
# kmem:rss_stat tracepoint reports every change of a process's MM_ANONPAGES counter (RssAnon) with
# its value after the change, so the largest value is the process's anonymous high-water mark,
# exactly. The events are recorded in a private ftrace instance, limited to this test process and
# what it starts (set_event_pid, event-fork), with tracefs mounted in a mount namespace of the
# helper's own where it is not mounted.
_ANON_HELPER = r"""
import os, sys, tempfile
mnt = None
for cand in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
    if os.path.exists(os.path.join(cand, "instances")):
        mnt = cand
        break
if mnt is None:
    mnt = tempfile.mkdtemp(prefix="ptfil-tracefs-")
    if os.system("mount -t tracefs nodev %s" % mnt) != 0:
        print("nomount", flush=True)
        sys.exit(3)
inst = os.path.join(mnt, "instances", "ptfil-test-%d" % os.getpid())
os.mkdir(inst)
def put(name, value):
    with open(os.path.join(inst, name), "w") as f:
        f.write(value)
try:
    put("buffer_size_kb", sys.argv[2])
    put("options/record-tgid", "1")
    put("options/event-fork", "1")
    put("set_event_pid", sys.argv[1])
    put("events/kmem/rss_stat/filter", "member == 1")
    put("events/kmem/rss_stat/enable", "1")
    print("ready", flush=True)
    sys.stdin.readline()
    put("events/kmem/rss_stat/enable", "0")
    lost = 0
    for cpu in os.listdir(os.path.join(inst, "per_cpu")):
        with open(os.path.join(inst, "per_cpu", cpu, "stats")) as f:
            for line in f:
                if line.startswith("overrun:"):
                    lost += int(line.split()[1])
    print("lost %d" % lost, flush=True)
    with open(os.path.join(inst, "trace")) as f:
        for line in f:
            sys.stdout.write(line)
    sys.stdout.flush()
finally:
    try:
        put("events/kmem/rss_stat/enable", "0")
    except OSError:
        pass
    os.rmdir(inst)
"""
_RSS_STAT = re.compile(r"-(\d+)\s+\(\s*(\d+|-+)\)\s+\[\d+\].*?rss_stat: mm_id=(\d+) curr=(\d) type=MM_ANONPAGES size=(\d+)B")


class AnonWatch:
    """with AnonWatch() as w: ...run ptfil...; then w.hwm(pid) is the largest RssAnon of process pid
    (its last mm: the one after its last exec) in bytes. Needs root (tracefs): otherwise a Skip."""

    def __init__(self, buffer_kib=16384):
        self.buffer_kib = buffer_kib
        self.events = None

    def __enter__(self):
        if os.geteuid() != 0:
            raise Skip("measuring RssAnon at the peak (kmem:rss_stat in tracefs) needs root")
        self.p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", sys.executable, "-c",
                                   _ANON_HELPER, str(os.getpid()), str(self.buffer_kib)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.p.stdout.readline()
        if line != b"ready\n":
            out, err = self.p.communicate(timeout=30)
            raise AssertionError("the kmem:rss_stat watch did not start: %r %r %r" % (line, out, err))
        return self

    def __exit__(self, *exc):
        try:
            out, err = self.p.communicate(b"\n", timeout=120)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.communicate()
            raise AssertionError("the kmem:rss_stat watch did not end")
        if exc[0] is not None:
            return False
        assert self.p.returncode == 0, "the kmem:rss_stat watch failed (%d): %s" % (self.p.returncode, err.decode())
        lines = out.decode(errors="replace").splitlines()
        assert lines and lines[0].startswith("lost "), lines[:3]
        lost = int(lines[0].split()[1])
        assert lost == 0, "the kmem:rss_stat watch lost %d events (its buffer is too small)" % lost
        self.events = []
        for line in lines[1:]:
            m = _RSS_STAT.search(line)
            if m:
                tid, tgid, mm, curr, size = m.groups()
                self.events.append((int(tgid) if tgid.isdigit() else int(tid), int(mm), int(curr), int(size)))
        return False

    def hwm(self, pid):
        """The anonymous high-water mark of pid's last mm, in bytes."""
        assert self.events is not None, "AnonWatch.hwm before the watch ended"
        mms = [mm for tgid, mm, curr, _ in self.events if tgid == pid and curr == 1]
        assert mms, "no kmem:rss_stat event of process %d" % pid
        last = mms[-1]
        # From its first event in that mm to its last: before and after, another mm may have had the same
        # hash (a freed mm_struct reused), and other processes' events on it say curr=0 too (an exec).
        mine = [i for i, e in enumerate(self.events) if e[0] == pid and e[1] == last]
        first = next(i for i in mine if self.events[i][2] == 1)
        return max(size for tgid, mm, curr, size in self.events[first:mine[-1] + 1]
                   if mm == last and (tgid == pid or curr == 0))


def anon_watch():
    """An AnonWatch in the touch pass, else a context that measures nothing (None)."""
    import contextlib
    return AnonWatch() if touch_view() else contextlib.nullcontext()


def check_anon_peak(doc, watch, pid=None, rel=0.01):
    """The touch view's peak is the process's anonymous resident memory at its peak: within rel (1%)
    of its RssAnon high-water mark as the kernel counted it (AnonWatch), plus a page or two."""
    pid = pid or doc["process"]["pid"]
    anon = watch.hwm(pid)
    check_near("touch peak of %d against its RssAnon high-water mark (kmem:rss_stat)" % pid,
               doc["peak"]["charged_bytes"], anon, rel=rel, slack=8192)
    return anon
