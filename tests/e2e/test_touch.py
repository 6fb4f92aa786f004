"""The touch view (--charge touch): each resident page charged to the stack that made it resident, as
the kernel's page-fault and page-count tracepoints report it. tests/targets/touch.c says what each of
its functions reserves and makes resident; the same program under --charge alloc charges the reserver
instead. Needs the fault path (root, or CAP_BPF and CAP_PERFMON): a real SKIP elsewhere, a failure
under CI (ptfiltest.missing).
"""
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, Attached, Skip, bare, charged_through, check_near, exec_mappings, launch, main, \
    mapping_differences, missing, reserved_through, stacks_through, target, thp_setting, wait_until

TOUCH = [target("touch")]
LOOP = target("attach_loop")
THREADS = target("attach_threads")
REMAP = target("remap_wait")
FAULT_PATH_REFUSED = "cannot charge memory to the code that made it resident"


def touch_run(argv, *options):
    r = launch(argv, ptfil_args=("-i", "0", "--charge", "touch", *options))
    err = r.stderr.decode(errors="replace")
    if r.returncode != 0 and FAULT_PATH_REFUSED in err:
        raise missing("the fault path cannot run here: " + err.strip())
    assert r.returncode == 0, (r.returncode, err)
    return r


def rss_anon(stdout):
    m = re.search(rb"rss_anon_kib (\d+)", stdout)
    assert m, stdout
    return int(m.group(1)) * 1024


def test_touch_charges_the_code_that_made_memory_resident():
    r = touch_run(TOUCH)
    doc = r.json
    assert doc["view"] == "touch", doc.get("view")
    # Made resident: by the writer, not by the mmap that reserved it.
    check_near("write_map", charged_through(doc, "write_map"), 16 * MiB, rel=0.01)
    assert charged_through(doc, "reserve_map") == 0, charged_through(doc, "reserve_map")
    # A malloc'd block: its pages are its writer's; the allocator wrote its header page at most.
    check_near("fill_block", charged_through(doc, "fill_block"), 8 * MiB, rel=0.01)
    assert charged_through(doc, "alloc_block") <= 8192, charged_through(doc, "alloc_block")
    # The kernel writing on the program's behalf, and pages made resident with no fault of its own.
    check_near("read_into", charged_through(doc, "read_into"), 4 * MiB, rel=0.01)
    check_near("populate", charged_through(doc, "populate"), 4 * MiB, rel=0.01)
    # Read only: the shared zero page, no memory.
    assert charged_through(doc, "only_read") == 0, charged_through(doc, "only_read")
    if thp_setting() not in (None, "never"):
        # Four huge pages, charged as what they are.
        check_near("huge_pages", charged_through(doc, "huge_pages"), 8 * MiB, rel=0.01)
    for s in stacks_through(doc, "write_map"):
        assert s["kind"] == "touch", s
    # The alloc view beside it: the reservation, with what of it is resident.
    assert reserved_through(doc, "reserve_map", key="other_view_stacks") == 64 * MiB
    check_near("reserve_map resident", charged_through(doc, "reserve_map", key="other_view_stacks"), 16 * MiB,
               rel=0.01)
    # The total is the program's anonymous residency, measured by the program itself at its peak (its end).
    anon = rss_anon(r.stdout)
    check_near("peak against the program's own RssAnon", doc["peak"]["charged_bytes"], anon, rel=0.01)
    assert doc["peak"]["charged_bytes"] <= doc["process"]["vmhwm_bytes"], (doc["peak"], doc["process"])
    # No malloc-family call stopped: the faults say it all.
    c = doc["counters"]
    assert c["stops.bp_entry"] == 0 and c["stops.bp_return"] == 0, c
    b = bare(TOUCH)
    assert r.returncode == b.returncode and r.stdout.splitlines()[:-1] == b.stdout.splitlines()[:-1]


