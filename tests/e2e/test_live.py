#!/usr/bin/env python3
"""ptfil --live in a real terminal (issue 17): tmux runs ptfil in a pane of a server of the test's own,
capture-pane reads the screen at known moments, send-keys presses the view's keys.

grow_steps (tests/targets/grow_steps.c) grows by 10 MiB a step in grow_step and waits, after each step,
for the test's go-K file: so the test knows what the screen must show when it looks.
"""
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptfiltest import (PTFIL, exec_mappings, main, mapping_differences, proc_status, ptfil, target,  # noqa: E402
                       view_json, wait_until, workdir, MiB)

TMUX = shutil.which("tmux")
GROW = target("grow_steps")
STEPS = 6
SCREEN_TIMEOUT = 30
_servers = itertools.count()


def tmux_env():
    env = dict(os.environ)
    env.pop("TMUX", None)  # a test run from inside tmux starts a server of its own all the same
    return env


class Pane:
    """One tmux server of our own (-L, no configuration), one 120x40 window whose shell runs script.
    Use it as a context manager: on leaving, the server is killed, and so is whatever the test started."""

    def __init__(self, d, script, owns_target=True):
        assert TMUX, "tmux is needed for the live view's tests (tools/install-deps.sh installs it)"
        self.dir = d
        self.owns_target = owns_target
        self.sock = "ptfil-live-%d-%d" % (os.getpid(), next(_servers))
        path = os.path.join(d, "pane.sh")
        with open(path, "w") as f:
            f.write(script)
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "-s", "live", "sh " + path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def tmux(self, *args):
        r = subprocess.run([TMUX, "-L", self.sock, *args], capture_output=True, timeout=30, env=tmux_env())
        if r.returncode != 0:
            raise AssertionError("tmux %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr.decode()))
        return r.stdout.decode(errors="replace")

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "live")

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "live", *keys)

    def wait_screen(self, predicate, what, timeout=SCREEN_TIMEOUT):
        """Reads the screen every 100 ms until predicate(screen) holds; returns that screen."""
        deadline = time.time() + timeout
        while True:
            s = self.screen()
            if predicate(s):
                return s
            if time.time() >= deadline:
                raise AssertionError("timed out after %ss waiting for %s; the screen:\n%s\nptfil's stderr:\n%s" % (
                    timeout, what, s, read(os.path.join(self.dir, "err"))))
            time.sleep(0.1)

    def wait_text(self, text, timeout=SCREEN_TIMEOUT):
        return self.wait_screen(lambda s: text in s, repr(text), timeout)

    def close(self):
        subprocess.run([TMUX, "-L", self.sock, "kill-server"], capture_output=True, timeout=30, env=tmux_env())
        # The pane's processes got SIGHUP; a target it launched, left waiting, is killed (it would give up in
        # 2 minutes). An attach test's target is the test's own.
        pid = target_pid(self.dir, wait=False) if self.owns_target else None
        if pid and "grow_steps" in read("/proc/%d/cmdline" % pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def touch(d, name):
    open(os.path.join(d, name), "w").close()


def wait_file(d, name, timeout=60):
    path = os.path.join(d, name)
    wait_until(lambda: os.path.exists(path), timeout, path)


def target_pid(d, wait=True):
    path = os.path.join(d, "pid")
    if wait:
        wait_file(d, "pid")
    text = read(path).strip()
    return int(text) if text else None


def parent_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def pane_script(d, ptfil_args):
    """The shell in the pane: the terminal's settings before, ptfil, its status, the settings after."""
    q = lambda s: "'" + s.replace("'", "'\\''") + "'"
    return "\n".join([
        "cd %s" % q(d),
        "stty -a > stty.before",
        "%s %s > out 2> err" % (q(PTFIL), " ".join(q(a) for a in ptfil_args)),
        "echo $? > rc.tmp && mv rc.tmp rc",
        "stty -a > stty.after",
        "echo ptfil-finished",
        "sleep 300",
        "",
    ])


def finished(pane, d, timeout=60):
    """Waits for ptfil to end in the pane; returns its exit status, after checking the terminal is as it was."""
    wait_file(d, "rc", timeout)
    rc = int(read(os.path.join(d, "rc")))
    pane.wait_text("ptfil-finished")
    before, after = read(os.path.join(d, "stty.before")), read(os.path.join(d, "stty.after"))
    assert before and before == after, "the terminal's settings changed under --live:\nbefore:\n%s\nafter:\n%s" % (
        before, after)
    return rc


def list_rows(screen):
    """The stack rows of the view's list, in order (the lines after its column header); [] without a list."""
    lines = screen.splitlines()
    for i, line in enumerate(lines):
        if re.search(r"charged\s+%\s+count\s+kind\s+where", line):
            rows = []
            for row in lines[i + 1:]:
                if not re.search(r"\d (B|KiB|MiB|GiB)\s", row):
                    break
                rows.append(row)
            return rows
    return []


def top_row_is(screen, size, function):
    rows = list_rows(screen)
    return bool(rows) and size in rows[0] and function in rows[0]


def check_top_row(pane, size, function, what):
    pane.wait_screen(lambda s: top_row_is(s, size, function), "%s: the top row %s in %s" % (what, size, function))


def test_launch_view():
    """launch --live: the totals and the growing stack after 3 steps, a stack's frames, p for the peak."""
    d = workdir()
    snap = os.path.join(d, "snap.gz")
    with Pane(d, pane_script(d, ["launch", "--live", "-o", snap, "--", GROW, str(STEPS), d])) as pane:
        for k in (1, 2):
            wait_file(d, "at-%d" % k)
            touch(d, "go-%d" % k)
        wait_file(d, "at-3")
        # The program's own small blocks and pages (stdio, the dynamic linker's) add a few KiB.
        s = pane.wait_screen(lambda s: re.search(r"now 30\.[01] MiB charged", s), "now 30.0 MiB charged")
        assert re.search(r"peak 30\.[01] MiB at \d+\.\d s", s), s
        assert "pid %d" % target_pid(d) in s.splitlines()[0], s
        check_top_row(pane, "30.0 MiB", "grow_step", "after 3 steps")
        assert re.search(r"\b3\s+\w+\s+grow_step", list_rows(pane.screen())[0]), pane.screen()

        # Enter: the top stack's frames in full, innermost first (grow_step before main); Esc: back.
        pane.keys("Enter")
        # The heading and its rows are drawn a moment apart: wait for the rows too.
        s = pane.wait_screen(lambda s: "frames, innermost first" in s and re.search(r"#\d+\s+main\b", s),
                             "the top stack's frames, down to main")
        frames = [line for line in s.splitlines() if re.match(r"\s+#\d+ ", line)]
        at = {name: next((i for i, line in enumerate(frames) if re.search(r"#\d+\s+%s\b" % name, line)), None)
              for name in ("grow_step", "main")}
        assert at["grow_step"] is not None and at["main"] is not None and at["grow_step"] < at["main"], s
        pane.keys("Escape")
        pane.wait_text("stacks now, by charged bytes")

        # The last steps, then shrink: 20 MiB now, the peak 60 MiB.
        for k in range(3, STEPS + 1):
            touch(d, "go-%d" % k)
            wait_file(d, "at-%d" % (k + 1) if k < STEPS else "at-shrunk")
        s = pane.wait_screen(lambda s: re.search(r"now 20\.[01] MiB charged", s), "now 20.0 MiB charged")
        m = re.search(r"peak (\d+\.\d) MiB", s)
        assert m and 10 * STEPS <= float(m.group(1)) <= 10 * STEPS + 0.2, s
        check_top_row(pane, "20.0 MiB", "grow_step", "now, after shrink")
        pane.keys("p")
        pane.wait_text("stacks at the peak")
        check_top_row(pane, "%d.0 MiB" % (10 * STEPS), "grow_step", "at the peak")
        pane.keys("p")
        check_top_row(pane, "20.0 MiB", "grow_step", "now again")

        touch(d, "go-shrunk")
        rc = finished(pane, d)
        assert rc == 0, "ptfil exited %d: %s" % (rc, read(os.path.join(d, "err")))
        assert "grew %d steps of 10 MiB, sum 42" % STEPS in read(os.path.join(d, "out")), read(os.path.join(d, "out"))
        doc = view_json(snap)
        peak = doc["peak"]["charged_bytes"]
        assert 10 * STEPS * MiB <= peak < (10 * STEPS + 2) * MiB, "peak %.1f MiB" % (peak / MiB)
    shutil.rmtree(d, ignore_errors=True)


def start_target(d):
    """grow_steps started untraced, in its own session; returns (Popen, pid) once it waits after step 1."""
    out = open(os.path.join(d, "target.out"), "wb")
    p = subprocess.Popen([GROW, str(STEPS), d], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                         start_new_session=True)
    out.close()
    wait_file(d, "at-1")
    return p


def run_target_out(p, d):
    """Lets the target run to its end; returns its exit status and output."""
    for k in range(1, STEPS + 1):
        touch(d, "go-%d" % k)
    touch(d, "go-shrunk")
    rc = p.wait(timeout=60)
    return rc, read(os.path.join(d, "target.out"))


def attach_then(leave):
    """attach --live to a running grow_steps, see it grow by a step, leave by leave(pane, ptfil pid); the
    target must run on unharmed: its code as before, its output and status as untraced."""
    d = workdir()
    snap = os.path.join(d, "snap.gz")
    p = start_target(d)
    try:
        before = exec_mappings(p.pid)
        with Pane(d, pane_script(d, ["attach", "--live", "-o", snap, str(p.pid)]), owns_target=False) as pane:
            pane.wait_screen(lambda s: "attached to %d" % p.pid in s and "charged, RSS" in s, "the view")
            touch(d, "go-1")
            wait_file(d, "at-2")
            # What was there before the attach has a row of its own, as large: grow_step's is one of the rows.
            pane.wait_screen(lambda s: any("10.0 MiB" in r and "grow_step" in r for r in list_rows(s)),
                             "a row of 10.0 MiB in grow_step, the step made while attached")
            leave(pane, p.pid)
            rc = finished(pane, d)
            assert rc == 0, "ptfil attach exited %d: %s" % (rc, read(os.path.join(d, "err")))
        assert p.poll() is None, "the target did not survive the detach (status %r)" % p.poll()
        diffs = mapping_differences(before, exec_mappings(p.pid))
        assert not diffs, "code left changed after the detach:\n" + "\n".join(diffs)
        doc = view_json(snap)
        assert doc["peak"]["charged_bytes"] >= 10 * MiB, doc["peak"]
        rc, out = run_target_out(p, d)
        assert rc == 0 and "grew %d steps of 10 MiB, sum 42" % STEPS in out, "target: status %d, output %r" % (rc, out)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    shutil.rmtree(d, ignore_errors=True)


def test_attach_q():
    """attach --live, q: ptfil detaches cleanly and writes the snapshot; the target runs on."""
    def press_q(pane, pid):
        pane.keys("q")
    attach_then(press_q)


def test_attach_sigterm():
    """attach --live, SIGTERM to ptfil mid-view: it detaches, writes the snapshot, gives the terminal back."""
    def sigterm(pane, pid):
        ptfil = int(proc_status(pid, "TracerPid") or 0)
        assert ptfil and read("/proc/%d/comm" % ptfil).strip() == "ptfil", "%d is not traced by ptfil" % pid
        os.kill(ptfil, signal.SIGTERM)
    attach_then(sigterm)


def test_launch_sigterm():
    """launch --live, SIGTERM to ptfil mid-view: the program gets it (128+15 as without ptfil) and the
    terminal is given back as it was."""
    d = workdir()
    snap = os.path.join(d, "snap.gz")
    with Pane(d, pane_script(d, ["launch", "--live", "-o", snap, "--", GROW, str(STEPS), d])) as pane:
        wait_file(d, "at-1")
        touch(d, "go-1")
        wait_file(d, "at-2")
        pane.wait_screen(lambda s: re.search(r"now 20\.[01] MiB charged", s), "now 20.0 MiB charged")
        pid = target_pid(d)
        ptfil = parent_of(pid)
        assert read("/proc/%d/comm" % ptfil).strip() == "ptfil", "the target's parent %d is not ptfil" % ptfil
        os.kill(ptfil, signal.SIGTERM)
        rc = finished(pane, d)
        assert rc == 128 + signal.SIGTERM, "ptfil exited %d: %s" % (rc, read(os.path.join(d, "err")))
        assert not os.path.exists("/proc/%d" % pid) or "grow_steps" not in read("/proc/%d/cmdline" % pid)
    shutil.rmtree(d, ignore_errors=True)


def test_no_terminal():
    """--live without a terminal (no controlling terminal, pipes for stdin and stdout): refused with one
    line and status 2, before anything runs or is written."""
    d = workdir()
    snap = os.path.join(d, "snap.gz")
    for args in (["launch", "--live", "-o", snap, "--", GROW, "1", d], ["attach", "--live", "-o", snap, str(os.getpid())]):
        r = ptfil(*args, input=b"", timeout=60)  # stdin a pipe too
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 2, "ptfil %s: status %d, stderr %r" % (" ".join(args), r.returncode, err)
        assert len(err.splitlines()) == 1 and "--live" in err and "terminal" in err, err
        assert not r.stdout, r.stdout
        assert not os.path.exists(snap) and not os.path.exists(os.path.join(d, "pid")), os.listdir(d)
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main([test_no_terminal, test_launch_view, test_attach_q, test_attach_sigterm, test_launch_sigterm])
