"""ptfil attach refuses what it cannot or must not trace: a status per kind of problem, one line that says what is wrong, and the target left as it was."""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import PTFIL, TIMEOUT, Skip, main, workdir

# The exit statuses of tracer/refuse.h.
USAGE, GONE, DENIED, BUSY = 2, 3, 4, 5

CAP_SYS_PTRACE = 1 << 19


def status(pid):
    """The fields of /proc/PID/status by name, or None when there is no such process."""
    try:
        with open("/proc/%d/status" % pid) as f:
            return dict(line.rstrip("\n").split(":", 1) for line in f if ":" in line)
    except (FileNotFoundError, ProcessLookupError):
        return None


def field(pid, name):
    s = status(pid)
    return s[name].strip() if s else None


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except (FileNotFoundError, ProcessLookupError):
        return None


def wait_until(cond, what, timeout=20):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.01)


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=TIMEOUT)


@contextlib.contextmanager
def sleeper():
    """A `sleep 30` in its own session, killed on the way out whatever happens."""
    p = subprocess.Popen(["sleep", "30"], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: comm(p.pid) == "sleep" and field(p.pid, "State")[0] == "S", "sleep to start")
        yield p.pid
    finally:
        kill_group(p)


def attach(pid, prefix=(), env=None):
    """Runs ptfil attach PID (after prefix, e.g. setpriv) in an empty directory anyone may write to."""
    d = workdir()
    os.chmod(d, 0o777)
    r = subprocess.run([*prefix, PTFIL, "attach", str(pid)], capture_output=True, timeout=60, cwd=d, env=env)
    r.files = os.listdir(d)
    shutil.rmtree(d, ignore_errors=True)
    return r


def one_line(stderr, *words):
    """stderr is one line that starts with "ptfil: " and holds every word; returns it."""
    err = stderr.decode(errors="replace")
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ptfil: "), "not one line starting with 'ptfil: ': %r" % err
    for w in words:
        assert w in lines[0], "%r not in %r" % (w, lines[0])
    return lines[0]


def check_refused(r, want, *words):
    """The attach exited with status want, said one line that holds every word, and left no file behind."""
    assert r.returncode == want, "status %d, expected %d; stderr: %r" % (r.returncode, want, r.stderr)
    one_line(r.stderr, *words)
    assert not r.files, "a refused attach wrote %s" % r.files


@contextlib.contextmanager
def untouched(pid):
    """Asserts on the way out that pid still runs with the same State and the same tracer as on the way in."""
    state, tracer = field(pid, "State")[0], field(pid, "TracerPid")
    yield
    s = status(pid)
    assert s is not None and s["State"].strip()[0] not in "ZX", "target %d is gone" % pid
    assert s["State"].strip()[0] == state, "target %d was %s, now %s" % (pid, state, s["State"])
    assert s["TracerPid"].strip() == tracer, "target %d traced by %s, now by %s" % (pid, tracer, s["TracerPid"])


def test_no_such_process():
    p = subprocess.Popen(["true"])
    p.wait(timeout=TIMEOUT)
    assert status(p.pid) is None
    r = attach(p.pid)
    check_refused(r, GONE, "no process %d" % p.pid, "ps")


def test_not_a_pid():
    r = attach("abc")
    check_refused(r, USAGE, "abc")


def test_zombie():
    z = subprocess.Popen(["true"])
    try:
        wait_until(lambda: field(z.pid, "State")[0] == "Z", "true to become a zombie")
        r = attach(z.pid)
        check_refused(r, GONE, "process %d" % z.pid, "zombie")
        assert field(z.pid, "State")[0] == "Z" and field(z.pid, "TracerPid") == "0"
    finally:
        z.wait(timeout=TIMEOUT)


def test_own_pid():
    # exec: the shell's $$ becomes ptfil's own pid.
    env = dict(os.environ, PTFIL=PTFIL)
    p = subprocess.Popen(["sh", "-c", 'exec "$PTFIL" attach $$'], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=60)
    finally:
        kill_group(p)
    assert p.returncode == USAGE, "status %d, expected %d; stderr: %r" % (p.returncode, USAGE, err)
    one_line(err, "process %d is ptfil itself" % p.pid)


