"""The seed scenario: 4 threads x (128 MiB mapped, 1 MiB written), then 50 MiB written and unmapped.

ptfil must report the resident peak (54 MiB), not the reserved one, attribute
the 50 MiB to load_dataset and each thread's 1 MiB to the thread function, and
leave the program's output and status unchanged.

In the touch pass (PTFIL_CHARGE=touch) the memory is charged to the code that wrote it: the same
functions (each maps and writes its own memory), but through the touch loop that wrote the pages,
not the mmap that reserved them, as kind "touch" stacks whose count is pages; the reservations
are in the alloc view beside it (other_view_stacks), and the peak is the program's RssAnon
high-water mark, measured apart by the kernel's kmem:rss_stat events.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, anon_watch, bare, charged_through, check_anon_peak, check_near, check_view, functions, \
    heap_counters_zero, launch, main, own_functions, reserved_through, stacks_through, starter_functions, target, \
    touch_view

PROG = [target("sparse_threads")]


def test_peak_is_resident_not_reserved():
    with anon_watch() as watch:
        r = launch(PROG)
    assert r.returncode == 0, r.stderr
    doc = r.json
    check_view(doc)
    check_near("peak charged", doc["peak"]["charged_bytes"], 54 * MiB)
    if touch_view():
        # The touch view's total is the process's anonymous residency: its RssAnon at the peak, within 1%.
        check_anon_peak(doc, watch)
        heap_counters_zero(doc)
    assert doc["peak"]["reserved_bytes"] >= 562 * MiB, doc["peak"]
    # The process's own high-water mark agrees: the reserved 512 MiB never existed.
    hwm = doc["process"]["vmhwm_bytes"]
    assert doc["peak"]["charged_bytes"] <= hwm < 100 * MiB, (doc["peak"], hwm)


def test_attribution():
    doc = launch(PROG).json
    check_view(doc)
    check_near("load_dataset", charged_through(doc, "load_dataset"), 50 * MiB)
    check_near("thread buffers", charged_through(doc, "thread_buffer_alloc"), 4 * MiB)
    if touch_view():
        # Each function wrote what it mapped: charged to its touch loop, every page of it (count is
        # pages: 50 MiB and 4 x 1 MiB), exactly; what the mmaps reserved is the alloc view's, beside it.
        for fn, pages in (("load_dataset", 50 * 256), ("thread_buffer_alloc", 4 * 256)):
            st = stacks_through(doc, fn)
            assert st and all(s["kind"] == "touch" and functions(s)[:2] == ["touch", fn] for s in st), \
                [(s["kind"], functions(s)[:4]) for s in st]
            assert sum(s["count"] for s in st) == pages, (fn, [s["count"] for s in st])
            assert sum(s["charged_bytes"] for s in st) == pages * 4096, fn
        assert reserved_through(doc, "thread_buffer_alloc", key="other_view_stacks") == 4 * 128 * MiB
        assert sum(s["count"] for s in stacks_through(doc, "thread_buffer_alloc", key="other_view_stacks")) == 4
        check_near("thread buffers (alloc view)", charged_through(doc, "thread_buffer_alloc", key="other_view_stacks"),
                   4 * MiB)
        check_near("load_dataset (alloc view)", charged_through(doc, "load_dataset", key="other_view_stacks"), 50 * MiB)
    else:
        assert reserved_through(doc, "thread_buffer_alloc") == 4 * 128 * MiB
        assert sum(s["count"] for s in stacks_through(doc, "thread_buffer_alloc")) == 4
    workers = stacks_through(doc, "worker")
    assert workers and all("main" not in own_functions(s) for s in workers), "thread stacks must start in the thread"
    # ... and go on into the call that started the thread: pthread_create in main.
    for s in workers:
        assert starter_functions(s)[:1] != [] and "main" in starter_functions(s), functions(s)
        assert starter_functions(s).index("pthread_create") < starter_functions(s).index("main"), functions(s)
    top = doc["stacks"][0]
    assert "load_dataset" in functions(top), functions(top)
    # Innermost first: the system call wrapper (under touch: the loop that wrote the pages), then
    # the program's functions outward.
    f = functions(top)
    assert f[0] == "touch" if touch_view() else "mmap" in (f[0] or ""), f
    assert f.index("load_dataset") < f.index("main"), f


def test_output_and_status_unchanged():
    b = bare(PROG)
    r = launch(PROG)
    assert (r.returncode, r.stdout) == (b.returncode, b.stdout), (r.returncode, r.stdout, b.stdout)


def test_timeline_with_poll():
    r = launch(PROG, ptfil_args=("--interval", "5"))
    doc = r.json
    samples = doc["timeline"]
    assert len(samples) >= 2, samples
    times = [s["time_s"] for s in samples]
    assert times == sorted(times)
    assert max(s["charged_bytes"] for s in samples) <= doc["peak"]["charged_bytes"]


if __name__ == "__main__":
    main([test_peak_is_resident_not_reserved, test_attribution, test_output_and_status_unchanged,
          test_timeline_with_poll])