def test_small_ring_loses_nothing():
    """A ring far smaller than the run's records (64 KiB for the seed's 13,800 faults on 5 threads):
    the faulting threads are stopped, and the stops suppressed, until ptfil has caught up, so nothing
    is lost and the charges are the same. (One system call's faults, a read() into a fresh buffer,
    cannot be stopped in between: a ring must hold them.)"""
    seed = [target("sparse_threads")]
    r = launch(seed, ptfil_args=("-i", "0", "--charge", "touch"), env=dict(os.environ, PTFIL_FAULT_RING_KIB="64"))
    err = r.stderr.decode(errors="replace")
    if r.returncode != 0 and FAULT_PATH_REFUSED in err:
        raise missing("the fault path cannot run here: " + err.strip())
    assert r.returncode == 0, (r.returncode, err)
    doc = r.json
    c = doc["counters"]
    assert c["touch.lost"] == 0, c
    assert c["touch.backpressure"] > 0 and c["stops.backpressure"] > 0, c
    check_near("load_dataset", charged_through(doc, "load_dataset"), 50 * MiB, rel=0.01)
    check_near("thread_buffer_alloc", charged_through(doc, "thread_buffer_alloc"), 4 * MiB, rel=0.01)
    b = bare(seed)
    assert (r.returncode, r.stdout) == (b.returncode, b.stdout)


def test_alloc_charges_the_code_that_reserved_it():
    r = launch(TOUCH, ptfil_args=("-i", "0", "--charge", "alloc"))
    assert r.returncode == 0, r.stderr
    doc = r.json
    assert doc["view"] == "alloc", doc.get("view")
    check_near("reserve_map", charged_through(doc, "reserve_map"), 16 * MiB, rel=0.02)
    assert charged_through(doc, "write_map") == 0
    check_near("alloc_block", charged_through(doc, "alloc_block"), 8 * MiB, rel=0.02)
    assert charged_through(doc, "fill_block") == 0


def test_both_views_link_the_writer_to_the_reserver():
    r = touch_run(TOUCH, "--charge", "both")
    doc = r.json
    assert doc["view"] == "touch"
    check_near("write_map", charged_through(doc, "write_map"), 16 * MiB, rel=0.01)
    # With both, the malloc family is followed too: the block is charged to alloc_block in the alloc view.
    check_near("alloc_block (alloc view)", charged_through(doc, "alloc_block", key="other_view_stacks"), 8 * MiB,
               rel=0.02)


def bare_loop(iterations):
    """attach_loop untraced, sent one SIGUSR2 after "ready" as the traced run is: (status, stdout)."""
    with Attached([LOOP, iterations]) as a:
        os.kill(a.pid, signal.SIGUSR2)
        return a.target_finish()


def test_attach_touch_writes_nothing_and_survives_kill_9():
    """Under attach the touch view needs no breakpoint: the target's code is byte for byte its files'
    while ptfil is attached, and a kill -9 of ptfil's whole process group leaves it running to the end
    an untraced run reaches."""
    want = bare_loop("60")
    with Attached([LOOP, "60"]) as a:
        code_before = exec_mappings(a.pid)
        a.attach("--charge", "touch")
        time.sleep(0.3)
        diffs = mapping_differences(code_before, exec_mappings(a.pid))
        assert not diffs, "the target's code changed while attached:\n" + "\n".join(diffs)
        os.killpg(a.ptfil.pid, signal.SIGKILL)
        a.ptfil.wait(timeout=30)
        wait_until(lambda: a.status("TracerPid") == "0", 10, "the kernel to detach the target")
        assert a.running(), "the target died with ptfil"
        os.kill(a.pid, signal.SIGUSR2)
        status, out = a.target_finish()
    assert (status, out) == want, ((status, out), want)


def attach_holding(argv, settle):
    """argv attached with --charge touch, sent "go"; once it prints "holding" and settle seconds
    more, ptfil is stopped by SIGINT and the target sent "release": (its stdout, the snapshot's JSON)."""
    with Attached(argv) as a:
        a.attach("--charge", "touch")
        a.send("go")
        a.wait_output("holding")
        time.sleep(settle)
        a.signal(signal.SIGINT)
        rc, err = a.finish()
        assert rc == 0, (rc, err)
        a.send("release")
        status, out = a.target_finish()
        assert status == 0, (status, out)
        return out, a.json()