def test_parent():
    # No exec: the shell is ptfil's parent, and goes on after the refusal.
    env = dict(os.environ, PTFIL=PTFIL)
    p = subprocess.Popen(["sh", "-c", '"$PTFIL" attach $$; echo rc=$?'], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=60)
    finally:
        kill_group(p)
    assert out.strip() == b"rc=%d" % USAGE, "expected rc=%d from the shell: %r; stderr: %r" % (USAGE, out, err)
    one_line(err, "process %d (sh)" % p.pid, "parent")


def test_other_user():
    if os.geteuid() != 0:
        raise Skip("running ptfil as nobody needs root")
    with sleeper() as pid, untouched(pid):
        r = attach(pid, ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
        check_refused(r, DENIED, "process %d (sleep)" % pid, "user root (uid 0)", "as root")


def test_missing_cap_sys_ptrace():
    if os.geteuid() != 0:
        raise Skip("dropping CAP_SYS_PTRACE from ptfil needs root")
    drop = ["setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace"]
    caps = subprocess.run([*drop, "grep", "CapEff", "/proc/self/status"], capture_output=True, timeout=60)
    assert caps.returncode == 0, caps.stderr
    assert not int(caps.stdout.split()[1], 16) & CAP_SYS_PTRACE, "setpriv did not drop CAP_SYS_PTRACE: %r" % caps.stdout
    with sleeper() as pid, untouched(pid):
        r = attach(pid, drop)
        assert r.returncode != 0, "the kernel let ptfil attach without CAP_SYS_PTRACE: this case tests nothing here"
        check_refused(r, DENIED, "process %d (sleep)" % pid, "CAP_SYS_PTRACE", "--cap-add=SYS_PTRACE")


def traced_by(tracer_argv, tracer_comm, find_target=None):
    """Runs ptfil attach on a sleep traced by tracer_argv (PID in it replaced), and checks the refusal names the tracer."""
    with sleeper() as pid:
        argv = [str(pid) if a == "PID" else a for a in tracer_argv]
        t = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: field(pid, "TracerPid") == str(t.pid) and field(pid, "State")[0] == "S",
                       "%s to trace sleep" % tracer_comm)
            with untouched(pid):
                r = attach(pid)
                check_refused(r, BUSY, "process %d (sleep)" % pid,
                              "already traced by process %d (%s)" % (t.pid, tracer_comm))
        finally:
            kill_group(t)


def test_traced_by_strace():
    # tools/install-deps.sh installs strace, so this runs wherever the test command was followed.
    assert shutil.which("strace"), "strace is not installed (tools/install-deps.sh installs it)"
    traced_by(["strace", "-p", "PID", "-o", "/dev/null"], "strace")


def test_traced_by_ptfil():
    # The sleep is ptfil launch's child, and in its session: killing the group ends both.
    d = workdir()
    launcher = subprocess.Popen([PTFIL, "launch", "-q", "-i", "0", "-o", os.path.join(d, "s.gz"), "--", "sleep", "30"],
                                start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def child():
            for p in os.listdir("/proc"):
                if p.isdigit() and field(int(p), "PPid") == str(launcher.pid) and comm(int(p)) == "sleep":
                    return int(p)
            return None
        wait_until(lambda: child() and field(child(), "TracerPid") == str(launcher.pid)
                   and field(child(), "State")[0] == "S", "ptfil launch to start sleep")
        pid = child()
        with untouched(pid):
            r = attach(pid)
            check_refused(r, BUSY, "process %d (sleep)" % pid,
                          "already traced by process %d (ptfil)" % launcher.pid)
    finally:
        kill_group(launcher)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main([test_no_such_process, test_not_a_pid, test_zombie, test_own_pid, test_parent, test_other_user,
          test_missing_cap_sys_ptrace, test_traced_by_strace, test_traced_by_ptfil])
