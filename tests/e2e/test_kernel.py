"""Heap events through the kernel (issue 14): uprobes and a BPF ring buffer instead of ptrace breakpoints.

The same program gives the same profile on either path. A ring too small for the records of a
4-thread storm (PTFIL_RING_KIB=64, about 7 records with stack copies) loses nothing: ptfil stops the
threads while it drains (kernel.backpressure), and the peak and its stacks are those of the ptrace path.
Under attach on this path the only int3 in the target are the kernel's uprobes: the malloc family,
and the calls a thread must stop at (libc's wrappers of the mapping calls and of sigaltstack, ld.so's
_dl_debug_state), whose probes stop it with a signal ptfil suppresses. They go with ptfil however it
goes: a kill -9 of either ptfil process, or both, leaves the target running and its code as its
files'. test_attach.py, run on the kernel path too (tests/e2e/uprobe/), checks the rest. Without the capabilities the kernel asks for, `auto`
says in one line that it takes ptrace and profiles as before; `uprobe` refuses before the
program runs. Python programs take it too: the kernel reads their frames at the event.

Every test here needs the kernel path: where ptfil says it cannot use kernel uprobes, the file is
skipped (77), unless PTFIL_REQUIRE_UPROBE=1.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import BUILDDIR, HEAP_EVENTS_ENV, SRCDIR, MiB, PTRACE_FALLBACK, UPROBE_REFUSED, Attached, Skip, bare, \
    check_near, code_differences, function_bytes, functions, heap_counters, heap_events_probe, heap_path, int3_offsets, \
    kernel_path_lock, \
    launch, main, malloc_bytes, mapped_library, require_kernel_path, run_ptfil, stack_signature, stacks_through, target, \
    usable_sizes, view_json, wait_snapshot, wait_until, workdir

STORM = os.path.join(BUILDDIR, "bench", "alloc_storm")
STORM_PAIRS = 200000
TINY_RING = {"PTFIL_RING_KIB": "64"}
# Hook stops left on the kernel path for the malloc family: none expected; a few allowed for a libc
# that the kernel path would leave to ptrace.
STOP_SLACK = 16
# The capabilities the kernel path needs (CAP_SYS_ADMIN stands for both on older kernels), dropped for
# ptfil and everything it starts.
DROP = "-bpf,-perfmon,-sys_admin"
SETPRIV = ["setpriv", "--inh-caps=" + DROP, "--bounding-set=" + DROP]


def env_with(**extra):
    """The test's environment without PTFIL_HEAP_EVENTS (a test says which path it wants), plus extra."""
    env = {k: v for k, v in os.environ.items() if k != HEAP_EVENTS_ENV}
    env.update(extra)
    return env


def traced(argv, path, extra_env=None, ptfil_args=("-i", "0"), timeout=300):
    """ptfil launch -q --heap-events=PATH on argv: the Run, its exit status checked against nothing yet."""
    return launch(argv, ptfil_args=(*ptfil_args, "--heap-events=" + path), env=env_with(**(extra_env or {})),
                  timeout=timeout)


def hook_stops(c):
    return c.get("stops.bp_entry", 0) + c.get("stops.bp_return", 0)


def check_kernel_doc(doc, what):
    """The snapshot says the kernel path ran, drained records, lost none, and left the malloc family no ptrace stops."""
    c = doc["counters"]
    assert heap_path(doc) == "uprobe", "%s: not on the kernel path: %r" % (what, heap_counters(doc))
    assert c.get("kernel.lost") == 0, "%s: records lost: %r" % (what, heap_counters(doc))
    assert c.get("kernel.records", 0) > 0, "%s: no kernel record drained: %r" % (what, heap_counters(doc))
    assert hook_stops(c) <= STOP_SLACK, "%s: %d ptrace hook stops on the kernel path (bp_entry %d, bp_return %d)" % (
        what, hook_stops(c), c.get("stops.bp_entry", 0), c.get("stops.bp_return", 0))


def excerpt(doc, limit=10):
    lines = ["peak %s" % doc["peak"]]
    for kind, fns, charged, count in stack_signature(doc, limit):
        lines.append("  %s charged=%d count=%d: %s" % (kind, charged, count, " <- ".join(str(f) for f in fns[:8])))
    return "\n".join(lines)