def test_attach_touch_charges_the_workers():
    """Threads that map and write their blocks while attached: each worker is charged what it wrote,
    and what was resident at the attach goes to [before attach]."""
    _, doc = attach_holding([THREADS], 0.3)
    assert doc["view"] == "touch"
    c = doc["counters"]
    assert c.get("stops.bp_entry", 0) == 0 and c.get("stops.bp_wrapper", 0) == 0, c
    for fn, mib in (("worker_one", 4), ("worker_two", 8), ("worker_three", 12)):
        check_near(fn, charged_through(doc, fn), mib * MiB, rel=0.05)
    assert charged_through(doc, "[before attach]") > 0


def test_attach_first_fault_is_a_huge_page():
    """The first fault ptfil sees after an attach is one of four huge pages (MADV_HUGEPAGE, one byte
    written per 2 MiB): it is charged 2 MiB like the three after it, not the one 4 KiB page a first
    fault of an address space would otherwise be taken for, and the total stays the target's RssAnon."""
    if thp_setting() in (None, "never"):
        raise Skip("transparent huge pages are off here (never): MADV_HUGEPAGE makes no huge page")
    out, doc = attach_holding([TOUCH[0], "attach"], 0.3)
    check_near("huge_pages", charged_through(doc, "huge_pages"), 8 * MiB, rel=0.01)
    c = doc["counters"]
    assert c.get("touch.first_fault_extra_bytes", 0) > 0, c
    check_near("the peak against the target's own RssAnon", doc["peak"]["charged_bytes"], rss_anon(out), rel=0.01)


def check_remap(doc, out):
    """remap_wait's pages at its peak, after the move and a release: write_first's 8 MiB where mremap
    took them, write_rest's 24, write_more's 2."""
    assert b"moved=1" in out, "the kernel grew the mapping in place: nothing was moved\n%r" % out
    check_near("write_first", charged_through(doc, "write_first"), 8 * MiB, rel=0.01)
    check_near("write_rest", charged_through(doc, "write_rest"), 24 * MiB, rel=0.01)
    check_near("write_more", charged_through(doc, "write_more"), 2 * MiB, rel=0.01)
    m = re.search(rb"RssAnon:\s+(\d+) kB", out)
    assert m, out
    # The peak is the program's anonymous residency (read by the program itself), within 1%.
    check_near("the peak", doc["peak"]["charged_bytes"], int(m.group(1)) * 1024, rel=0.01)


def test_moved_mapping_keeps_its_pages():
    """A mapping written, then moved by mremap and grown: its pages keep the stack that wrote them,
    under launch (the move applied at the call's exit stop, the residency scan held off meanwhile)."""
    r = launch([REMAP], ptfil_args=("-i", "0", "--charge", "touch"), stdin_data=b"go\nrelease\n")
    err = r.stderr.decode(errors="replace")
    if r.returncode != 0 and FAULT_PATH_REFUSED in err:
        raise missing("the fault path cannot run here: " + err.strip())
    assert r.returncode == 0, (r.returncode, err)
    check_remap(r.json, r.stdout)


def test_attach_moved_mapping_keeps_its_pages():
    """The same under attach, where no mapping call stops: the move is a record of the fault path (the
    kernel's syscall tracepoints), the pages mremap took away from their old addresses are not
    released (the residency scan waits for that record), and are found charged at the new ones. Run
    five times: the scan and the move race."""
    for _ in range(5):
        out, doc = attach_holding([REMAP], 0.2)
        assert doc["counters"].get("touch.moves", 0) >= 1, doc["counters"]
        check_remap(doc, out)


if __name__ == "__main__":
    main([test_touch_charges_the_code_that_made_memory_resident, test_small_ring_loses_nothing,
          test_alloc_charges_the_code_that_reserved_it,
          test_both_views_link_the_writer_to_the_reserver, test_attach_touch_writes_nothing_and_survives_kill_9,
          test_attach_touch_charges_the_workers, test_attach_first_fault_is_a_huge_page,
          test_moved_mapping_keeps_its_pages,
          test_attach_moved_mapping_keeps_its_pages])
