"""A program is a process tree (issue 16): the tree's combined peak, each process's own, a budget.

With --follow-forks the main snapshot carries the whole tree (ptfil-view --json: a top-level "tree"
with every process and the combined peak, and "combined_peak_stacks", each with the "pid" that held
it). The combined peak is the real maximum over time of what the live profiled processes held
together, not the sum of their own peaks, and a page a forked child still shares with its parent is
counted once. Without --follow-forks the children are not profiled, but ptfil says so and names the
largest. Counters are each process's own; the main snapshot adds the run's. --max-peak SIZE makes
ptfil exit 97 when the (combined) peak is over SIZE and the program itself succeeded.

The targets: tests/targets/tree.c (20 MiB held by the parent throughout, a child A holding 30 MiB
that exits, then a child B holding 50 MiB while an exec'd third holds 10: combined 80 MiB, own peaks
adding up to 110), tests/targets/cow.c (100 MiB in the parent, a child writing 10 MiB of it: 110, not
200), gcc -c of a generated file, and tests/targets/py/pool.py (2 Pool workers holding 40 MB each at
once).

In the touch pass (PTFIL_CHARGE=touch) each page is charged to the code that wrote it: tree.c's
buffers to fill (called by alloc_b and the others), a Pool worker's bytearray to the interpreter's
native frames (no Python frame of the worker's own under touch); each process's peak and the
combined one are the same, a page a child shares with its parent still counted once (the parent
wrote it), and no malloc-family call is counted or stops.
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, SRCDIR, bare, charged_through, check_near, check_view, child_snapshots, functions, \
    heap_counters_zero, launch, main, own_functions, run_ptfil, stacks_through, target, touch_view, view, view_json, \
    workdir

TREE = target("tree")
COW = target("cow")
FORKS = target("forks")
POOL = os.path.join(SRCDIR, "tests", "targets", "py", "pool.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
GCC = shutil.which("gcc") or "/usr/bin/gcc"
FOLLOW = ("-i", "0", "--follow-forks")
NO_FOLLOW = ("-i", "0")
TREE_OUT = (b"parent holds 20 MiB\na holds 30 MiB\na exited 0\nb holds 50 MiB, third holds 10 MiB\n"
            b"third exited 0\nb exited 0\ndone\n")
BUDGET_STATUS = 97
# A constant of hook stops allowed per process for calls whose return is never seen (README).
STOP_SLACK = 16


def slack_near(what, actual, expected_mib):
    """actual within 3% + 1 MiB of expected_mib MiB."""
    check_near(what, actual, expected_mib * MiB, rel=0.03, slack=MiB)


def pids_from(stderr, pattern):
    return [int(m) for m in re.findall(pattern, stderr)]


def tree_pids(stderr):
    """{"a": pid, "b": pid, "third": pid} from tree's stderr ("tree: NAME pid N")."""
    out = dict((name.decode(), int(pid)) for name, pid in re.findall(rb"tree: (\w+) pid (\d+)", stderr))
    assert set(out) == {"a", "b", "third"}, "tree did not report its children: %r" % stderr
    return out


def tree_of(doc):
    """The "tree" object of a snapshot document, with its processes keyed by pid."""
    assert "tree" in doc, "no \"tree\" in ptfil-view --json: keys %r" % sorted(doc)
    tree = doc["tree"]
    procs = {p["pid"]: p for p in tree["processes"]}
    assert len(procs) == len(tree["processes"]), "a pid listed twice: %r" % tree["processes"]
    return tree, procs


def show_tree(tree):
    return "\n".join("  pid %(pid)s ppid %(ppid)s profiled %(profiled)s peak %(peak_bytes)s at %(peak_time_s)s "
                     "at_combined %(at_combined_peak_bytes)s vmhwm %(vmhwm_bytes)s %(start_s)s-%(end_s)s "
                     "%(command)r %(file)r" % p for p in tree["processes"]) + \
        "\n  combined %s at %s" % (tree.get("combined_peak_bytes"), tree.get("time_s"))


def combined_through(doc, function, pid=None):
    """Bytes charged at the combined peak through function (by pid, if given)."""
    return sum(s["charged_bytes"] for s in stacks_through(doc, function, "combined_peak_stacks")
               if pid is None or s["pid"] == pid)