def through(doc, function):
    st = stacks_through(doc, function)
    return sum(s["charged_bytes"] for s in st), sum(s["count"] for s in st)


# --- a tiny ring under a 4-thread storm -----------------------------------------------------------

def test_tiny_ring_storm_loses_nothing():
    # bench/alloc_storm: 200,000 malloc/free pairs split over 4 threads, 10,000 blocks live.
    argv = [STORM, str(STORM_PAIRS), "4"]
    b = bare(argv)
    r = traced(argv, "uprobe", TINY_RING)
    assert (r.returncode, r.stdout) == (b.returncode, b.stdout), "traced %r, untraced %r; stderr:\n%s" % (
        (r.returncode, r.stdout), (b.returncode, b.stdout), r.stderr.decode(errors="replace"))
    doc = r.json
    check_kernel_doc(doc, "storm, 64 KiB ring")
    c = doc["counters"]
    assert c.get("kernel.backpressure", 0) > 0, "a 64 KiB ring under 4 threads never pushed back: %r" % heap_counters(doc)
    # Every pair seen: its malloc and its free, plus the 4 slot arrays and what libc and pthread_create make.
    unknown = c.get("heap.unknown_frees", 0)
    assert STORM_PAIRS <= c["heap.allocs"] <= STORM_PAIRS + 200, c
    assert STORM_PAIRS <= c["heap.frees"] - unknown <= STORM_PAIRS + 200, c
    assert c["kernel.records"] >= STORM_PAIRS, heap_counters(doc)


def test_tiny_ring_same_profile_as_ptrace():
    # heap_threads: 4 threads x 250,000 pairs; at the checkpoint 5,000 blocks, 4,500,000 bytes asked
    # for through hold_blocks: the same peak and the same stacks whatever the threads' interleaving,
    # to the byte. Both paths charge glibc's blocks at their usable size (the one charging rule:
    # memory/alloc.h), the ptrace path's malloc at its returns, the kernel path's from the chunk
    # header its return probe read.
    argv = [target("heap_threads")]
    b = bare(argv)
    runs = {}
    for path, extra, options in (("uprobe", TINY_RING, ()), ("ptrace", {}, ())):
        r = traced(argv, path, extra, ptfil_args=("-i", "0", *options), timeout=540)
        assert (r.returncode, r.stdout) == (b.returncode, b.stdout), "%s: traced %r, untraced %r; stderr:\n%s" % (
            path, (r.returncode, r.stdout), (b.returncode, b.stdout), r.stderr.decode(errors="replace"))
        assert heap_path(r.json) == path, (path, heap_counters(r.json))
        runs[path] = r.json
    k, p = runs["uprobe"], runs["ptrace"]
    check_kernel_doc(k, "heap_threads, 64 KiB ring")
    assert k["counters"].get("kernel.backpressure", 0) > 0, heap_counters(k)
    for doc in (k, p):
        assert usable_sizes(doc), heap_counters(doc)
        held = sum(malloc_bytes(doc, 300 * (i + 1), 500 * (i + 1)) for i in range(4))
        assert through(doc, "hold_blocks") == (held, 5000), excerpt(doc)
    assert k["peak"]["charged_bytes"] == p["peak"]["charged_bytes"], "peak %d on the kernel path, %d on ptrace\n" \
        "kernel:\n%s\nptrace:\n%s" % (k["peak"]["charged_bytes"], p["peak"]["charged_bytes"], excerpt(k), excerpt(p))
    # The top stacks (kind, function names, charged bytes, blocks), in any order among equals.
    n = min(10, len(p["stacks"]))
    assert sorted(stack_signature(k, n)) == sorted(stack_signature(p, n)), \
        "the top stacks differ\nkernel:\n%s\nptrace:\n%s" % (excerpt(k), excerpt(p))
    for key in ("heap.allocs", "heap.frees", "heap.nested"):
        assert k["counters"].get(key) == p["counters"].get(key), (key, heap_counters(k), k["counters"].get(key),
                                                                   p["counters"].get(key))


