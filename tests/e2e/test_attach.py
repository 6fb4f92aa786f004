"""ptfil attach: profile a running process, then leave it exactly as it was.

Every way of leaving (SIGINT, SIGTERM, SIGHUP, --duration) writes a snapshot in which what was resident
before the attach is charged to [before attach], removes every breakpoint (the target's code reads
back byte for byte as before the attach), detaches, and lets the target finish with the output
and exit status of an untraced run. Allocations after the attach are charged to their stacks.

In the touch pass (PTFIL_CHARGE=touch) nothing at all is hooked under attach, not even the mapping
wrappers: [before attach] is a touch stack of the pages resident at the attach, what was made
resident after it is charged to the code that wrote it (the raw mapping of 12 MiB to the memset that
filled it; no [unhooked mmap], an alloc-view reconciliation), the ring's small blocks, which reuse
heap memory resident before the attach, make nothing resident of their own, and the total is the
target's RssAnon (read while it holds still, or just after the detach), within 1%.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import FAULT_PATH_REFUSED, HEAP_EVENTS_ENV, MiB, Attached, Lines, charged_through, check_near, check_view, exec_mappings, \
    functions, heap_counters_zero, live_snapshot, main, mapping_differences, missing, own_functions, proc_status, \
    rss_anon_bytes, stacks_through, target, touch_view, vmrss_bytes, wait_snapshot, wait_until

LOOP = target("attach_loop")
THREADS = target("attach_threads")
# attach_loop runs about 10 ms per iteration, at least ITERATIONS of them and then until it has had a
# SIGUSR2: every test sends that only after the detach and the checks of the still running target.
ITERATIONS = "100"
BEFORE = "[before attach]"
REL = 0.05  # what else was resident before the attach: stack, heap and library data, a few hundred KiB

_bare_loop = {}


def bare_loop(iterations=ITERATIONS):
    """attach_loop run untraced, sent one SIGUSR2 after "ready" as the traced runs are after the detach:
    (exit status, stdout). Computed once."""
    if iterations not in _bare_loop:
        p = subprocess.Popen([LOOP, iterations], stdout=subprocess.PIPE, start_new_session=True)
        out = Lines(p.stdout)
        try:
            out.wait_for(lambda s: s == "ready", 30)
            os.kill(p.pid, signal.SIGUSR2)
            p.wait(timeout=120)
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            if out.join(10):
                p.stdout.close()
        assert p.returncode == 7 and b"usr2 1\n" in out.data(), (p.returncode, out.data())
        _bare_loop[iterations] = (p.returncode, out.data())
    return _bare_loop[iterations]


def excerpt(doc, key="stacks", limit=8):
    lines = ["peak %s" % doc["peak"]]
    for s in doc[key][:limit]:
        lines.append("  %s charged=%d count=%d: %s" % (s["kind"], s["charged_bytes"], s["count"],
                                                      " <- ".join(str(f) for f in functions(s)[:6])))
    return "\n".join(lines)


def check_attach_doc(doc, pid, before_bytes, rss):
    """The snapshot of an attach that ended by a detach: mode, pid, no exit status, and the memory
    resident before the attach charged to [before attach] (about before_bytes, at most the RSS)."""
    assert doc["process"]["mode"] == "attach", doc["process"]
    assert doc["process"]["pid"] == pid, doc["process"]
    assert doc["process"]["exit_status"] is None, doc["process"]
    check_view(doc)
    before = charged_through(doc, BEFORE)
    check_near(BEFORE, before, before_bytes, rel=REL)
    assert before <= rss, "%s charged %d, more than the target's VmRSS %d" % (BEFORE, before, rss)
    for s in stacks_through(doc, BEFORE):
        assert s["kind"] == ("touch" if touch_view() else "pseudo") and functions(s)[0] == BEFORE, s
    if touch_view():
        heap_counters_zero(doc)


def check_touch_total(doc, anon, slack=0):
    """Under touch the peak is the target's anonymous residency: its RssAnon (anon), within 1%."""
    check_near("touch peak against the target's RssAnon", doc["peak"]["charged_bytes"], anon, rel=0.01, slack=slack)


def check_code_intact(a, before):
    """The target still runs, and its executable mappings read as before the attach: no int3 left."""
    assert a.running(), "attach_loop ended before its SIGUSR2"
    diffs = mapping_differences(before, exec_mappings(a.pid))
    assert not diffs, "the target's code changed across attach and detach:\n" + "\n".join(diffs)