def run_tree(follow):
    """tree under ptfil launch (with or without -f): the Run, checked against a bare run's stdout and status."""
    b = bare([TREE])
    assert (b.returncode, b.stdout) == (0, TREE_OUT), (b.returncode, b.stdout, b.stderr)
    r = launch([TREE], ptfil_args=FOLLOW if follow else NO_FOLLOW)
    assert (r.returncode, r.stdout) == (b.returncode, b.stdout), "traced %r, untraced %r; ptfil's stderr: %s" % (
        (r.returncode, r.stdout), (b.returncode, b.stdout), r.stderr.decode(errors="replace"))
    return r


def test_tree_combined_peak():
    r = run_tree(follow=True)
    kids = tree_pids(r.stderr)
    doc = r.json
    parent = doc["process"]["pid"]
    tree, procs = tree_of(doc)
    msg = show_tree(tree)
    assert set(procs) == {parent, *kids.values()}, "processes %r, expected %d and %r\n%s" % (
        sorted(procs), parent, kids, msg)
    assert procs[parent]["ppid"] == 0, msg
    for name, pid in kids.items():
        assert procs[pid]["ppid"] == parent, "%s's ppid\n%s" % (name, msg)
    for p in procs.values():
        assert p["profiled"] is True, msg
    assert "third" in procs[kids["third"]]["command"].split()[1:2], "the exec'd third's command\n" + msg
    assert os.path.basename(procs[parent]["command"].split()[0]) == "tree", msg

    # Each process's own peak, and what each held at the combined peak.
    own = {parent: 20, kids["a"]: 30, kids["b"]: 50, kids["third"]: 10}
    for pid, mib in own.items():
        slack_near("own peak of %d\n%s" % (pid, msg), procs[pid]["peak_bytes"], mib)
    at = {parent: 20, kids["a"]: 0, kids["b"]: 50, kids["third"]: 10}
    for pid, mib in at.items():
        slack_near("at the combined peak, %d\n%s" % (pid, msg), procs[pid]["at_combined_peak_bytes"], mib)
    assert procs[kids["a"]]["at_combined_peak_bytes"] <= MiB, "A had exited by the combined peak\n" + msg

    # The combined peak: the real maximum (80 MiB), not the sum of the own peaks (110).
    combined = tree["combined_peak_bytes"]
    slack_near("combined peak\n" + msg, combined, 80)
    own_sum = sum(p["peak_bytes"] for p in procs.values())
    assert combined < own_sum - 20 * MiB, "combined %d, sum of own peaks %d\n%s" % (combined, own_sum, msg)
    at_sum = sum(p["at_combined_peak_bytes"] for p in procs.values())
    assert abs(at_sum - combined) <= 4096, "combined %d, its parts add up to %d\n%s" % (combined, at_sum, msg)
    # On one clock: A was gone before B started; the combined peak is while B and the third both lived.
    a, b, c = procs[kids["a"]], procs[kids["b"]], procs[kids["third"]]
    assert 0 <= a["start_s"] <= a["end_s"] <= b["start_s"] <= c["start_s"], msg
    assert c["start_s"] <= tree["time_s"] <= min(b["end_s"], c["end_s"]), msg

    # Whose stacks held the combined peak: B's alloc_b, the third's alloc_third, the parent's alloc_parent.
    st = doc["combined_peak_stacks"]
    assert all("pid" in s for s in st), "a combined-peak stack without its pid"
    for function, pid, mib in (("alloc_b", kids["b"], 50), ("alloc_third", kids["third"], 10),
                               ("alloc_parent", parent, 20)):
        slack_near("combined-peak stacks through %s" % function, combined_through(doc, function, pid), mib)
        assert combined_through(doc, function) == combined_through(doc, function, pid), \
            "%s held by another process than %d: %r" % (function, pid, [
                (s["pid"], s["charged_bytes"]) for s in stacks_through(doc, function, "combined_peak_stacks")])
    assert combined_through(doc, "alloc_a") == 0, "A's memory at the combined peak, after A exited"
    top = functions(max(st, key=lambda s: s["charged_bytes"]))
    if touch_view():
        # Written, not allocated: B's 50 MiB by fill's memset, called from alloc_b.
        check_view(doc)
        assert "memset" in (top[0] or "") and top[1:3] == ["fill", "alloc_b"], top
    else:
        assert top[1] == "alloc_b", top

    # Each child's own snapshot beside the main one, named in the tree; --pid shows one process alone.
    files = child_snapshots(r.snapshot)
    assert set(files) == {str(p) for p in kids.values()}, sorted(files)
    for name, pid in kids.items():
        assert procs[pid]["file"] == os.path.basename(files[str(pid)]), msg
    for function, pid, mib in (("alloc_a", kids["a"], 30), ("alloc_b", kids["b"], 50),
                               ("alloc_third", kids["third"], 10)):
        alone = view_json(files[str(pid)])
        assert alone["process"]["pid"] == pid, alone["process"]
        slack_near("%s in %d's own snapshot" % (function, pid), charged_through(alone, function), mib)
        v = view("--json", "--pid", str(pid), r.snapshot, timeout=60)
        assert v.returncode == 0, "ptfil-view --pid %d: %s" % (pid, v.stderr.decode(errors="replace"))
        one = json.loads(v.stdout)
        assert one["process"]["pid"] == pid, one["process"]
        slack_near("%s under --pid %d" % (function, pid), charged_through(one, function), mib)
    slack_near("alloc_parent in the main snapshot", charged_through(doc, "alloc_parent"), 20)
    for f in ("alloc_a", "alloc_b", "alloc_third"):
        assert charged_through(doc, f) == 0, "a child's %s charged to the parent's own stacks" % f