def test_storm_same_peak_on_both_paths():
    # bench/alloc_storm, 200,000 pairs of 16..512 bytes from a fixed sequence, one thread: the same peak
    # to the byte on the ptrace path and the kernel path, at glibc's usable sizes by default and at the
    # sizes asked for with --exact-sizes (memory/alloc.h: one charging rule, whoever runs ptfil).
    argv = [STORM, str(STORM_PAIRS), "1"]
    b = bare(argv)
    peaks = {}
    for sizes in ((), ("--exact-sizes",)):
        for path in ("uprobe", "ptrace"):
            r = traced(argv, path, ptfil_args=("-i", "0", "--charge=alloc", *sizes))
            assert (r.returncode, r.stdout) == (b.returncode, b.stdout), (path, sizes, r.stderr.decode(errors="replace"))
            doc = r.json
            assert heap_path(doc) == path, (path, heap_counters(doc))
            c = doc["counters"]
            assert c["heap.allocs"] >= STORM_PAIRS, (path, sizes, heap_counters(doc))
            assert (c.get("heap.usable_size_blocks", 0) >= STORM_PAIRS) == (not sizes), (path, sizes, c)
            peaks[path, sizes] = doc["peak"]["charged_bytes"]
    for sizes in ((), ("--exact-sizes",)):
        assert peaks["uprobe", sizes] == peaks["ptrace", sizes], peaks
    # The usable sizes are larger: 10,000 blocks live, each up to 15 bytes more than asked.
    more = peaks["ptrace", ()] - peaks["ptrace", ("--exact-sizes",)]
    assert 0 < more <= 10000 * 24, peaks


# --- attach: malloc and free carry the kernel's probes alone -------------------------------------

LOOP = target("attach_loop")
ITERATIONS = "100"
WATCHED = ("malloc", "free")
HEAD = 16  # bytes read from the start of each function while attached


def bare_loop():
    from test_attach import bare_loop as bl  # attach_loop untraced, sent one SIGUSR2 after "ready"
    return bl(ITERATIONS)


def attached_code_checks(a):
    """While attached on the kernel path: malloc's and free's first bytes are the file's or the kernel's int3,
    and malloc has at least one (the probe is in place). Returns (libc path, load base)."""
    path, base = mapped_library(a.pid, "libc.so")
    fb = function_bytes(a.pid, path, base, WATCHED, HEAD)
    diffs = code_differences(fb, allow_int3=True)
    assert not diffs, "while attached, malloc/free differ from libc's file other than by an int3:\n" + "\n".join(diffs)
    return path, base, fb


def wait_code_restored(a, path, base, what):
    """malloc and free, whole, read back as libc's file once ptfil is gone (the kernel removes its probes
    when the last link fd closes); waits up to 10 s for it."""
    last = []

    def restored():
        last[:] = code_differences(function_bytes(a.pid, path, base, WATCHED))
        return not last
    try:
        wait_until(restored, 10, "malloc and free to read as libc's file %s" % what)
    except AssertionError as e:
        raise AssertionError("%s:\n%s" % (e, "\n".join(last))) from None


def test_attach_kill_9_leaves_target_intact():
    want = bare_loop()
    with Attached([LOOP, ITERATIONS]) as a:
        path, base = mapped_library(a.pid, "libc.so")
        before = code_differences(function_bytes(a.pid, path, base, WATCHED))
        assert not before, "before the attach, malloc/free already differ from %s:\n%s" % (path, "\n".join(before))
        a.attach("--heap-events=uprobe")
        # The first checkpoint: ptfil runs on the kernel path, and a snapshot is there for after the kill.
        wait_snapshot(a.snap, lambda doc: heap_path(doc) == "uprobe", "a checkpoint on the kernel path")
        _, _, fb = attached_code_checks(a)
        assert int3_offsets(fb, "malloc"), "no uprobe int3 in malloc's first %d bytes while attached: %s" % (
            HEAD, fb["malloc"][0].hex())
        a.signal(signal.SIGKILL)
        a.ptfil.wait(timeout=30)
        wait_until(lambda: a.status("TracerPid") == "0", 10, "TracerPid 0 after kill -9 of ptfil")
        assert a.running(), "the target did not survive kill -9 of ptfil: %r" % a.target_stderr()
        wait_code_restored(a, path, base, "after kill -9 of ptfil")
        os.kill(a.pid, signal.SIGUSR2)
        status, out = a.target_finish()
        assert heap_path(a.json()) == "uprobe", heap_counters(a.json())
    assert (status, out) == want, "after kill -9 of ptfil: %r, untraced %r" % ((status, out), want)