def leave_loop(how):
    """Attaches to attach_loop, lets it run about a second, leaves by how ("SIGINT", "SIGTERM",
    "SIGHUP" or "duration"), then checks the snapshot, the target's code, its signal handler and its end."""
    want_status, want_out = bare_loop()
    with Attached([LOOP, ITERATIONS]) as a:
        code_before = exec_mappings(a.pid)
        if how == "duration":
            a.attach("--duration", "1")
            rc, err = a.finish(timeout=60)
            elapsed = time.time() - a.ptfil_started
            assert elapsed >= 0.95, "ptfil --duration 1 left after %.2f s" % elapsed
        else:
            a.attach()
            time.sleep(1)
            a.signal(getattr(signal, how))
            rc, err = a.finish(timeout=60)
        assert rc == 0, (how, rc, err)
        assert "detached from process %d" % a.pid in err, err
        check_code_intact(a, code_before)
        assert a.status("TracerPid") == "0", a.status("TracerPid")
        rss = vmrss_bytes(a.pid)
        anon = rss_anon_bytes(a.pid)
        # The program's own signal handler still runs after the detach.
        os.kill(a.pid, signal.SIGUSR2)
        status, out = a.target_finish()
        doc = a.json()
    assert (status, out) == (want_status, want_out), "traced %r, untraced %r" % ((status, out), (want_status, want_out))
    check_attach_doc(doc, a.pid, 16 * MiB, rss)
    if how == "duration":
        assert 0.9 <= doc["process"]["duration_s"] <= 30, doc["process"]
    if touch_view():
        # Its temporaries (up to 192 KiB) come and go around the RssAnon read after the detach.
        check_touch_total(doc, anon, slack=256 * 1024)
        assert charged_through(doc, "ring_alloc") <= 2 * 4096, excerpt(doc)
        return
    # The ring of blocks made after the attach is charged to ring_alloc: 8 live blocks, or 7 if the
    # detach caught the loop between a free and the next malloc.
    ring = stacks_through(doc, "ring_alloc", key="live_at_end")
    assert 7 <= sum(s["count"] for s in ring) <= 8, excerpt(doc, "live_at_end")
    assert all(s["kind"] == "heap" for s in ring), excerpt(doc, "live_at_end")
    assert doc["counters"]["heap.allocs"] > 0 and doc["counters"]["heap.frees"] > 0, doc["counters"]


def test_leave_on_sigint():
    leave_loop("SIGINT")


def test_leave_on_duration():
    leave_loop("duration")


def test_leave_on_sigterm():
    leave_loop("SIGTERM")


def test_leave_on_sighup():
    leave_loop("SIGHUP")


def hold_threads(a):
    """Lets attach_threads start its workers and hold their 4, 8 and 12 MiB."""
    a.send("go")
    a.wait_output("holding")


def check_workers(doc, key):
    for fn, mib in (("worker_one", 4), ("worker_two", 8), ("worker_three", 12)):
        check_near("%s in %s" % (fn, key), charged_through(doc, fn, key), mib * MiB, rel=REL)


def release_threads(a):
    """Releases the workers; attach_threads prints done and exits 0."""
    a.send("release")
    status, out = a.target_finish()
    assert (status, out) == (0, b"ready\nholding\ndone\n"), (status, out, a.target_stderr())


def test_threads_attributed():
    with Attached([THREADS]) as a:
        code_before = exec_mappings(a.pid)
        a.attach()
        hold_threads(a)
        time.sleep(0.3)  # a few timeline polls see the workers' pages resident
        a.signal(signal.SIGINT)
        rc, err = a.finish()
        assert rc == 0, (rc, err)
        assert "detached from process %d" % a.pid in err, err
        assert a.status("TracerPid") == "0", a.status("TracerPid")
        diffs = mapping_differences(code_before, exec_mappings(a.pid), same_set=False)
        assert not diffs, "the target's code changed across attach and detach:\n" + "\n".join(diffs)
        rss = vmrss_bytes(a.pid)
        anon = rss_anon_bytes(a.pid)
        release_threads(a)
        doc = a.json()
    check_attach_doc(doc, a.pid, 24 * MiB, rss)
    if touch_view():
        # The workers hold still: the peak is the RssAnon read after the detach.
        check_touch_total(doc, anon)
    check_workers(doc, "stacks")
    for fn in ("worker_one", "worker_two", "worker_three"):
        assert all("main" not in own_functions(s) for s in stacks_through(doc, fn)), excerpt(doc)
    check_near("peak", doc["peak"]["charged_bytes"], 48 * MiB, rel=REL)