def test_tree_not_followed():
    r = run_tree(follow=False)
    kids = tree_pids(r.stderr)
    assert not child_snapshots(r.snapshot), sorted(child_snapshots(r.snapshot))
    doc = r.json
    tree, procs = tree_of(doc)
    msg = show_tree(tree)
    assert set(procs) == {doc["process"]["pid"], *kids.values()}, msg
    for name, pid in kids.items():
        p = procs[pid]
        assert p["profiled"] is False and p["file"] is None, msg
        # VmHWM: what it held, and no more than the 20 MiB a forked child maps of its parent's and a few of code.
        held = {"a": 30, "b": 50, "third": 10}[name]
        assert held * MiB <= p["vmhwm_bytes"] <= (held + 30) * MiB, "%s's VmHWM\n%s" % (name, msg)


def run_cow():
    b = bare([COW])
    want = b"parent holds 100 MiB\nchild wrote 10 MiB of it\nchild exited 0\n"
    assert (b.returncode, b.stdout) == (0, want), b
    r = launch([COW], ptfil_args=FOLLOW)
    assert (r.returncode, r.stdout) == (0, want), (r.returncode, r.stdout, r.stderr.decode(errors="replace"))
    return r


def test_cow_shared_once():
    r = run_cow()
    child = pids_from(r.stderr, rb"cow: child pid (\d+)")
    assert len(child) == 1, r.stderr
    child = child[0]
    doc = r.json
    parent = doc["process"]["pid"]
    tree, procs = tree_of(doc)
    msg = show_tree(tree)
    assert set(procs) == {parent, child}, msg
    slack_near("combined peak (100 + 10, not 200)\n" + msg, tree["combined_peak_bytes"], 110)
    slack_near("the parent's own peak\n" + msg, procs[parent]["peak_bytes"], 100)
    slack_near("the child's own peak: the 10 MiB it wrote\n" + msg, procs[child]["peak_bytes"], 10)
    slack_near("the child at the combined peak\n" + msg, procs[child]["at_combined_peak_bytes"], 10)
    slack_near("the parent at the combined peak\n" + msg, procs[parent]["at_combined_peak_bytes"], 100)


# --- gcc: a real tree (driver, cc1, as) ------------------------------------------------------------
def generated_c(d):
    """A C file whose compilation makes cc1 hold some 40 MiB (300,000 initializers: tree nodes in GCC's
    garbage-collected pages) in a second or so, with few mallocs (cheap on the ptrace path)."""
    path = os.path.join(d, "big.c")
    with open(path, "w") as f:
        for k in range(3):
            f.write("const int table%d[] = {\n" % k)
            for i in range(0, 100000, 20):
                f.write(",".join(str((i + j) * (7 + k) % 1000) for j in range(20)) + ",\n")
            f.write("};\n")
        for k in range(50):
            f.write("int get%d(int i) { return table%d[i] + %d; }\n" % (k, k % 3, k))
    return path


def gcc_argv(d):
    return [GCC, "-O0", "-c", generated_c(d), "-o", os.path.join(d, "big.o")]


def is_cc1(command):
    return command is not None and os.path.basename(command.split()[0]) == "cc1"


