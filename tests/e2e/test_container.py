"""Python programs in containers, profiled from outside them, and what tracing itself changes.

A process in its own PID namespace (made by util-linux `unshare -fp --mount-proc`, as a container
runtime makes one) names its threads by the ids they have there: the interpreter's thread states say
1 for its main thread, while ptrace stops it under the id it has on the host. ptfil must map one to
the other (NSpid) and find the Python frames, whether it attaches from the host, launches the
container's command, or the namespace sits inside a user namespace. A stack in Python code whose
thread state cannot be found loses its Python frames: that is counted and said once, never silent
(hidden_thread.py makes such a stack on purpose).

ptrace itself changes a set-uid program run by a user who is not root: it runs without its
privilege. ptfil launch says so before it starts it (tracer/caveats.c), and the program still runs
to its end with its own exit status.

In the touch pass (PTFIL_CHARGE=touch) the buffers are found by their Python lines as under alloc
(the kernel reads the frames at each fault, by the thread's id in its own PID namespace); a user without CAP_BPF and CAP_PERFMON (nobody) is refused the touch
view before the program starts, with the set-user-ID warning still said first.
"""
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import (FAULT_PATH_REFUSED, MiB, PTFIL, SRCDIR, TIMEOUT, Attached, Skip, bare, charged_through,
                       check_near, check_view, child_snapshots, exec_mappings, functions, launch, main,
                       mapping_differences, own_functions, target, touch_pseudo, touch_view, view_json, wait_until,
                       workdir)

PYTHON = "/usr/bin/python3"  # Debian 12's CPython 3.11, as in test_python.py
PYDIR = os.path.abspath(os.path.join(SRCDIR, "tests", "targets", "py"))
BOXED = os.path.join(PYDIR, "boxed.py")
HIDDEN = os.path.join(PYDIR, "hidden_thread.py")
PID_NS = ["unshare", "-fp", "--mount-proc"]
USER_PID_NS = ["unshare", "-U", "--map-root-user", "-fp", "--mount-proc"]
MISSING = re.compile(r"warning: process (\d+): Python frames are missing from (\d+) of its (\d+) stacks")


def site_lines(path):
    """{name: line} of the "# SITE: NAME" markers of a Python target."""
    with open(path) as f:
        return {m.group(1): i for i, text in enumerate(f, 1) for m in [re.search(r"# SITE: (\w+)", text)] if m}


def py_frames(stack):
    return [f for f in stack["frames"] if f["kind"] == "python"]


def own_py_frames(stack):
    """The Python frames of a stack's own part: before "[new thread]", past which the stack of the call
    that started the thread follows (taken at the clone, Python frames included, in either view)."""
    names = [f.get("function") for f in stack["frames"]]
    own = stack["frames"][:names.index("[new thread]")] if "[new thread]" in names else stack["frames"]
    return [f for f in own if f["kind"] == "python"]


def show(stack, depth=12):
    return " <- ".join("%s%s" % (f.get("function"), ":%s" % f["line"] if f.get("line") else "")
                       for f in stack["frames"][:depth])


def charged_at(doc, function, path, line):
    """The bytes charged at the peak to stacks whose innermost Python frame is function at path:line."""
    return sum(s["charged_bytes"] for s in doc["stacks"] if py_frames(s) and
               (py_frames(s)[0]["function"], py_frames(s)[0]["file"], py_frames(s)[0]["line"]) == (function, path, line))


def top_stacks(doc, n=6):
    return "\n".join("  %.1f MiB: %s" % (s["charged_bytes"] / MiB, show(s))
                     for s in sorted(doc["stacks"], key=lambda s: -s["charged_bytes"])[:n])