RAW_MMAP = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_void_p
print("ready", flush=True)
sys.stdin.readline()
# mmap(NULL, 12 MiB, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS) as a raw system call: no libc wrapper sees it.
size = 12 << 20
addr = libc.syscall(9, None, ctypes.c_size_t(size), 3, 0x22, -1, 0)
ctypes.memset(addr, 1, size)
print("holding", flush=True)
sys.stdin.readline()
"""


def test_raw_syscall_mapping_found_by_reconciling():
    """A mapping made by a raw system call, past the hooked wrappers, is charged to [unhooked mmap]."""
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    with Attached([python, "-c", RAW_MMAP]) as a:
        a.attach()
        a.send("")
        a.wait_output("holding")
        if touch_view():
            # No wrapper is hooked under touch: the 12 MiB is charged to ctypes' memset that wrote it, and
            # the total is the interpreter's RssAnon, held still until the next line.
            def written(doc):
                check_near("memset", sum(s["charged_bytes"] for s in doc["stacks"]
                                         if "memset" in (functions(s)[0] or "")), 12 * MiB, rel=0.05)
            wait_snapshot(a.snap, written, "a checkpoint with the raw mapping charged to the memset that wrote it")
            anon = rss_anon_bytes(a.pid)
            a.signal(signal.SIGINT)
            rc, err = a.finish()
            assert rc == 0, (rc, err)
            a.send("")
            status, out = a.target_finish()
            assert status == 0, (status, out)
            doc = a.json()
            check_view(doc)
            heap_counters_zero(doc)
            assert charged_through(doc, "[unhooked mmap]") == 0, excerpt(doc)
            check_touch_total(doc, anon)
            return
        # The maps are compared with the ledger once a second, and the snapshot rewritten once its peak grew.
        wait_snapshot(a.snap, lambda doc: check_near("[unhooked mmap]", charged_through(doc, "[unhooked mmap]"),
                                                     12 * MiB, rel=0.05),
                      "a checkpoint with the raw mapping charged to [unhooked mmap]")
        a.signal(signal.SIGINT)
        rc, err = a.finish()
        assert rc == 0, (rc, err)
        a.send("")
        status, out = a.target_finish()
        assert status == 0, (status, out)
        doc = a.json()
    check_near("[unhooked mmap]", charged_through(doc, "[unhooked mmap]"), 12 * MiB, rel=0.05)


def test_sigusr1_writes_live_state():
    with Attached([THREADS]) as a:
        a.attach()
        hold_threads(a)
        time.sleep(0.3)
        for n in (1, 2):
            a.signal(signal.SIGUSR1)
            a.wait_stderr(r"live state\b.*\bwritten to", timeout=30, n=n)
            path = live_snapshot(a.snap, n)
            assert os.path.exists(path), "no %s after SIGUSR1 number %d; stderr:\n%s" % (path, n, a.err.text())
            live = a.json(path)
            check_workers(live, "live_at_end")
            check_near(BEFORE + " live", charged_through(live, BEFORE, "live_at_end"), 24 * MiB, rel=REL)
            assert live["process"]["mode"] == "attach" and live["process"]["pid"] == a.pid, live["process"]
        assert a.running() and a.ptfil.poll() is None, "SIGUSR1 ended ptfil or the target"
        a.signal(signal.SIGINT)
        rc, err = a.finish()
        assert rc == 0, (rc, err)
        release_threads(a)


def test_kill_9_leaves_last_peak_and_target_runs():
    with Attached([THREADS]) as a:
        code_before = exec_mappings(a.pid)
        a.attach()
        hold_threads(a)

        def held(doc):
            check_workers(doc, "stacks")
            check_near(BEFORE, charged_through(doc, BEFORE), 24 * MiB, rel=REL)
        # The peak snapshot is rewritten at most about once a second: kill -9 once it has the workers.
        wait_snapshot(a.snap, held, "a checkpoint with the workers' 4, 8 and 12 MiB")
        a.signal(signal.SIGKILL)
        a.ptfil.wait(timeout=30)
        wait_until(lambda: a.status("TracerPid") == "0", 10, "TracerPid 0 after kill -9 of ptfil")
        assert a.running(), "the target did not survive kill -9 of ptfil: %r" % a.target_stderr()
        diffs = mapping_differences(code_before, exec_mappings(a.pid), same_set=False)
        assert not diffs, "the target's code changed after kill -9 of ptfil:\n" + "\n".join(diffs)
        doc = a.json()
        check_workers(doc, "stacks")
        check_near(BEFORE, charged_through(doc, BEFORE), 24 * MiB, rel=REL)
        assert doc["process"]["mode"] == "attach" and doc["process"]["pid"] == a.pid, doc["process"]
        release_threads(a)


def ptrace_path():
    """Whether this pass's attach puts breakpoints into the target: the alloc view on the ptrace path
    (not the kernel-path pass, PTFIL_HEAP_EVENTS=uprobe, and not the touch pass)."""
    return not touch_view() and os.environ.get(HEAP_EVENTS_ENV) != "uprobe"


def check_intact_after_kill(a, tracer, code_before, what):
    """After a SIGKILL of some ptfil process: ptfil's front and its tracing process end, the target is
    traced by no one, runs, and its code reads as its files' again. The kernel takes the probes of a
    killed ptfil out when it closes its links, after ptfil died (a few hundred milliseconds for a
    dozen here, longer on a loaded machine): the code is read again for up to 30 s."""
    a.ptfil.wait(timeout=30)
    wait_until(lambda: a.status("TracerPid") == "0", 30, "TracerPid 0 after %s" % what)
    wait_until(lambda: proc_status(tracer, "State") in (None, "Z (zombie)"), 30, "ptfil's tracing process to end")
    assert a.running(), "%s: the target died: %r" % (what, a.target_stderr())
    diffs = []

    def restored():
        diffs[:] = mapping_differences(code_before, exec_mappings(a.pid), same_set=False)
        return not diffs
    try:
        wait_until(restored, 30, "the target's code to read as its files' after %s" % what)
    except AssertionError:
        raise AssertionError("%s: the target's code changed:\n%s" % (what, "\n".join(diffs))) from None
    assert a.running(), "%s: the target died: %r" % (what, a.target_stderr())


def kill_9_of_any_ptfil_process(argv, options, rounds, want, finish):
    """Attached with options to argv (its ready line "ready"), `rounds` times each: a SIGKILL of the
    process the user started, of the tracing process alone (the OOM killer's choice, `kill -9` of
    the pid in TracerPid) and of both (`pkill -9 ptfil`), one after another, 0.3 s into each attach.
    The target runs on after each, traced by no one, its code its files'; finish(a) then ends it,
    and its (status, output) must be want, an untraced run's."""
    with Attached(argv) as a:
        code_before = exec_mappings(a.pid)
        for cycle, who in enumerate(("front", "tracer", "both") * rounds):
            a.attach(*options, wait=False)
            try:
                a.wait_attached()
            except AssertionError:
                a.ptfil.wait(timeout=30)
                err = a.err.text()
                if FAULT_PATH_REFUSED in err:
                    raise missing("the touch view is refused here: " + err.strip())
                raise
            tracer = a.tracers[-1]
            time.sleep(0.3)  # some 30 large blocks mapped and unmapped meanwhile
            if who in ("front", "both"):
                os.kill(a.ptfil.pid, signal.SIGKILL)
            if who in ("tracer", "both"):
                os.kill(tracer, signal.SIGKILL)
            check_intact_after_kill(a, tracer, code_before, "cycle %d (kill -9 of the %s)" % (cycle, who))
        got = finish(a)
    assert got == want, "after %d kills: %r, untraced %r" % (3 * rounds, got, want)