SUMMARY = re.compile(r"^ptfil: (\d+) child process(?:es)? (?:were|was) not profiled; the largest, (.+) \(pid (\d+)\), "
                     r"peaked at ([\d.]+) MiB RSS: --follow-forks profiles them$", re.M)


def bare_max_rss(argv):
    """The peak RSS of argv's largest process, run bare under /usr/bin/time -f %M (in bytes)."""
    r = subprocess.run(["/usr/bin/time", "-f", "maxrss %M", *argv], capture_output=True, timeout=120)
    assert r.returncode == 0, r
    m = re.search(rb"^maxrss (\d+)$", r.stderr, re.M)
    assert m, r.stderr
    return int(m.group(1)) * 1024


def test_gcc_not_followed():
    d = workdir()
    try:
        argv = gcc_argv(d)
        snap = os.path.join(d, "gcc.gz")
        rc, out, err = run_ptfil(["launch", "-i", "0", "-o", snap, "--", *argv])
        assert rc == 0, (rc, err)
        m = SUMMARY.search(err)
        assert m, "no summary naming the unprofiled children:\n" + err
        n, command, pid, mib = int(m.group(1)), m.group(2), int(m.group(3)), float(m.group(4))
        assert n >= 2, err  # cc1 and as
        assert is_cc1(command), "the largest is %r, not cc1:\n%s" % (command, err)
        assert mib * MiB > 10 * MiB, err
        tree, procs = tree_of(view_json(snap))
        msg = show_tree(tree)
        assert pid in procs and is_cc1(procs[pid]["command"]) and procs[pid]["profiled"] is False, msg
        assert abs(procs[pid]["vmhwm_bytes"] - mib * MiB) <= 0.06 * MiB, "summary %.1f MiB\n%s" % (mib, msg)
        assert procs[pid]["vmhwm_bytes"] == max(p["vmhwm_bytes"] for p in procs.values() if p["profiled"] is False), msg
        # Against gcc run bare: /usr/bin/time's %M is its largest process's (cc1's) peak RSS.
        outside = bare_max_rss(argv)
        check_near("cc1's peak RSS (bare: %.1f MiB)" % (outside / MiB), mib * MiB, outside, rel=0.15, slack=2 * MiB)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_gcc_followed():
    d = workdir()
    try:
        argv = gcc_argv(d)
        r = launch(argv, ptfil_args=FOLLOW, timeout=300)
        assert r.returncode == 0, (r.returncode, r.stderr)
        doc = r.json
        tree, procs = tree_of(doc)
        msg = show_tree(tree)
        cc1 = [p for p in procs.values() if is_cc1(p["command"])]
        assert len(cc1) == 1 and cc1[0]["profiled"] is True, msg
        cc1 = cc1[0]
        assert cc1["peak_bytes"] > 10 * MiB, msg
        assert tree["combined_peak_bytes"] >= cc1["peak_bytes"], msg
        top = max(doc["combined_peak_stacks"], key=lambda s: s["charged_bytes"])
        assert top["pid"] == cc1["pid"], "the combined peak's top stack is %d's, not cc1's (%d): %r\n%s" % (
            top["pid"], cc1["pid"], functions(top), msg)
        assert cc1["at_combined_peak_bytes"] > tree["combined_peak_bytes"] / 2, msg
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- Python: a multiprocessing.Pool of 2 workers ---------------------------------------------------
POOL_BLOCK = 40 * 1000 * 1000


