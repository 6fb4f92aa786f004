"""--mappings-only: no malloc-family breakpoints; anonymous mappings and brk growth charged by
residency to the stack that made the system call, in launch and in attach mode.
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, Attached, bare, charged_through, check_near, exec_mappings, functions, launch, main, \
    mapping_differences, reserved_through, stacks_through, target, view

CHAIN = [target("heap_chain"), "chain"]
SEED = [target("sparse_threads")]
THREADS = target("attach_threads")
CHAIN_BYTES = 2000 * 10000


def no_heap_stops(doc):
    c = doc["counters"]
    assert c.get("options.mappings_only") == 1, c
    assert c["heap.allocs"] == 0 and c["heap.frees"] == 0, c


def test_launch_brk_growth_charged_to_its_stack():
    """The malloc chain's 2000 blocks of 10,000 bytes grow the heap by brk: charged by residency to
    the stack that called brk, through malloc and f2, with no breakpoint stop at all."""
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
        assert s["kind"] == "brk", s
        assert f.index("malloc") < f.index("f2") < f.index("f1") < f.index("f0"), f
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
    assert reserved_through(doc, "thread_buffer_alloc") == 4 * 128 * MiB


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
    assert doc["counters"]["stops.bp_wrapper"] > 0, doc["counters"]  # the mmap wrapper
    for fn, mib in (("worker_one", 4), ("worker_two", 8), ("worker_three", 12)):
        check_near(fn, charged_through(doc, fn), mib * MiB, rel=0.05)
        for s in stacks_through(doc, fn):
            assert s["kind"] == "mmap" and "malloc" in functions(s), s


if __name__ == "__main__":
    main([test_launch_brk_growth_charged_to_its_stack, test_launch_seed_same_attribution, test_attach_wrappers_only])