def test_attach_kill_9_of_any_ptfil_process():
    """Under attach the kernel path writes nothing into the target (issue 26): the malloc family, the
    mapping calls' wrappers, sigaltstack and the loader's load hook are all kernel probes, and
    nothing returns through a trampoline of ptfil's. So a SIGKILL of the process the user started,
    of the tracing process alone (the OOM killer's choice) or of both leaves attach_loop running,
    its code its files' once the kernel has taken the probes out, and it ends as an untraced run
    does: 20 kills of each, while its calloc of 192 KiB goes through mmap and munmap every 10 ms."""
    from test_attach import finish_loop, kill_9_of_any_ptfil_process
    kill_9_of_any_ptfil_process([LOOP, ITERATIONS], ("--charge=alloc", "--heap-events=uprobe"), 20, bare_loop(),
                                finish_loop)


def test_attach_kill_9_of_ptfil_target_catching_its_stop_signals():
    """attach_loop with handlers for SIGURG and SIGWINCH (as a Go program has): the signal the kernel
    path stops its threads with is then one it catches, SIGURG (whose handler may run once for
    nothing if ptfil dies with it queued), not SIGSTOP, which a SIGKILL of the tracing process during
    a stop, or with one queued, would deliver and so freeze the program until a SIGCONT. 10 kills of
    each kind: it runs on each time, and ends as an untraced run does."""
    from test_attach import finish_loop, kill_9_of_any_ptfil_process
    # Its handlers print nothing: its output is the one without them.
    kill_9_of_any_ptfil_process([LOOP, ITERATIONS, "catch"], ("--charge=alloc", "--heap-events=uprobe"), 10,
                                bare_loop(), finish_loop)