def test_python_pool():
    argv = [PYTHON, POOL]
    want = b"[40000000, 40000001]\npool done\n"
    b = bare(argv)
    assert (b.returncode, b.stdout) == (0, want), b
    r = launch(argv, ptfil_args=FOLLOW, timeout=300)
    assert (r.returncode, r.stdout) == (0, want), (r.returncode, r.stdout, r.stderr.decode(errors="replace"))
    workers = set(pids_from(r.stderr, rb"pool: worker pid (\d+)"))
    assert len(workers) == 2, r.stderr
    doc = r.json
    tree, procs = tree_of(doc)
    msg = show_tree(tree)
    assert workers <= set(procs), msg
    # Both blocks were held at once: the combined peak has both.
    assert tree["combined_peak_bytes"] >= 2 * POOL_BLOCK, msg
    for pid in workers:
        w = procs[pid]
        assert w["profiled"] is True and w["ppid"] == doc["process"]["pid"], msg
        # Its own 40 MB, and what it made its own of the interpreter it inherited (a few MiB at most).
        assert POOL_BLOCK <= w["peak_bytes"] <= POOL_BLOCK + 8 * MiB, "worker %d\n%s" % (pid, msg)
        assert POOL_BLOCK <= w["at_combined_peak_bytes"] <= POOL_BLOCK + 8 * MiB, "worker %d\n%s" % (pid, msg)
        if touch_view():
            # The bytearray zero-filled by the interpreter's memset, in one stack of the worker's at the
            # combined peak, under hold_block's line (Python frames read by the kernel at each fault).
            mine = [s for s in doc["combined_peak_stacks"] if s["pid"] == pid]
            big = max(mine, key=lambda s: s["charged_bytes"])
            check_near("the worker %d's bytearray at the combined peak" % pid, big["charged_bytes"], POOL_BLOCK,
                       rel=0.01)
            assert "memset" in (functions(big)[0] or ""), functions(big)
            frame = [f for f in big["frames"] if f.get("function") == "hold_block"]
            assert frame and frame[0]["kind"] == "python" and frame[0]["file"].endswith("pool.py"), big["frames"][:12]
            continue
        held = combined_through(doc, "hold_block", pid)
        check_near("hold_block in worker %d at the combined peak" % pid, held, POOL_BLOCK, rel=0.01)
        for s in stacks_through(doc, "hold_block", "combined_peak_stacks"):
            if s["pid"] == pid and s["charged_bytes"] >= POOL_BLOCK:
                frame = [f for f in s["frames"] if f.get("function") == "hold_block"][0]
                assert frame["kind"] == "python" and frame["file"].endswith("pool.py"), frame


# --- a memory budget: --max-peak SIZE ------------------------------------------------------------
def budget_run(argv, *options):
    d = workdir()
    try:
        return run_ptfil(["launch", "-i", "0", "-o", os.path.join(d, "snap.gz"), *options, "--", *argv])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def over_budget_lines(err):
    """The lines that say a peak is over the budget (not those of an unprofiled child: child_over_lines)."""
    return [l for l in err.splitlines() if l.startswith("ptfil: ") and "over the budget" in l and
            not l.startswith("ptfil: child process ")]


def child_over_lines(err):
    return [l for l in err.splitlines() if l.startswith("ptfil: child process ") and "over the budget" in l]


def check_over(argv, options, function, out, status=BUDGET_STATUS):
    """ptfil exits 97 after the program (or with the program's own status when it failed), with one line
    naming the peak (the combined one with -f: docs/ptfil.1), the budget, and function in the top stack."""
    rc, stdout, err = budget_run(argv, *options)
    assert rc == status, "%s: exit status %d, expected %d:\n%s" % (options, rc, status, err)
    assert stdout == out, stdout
    lines = over_budget_lines(err)
    assert len(lines) == 1, "%s: expected one line 'ptfil: ... over the budget':\n%s" % (options, err)
    start = "ptfil: combined peak " if "-f" in options else "ptfil: peak "
    assert lines[0].startswith(start), "%s: the line does not start with %r: %r" % (options, start, lines[0])
    assert function in lines[0], "%s: the line does not name %s: %r" % (options, function, lines[0])


def check_under(argv, options, status, out):
    rc, stdout, err = budget_run(argv, *options)
    assert rc == status, "%s: exit status %d, expected the program's %d:\n%s" % (options, rc, status, err)
    assert stdout == out, stdout
    assert not over_budget_lines(err) and not child_over_lines(err), err


def check_child_over(argv, options, out):
    """The main process is under the budget, an unprofiled child over it (by its VmHWM): 97, and one line
    naming the child, its pid, and -f."""
    rc, stdout, err = budget_run(argv, *options)
    assert rc == BUDGET_STATUS, "%s: exit status %d, expected %d:\n%s" % (options, rc, BUDGET_STATUS, err)
    assert stdout == out, stdout
    assert not over_budget_lines(err), err
    lines = child_over_lines(err)
    assert len(lines) == 1, err
    # tree's child B: 50 MiB of its own and the parent's 20 it shares (its RSS, not a charge).
    b = re.search(r"tree: b pid (\d+)", err).group(1)
    m = re.match(r"ptfil: child process tree \(pid (\d+)\), not profiled, peaked at ([\d.]+) MiB RSS, over the budget", lines[0])
    assert m and m.group(1) == b, (lines[0], b)
    assert 50 <= float(m.group(2)) <= 80, lines[0]
    assert "-f" in lines[0], lines[0]