def namespaces_work(prefix):
    """True when this machine lets us make these namespaces (root, or a kernel allowing user namespaces)."""
    try:
        r = subprocess.run(prefix + ["/bin/true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def only_child(pid, timeout=30):
    """The one child of pid (unshare -f's: the program in the new namespace)."""
    def child():
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = f.read().split()
        except OSError:
            return None
        return int(kids[0]) if len(kids) == 1 else None
    return wait_until(child, timeout, "the child of unshare (%d)" % pid)


def attach_in_namespace(prefix):
    """ptfil attach from the host to boxed.py serve running inside the namespaces prefix makes: its
    second thread's allocations after the attach carry their Python frames, it runs on to its own end
    after the detach, with its output and exit status, and no int3 is left in its code."""
    line = site_lines(BOXED)["hold"]
    with Attached(prefix + [PYTHON, BOXED, "serve"]) as a:
        py = only_child(a.pid)
        with open("/proc/%d/status" % py) as f:
            ns = f.read()
        assert re.search(r"^NSpid:\s+%d\s+1$" % py, ns, re.M), "python3 is not pid 1 of a namespace:\n" + ns
        before = exec_mappings(py)
        a.pid = py                # the process to attach to: the interpreter, not unshare
        a.attach()
        time.sleep(1)
        a.signal(signal.SIGINT)
        rc, err = a.finish()
        assert rc == 0 and "detached from process %d" % py in err, (rc, err)
        diffs = mapping_differences(before, exec_mappings(py), same_set=False)
        status, out = a.target_finish()
        doc = a.json()
    assert (status, out) == (4, b"ready\nbye\n"), (status, out, a.target_stderr())
    assert not diffs, "code changed after the detach:\n" + "\n".join(diffs)
    assert doc["process"]["pid"] == py, doc["process"]
    check_view(doc)
    if touch_view():
        # What was resident before the attach; the rest, as under alloc, under hold's line (its Python
        # frames read by the kernel at each fault, from the thread's id in its own namespace).
        assert touch_pseudo(doc, "[before attach]"), top_stacks(doc)
    held = charged_at(doc, "hold", BOXED, line)
    # About a second of 256 KiB a tick in hold(): several MiB, never more than the 100 MiB it keeps at most.
    assert 4 * MiB <= held <= 110 * MiB, "%.1f MiB charged to hold (boxed.py:%d); counters %s\n%s" % (
        held / MiB, line, {k: v for k, v in doc["counters"].items() if k.startswith("python.")}, top_stacks(doc))
    top = max((s for s in doc["stacks"] if py_frames(s) and py_frames(s)[0]["function"] == "hold"),
              key=lambda s: s["charged_bytes"])
    assert [f["function"] for f in py_frames(top)][:2] == ["hold", "serve"], show(top, 30)
    assert doc["counters"].get("python.no_thread_state") == 0, doc["counters"]
    assert not MISSING.search(err), err


def test_attach_pid_namespace():
    if not namespaces_work(PID_NS):
        raise Skip("cannot make a PID namespace here (%s)" % " ".join(PID_NS))
    attach_in_namespace(PID_NS)


def test_attach_user_namespace():
    """The same inside a user namespace (unprivileged containers): the host's root still traces it."""
    if not namespaces_work(USER_PID_NS):
        raise Skip("this kernel does not let us make a user namespace (%s)" % " ".join(USER_PID_NS))
    attach_in_namespace(USER_PID_NS)


def test_launch_pid_namespace():
    """ptfil launch -f -- unshare -fp --mount-proc python3 boxed.py: unshare forks the program into the
    namespace, so only --follow-forks profiles it, in the child's own snapshot; each buffer is charged
    to the Python line that made it, in the main thread and in the second thread."""
    if not namespaces_work(PID_NS):
        raise Skip("cannot make a PID namespace here (%s)" % " ".join(PID_NS))
    lines = site_lines(BOXED)
    b = bare(PID_NS + [PYTHON, BOXED])
    assert (b.returncode, b.stdout) == (5, b"boxed: 36 MiB\n"), (b.returncode, b.stdout, b.stderr)
    r = launch(PID_NS + [PYTHON, BOXED], ptfil_args=("-i", "0", "-f"))
    err = r.stderr.decode(errors="replace")
    assert (r.returncode, r.stdout) == (b.returncode, b.stdout), (r.returncode, r.stdout, err)
    assert not MISSING.search(err), err
    kids = child_snapshots(r.snapshot)
    docs = [view_json(p) for p in kids.values()]
    boxed = [d for d in docs if d["process"]["command"] == [PYTHON, BOXED]]
    assert len(boxed) == 1, "snapshots of %s: %s" % (sorted(kids), [d["process"]["command"] for d in docs])
    doc = boxed[0]
    assert doc["process"]["exit_status"] == 5, doc["process"]
    check_view(doc)
    for fn, site, mib in (("fill_main", "main", 24), ("fill_thread", "thread", 12)):
        check_near("%s (boxed.py:%d)" % (fn, lines[site]), charged_at(doc, fn, BOXED, lines[site]), mib * MiB)
    assert doc["counters"].get("python.no_thread_state") == 0, doc["counters"]


def test_missing_frames_reported():
    """A stack in Python code whose thread state is not found: counted in the snapshot, and said once
    on stderr with the same count; the program's output and status are its own."""
    b = bare([PYTHON, HIDDEN])
    assert (b.returncode, b.stdout) == (6, b"hidden_thread: 16 MiB\n"), (b.returncode, b.stdout, b.stderr)
    r = launch([PYTHON, HIDDEN])
    err = r.stderr.decode(errors="replace")
    assert (r.returncode, r.stdout) == (b.returncode, b.stdout), (r.returncode, r.stdout, err)
    found = MISSING.findall(err)
    assert len(found) == 1, "expected one warning about missing Python frames, stderr:\n" + err
    pid, missing, stacks = (int(x) for x in found[0])
    doc = r.json
    assert pid == doc["process"]["pid"], (pid, doc["process"])
    assert 1 <= missing <= stacks and missing == doc["counters"].get("python.no_thread_state"), (found, doc["counters"])
    # The buffer made after the thread state was hidden: charged, through native frames only.
    big = max(doc["stacks"], key=lambda s: s["charged_bytes"])
    check_near("the 16 MiB buffer", big["charged_bytes"], 16 * MiB)
    assert not py_frames(big), show(big)


# --- what tracing itself changes ------------------------------------------------------------------

PRIVILEGE = re.compile(r"warning: (.*) is set-user-ID root: .* it runs WITHOUT that privilege")


def run_as(user, argv, cwd):
    """Runs argv as user (setpriv, no supplementary groups), or as ourselves when user is None, in its
    own session under a timeout; returns (status, stdout, stderr)."""
    if user is not None:
        argv = ["setpriv", "--reuid=%d" % user.pw_uid, "--regid=%d" % user.pw_gid, "--clear-groups"] + argv
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError("%r timed out after %ss" % (argv, TIMEOUT))
    return proc.returncode, out, err.decode(errors="replace")


def test_setuid_loses_privilege():
    """ptfil launch, run by a user who is not root, of a set-user-ID root copy of whoami_euid: ptfil
    warns before it starts that the program will run without its privilege, and the program runs to
    its end unprivileged (it prints the euid it got: the user's, not root's), with its own exit status.
    Run by root, or on a program that is not set-user-ID, there is nothing to say."""
    if os.geteuid() != 0:
        raise Skip("making a set-user-ID root copy needs root")
    if not shutil.which("setpriv"):
        raise Skip("no setpriv (util-linux) to run ptfil as another user")
    nobody = pwd.getpwnam("nobody")
    d = workdir()
    try:
        # nobody owns the directory (the snapshots go there); root owns the set-user-ID copy in it.
        os.chown(d, nobody.pw_uid, nobody.pw_gid)
        os.chmod(d, 0o755)
        plain = os.path.join(d, "plain_copy")
        shutil.copy(target("whoami_euid"), plain)
        setuid = os.path.join(d, "setuid_copy")
        shutil.copy(target("whoami_euid"), setuid)
        os.chmod(setuid, 0o4755)
        # ptfil is run from a copy here: the build directory may be one that nobody cannot enter (a clone
        # under /root), and ptfil is one file that needs nothing beside it.
        ptfil_copy = os.path.join(d, "ptfil")
        shutil.copy(PTFIL, ptfil_copy)
        rc, out, err = run_as(nobody, [ptfil_copy, "--version"], d)
        if rc != 0:
            raise Skip("nobody cannot run %s: %s" % (ptfil_copy, err.strip()))
        rc, out, err = run_as(nobody, ["./setuid_copy"], d)
        assert rc == 7, (rc, out, err)
        if out != b"euid 0 ruid %d\n" % nobody.pw_uid:
            raise Skip("set-user-ID is not honoured in %s even untraced (a nosuid mount?): %r" % (d, out))

        def ptfil(user, program, snap):
            # auto: the kernel path needs CAP_BPF and CAP_PERFMON, which nobody lacks (the suite's
            # kernel-path pass sets PTFIL_HEAP_EVENTS=uprobe, which would refuse to run).
            return run_as(user, [ptfil_copy, "launch", "-q", "-i", "0", "--heap-events=auto", "-o", os.path.join(d, snap),
                                 "--", program], d)

        rc, out, err = ptfil(nobody, "./setuid_copy", "nobody.gz")
        warned = PRIVILEGE.findall(err)
        assert warned == ["./setuid_copy"], "expected one warning that ./setuid_copy loses its privilege:\n" + err
        if touch_view():
            # nobody may not load the fault path's BPF programs: --charge touch is refused before the
            # program starts (it prints nothing), and the refusal names --charge alloc.
            assert rc != 0 and out == b"" and FAULT_PATH_REFUSED in err and "--charge alloc" in err, (rc, out, err)
        else:
            assert rc == 7 and out == b"euid %d ruid %d\n" % (nobody.pw_uid, nobody.pw_uid), (rc, out, err)
            check_near("keep_block", charged_through(view_json(os.path.join(d, "nobody.gz")), "keep_block"), 4 * MiB)
        # Found through PATH as execvp finds it: the warning names the file.
        env_path = "PATH=%s:%s" % (d, os.environ.get("PATH", "/usr/bin:/bin"))
        rc, out, err = run_as(nobody, ["env", env_path, ptfil_copy, "launch", "-q", "-i", "0", "--heap-events=auto", "-o",
                                       os.path.join(d, "path.gz"), "--", "setuid_copy"], d)
        assert PRIVILEGE.findall(err) == [setuid] and rc == (1 if touch_view() else 7), (rc, out, err)
        # Nothing to say: root keeps the privilege, and a program that is not set-user-ID has none to lose.
        rc, out, err = ptfil(None, "./setuid_copy", "root.gz")
        assert (rc, out) == (7, b"euid 0 ruid 0\n") and not PRIVILEGE.search(err) and "WITHOUT" not in err, (rc, out, err)
        if touch_view():
            # As root the touch view runs: keep_block's 4 MiB, which it wrote itself.
            root_doc = view_json(os.path.join(d, "root.gz"))
            check_view(root_doc)
            check_near("keep_block", charged_through(root_doc, "keep_block"), 4 * MiB)
        rc, out, err = ptfil(nobody, "./plain_copy", "plain.gz")
        assert rc == (1 if touch_view() else 7) and "WITHOUT" not in err, (rc, out, err)
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main([test_attach_pid_namespace, test_attach_user_namespace, test_launch_pid_namespace,
          test_missing_frames_reported, test_setuid_loses_privilege])