def test_torture_kill_9_while_mapping_forking_dlopening():
    """bench/torture's hostile targets on the kernel path, each attach ended by a SIGKILL of the front,
    of the tracing process alone or of both, chosen at random (a fixed seed): a program that forks
    and waits, one that starts and joins threads, a malloc/free storm with large blocks (mapped and
    unmapped), one that dlopens and dlcloses libraries with malloc families of their own. The torture
    fails on any death, hang, changed checksum (against the same work untraced) or byte of code that
    is not its file's once the kernel has taken the probes out. 24 cycles: a quick count; the full
    one is CI's (.ci/run) and bench/README.md's."""
    torture = os.path.join(SRCDIR, "bench", "torture")
    env = env_with(PTFIL_CHARGE="alloc", PTFIL_HEAP_EVENTS="uprobe")
    r = subprocess.run([sys.executable, torture, "--builddir", BUILDDIR, "--cycles", "24", "--launches", "0",
                        "--kill9", "1", "--kill9-whom", "any", "--lifetime", "6", "--seed", "26",
                        "--targets", "forks,threads,storm,dlopen"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, "bench/torture on the kernel path, kill -9 of any ptfil process: exit %d\n%s" % (
        r.returncode, out[-4000:])
    total = [l.split() for l in out.splitlines() if l.startswith("total")]
    assert total and total[-1][1:4] == ["24", "24", "0"], out[-2000:]


def test_attach_wrappers_stop_at_kernel_probes():
    """While attached on the kernel path the mapping calls are seen (their stops counted as wrapper
    stops) with no int3 of ptfil's in libc's wrappers or ld.so: their bytes read as the files' or
    as the kernel's int3 at the first byte, and the 16 MiB attach_loop maps after the attach is
    charged to its stack as on the ptrace path."""
    want = bare_loop()
    with Attached([LOOP, ITERATIONS]) as a:
        a.attach("--charge=alloc", "--heap-events=uprobe")
        time.sleep(1)
        path, base = mapped_library(a.pid, "libc.so")
        fb = function_bytes(a.pid, path, base, ("mmap64", "munmap", "madvise"), HEAD)
        diffs = code_differences(fb, allow_int3=True)
        assert not diffs, "while attached, the wrappers differ from libc's file other than by an int3:\n" + "\n".join(diffs)
        a.signal(signal.SIGINT)
        rc, err = a.finish()
        assert rc == 0, (rc, err)
        assert "breakpoints are in process" not in err, err
        doc = a.json()
        c = doc["counters"]
        assert heap_path(doc) == "uprobe", heap_counters(doc)
        assert c["stops.bp_wrapper"] > 0 and c["stops.bp_entry"] == 0 and c["stops.bp_return"] == 0, \
            {k: v for k, v in c.items() if k.startswith("stops.")}
        os.kill(a.pid, signal.SIGUSR2)
        status, out = a.target_finish()
    assert (status, out) == want, "after the detach: %r, untraced %r" % ((status, out), want)


def test_attach_detach_leaves_original_bytes():
    want = bare_loop()
    with Attached([LOOP, ITERATIONS]) as a:
        path, base = mapped_library(a.pid, "libc.so")
        a.attach("--heap-events=uprobe")
        time.sleep(1)
        attached_code_checks(a)
        a.signal(signal.SIGINT)
        rc, err = a.finish(timeout=60)
        assert rc == 0, (rc, err)
        assert "detached from process %d" % a.pid in err, err
        assert a.status("TracerPid") == "0", a.status("TracerPid")
        wait_code_restored(a, path, base, "after the detach")
        os.kill(a.pid, signal.SIGUSR2)
        status, out = a.target_finish()
        doc = a.json()
    assert (status, out) == want, "after the detach: %r, untraced %r" % ((status, out), want)
    check_kernel_doc(doc, "attach_loop")
    # The ring of blocks made after the attach is charged to ring_alloc (as in test_attach.py).
    ring = stacks_through(doc, "ring_alloc", key="live_at_end")
    assert 7 <= sum(s["count"] for s in ring) <= 8, excerpt(doc)
    assert all(s["kind"] == "heap" for s in ring), excerpt(doc)


# --- auto, without the capabilities -----------------------------------------------------------------

def setpriv_works():
    """None when setpriv can drop the kernel path's capabilities here (root, util-linux's setpriv), else why not."""
    if os.geteuid() != 0:
        return "not root"
    if not shutil.which("setpriv"):
        return "no setpriv (util-linux)"
    r = subprocess.run(SETPRIV + ["grep", "^CapEff:", "/proc/self/status"], capture_output=True, timeout=30)
    if r.returncode != 0:
        return "setpriv failed: %s" % r.stderr.decode(errors="replace").strip()
    eff = int(r.stdout.split()[1], 16)
    for bit in (21, 38, 39):  # CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF
        if eff & (1 << bit):
            return "setpriv left capability %d in place: %s" % (bit, r.stdout.decode().strip())
    return None


def unprivileged(args, env, timeout=120):
    """Runs ptfil ARGS under setpriv without the kernel path's capabilities (run_ptfil): (exit status,
    stdout, stderr as str)."""
    return run_ptfil(args, env=env, timeout=timeout, stdin_data=b"", prefix=SETPRIV)


def fallback_lines(err):
    return [l for l in err.splitlines() if l.startswith(PTRACE_FALLBACK)]


def test_auto_without_capabilities_takes_ptrace():
    why = setpriv_works()
    if why:
        raise Skip("ptfil cannot be run without the kernel path's capabilities here: %s" % why)
    d = workdir()
    snap = os.path.join(d, "s.gz")
    chain = [target("heap_chain"), "chain"]
    for how, args, env in (("--heap-events=auto", ["--heap-events=auto"], env_with()),
                           ("no option", [], env_with()),
                           ("PTFIL_HEAP_EVENTS=auto", [], env_with(**{HEAP_EVENTS_ENV: "auto"}))):
        rc, out, err = unprivileged(["launch", "-i", "0", "-o", snap, *args, "--", *chain], env)
        assert rc == 0 and b"chain done" in out, (how, rc, out, err)
        lines = fallback_lines(err)
        assert len(lines) == 1, "%s without the capabilities: %d lines %r, expected one; stderr:\n%s" % (
            how, len(lines), PTRACE_FALLBACK, err)
        assert len(lines[0]) > len(PTRACE_FALLBACK) + 3, "no reason given: %r" % lines[0]
        doc = view_json(snap)
        assert heap_path(doc) == "ptrace", (how, heap_counters(doc))
        check_near("peak", doc["peak"]["charged_bytes"], 20000000, rel=0.01)
        assert through(doc, "f2") == (malloc_bytes(doc, 10000, 2000), 2000), excerpt(doc)
    # -q: nothing said.
    rc, _, err = unprivileged(["launch", "-q", "-i", "0", "-o", snap, "--", *chain], env_with())
    assert rc == 0 and not fallback_lines(err), (rc, err)
    shutil.rmtree(d, ignore_errors=True)


def test_uprobe_without_capabilities_refused_before_the_program():
    why = setpriv_works()
    if why:
        raise Skip("ptfil cannot be run without the kernel path's capabilities here: %s" % why)
    d = workdir()
    mark = os.path.join(d, "ran")
    prog = ["/bin/sh", "-c", 'echo ran > "$0"', mark]
    for how, args, env in (("--heap-events=uprobe", ["--heap-events=uprobe"], env_with()),
                           ("PTFIL_HEAP_EVENTS=uprobe", [], env_with(**{HEAP_EVENTS_ENV: "uprobe"}))):
        rc, _, err = unprivileged(["launch", "-q", "-o", os.path.join(d, "s.gz"), *args, "--", *prog], env, 60)
        assert rc != 0, "%s without the capabilities: exit status 0; stderr:\n%s" % (how, err)
        assert UPROBE_REFUSED in err, "%s: no %r in:\n%s" % (how, UPROBE_REFUSED, err)
        assert not os.path.exists(mark), "%s: the program ran although ptfil refused" % how
    # attach: refused before the target is touched (no tracer, its code as before, it runs on).
    want = bare_loop()
    with Attached([LOOP, ITERATIONS]) as a:
        path, base = mapped_library(a.pid, "libc.so")
        rc, _, err = unprivileged(["attach", "-q", "-o", os.path.join(d, "a.gz"), "--heap-events=uprobe",
                                   str(a.pid)], env_with(), 60)
        assert rc != 0 and UPROBE_REFUSED in err, (rc, err)
        assert a.status("TracerPid") == "0" and a.running(), (a.status("TracerPid"), a.status("State"))
        diffs = code_differences(function_bytes(a.pid, path, base, WATCHED))
        assert not diffs, "\n".join(diffs)
        os.kill(a.pid, signal.SIGUSR2)
        status, out = a.target_finish()
    assert (status, out) == want, ((status, out), want)
    shutil.rmtree(d, ignore_errors=True)


def test_bad_value_is_a_usage_error():
    d = workdir()
    mark = os.path.join(d, "ran")
    prog = ["/bin/sh", "-c", 'echo ran > "$0"', mark]
    for args, env in ((["--heap-events=kernel"], env_with()), ([], env_with(**{HEAP_EVENTS_ENV: "fast"}))):
        rc, _, err = run_ptfil(["launch", "-q", "-o", os.path.join(d, "s.gz"), *args, "--", *prog], env=env, timeout=60)
        assert rc != 0 and err.strip(), (args, rc, err)
        assert not os.path.exists(mark), "%s: the program ran" % (args or env[HEAP_EVENTS_ENV])
    shutil.rmtree(d, ignore_errors=True)


# --- the kernel path on plain C targets -------------------------------------------------------------

def test_plain_c_on_the_kernel_path():
    # heap_chain chain: 2000 blocks of 10,000 bytes live at once through f0 -> f1 -> f2 -> malloc.
    r = traced([target("heap_chain"), "chain"], "uprobe")
    assert r.returncode == 0 and b"chain done" in r.stdout, (r.returncode, r.stderr)
    doc = r.json
    check_kernel_doc(doc, "heap_chain chain")
    check_near("peak", doc["peak"]["charged_bytes"], 20000000, rel=0.01)
    assert through(doc, "f2") == (malloc_bytes(doc, 10000, 2000), 2000), excerpt(doc)
    for s in stacks_through(doc, "f2"):
        f = functions(s)
        assert s["kind"] == "heap" and f[0] in ("malloc", "__libc_malloc"), excerpt(doc)
        assert f.index("f2") < f.index("f1") < f.index("f0") < f.index("main"), f
    # heap_drop: 100,000 x 200 bytes, half freed, then 8 MiB written: the first peak stays.
    r = traced([target("heap_drop")], "uprobe")
    assert r.returncode == 0 and b"done" in r.stdout, (r.returncode, r.stderr)
    doc = r.json
    check_kernel_doc(doc, "heap_drop")
    check_near("peak", doc["peak"]["charged_bytes"], 20000000, rel=0.01)
    assert through(doc, "drop_small") == (20000000, 100000), excerpt(doc)
    assert through(doc, "drop_large")[0] == 0, "the later, lower plateau was reported\n" + excerpt(doc)


def test_environment_chooses_option_wins():
    chain = [target("heap_chain"), "chain"]
    r = launch(chain, env=env_with(**{HEAP_EVENTS_ENV: "uprobe"}))
    assert r.returncode == 0, r.stderr
    assert heap_path(r.json) == "uprobe", heap_counters(r.json)
    r = launch(chain, ptfil_args=("-i", "0", "--heap-events=ptrace"), env=env_with(**{HEAP_EVENTS_ENV: "uprobe"}))
    assert r.returncode == 0, r.stderr
    assert heap_path(r.json) == "ptrace", heap_counters(r.json)
    assert through(r.json, "f2") == (malloc_bytes(r.json, 10000, 2000), 2000), excerpt(r.json)
    # auto where the kernel path is allowed (this file runs only there): uprobes, and nothing said.
    d = workdir()
    rc, out, err = run_ptfil(["launch", "-i", "0", "-o", os.path.join(d, "s.gz"), "--", *chain], env=env_with())
    assert rc == 0 and not fallback_lines(err), (rc, err)
    assert heap_path(view_json(os.path.join(d, "s.gz"))) == "uprobe"
    shutil.rmtree(d, ignore_errors=True)


# --- Python stays on the ptrace path ------------------------------------------------------------------

def test_python_on_the_kernel_path():
    """A Python program takes the kernel path too: its Python frames are read by the kernel at each
    entry (tracer/kernel/pyread.bpf.h), and the sites are charged to their lines as on ptrace."""
    import test_python as tp  # sites.py and its checks
    r = tp.run_sites(ptfil_args=("--heap-events=uprobe",), env=env_with())
    doc = r.json
    assert heap_path(doc) == "uprobe", heap_counters(doc)
    c = doc["counters"]
    assert c.get("python.kernel_stacks", 0) > 0, {k: v for k, v in c.items() if k.startswith("python.")}
    tp.check_sites(doc, 11, native=False)
    tp.check_python_outermost(doc, "--heap-events=uprobe")
    d = workdir()
    rc, _, err = run_ptfil(["launch", "-i", "0", "--heap-events=uprobe", "-o", os.path.join(d, "s.gz"), "--",
                            tp.PYTHON, tp.SITES], env=env_with())
    assert rc == tp.SITES_STATUS, (rc, err)
    note = re.compile(r"(?i)python.*ptrace|ptrace.*python")
    assert not [l for l in err.splitlines() if note.search(l)], "a note that Python goes through ptrace:\n%s" % err
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    kernel_path_lock()
    status, message = heap_events_probe()
    if status == "broken":
        # Run the tests anyway, so that each says how it fails.
        print("ptfil cannot take the kernel path: %s" % message)
    else:
        require_kernel_path(status, message, "test_kernel.py")
    main([test_plain_c_on_the_kernel_path, test_storm_same_peak_on_both_paths, test_environment_chooses_option_wins, test_bad_value_is_a_usage_error,
          test_tiny_ring_storm_loses_nothing, test_tiny_ring_same_profile_as_ptrace,
          test_attach_kill_9_leaves_target_intact, test_attach_detach_leaves_original_bytes,
          test_attach_kill_9_of_any_ptfil_process, test_attach_kill_9_of_ptfil_target_catching_its_stop_signals,
          test_attach_wrappers_stop_at_kernel_probes,
          test_torture_kill_9_while_mapping_forking_dlopening,
          test_auto_without_capabilities_takes_ptrace, test_uprobe_without_capabilities_refused_before_the_program,
          test_python_on_the_kernel_path])