def test_max_peak():
    # tree: 80 MiB at once with -f (B's alloc_b the largest), the parent's own 20 MiB without.
    for size in ("60M", "1048576", "79M"):
        check_over([TREE], ("-f", "--max-peak", size), "alloc_b", TREE_OUT)
    for size in ("100M", "2G", "%d" % (90 * MiB)):
        check_under([TREE], ("-f", "--max-peak", size), 0, TREE_OUT)
    # Without -f the budget is the main process's own peak, and each unprofiled child's VmHWM.
    check_over([TREE], ("--max-peak", "10M"), "alloc_parent", TREE_OUT)
    check_child_over([TREE], ("--max-peak", "30M"), TREE_OUT)
    check_under([TREE], ("--max-peak", "100M"), 0, TREE_OUT)
    # A program that fails keeps its own status, over the budget (which is still said) or not.
    check_over([FORKS, "child-image"], ("--max-peak", "1M"), "exec_image_alloc", b"child image holds 20 MiB\n", 3)
    check_under([FORKS, "child-image"], ("--max-peak", "1G"), 3, b"child image holds 20 MiB\n")


# --- counters per process --------------------------------------------------------------------------
def hook_excess(c):
    """Hook events beyond 2 per allocating call and 1 per free (see test_heap.stop_excess)."""
    if c.get("heap_events.uprobe", 0) == 1:
        events = c["kernel.records"] - 2 * c["heap.nested"]
        return events - (2 * c["heap.allocs"] + c["heap.frees"])
    events = c["stops.bp_entry"] + c["stops.bp_return"]
    return events - (2 * c["heap.allocs"] - c.get("heap.one_stop_blocks", 0) + c["heap.frees"])


def test_counters_per_process():
    r = run_tree(follow=True)
    kids = tree_pids(r.stderr)
    main_doc = r.json
    files = child_snapshots(r.snapshot)
    docs = {"parent": main_doc}
    docs.update((name, view_json(files[str(pid)])) for name, pid in kids.items())
    counters = {name: d["counters"] for name, d in docs.items()}
    show = "\n".join("  %s: %s" % (n, {k: v for k, v in c.items() if k.startswith(("stops.total", "unwinds", "heap.", "run."))})
                     for n, c in counters.items())
    # heap.allocs: what each process allocated itself. The parent: 3000 churn pairs, its 20 MiB, stdout's
    # buffer; A: its 30 MiB; B: 300 pairs and its 50 MiB; the third (a fresh image): its 10 MiB.
    # Under touch none of those calls is followed: 0 in each, and they cost no stop.
    for name, low in (("parent", 3001), ("a", 1), ("b", 301), ("third", 1)):
        if touch_view():
            heap_counters_zero(docs[name])
            check_view(docs[name])
            continue
        allocs = counters[name]["heap.allocs"]
        assert low <= allocs <= low + 4, "%s: heap.allocs %d, expected %d (+4)\n%s" % (name, allocs, low, show)
        assert 0 <= hook_excess(counters[name]) <= STOP_SLACK, "%s: hook events against the rule\n%s" % (name, show)
    # Stops and unwinds: each snapshot's own, the run's in the main one.
    c = counters["parent"]
    assert "run.stops.total" in c and "run.unwinds" in c, show
    assert c["run.stops.total"] >= sum(x["stops.total"] for x in counters.values()), show
    assert c["run.unwinds"] >= sum(x["unwinds"] for x in counters.values()), show
    for name in kids:
        assert counters[name]["stops.total"] < c["run.stops.total"], show
        assert counters[name]["unwinds"] < c["run.unwinds"], show
    if touch_view():
        # The parent's 3000 pairs cost nothing: its stops are the seccomp, clone and exit stops of a
        # few dozen mapping calls and processes.
        assert c["stops.total"] < 200, show
    elif main_doc["counters"].get("heap_events.uprobe", 0) != 1:
        # On the ptrace path the parent's 3000 pairs cost 6000 stops; A's one malloc a handful.
        assert counters["a"]["stops.total"] * 20 < c["run.stops.total"], show
        assert c["stops.total"] >= 6000, show


if __name__ == "__main__":
    main([test_tree_combined_peak, test_tree_not_followed, test_cow_shared_once, test_gcc_not_followed,
          test_gcc_followed, test_python_pool, test_max_peak, test_counters_per_process])
