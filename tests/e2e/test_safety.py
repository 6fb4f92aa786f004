"""ptfil never freezes, corrupts or kills what it traces (issue 13, findings 1 to 4 and 6 to 9).

Each test does to a target what a user would, then checks what the user would see: ptfil leaves
within a bound when told to (and exits 0 after an attach, the program's own status after a launch);
the target is left running (no thread stopped, no tracer), its code reads back as before the
attach (no int3 left in), and it finishes with the output and exit status of an untraced run;
where a peak is the point, the peak and the function it is charged to.

The targets (tests/targets/safety_*.c) fork, start short threads, end their main thread first,
storm malloc on eight threads, take signals on an alternate stack, siglongjmp out of realloc,
dlopen the malloc family thirty times over and leave their forked children running.

In the touch pass (PTFIL_CHARGE=touch) nothing of the malloc family is hooked, so what these tests do
to ptfil's hooks (a siglongjmp out of a hooked realloc, thirty malloc families in one load event)
cannot go wrong there; every check of the target's end still holds, and the peaks are charged to
the code that wrote the pages: safety_longjmp's 40 MiB to main's memset, not alloc_at_depth's malloc.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, PTFIL, Attached, Lines, bare, charged_through, check_near, check_view, exec_mappings, functions, \
    heap_counters_zero, launch, main, malloc_bytes, mapping_differences, page_round, proc_status, stacks_through, \
    ptfil, target, touch_pseudo, touch_view, view_json, wait_until, workdir

SPAWN = target("safety_spawn")
MAINEXIT = target("safety_mainexit")
STORM = target("safety_storm")
ALTSTACK = target("safety_altstack")
LONGJMP = target("safety_longjmp")
DLMANY = target("safety_dlmany")
ORPHANS = target("safety_orphans")

LEAVE_BOUND = 20  # seconds from the start of ptfil to its end, told to leave after at most a few
DURATION_RUNS = 3  # attach -d 1 runs on each churning target (the old tracer froze 3 of 3, 4 of 5, 3 of 3)
# attach -d 0.2 cycles on the malloc storm: about 55 s. The old tracer killed it with a SIGTRAP within
# 50 detaches in 6 runs of 7 (at detach 2, 6, 11, 16, 37 and 50).
DETACH_CYCLES = 120
CRASH_ROUNDS = 3  # crashes of the tracing process per signal (SIGSEGV, SIGBUS, SIGABRT)


# --- what a user checks -----------------------------------------------------------------------------

def tids(pid):
    try:
        return sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))
    except FileNotFoundError:
        return []


def live_tid(pid):
    """A thread of pid that has not ended (the main thread may be a zombie): its /proc/TID/maps and
    mem are the process's, where /proc/PID/maps of a zombie main thread reads empty."""
    for tid in [pid] + tids(pid):
        state = proc_status(tid, "State")
        if state and state[0] != "Z":
            return tid
    raise AssertionError("process %d has no live thread" % pid)


def check_released(pid):
    """No thread of pid is traced or stopped: each runs (or sleeps) as it would untraced."""
    assert tids(pid), "process %d is gone" % pid
    for tid in tids(pid):
        state, tracer = proc_status(tid, "State"), proc_status(tid, "TracerPid")
        if state is None or tracer is None:
            continue  # ended meanwhile (between the two reads, too)
        assert tracer == "0", "thread %d of %d still traced by %s (state %s)" % (tid, pid, tracer, state)
        assert state[0] not in "tT", "thread %d of %d left stopped: %s" % (tid, pid, state)


def check_code(before, pid, same_set=True):
    """The executable mappings of pid read as they did before the attach: no int3 of ours left."""
    diffs = mapping_differences(before, exec_mappings(live_tid(pid)), same_set=same_set)
    assert not diffs, "the code of process %d changed across attach and detach:\n%s" % (pid, "\n".join(diffs))


