"""The target comes first: exit status, death by signal, signal handlers, stdin/stdout and Ctrl-C
behave exactly as without ptfil, and ptfil still writes its snapshot."""
import os
import pty
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import FAULT_PATH_REFUSED, MiB, PTFIL, TIMEOUT, bare, charged_through, check_near, launch, main, \
    missing, target, view_json, workdir

BEHAVE = target("behave")


def test_exit_status_passes_through():
    for code in (0, 3):
        b = bare([BEHAVE, "exit", str(code)])
        r = launch([BEHAVE, "exit", str(code)])
        assert b.returncode == code
        assert r.returncode == code, (r.returncode, r.stderr)
        assert r.stdout == b.stdout
        check_near("make_work", charged_through(r.json, "make_work"), 8 * MiB)


def test_sigsegv_gives_139_and_a_snapshot():
    b = bare([BEHAVE, "segv"])
    assert b.returncode == -signal.SIGSEGV
    r = launch([BEHAVE, "segv"])
    assert r.returncode == 128 + signal.SIGSEGV, (r.returncode, r.stderr)
    assert r.stdout == b.stdout == b"about to crash\n"
    doc = r.json
    assert doc["process"]["exit_status"] == 139
    check_near("peak at the crash", doc["peak"]["charged_bytes"], 8 * MiB, slack=512 * 1024)
    check_near("make_work", charged_through(doc, "make_work"), 8 * MiB)


