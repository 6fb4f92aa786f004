"""--mappings-only: no malloc-family breakpoints; anonymous mappings and brk growth charged by
residency to the stack that made the system call, in launch and in attach mode.

In the touch pass (PTFIL_CHARGE=touch) the malloc family is not followed in either case, and pages
are charged to the code that first wrote them: the chain's heap to f2's malloc (the chunk headers it
writes in fresh pages) and f2's memset, the workers' blocks to the workers' memset; under attach no
wrapper is hooked at all (nothing is written into the target).
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, Attached, anon_watch, bare, charged_through, check_anon_peak, check_near, check_view, \
    exec_mappings, functions, heap_counters_zero, launch, launched, main, mapping_differences, reserved_through, stacks_through, \
    target, touch_view, view

CHAIN = [target("heap_chain"), "chain"]
SEED = [target("sparse_threads")]
THREADS = target("attach_threads")
REUSE = target("reuse")
CHAIN_BYTES = 2000 * 10000


def no_heap_stops(doc):
    check_view(doc)
    c = doc["counters"]
    assert c.get("options.mappings_only") == 1, c
    assert c["heap.allocs"] == 0 and c["heap.frees"] == 0, c
    if touch_view():
        heap_counters_zero(doc)


def is_memset(name):
    return bool(name) and "memset" in name


def written_below(s, fn):
    """The function that the stack s calls from fn (the frame inside fn), or None."""
    f = functions(s)
    i = f.index(fn)
    return f[i - 1] if i > 0 else None


def test_launch_brk_growth_charged_to_its_stack():
    """The malloc chain's 2000 blocks of 10,000 bytes grow the heap by brk: charged by residency to
    the stack that called brk, through malloc and f2, with no breakpoint stop at all."""
    with anon_watch() as watch:
        r = launch(CHAIN, ptfil_args=("-i", "0", "--mappings-only"))
    assert r.returncode == 0, r.stderr
    doc = r.json
    no_heap_stops(doc)
    assert doc["counters"]["stops.bp_entry"] == 0 and doc["counters"]["stops.bp_return"] == 0, doc["counters"]
    # glibc's arena rounds up and keeps a little slack: the brk growth is the blocks plus a few percent.
    through_f2 = charged_through(doc, "f2")
    check_near("brk growth through f2", through_f2, CHAIN_BYTES, rel=0.05)
    for s in stacks_through(doc, "f2"):
        f = functions(s)
        if touch_view():
            # Made resident by f2: by malloc, which writes each new chunk's header (and the top
            # chunk's after it) in a fresh page first, or by f2's memset of the block.
            assert s["kind"] == "touch", s
            assert written_below(s, "f2") == "malloc" or is_memset(written_below(s, "f2")), f
            assert f.index("f2") < f.index("f1") < f.index("f0"), f
        else:
            assert s["kind"] == "brk", s
            assert f.index("malloc") < f.index("f2") < f.index("f1") < f.index("f0"), f
    if touch_view():
        # Both writers have their share: the memset most of each 10,000-byte block's pages.
        by_memset = sum(s["charged_bytes"] for s in stacks_through(doc, "f2") if is_memset(written_below(s, "f2")))
        assert 0.5 * through_f2 <= by_memset < through_f2, (by_memset, through_f2)
        check_anon_peak(doc, watch)
    hwm = doc["process"]["vmhwm_bytes"]
    assert doc["peak"]["charged_bytes"] <= hwm, (doc["peak"], hwm)
    check_near("peak against VmHWM", doc["peak"]["charged_bytes"], hwm, rel=0.15)
    b = bare(CHAIN)
    assert (r.returncode, r.stdout) == (b.returncode, b.stdout)
    report = view(r.snapshot, timeout=60).stdout.decode()
    assert "launch, mappings only (malloc calls not followed)" in report, report


def test_launch_seed_same_attribution():
    """The seed scenario's memory is all mappings: the same charges as with the heap followed."""
    doc = launch(SEED, ptfil_args=("-i", "0", "--mappings-only")).json
    no_heap_stops(doc)
    check_near("peak charged", doc["peak"]["charged_bytes"], 54 * MiB)
    check_near("load_dataset", charged_through(doc, "load_dataset"), 50 * MiB)
    check_near("thread buffers", charged_through(doc, "thread_buffer_alloc"), 4 * MiB)
    # Under touch what was reserved is the alloc view's, beside the touch view.
    key = "other_view_stacks" if touch_view() else "stacks"
    assert reserved_through(doc, "thread_buffer_alloc", key=key) == 4 * 128 * MiB