def check_left(a, before, same_set=True):
    """After ptfil left: the target runs, untraced and not stopped, with its code as before."""
    assert a.running(), "the target died: status %r, stderr %r" % (a.target.poll(), a.target_stderr())
    check_released(a.pid)
    check_code(before, a.pid, same_set)


def finish_ptfil(a, want=0):
    """Waits for ptfil (at most LEAVE_BOUND s after it started); checks its exit status; returns its stderr."""
    left = max(1.0, LEAVE_BOUND - (time.time() - a.ptfil_started))
    rc, err = a.finish(timeout=left)
    assert rc == want, "ptfil exited %r, expected %d; stderr:\n%s" % (rc, want, err)
    return err


def leave(a, how):
    """Sends ptfil the signal named how; with how "duration" it leaves by itself (-d)."""
    if how != "duration":
        a.signal(getattr(signal, how))


def attach_for(a, how, *options):
    """attach -d 1 when how is "duration", else a plain attach (left by a signal later)."""
    if how == "duration":
        a.attach(*options, "-d", "1")
    else:
        a.attach(*options)


_untraced = {}


def untraced(argv, script=None, end=None):
    """The target run with no tracer, driven by script(a) as the traced run is: (exit status, stdout).
    end(a) ends it (default: its stdin closed). Computed once per argv and script."""
    key = (tuple(argv), script, end)
    if key not in _untraced:
        with Attached(argv) as a:
            if script:
                script(a)
            if end:
                end(a)
            _untraced[key] = a.target_finish()
    return _untraced[key]


def launched_untraced(argv, stdin_data=None):
    """(exit status, stdout) of argv run with no tracer."""
    b = bare(argv, stdin_data=stdin_data, timeout=60)
    return b.returncode, b.stdout


def check_same_end(a, argv, script=None, end=None):
    """Ends the target as the untraced run was ended; its output and status must be the untraced run's."""
    if end:
        end(a)
    got = a.target_finish()
    want = untraced(argv, script, end)
    assert got == want, "traced %r, untraced %r; its stderr: %r" % (got, want, a.target_stderr())


# --- 1: a target that forks or starts short threads is let go --------------------------------------

SHELL_LOOP = 'echo ready; while [ ! -e "$1" ]; do /bin/true; done; echo done; exit 3'


def churn_runs(argv, script=None, end=None):
    """attach -d 1 DURATION_RUNS times, then attach left by SIGINT and by SIGTERM, on a target that keeps
    making processes or threads (script(a) runs while attached; argv may be a function that returns the
    command): every time ptfil leaves within the bound and exits 0, and the target is left running and
    ends as untraced."""
    for how in ["duration"] * DURATION_RUNS + ["SIGINT", "SIGTERM"]:
        with Attached(argv() if callable(argv) else argv) as a:
            before = exec_mappings(a.pid)
            attach_for(a, how)
            if script:
                script(a)
            else:
                time.sleep(0.5)
            leave(a, how)
            err = finish_ptfil(a)
            assert "detached from process %d" % a.pid in err, err
            check_left(a, before)
            check_same_end(a, a.argv, script, end)


def test_attach_leaves_shell_loop():
    """sh -c 'while ...; do /bin/true; done': a fork and an exec every few milliseconds."""
    stop = os.path.join(workdir(), "stop")

    def argv():
        if os.path.exists(stop):
            os.unlink(stop)
        return ["/bin/sh", "-c", SHELL_LOOP, "sh", stop]

    def end(a):
        with open(stop, "w"):
            pass
    want = untraced(argv(), None, end)
    assert want == (3, b"ready\ndone\n"), want
    churn_runs(argv, end=end)


def fork_once(a):
    """One fork while attached: the child mallocs, writes, frees and exits 21."""
    a.send("fork")
    a.wait_output("child exited 21", timeout=LEAVE_BOUND)


def test_attach_leaves_program_that_forks_once():
    churn_runs([SPAWN, "fork"], script=fork_once)


