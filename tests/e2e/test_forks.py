"""Process trees: fork, vfork/posix_spawn and exec, in launch and attach modes.

Without --follow-forks a child runs as it would untraced (no breakpoint of ours left in it) and no
snapshot is written for it. With --follow-forks every process of the tree is profiled: the main one
at the output path, each child at STEM.CHILDPID.gz; an exec'd image starts a fresh ledger. Either
way the program's output and exit status are those of an untraced run.

In the touch pass (PTFIL_CHARGE=touch) each snapshot, the children's too, is in the touch view, the
blocks charged to the memset that wrote them in parent_alloc, child_alloc or exec_image_alloc; a
page a forked child inherited and never wrote stays its parent's (the child is charged what it
wrote); each snapshot's RSS at the peak holds what it charges (VmRSS counts every anonymous page).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, Attached, bare, charged_through, check_near, check_view, child_snapshots, functions, \
    heap_counters_zero, launch, main, stacks_through, target, touch_view, view_json

FORKS = target("forks")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
CHILD_PID = re.compile(rb"forks: child pid (\d+)")
FOLLOW = ("-i", "0", "--follow-forks")
NO_FOLLOW = ("-i", "0")


def launched(argv, follow, stdin_data=None, timeout=300):
    """Runs argv bare and under ptfil launch (with or without --follow-forks); checks that the output
    and exit status are the same; returns the Run and its child snapshots {pid text: path}."""
    b = bare(argv, stdin_data=stdin_data, timeout=timeout)
    r = launch(argv, ptfil_args=FOLLOW if follow else NO_FOLLOW, stdin_data=stdin_data, timeout=timeout)
    assert (r.returncode, r.stdout) == (b.returncode, b.stdout), "traced %r, untraced %r; ptfil's stderr: %s" % (
        (r.returncode, r.stdout), (b.returncode, b.stdout), r.stderr.decode(errors="replace"))
    return r, child_snapshots(r.snapshot)


def child_pid(stderr):
    m = CHILD_PID.search(stderr)
    assert m, "forks did not report its child: %r" % stderr
    return int(m.group(1))


def check_touch_doc(doc, function):
    """Under touch: the view, no malloc-family call followed, function's block charged to the memset it
    called (all but a page or so its malloc's or its own), and an RSS at the peak that holds the charge (the touch charge is anonymous resident memory)."""
    if not touch_view():
        return
    check_view(doc)
    heap_counters_zero(doc)
    st = stacks_through(doc, function)
    assert st and all(s["kind"] == "touch" for s in st), [(s["kind"], functions(s)[:4]) for s in st]
    by_memset = sum(s["charged_bytes"] for s in st if "memset" in (functions(s)[0] or ""))
    assert by_memset >= 0.99 * charged_through(doc, function), (by_memset, charged_through(doc, function))
    peak = doc["peak"]
    assert peak["rss_bytes"] >= peak["charged_bytes"], "process %d: VmRSS %d at the peak, below its charge %d" % (
        doc["process"]["pid"], peak["rss_bytes"], peak["charged_bytes"])


def check_child_snapshot(kids, pid, function, mib):
    """Exactly one child snapshot, for pid, with about mib MiB charged through function."""
    assert set(kids) == {str(pid)}, "child snapshots %r, expected one for %d" % (sorted(kids), pid)
    doc = view_json(kids[str(pid)])
    assert doc["process"]["pid"] == pid, doc["process"]
    check_near("%s in the child's snapshot" % function, charged_through(doc, function), mib * MiB)
    check_touch_doc(doc, function)
    return doc


def check_main_snapshot(doc, child_function):
    """The parent's own snapshot: its 10 MiB, and nothing the child allocated."""
    check_near("parent_alloc", charged_through(doc, "parent_alloc"), 10 * MiB)
    check_touch_doc(doc, "parent_alloc")
    assert charged_through(doc, child_function) == 0, "the child's %s is charged to the parent" % child_function


def test_fork_followed():
    r, kids = launched([FORKS, "fork"], follow=True)
    assert r.returncode == 0 and r.stdout == b"forks fork\nchild holds 30 MiB\nchild exited 0\n", r.stdout
    check_main_snapshot(r.json, "child_alloc")
    check_child_snapshot(kids, child_pid(r.stderr), "child_alloc", 30)


def test_fork_not_followed():
    r, kids = launched([FORKS, "fork"], follow=False)
    assert r.returncode == 0 and r.stdout == b"forks fork\nchild holds 30 MiB\nchild exited 0\n", r.stdout
    assert not kids, "child snapshots without --follow-forks: %r" % sorted(kids)
    check_main_snapshot(r.json, "child_alloc")


def exec_modes(mode):
    """mode (exec, spawn or vfork) starts the child image, which holds 20 MiB and exits 3."""
    want = ("forks %s\nchild image holds 20 MiB\nchild exited 3\n" % mode).encode()
    for follow in (False, True):
        r, kids = launched([FORKS, mode], follow=follow)
        assert r.returncode == 0 and r.stdout == want, (follow, r.stdout)
        check_main_snapshot(r.json, "exec_image_alloc")
        if follow:
            check_child_snapshot(kids, child_pid(r.stderr), "exec_image_alloc", 20)
        else:
            assert not kids, "child snapshots without --follow-forks: %r" % sorted(kids)


def test_fork_exec():
    exec_modes("exec")


def test_posix_spawn():
    exec_modes("spawn")


def test_vfork_exec():
    exec_modes("vfork")


SUBPROCESS = r"""
import subprocess, sys
r = subprocess.run(["/bin/echo", "from echo"], capture_output=True)
print("echo", r.returncode, r.stdout, flush=True)
r = subprocess.run([sys.executable, "-c", "import sys; print(sum(range(1000)), flush=True); sys.exit(4)"])
print("python child", r.returncode, flush=True)
sys.exit(3)
"""

POOL = r"""
import multiprocessing, sys
def square(x):
    return x * x
if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(square, range(20)), flush=True)
    sys.exit(5)
"""


def check_readable(kids):
    for name, path in kids.items():
        doc = view_json(path)
        assert str(doc["process"]["pid"]) == name, (path, doc["process"])


def test_python_subprocess_run():
    for follow in (False, True):
        r, kids = launched([PYTHON, "-c", SUBPROCESS], follow=follow)
        assert r.returncode == 3, (r.returncode, r.stderr)
        assert r.stdout == b"echo 0 b'from echo\\n'\n499500\npython child 4\n", r.stdout
        if follow:
            # Two children: echo and the second interpreter, each with its own snapshot.
            assert len(kids) == 2, sorted(kids)
            check_readable(kids)
        else:
            assert not kids, sorted(kids)


def test_python_multiprocessing_pool():
    for follow in (False, True):
        r, kids = launched([PYTHON, "-c", POOL], follow=follow)
        assert r.returncode == 5, (r.returncode, r.stderr)
        assert r.stdout == ("%s\n" % [x * x for x in range(20)]).encode(), r.stdout
        if follow:
            assert len(kids) >= 2, "a snapshot per worker expected: %r" % sorted(kids)
            check_readable(kids)
        else:
            assert not kids, sorted(kids)


def attach_wait_fork(follow):
    """forks wait-fork, attached to before it allocates and forks: the tree runs as untraced, ptfil
    leaves when the target exits (so it prints no detach line) and exits 0."""
    b = bare([FORKS, "wait-fork"], stdin_data=b"go\n")
    assert b.returncode == 0, b
    with Attached([FORKS, "wait-fork"]) as a:
        if follow:
            a.attach("--follow-forks")
        else:
            a.attach()
        a.send("go")
        status, out = a.target_finish()
        rc, err = a.finish()
        assert (status, out) == (b.returncode, b.stdout), ((status, out), (b.returncode, b.stdout))
        assert rc == 0, (rc, err)
        assert "detached from process" not in err, err
        doc = a.json()
        assert doc["process"]["mode"] == "attach" and doc["process"]["pid"] == a.pid, doc["process"]
        check_main_snapshot(doc, "child_alloc")
        kids = child_snapshots(a.snap)
        if follow:
            check_child_snapshot(kids, child_pid(a.target_stderr()), "child_alloc", 30)
        else:
            assert not kids, "child snapshots without --follow-forks: %r" % sorted(kids)


WAIT_THEN = r"""
import sys
print("ready", flush=True)
sys.stdin.readline()
exec(sys.argv[1])
"""


def test_attach_python_subprocess_and_pool():
    """The same two Python programs, attached to while they wait for a line, then let go."""
    for program, status, expect in ((SUBPROCESS, 3, b"echo 0 b'from echo\\n'\n499500\npython child 4\n"),
                                    (POOL, 5, ("%s\n" % [x * x for x in range(20)]).encode())):
        for follow in (False, True):
            with Attached([PYTHON, "-c", WAIT_THEN, program]) as a:
                a.attach(*(["--follow-forks"] if follow else []))
                a.send("")
                status_, out = a.target_finish()
                rc, err = a.finish()
                assert (status_, out) == (status, b"ready\n" + expect), (status_, out, err)
                assert rc == 0, (rc, err)
                kids = child_snapshots(a.snap)
                if follow:
                    assert len(kids) >= 2, "a snapshot per child expected: %r" % sorted(kids)
                    check_readable(kids)
                else:
                    assert not kids, sorted(kids)


def test_attach_fork_followed():
    attach_wait_fork(True)


def test_attach_fork_not_followed():
    attach_wait_fork(False)


if __name__ == "__main__":
    main([test_fork_followed, test_fork_not_followed, test_fork_exec, test_posix_spawn, test_vfork_exec,
          test_python_subprocess_run, test_python_multiprocessing_pool, test_attach_python_subprocess_and_pool,
          test_attach_fork_followed,
          test_attach_fork_not_followed])