def finish_loop(a):
    """attach_loop, still running after the kills: told to finish (SIGUSR2); its (status, output)."""
    os.kill(a.pid, signal.SIGUSR2)
    return a.target_finish()


def test_kill_9_of_ptfil_group_leaves_target_intact():
    """kill -9 of ptfil's whole process group (kill -9 -- -PGID: a user's, a service manager's or a
    container's stop), three times in a row, while attached to attach_loop, whose calloc of 192 KiB
    goes through mmap and munmap every 10 ms (the mapping calls' wrappers, breakpoints on the ptrace
    path and the kernel path's alloc view): ptfil's tracing process is in a group of its own, so the
    kill reaches only the process the user started, and the tracer leaves as on Ctrl-C. The target's
    code is its files' again each time, and it ends as an untraced run does."""
    want = bare_loop()
    with Attached([LOOP, ITERATIONS]) as a:
        code_before = exec_mappings(a.pid)
        for cycle in range(3):
            a.attach()
            tracer = a.tracers[-1]
            assert os.getpgid(tracer) == tracer != os.getpgid(a.ptfil.pid), (tracer, a.ptfil.pid)
            notice = "breakpoints are in process %d's code while attached" % a.pid
            if ptrace_path():
                a.err.wait_for(lambda s: notice in s, 10)
            time.sleep(0.5)  # some 50 large blocks mapped and unmapped through the hooked wrappers
            # The kernel path writes nothing into the target, and says nothing of breakpoints.
            assert ptrace_path() or notice not in a.err.text(), a.err.text()
            os.killpg(a.ptfil.pid, signal.SIGKILL)
            check_intact_after_kill(a, tracer, code_before, "cycle %d (kill -9 of ptfil's group)" % cycle)
        os.kill(a.pid, signal.SIGUSR2)
        status, out = a.target_finish()
    assert (status, out) == want, "after 3 kills of ptfil's group: %r, untraced %r" % ((status, out), want)