def test_attach_leaves_short_lived_threads():
    churn_runs([SPAWN, "threads"])


# --- 2: the main thread exits while ptfil is attached, or before --------------------------------

def main_exits(a):
    a.send("mainexit")
    a.wait_output("main exited", timeout=LEAVE_BOUND)


def main_thread_exits_while_attached(how):
    with Attached([MAINEXIT]) as a:
        before = exec_mappings(a.pid)
        attach_for(a, how)
        main_exits(a)
        time.sleep(0.3)  # the workers malloc on, traced, with the main thread a zombie
        leave(a, how)
        finish_ptfil(a)
        check_left(a, before)
        check_same_end(a, [MAINEXIT], main_exits)


def test_main_thread_exits_while_attached_duration():
    main_thread_exits_while_attached("duration")


def test_main_thread_exits_while_attached_sigint():
    main_thread_exits_while_attached("SIGINT")


def test_attach_after_main_thread_exited():
    """A process whose main thread is a zombie is traced through its other threads, and left unharmed."""
    with Attached([MAINEXIT]) as a:
        before = exec_mappings(a.pid)
        main_exits(a)
        a.attach()
        time.sleep(0.5)
        a.signal(signal.SIGINT)
        finish_ptfil(a)
        check_left(a, before)
        check_same_end(a, [MAINEXIT], main_exits)
        doc = a.json()
    check_view(doc)
    if touch_view():
        # The workers' rounds of blocks reuse heap memory resident before the attach: they make nothing
        # resident of their own, and the profile is what was there, [before attach], read through the
        # threads that still run.
        heap_counters_zero(doc)
        before = sum(s["charged_bytes"] for s in touch_pseudo(doc, "[before attach]"))
        assert before > 0 and doc["peak"]["charged_bytes"] >= before, doc["peak"]
        return
    assert charged_through(doc, "worker_unit") > 0, "the workers' blocks are not in the profile: peak %s" % doc["peak"]


def test_kill_9_after_main_thread_exited():
    """kill -9 of the ptfil process the user started: its tracing child leaves, the target runs on."""
    with Attached([MAINEXIT]) as a:
        before = exec_mappings(a.pid)
        a.attach()
        main_exits(a)
        time.sleep(0.5)
        a.signal(signal.SIGKILL)
        a.ptfil.wait(timeout=10)
        wait_until(lambda: all(proc_status(t, "TracerPid") in ("0", None) for t in tids(a.pid)), 10,
                   "every thread of %d untraced after kill -9 of ptfil" % a.pid)
        time.sleep(0.3)  # the workers malloc on: a breakpoint left in would kill them now
        check_left(a, before)
        check_same_end(a, [MAINEXIT], main_exits)


# --- 3: detach while threads hit breakpoints ------------------------------------------------------

def test_repeated_detach_from_malloc_storm():
    """attach -d 0.2, DETACH_CYCLES times, on eight threads that malloc and free without pause: the
    target survives every detach with its code intact."""
    with Attached([STORM]) as a:
        before = exec_mappings(a.pid)
        for cycle in range(1, DETACH_CYCLES + 1):
            a.attach("-d", "0.2")
            try:
                finish_ptfil(a)
                time.sleep(0.05)  # a SIGTRAP left pending would end the target now
                check_left(a, before)
            except AssertionError as e:
                raise AssertionError("detach %d of %d: %s" % (cycle, DETACH_CYCLES, e)) from None
            a.err.join(5)
            a.ptfil.stderr.close()
        check_same_end(a, [STORM])


# --- 5: the tracing process itself crashes ----------------------------------------------------------

def tracing_child(a):
    """The process that traces: ptfil attach runs as two, the one the test started and its child."""
    with open("/proc/%d/task/%d/children" % (a.ptfil.pid, a.ptfil.pid)) as f:
        kids = [int(k) for k in f.read().split()]
    assert len(kids) == 1, "ptfil %d has children %r" % (a.ptfil.pid, kids)
    return kids[0]


