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


# --- attach mode and process trees (test_attach.py, test_forks.py) ------------------------------
import glob
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
            return self.err.wait_for(lambda s: pattern.search(s), timeout)
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
        and waits for both."""
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