class Child:
    """ptfil launch with pipes to the target's stdin and stdout, for a conversation."""

    def __init__(self, args):
        self.dir = workdir()
        self.snap = os.path.join(self.dir, "snap.gz")
        self.p = subprocess.Popen([PTFIL, "launch", "-q", "-o", self.snap, "--", BEHAVE, *args],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  start_new_session=True)
        self.deadline = time.time() + TIMEOUT

    def line(self):
        r, _, _ = select.select([self.p.stdout], [], [], max(0, self.deadline - time.time()))
        if not r:
            self.kill()
            raise AssertionError("no output from the target in time")
        return self.p.stdout.readline().decode().rstrip("\n")

    def send(self, text):
        self.p.stdin.write(text.encode() + b"\n")
        self.p.stdin.flush()

    def finish(self):
        try:
            out, err = self.p.communicate(timeout=max(1, self.deadline - time.time()))
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("ptfil did not finish")
        return out.decode(), err.decode()

    def kill(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()


def test_sigusr1_handler_called_once_per_signal():
    c = Child(["signals"])
    try:
        pid = int(c.line().split()[1])
        for i in range(1, 6):
            os.kill(pid, signal.SIGUSR1)
            c.send("wait")
            assert c.line() == "handled %d" % i
        c.send("quit")
        out, err = c.finish()
    finally:
        c.kill()
    assert c.p.returncode == 0, err
    assert "raised 3, handled 3" in out, out
    assert "total 8" in out, out


def test_stdin_stdout_unchanged():
    data = os.urandom(200000).hex().encode()
    b = bare([BEHAVE, "echo"], stdin_data=data)
    r = launch([BEHAVE, "echo"], stdin_data=data)
    assert r.returncode == b.returncode == 0
    assert r.stdout == b.stdout
    assert r.stdout.startswith(data)


def test_no_stop_on_other_syscalls():
    # Ten times the reads and writes, the same number of stops: only mapping calls stop the program.
    small = launch([BEHAVE, "echo"], stdin_data=b"x" * 40000).json["counters"]
    large = launch([BEHAVE, "echo"], stdin_data=b"x" * 400000).json["counters"]
    assert small["stops.seccomp"] > 0
    assert abs(large["stops.seccomp"] - small["stops.seccomp"]) <= 2, (small, large)
    assert abs(large["stops.total"] - small["stops.total"]) <= 4, (small, large)


def _sigint_count(out):
    for line in out.splitlines():
        if line.startswith("sigint "):
            return int(line.split()[1])
    raise AssertionError("no count in %r" % out)


def _sigint_by(send):
    """Runs the sigint target, sends SIGINT with send(ptfil_pid), returns how often the program saw it."""
    c = Child(["sigint"])
    try:
        assert c.line() == "ready"
        send(c.p.pid)
        time.sleep(0.3)
        c.send("quit")
        out, err = c.finish()
    finally:
        c.kill()
    assert c.p.returncode == 0, err
    return _sigint_count(out), out


def test_kill_int_to_ptfil_reaches_program_once():
    # Sent to ptfil alone: ptfil passes it on, once.
    count, out = _sigint_by(lambda pid: os.kill(pid, signal.SIGINT))
    assert count == 1, out


def test_kill_int_to_group_reaches_program_once():
    # Sent to the whole process group, ptfil and program: the program sees it once, not twice.
    count, out = _sigint_by(lambda pid: os.killpg(pid, signal.SIGINT))
    assert count == 1, out


def _in_terminal(args, keys, expect_first):
    """Runs ptfil under a pseudo-terminal, types keys once expect_first was printed; returns (status, output)."""
    d = workdir()
    snap = os.path.join(d, "snap.gz")
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(PTFIL, [PTFIL, "launch", "-q", "-o", snap, "--", BEHAVE, *args])
    out = b""
    deadline = time.time() + TIMEOUT
    sent = []
    status = None
    try:
        while time.time() < deadline:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                out += chunk
            if expect_first.encode() in out and len(sent) < len(keys):
                time.sleep(0.1)
                os.write(fd, keys[len(sent)])
                sent.append(keys[len(sent)])
        wpid, status = os.waitpid(pid, 0)
    finally:
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace"), snap


def test_ctrl_c_kills_program_and_snapshot_is_written():
    code, out, snap = _in_terminal(["sleep"], [b"\x03"], "ready")
    assert code == 128 + signal.SIGINT, (code, out)
    doc = view_json(snap)
    assert doc["process"]["exit_status"] == 130
    check_near("make_work", charged_through(doc, "make_work"), 8 * MiB)


def test_ctrl_c_reaches_handler_once():
    code, out, _ = _in_terminal(["sigint"], [b"\x03", b"quit\n"], "ready")
    assert code == 0, (code, out)
    assert _sigint_count(out) == 1, out


def test_sigterm_to_ptfil_ends_program_and_writes_snapshot():
    c = Child(["sleep"])
    try:
        assert c.line() == "ready"
        os.kill(c.p.pid, signal.SIGTERM)
        out, err = c.finish()
    finally:
        c.kill()
    assert c.p.returncode == 128 + signal.SIGTERM, (c.p.returncode, err)
    check_near("make_work", charged_through(view_json(c.snap), "make_work"), 8 * MiB)


def test_own_malloc_unwinding_itself():
    """own_malloc: a malloc of the program's own that calls backtrace() inside each call (as a heap
    profiler or a debugging allocator does). The touch view (the default) hooks no call: the program
    sees its stack exactly as untraced. The alloc view hooks the program's malloc at its entry and
    replaces its return address while it runs (the ptrace path's trampoline, the kernel's return
    probe), so an unwind from inside the call ends there: 2 frames instead of 8 (README, "What
    tracing changes"). The program's work, output format and exit status are unchanged either way."""
    argv = [target("own_malloc")]
    b = bare(argv)
    assert b.returncode == 0 and b.stdout.startswith(b"calls=2000 depth_min="), b.stdout
    want_depth = int(b.stdout.split(b"depth_min=")[1].split()[0])
    assert want_depth >= 6, b.stdout
    touch = launch(argv, ptfil_args=("-i", "0", "--charge=touch"))
    if touch.returncode != 0 and FAULT_PATH_REFUSED in touch.stderr.decode(errors="replace"):
        raise missing("the touch view is refused here: " + touch.stderr.decode(errors="replace").strip())
    else:
        assert (touch.returncode, touch.stdout) == (0, b.stdout), (touch.returncode, touch.stdout, b.stdout,
                                                                   touch.stderr.decode(errors="replace"))
    alloc = launch(argv, ptfil_args=("-i", "0", "--charge=alloc"))
    assert alloc.returncode == 0 and alloc.stdout.startswith(b"calls=2000 depth_min="), (alloc.returncode, alloc.stdout)
    seen = alloc.stdout.split()
    assert seen[1] == seen[2].replace(b"max", b"min"), alloc.stdout  # the same depth at every call
    depth = int(seen[1].split(b"=")[1])
    assert 1 <= depth < want_depth, "the alloc view's return hook no longer cuts the stack (%r): update the README" % (
        alloc.stdout)


if __name__ == "__main__":
    main([test_exit_status_passes_through, test_sigsegv_gives_139_and_a_snapshot,
          test_sigusr1_handler_called_once_per_signal, test_stdin_stdout_unchanged, test_no_stop_on_other_syscalls,
          test_kill_int_to_ptfil_reaches_program_once, test_kill_int_to_group_reaches_program_once,
          test_ctrl_c_kills_program_and_snapshot_is_written, test_ctrl_c_reaches_handler_once,
          test_sigterm_to_ptfil_ends_program_and_writes_snapshot, test_own_malloc_unwinding_itself])