def test_crash_of_the_tracing_process_leaves_the_target():
    """The tracing process dies of SIGSEGV, SIGBUS or SIGABRT (as a bug in ptfil would make it) while
    eight threads malloc and free through its breakpoints: every byte and return address goes back,
    every thread is let go, and the target runs on to its own end with its code intact."""
    with Attached([STORM]) as a:
        before = exec_mappings(a.pid)
        for cycle, sig in enumerate([signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT] * CRASH_ROUNDS, 1):
            a.attach()
            time.sleep(0.2 + 0.1 * (cycle % 4))  # the threads are in the allocator most of the time
            os.kill(tracing_child(a), sig)
            try:
                err = finish_ptfil(a, want=1)
                time.sleep(0.1)  # a SIGTRAP or an int3 left behind would end the target now
                check_left(a, before)
                assert "died of signal %d" % sig in err, err
                assert "the breakpoints were taken out" in err, err
            except AssertionError as e:
                raise AssertionError("crash %d (%s): %s" % (cycle, signal.Signals(sig).name, e)) from None
            a.err.join(5)
            a.ptfil.stderr.close()
        check_same_end(a, [STORM])


# --- 4: ptfil's stderr is a closed pipe ------------------------------------------------------------

def attach_with_closed_stderr(a, *options):
    """ptfil attach with its stderr a pipe whose reading end is closed (ptfil ... 2>&1 | true)."""
    r, w = os.pipe()
    os.close(r)
    cmd = [PTFIL, "attach", "-o", a.snap, "-i", "50", *options, str(a.pid)]
    a.ptfil_started = time.time()
    try:
        a.ptfil = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=w,
                                   start_new_session=True)
    finally:
        os.close(w)
    # Attached once the target is traced (ptfil says so on the stderr nobody reads); then a second traced.
    wait_until(lambda: proc_status(a.pid, "TracerPid") not in ("0", None) or a.ptfil.poll() is not None,
               LEAVE_BOUND, "ptfil to attach to %d" % a.pid)
    time.sleep(1)


def closed_stderr_attach(how):
    with Attached([STORM]) as a:
        before = exec_mappings(a.pid)
        if how == "duration":
            attach_with_closed_stderr(a, "-d", "2")
        else:
            attach_with_closed_stderr(a)
            assert a.ptfil.poll() is None, "ptfil ended (status %r) before it was told to leave" % a.ptfil.returncode
            a.signal(getattr(signal, how))
        try:
            a.ptfil.wait(timeout=max(1.0, LEAVE_BOUND - (time.time() - a.ptfil_started)))
        except subprocess.TimeoutExpired:
            raise AssertionError("ptfil did not leave within %d s" % LEAVE_BOUND) from None
        assert a.ptfil.returncode == 0, "ptfil exited %r with its stderr a closed pipe" % a.ptfil.returncode
        time.sleep(0.2)
        check_left(a, before)
        check_same_end(a, [STORM])


def test_attach_stderr_closed_pipe_sigint():
    closed_stderr_attach("SIGINT")


def test_attach_stderr_closed_pipe_duration():
    closed_stderr_attach("duration")