def test_kill_9_of_any_ptfil_process_under_touch():
    """The touch view (the default for C programs) writes nothing into the target: a SIGKILL of the
    process the user started, of the tracing process alone or of both leaves attach_loop running,
    its code its files', and it ends as an untraced run does. Three kills of each, while its calloc
    of 192 KiB goes through mmap and munmap every 10 ms. (On the ptrace path a SIGKILL of the tracing
    process is fatal to the target: README, "Attaching to a running process"; the kernel path's
    alloc view is test_kernel.py's test_attach_kill_9_of_any_ptfil_process.)"""
    kill_9_of_any_ptfil_process([LOOP, ITERATIONS], ("--charge=touch",), 3, bare_loop(), finish_loop)


def stopped_target(when):
    """attach_loop stopped by SIGSTOP before the attach or while attached stays stopped through the
    detach (State T, no tracer), and on SIGCONT finishes as an untraced run does."""
    want_status, want_out = bare_loop()
    with Attached([LOOP, ITERATIONS]) as a:
        code_before = exec_mappings(a.pid)
        if when == "before":
            os.kill(a.pid, signal.SIGSTOP)
            wait_until(lambda: a.state() == "T", 10, "attach_loop to stop")
            a.attach()
        else:
            a.attach()
            time.sleep(0.5)
            os.kill(a.pid, signal.SIGSTOP)
        time.sleep(0.5)
        # Traced, a stopped process shows t (tracing stop) or T: stopped either way, never running.
        assert a.state() in ("T", "t"), a.status("State")
        a.signal(signal.SIGINT)
        rc, err = a.finish()
        assert rc == 0, (rc, err)
        assert "detached from process %d" % a.pid in err, err
        assert a.state() == "T", "after the detach: %r" % a.status("State")
        assert a.status("TracerPid") == "0", a.status("TracerPid")
        time.sleep(0.3)
        assert a.state() == "T" and a.running(), "the target did not stay stopped: %r" % a.status("State")
        diffs = mapping_differences(code_before, exec_mappings(a.pid))
        assert not diffs, "the target's code changed across attach and detach:\n" + "\n".join(diffs)
        rss = vmrss_bytes(a.pid)
        os.kill(a.pid, signal.SIGUSR2)  # pending while stopped, handled after SIGCONT
        os.kill(a.pid, signal.SIGCONT)
        status, out = a.target_finish()
        doc = a.json()
    assert (status, out) == (want_status, want_out), "traced %r, untraced %r" % ((status, out), (want_status, want_out))
    check_attach_doc(doc, a.pid, 16 * MiB, rss)


def test_stopped_before_attach_stays_stopped():
    stopped_target("before")


def test_stopped_while_attached_stays_stopped():
    stopped_target("during")


if __name__ == "__main__":
    main([test_kill_9_of_any_ptfil_process_under_touch, test_raw_syscall_mapping_found_by_reconciling, test_leave_on_sigint, test_leave_on_duration, test_leave_on_sigterm, test_leave_on_sighup,
          test_threads_attributed, test_sigusr1_writes_live_state, test_kill_9_leaves_last_peak_and_target_runs,
          test_kill_9_of_ptfil_group_leaves_target_intact,
          test_stopped_before_attach_stays_stopped, test_stopped_while_attached_stays_stopped])