def test_attach_wrappers_only():
    """attach --mappings-only hooks the mapping calls' wrappers and nothing else: the workers' 1 MiB
    blocks are mapped by malloc and charged through it to each worker; the code reads back intact."""
    with Attached([THREADS]) as a:
        code_before = exec_mappings(a.pid)
        a.attach("--mappings-only")
        a.send("go")
        a.wait_output("holding")
        time.sleep(0.3)
        a.signal(signal.SIGINT)
        rc, err = a.finish()
        assert rc == 0, (rc, err)
        diffs = mapping_differences(code_before, exec_mappings(a.pid), same_set=False)
        assert not diffs, "the target's code changed across attach and detach:\n" + "\n".join(diffs)
        a.send("release")
        status, out = a.target_finish()
        assert (status, out) == (0, b"ready\nholding\ndone\n"), (status, out)
        doc = a.json()
    no_heap_stops(doc)
    if touch_view():
        # The touch view needs no breakpoint under attach, not even at the mapping wrappers.
        assert doc["counters"]["stops.bp_wrapper"] == 0, doc["counters"]
    else:
        assert doc["counters"]["stops.bp_wrapper"] > 0, doc["counters"]  # the mmap wrapper
    for fn, mib in (("worker_one", 4), ("worker_two", 8), ("worker_three", 12)):
        check_near(fn, charged_through(doc, fn), mib * MiB, rel=0.05)
        for s in stacks_through(doc, fn):
            if touch_view():
                # Each worker mallocs 1 MiB blocks (mmapped by malloc) and writes them with memset.
                assert s["kind"] == "touch" and (written_below(s, fn) in ("malloc", "check") or
                                                 is_memset(written_below(s, fn))), (s["kind"], functions(s)[:5])
            else:
                assert s["kind"] == "mmap" and "malloc" in functions(s), s
    if touch_view():
        by_memset = sum(s["charged_bytes"] for fn in ("worker_one", "worker_two", "worker_three")
                        for s in stacks_through(doc, fn) if is_memset(written_below(s, fn)))
        check_near("the workers' memset", by_memset, 24 * MiB, rel=0.05)


def test_threads_meeting_at_reused_addresses():
    """A munmap's return and another thread's mmap of the same addresses, which ptfil hears of in either
    order: each of keeper's 64 blocks, mapped where churn's pages just were, stays charged to keeper."""
    r, doc = launched([REUSE])
    assert r.stdout == b"done\n", r.stdout
    keeper_at_end = charged_through(doc, "keeper", key="live_at_end")
    check_near("keeper's blocks at the end", keeper_at_end, 64 * MiB, rel=0.01)
    if not touch_view():
        assert reserved_through(doc, "keeper", key="live_at_end") == 64 * MiB, doc["live_at_end"]
    # The peak: keeper's 63 or 64 MiB and churn's 2 or 3 MiB of the last round.
    peak = doc["peak"]["charged_bytes"]
    assert 65 * MiB <= peak <= 67.5 * MiB, peak / MiB
    assert charged_through(doc, "keeper") >= 63 * MiB - 64 * 1024, charged_through(doc, "keeper") / MiB


if __name__ == "__main__":
    main([test_launch_brk_growth_charged_to_its_stack, test_launch_seed_same_attribution, test_attach_wrappers_only,
          test_threads_meeting_at_reused_addresses])