def test_launch_stderr_closed_pipe():
    """ptfil launch -- prog 2>&1 | true: the program's own exit status, its stdout unchanged."""
    want = untraced([SPAWN, "fork"], fork_once)
    snap = os.path.join(workdir(), "snap.gz")
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.Popen([PTFIL, "launch", "-o", snap, "-i", "0", "--", SPAWN, "fork"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=w, start_new_session=True)
    finally:
        os.close(w)
    try:
        out, _ = p.communicate(b"fork\n", timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise AssertionError("ptfil launch with a closed stderr did not end within 60 s") from None
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert (p.returncode, out) == want, "traced %r, untraced %r" % ((p.returncode, out), want)


# --- 6: dlopen after the main thread exited --------------------------------------------------------

def main_exits_then_dlopen(a):
    main_exits(a)
    a.send("dlopen")
    a.wait_output("dlopened", timeout=LEAVE_BOUND)


def test_dlopen_after_main_thread_exit_launch():
    want = untraced([MAINEXIT], main_exits_then_dlopen)
    r = launch([MAINEXIT], stdin_data=b"mainexit\ndlopen\n", timeout=60)
    assert (r.returncode, r.stdout) == want, "traced %r, untraced %r; ptfil's stderr: %s" % (
        (r.returncode, r.stdout), want, r.stderr.decode(errors="replace"))
    check_dl_alloc_at_peak(r.json)


def check_dl_alloc_at_peak(doc):
    """libheapdl.so's 200 blocks of 10,000 bytes, made after the dlopen, are at the peak: all, or all but
    the few that the workers' coming and going blocks (at most about 800 KiB) put after it."""
    dl = charged_through(doc, "dl_alloc")
    check_view(doc)
    # Under touch: the pages those blocks' chunks (10,016 bytes each) fill, at most.
    most = page_round(200 * 10016) + 2 * 4096 if touch_view() else malloc_bytes(doc, 10000, 200)
    assert MiB <= dl <= most, "dl_alloc charged %d bytes at the peak %s" % (dl, doc["peak"])


def test_dlopen_after_main_thread_exit_while_another_ptfil_ends():
    """The launch above, with another ptfil run started and ended between the main thread's exit and
    the dlopen. On the kernel path that second run's probes of the same libc functions go at its end,
    and the kernel then takes out the int3s of every process whose probe links it no longer matches:
    one whose main thread has exited. Its allocations went unseen (dl_alloc charged 0, in one run of
    three when ptfil runs followed one another closely); ptfil now moves such a process to
    breakpoints at its main thread's exit."""
    want = untraced([MAINEXIT], main_exits_then_dlopen)
    d = workdir()
    snap = os.path.join(d, "snap.gz")
    proc = subprocess.Popen([PTFIL, "launch", "-q", "-o", snap, "-i", "0", "--", MAINEXIT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out = Lines(proc.stdout)
        proc.stdin.write(b"mainexit\n")
        proc.stdin.flush()
        out.wait_for(lambda s: s == "main exited", timeout=LEAVE_BOUND)
        other = ptfil("launch", "-q", "-o", os.path.join(d, "other.gz"), "--", "/bin/true", timeout=60)
        assert other.returncode == 0, other.stderr.decode(errors="replace")
        proc.stdin.write(b"dlopen\n")
        proc.stdin.close()
        out.wait_for(lambda s: s == "dlopened", timeout=LEAVE_BOUND)
        err = proc.stderr.read()
        proc.wait(timeout=60)
        out.join(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (proc.returncode, out.data()) == want, "traced %r, untraced %r; ptfil's stderr: %s" % (
        (proc.returncode, out.data()), want, err.decode(errors="replace"))
    check_dl_alloc_at_peak(view_json(snap))


def test_dlopen_after_main_thread_exit_attach():
    with Attached([MAINEXIT]) as a:
        before = exec_mappings(a.pid)
        a.attach()
        main_exits_then_dlopen(a)
        time.sleep(0.3)
        a.signal(signal.SIGINT)
        err = finish_ptfil(a)
        if not touch_view() and os.environ.get("PTFIL_HEAP_EVENTS") == "uprobe":
            # The kernel path under attach: the process stays on its probes, nothing written into it,
            # and the user is told what the main thread's exit may cost (README, "keep breakpoints").
            assert "ended its main thread (pthread_exit)" in err, err
            assert "breakpoints are in process" not in err and "go through ptrace from now on" not in err, err
        check_left(a, before, same_set=False)  # libheapdl.so was loaded meanwhile
        check_same_end(a, [MAINEXIT], main_exits_then_dlopen)


# --- 7: one load event with more hooks than the table held ----------------------------------------

def test_dlopen_of_many_malloc_families():
    want = launched_untraced([DLMANY])
    r = launch([DLMANY], timeout=60)
    assert (r.returncode, r.stdout) == want, "traced %r, untraced %r; ptfil's stderr: %s" % (
        (r.returncode, r.stdout), want, r.stderr.decode(errors="replace"))
    check_view(r.json)
    if touch_view():
        # Under touch no malloc family is hooked, the thirty dlopened ones no more than libc's.
        heap_counters_zero(r.json)
        return
    # Every calloc and realloc of blocks_work (8 a call, 120 calls, 100 of them after the dlopen) was counted.
    assert r.json["counters"]["heap.allocs"] >= 8 * 120, r.json["counters"]


# --- 8: signal handlers on an alternate stack; siglongjmp out of a hooked call ---------------------

def test_signal_handler_on_alternate_stack_above():
    want = launched_untraced([ALTSTACK])
    assert want == (4, b"handler ran\nerrors 0\n"), want
    r = launch([ALTSTACK], timeout=60)
    assert (r.returncode, r.stdout) == want, "traced %r, untraced %r; ptfil's stderr: %s" % (
        (r.returncode, r.stdout), want, r.stderr.decode(errors="replace"))


def test_attach_then_signal_stack_above():
    """attach, then the program execs into safety_altstack, which puts a signal stack above its
    stack and mallocs on it while it is in malloc: it runs as untraced. (On the kernel path the
    kernel's return probes cannot return across such a stack: ptfil sees the sigaltstack call
    at its libc wrapper and moves the process to breakpoints first; without that it died of SIGILL.)"""
    want = launched_untraced([ALTSTACK])
    d = workdir()
    prog = subprocess.Popen(["sh", "-c", "read go; exec %s" % ALTSTACK], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    tracer = None
    try:
        tracer = subprocess.Popen([PTFIL, "attach", "-q", "-i", "0", "-o", os.path.join(d, "snap.gz"), str(prog.pid)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.time() + 30
        while proc_status(prog.pid, "TracerPid") in (None, "0") and time.time() < deadline:
            assert tracer.poll() is None, "ptfil attach ended early: %r" % (tracer.communicate(),)
            time.sleep(0.02)
        assert proc_status(prog.pid, "TracerPid") not in (None, "0"), "ptfil did not attach"
        time.sleep(0.2)  # the hooks are armed after the seize
        out, _ = prog.communicate(b"go\n", timeout=60)
        _, err = tracer.communicate(timeout=60)
        assert (prog.returncode, out) == want, "traced %r, untraced %r; ptfil's stderr: %s" % (
            (prog.returncode, out), want, err.decode(errors="replace"))
        assert tracer.returncode == 0, err.decode(errors="replace")
    finally:
        for p in (prog, tracer):
            if p and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def test_allocations_after_siglongjmp_counted():
    want = launched_untraced([LONGJMP])
    r = launch([LONGJMP], timeout=60)
    assert (r.returncode, r.stdout) == want, "traced %r, untraced %r; ptfil's stderr: %s" % (
        (r.returncode, r.stdout), want, r.stderr.decode(errors="replace"))
    doc = r.json
    check_view(doc)
    check_near("peak", doc["peak"]["charged_bytes"], 40 * MiB, rel=0.03)
    if touch_view():
        # Reserved in alloc_at_depth, written in main: the 40 blocks (mmapped by malloc) are main's
        # memset's, but for the page of each where malloc wrote the chunk's header.
        heap_counters_zero(doc)
        by_main = sum(s["charged_bytes"] for s in doc["stacks"]
                      if len(functions(s)) > 1 and "memset" in (functions(s)[0] or "") and functions(s)[1] == "main")
        assert 40 * (MiB - 4096) <= by_main <= 40 * MiB, by_main
        assert charged_through(doc, "alloc_at_depth") <= 40 * 4096 + 8192, charged_through(doc, "alloc_at_depth")
        return
    check_near("alloc_at_depth at the peak", charged_through(doc, "alloc_at_depth"), 40 * MiB, rel=0.01)
    for s in stacks_through(doc, "alloc_at_depth"):
        assert functions(s)[:2] == ["malloc", "alloc_at_depth"], functions(s)


# --- 9: attach -f, and the main process exits before its children -------------------------------

def orphans_go(a):
    a.send("go")
    a.wait_output("forked", timeout=LEAVE_BOUND)


def orphans_go_exit(a):
    orphans_go(a)
    a.send("exit")


def orphans_pids(a):
    """The keeper's and the workers' pids, from what safety_orphans wrote on stderr."""
    pids = []
    for line in a.target_stderr().decode().splitlines():
        words = line.split()
        if words and words[0] in ("keeper", "worker"):
            pids.append(int(words[-1]))
    assert len(pids) == 4, "safety_orphans did not name its keeper and 3 workers: %r" % a.target_stderr()
    return pids


def test_attach_follow_main_process_exits_first():
    """attach -f; the main process exits while its followed children allocate; ptfil leaves (-d): the
    children run on, untraced, with their code intact, to their own ends."""
    with Attached([ORPHANS]) as a:
        before = exec_mappings(a.pid)
        a.attach("-f", "-d", "3")
        orphans_go(a)
        time.sleep(0.5)  # the workers allocate, followed
        a.send("exit")
        a.target.wait(timeout=LEAVE_BOUND)
        assert a.target.returncode == 4, a.target.returncode
        finish_ptfil(a)
        time.sleep(0.3)  # the workers allocate on: a breakpoint left in would kill them now
        try:
            for pid in orphans_pids(a):
                check_released(pid)
                diffs = mapping_differences(before, exec_mappings(pid))
                assert not diffs, "the code of child %d changed:\n%s" % (pid, "\n".join(diffs))
        except (AssertionError, OSError) as e:
            # A child that died: the keeper says how, once the others have ended.
            status, out = a.target_finish()
            raise AssertionError("%s\nthe keeper's report:\n%s" % (e, out.decode(errors="replace"))) from None
        status, out = a.target_finish()
    want = untraced([ORPHANS], orphans_go_exit)
    for i in (1, 2, 3):
        assert b"worker %d exited %d\n" % (i, 30 + i) in out, out
    # Main and keeper write to one pipe from two processes: when "main exits" lands among the
    # keeper's lines is a race between the two processes, not behaviour ptfil could change.
    assert (status, sorted(out.splitlines())) == (want[0], sorted(want[1].splitlines())), \
        "traced %r, untraced %r" % ((status, out), want)


if __name__ == "__main__":
    main([test_attach_leaves_shell_loop, test_attach_leaves_program_that_forks_once, test_attach_leaves_short_lived_threads,
          test_main_thread_exits_while_attached_duration, test_main_thread_exits_while_attached_sigint,
          test_attach_after_main_thread_exited, test_kill_9_after_main_thread_exited,
          test_repeated_detach_from_malloc_storm, test_crash_of_the_tracing_process_leaves_the_target,
          test_attach_stderr_closed_pipe_sigint, test_attach_stderr_closed_pipe_duration, test_launch_stderr_closed_pipe,
          test_dlopen_after_main_thread_exit_launch, test_dlopen_after_main_thread_exit_while_another_ptfil_ends,
          test_dlopen_after_main_thread_exit_attach,
          test_dlopen_of_many_malloc_families,
          test_signal_handler_on_alternate_stack_above, test_attach_then_signal_stack_above,
          test_allocations_after_siglongjmp_counted,
          test_attach_follow_main_process_exits_first])
