"""Heap tracking: malloc-family blocks charged per block, from the first call, at two stops or fewer.

Each target is built to a known live total (see the comment at the top of each target):
small blocks (< 64 KiB, or < --large-block) are charged at their size, so those totals are
checked exactly: on every path the usable size glibc gives a block of its malloc family
(malloc_bytes), the size asked for with --exact-sizes; large blocks by their resident bytes. Blocks are kind "heap" and
their stacks start at the allocator function, with the program's functions above it.

In the touch pass (PTFIL_CHARGE=touch) no malloc-family call is followed (heap.* counters and hook
stops are 0): each resident page is charged to the stack that first wrote it, kind "touch", count
in pages. A block reserved in one function and written in another is charged to the writer; small
blocks share pages, so their totals are checked at page granularity (glibc's chunks: the size
plus its 8-byte header, rounded up to 16), per function only where a function owns whole pages; a
freed small block's pages stay resident, charged to their first writer, and the peak is where
resident memory peaks, the process's RssAnon high-water mark (kmem:rss_stat, within 1%).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, SRCDIR, TARGETS, anon_watch, charged_through, check_anon_peak, check_near, check_view, \
    functions, glibc_mmapped_usable, glibc_usable, heap_counters_zero, launch, launched, main, malloc_bytes, no_meaning_under_touch, \
    other_through, own_functions, page_round, stacks_through, starter_functions, target, touch_view, usable_sizes

GiB = 1024 * MiB
PYTHON = "/usr/bin/python3"  # Debian's interpreter: its arena allocator maps 1 MiB arenas with mmap
# Names a malloc-family entry point can carry in glibc's symbol table (aliases of one address).
ALLOCATORS = {"malloc", "__libc_malloc", "calloc", "__libc_calloc", "realloc", "__libc_realloc",
              "reallocarray", "__libc_reallocarray", "posix_memalign", "__posix_memalign", "aligned_alloc",
              "memalign", "__libc_memalign", "__memalign", "valloc", "__libc_valloc", "__valloc", "pvalloc",
              "__libc_pvalloc"}
# Hook stops (entry + return) beyond 2 per outermost allocating call (1 for one hooked at its
# returns, heap.one_stop_blocks) and 1 per outermost free:
# the stops of nested calls inside the allocator (heap.nested) and of calls that never returned
# (a thread or process exit inside a hooked call). For these small C targets there are none; the
# constant leaves room for a libc that nests a few calls at start-up.
STOP_SLACK = 16


def excerpt(doc, function=None, limit=8):
    """A short, readable view of the stacks (through function, if given), for assertion messages."""
    stacks = stacks_through(doc, function) if function else doc["stacks"]
    lines = ["peak %s" % doc["peak"]]
    for s in stacks[:limit]:
        lines.append("  %s charged=%d reserved=%d count=%d: %s" % (
            s["kind"], s["charged_bytes"], s["reserved_bytes"], s["count"], " <- ".join(
                str(f) for f in functions(s)[:8])))
    if len(stacks) > limit:
        lines.append("  ... %d more" % (len(stacks) - limit))
    return "\n".join(lines)


def through(doc, function):
    """(charged, reserved, count) summed over the stacks through function."""
    st = stacks_through(doc, function)
    return (sum(s["charged_bytes"] for s in st), sum(s["reserved_bytes"] for s in st), sum(s["count"] for s in st))


def assert_heap_stacks(doc, function, allocators=ALLOCATORS):
    """Every stack through function is a heap stack whose innermost frame is an allocator."""
    st = stacks_through(doc, function)
    assert st, "no stack through %s\n%s" % (function, excerpt(doc))
    for s in st:
        f = functions(s)
        assert s["kind"] == "heap", "%s: not a heap stack\n%s" % (function, excerpt(doc, function))
        assert f[0] in allocators, "%s: innermost frame %r is not the allocator\n%s" % (
            function, f[0], excerpt(doc, function))


def kernel_path(counters):
    """True when the malloc family went through kernel uprobes (tracer/kernel/kheap.h), not ptrace breakpoints."""
    return counters.get("heap_events.uprobe", 0) == 1


def stop_excess(counters):
    """Hook events beyond the budget: 2 per allocating call, 1 per free. On the kernel path they are
    records (a nested call writes its own, up to 2), and ptrace stops none at all."""
    if kernel_path(counters):
        assert counters["stops.bp_entry"] + counters["stops.bp_return"] == 0, counters
        events = counters["kernel.records"] - 2 * counters["heap.nested"]
    else:
        events = counters["stops.bp_entry"] + counters["stops.bp_return"]
        return events - (2 * counters["heap.allocs"] - counters.get("heap.one_stop_blocks", 0)
                         + counters["heap.frees"])
    return events - (2 * counters["heap.allocs"] + counters["heap.frees"])


def chunk(n):
    """The bytes of glibc's chunk for a malloc of n bytes (below its mmap threshold): n and its 8-byte
    size word, rounded up to 16, at least 32."""
    return glibc_usable(n) + 8


def within_pages(what, actual, bytes_, below=1, above=2):
    """actual, whole pages, covers bytes_ of heap: from bytes_ less `below` pages (a first page another
    stack made resident before) to bytes_ rounded up to pages plus `above` (the pages where the range
    starts and ends, and the header malloc writes after the last chunk)."""
    assert actual % 4096 == 0, "%s: %d is not whole pages" % (what, actual)
    assert bytes_ - below * 4096 <= actual <= page_round(bytes_) + above * 4096, \
        "%s: %d bytes charged, %d expected at page granularity (-%d/+%d pages)" % (what, actual, bytes_, below, above)


def touch_stacks_ok(doc, function, writers=None):
    """Under touch: every stack through function is a touch stack whose count is its pages; when writers
    is given, the frame that function called to write the page (malloc, memset...) is one of them."""
    st = stacks_through(doc, function)
    assert st, "no stack through %s\n%s" % (function, excerpt(doc))
    for s in st:
        f = functions(s)
        assert s["kind"] == "touch" and s["count"] * 4096 == s["charged_bytes"], excerpt(doc, function)
        if writers is not None:
            i = f.index(function)
            inner = f[i - 1] if i else function
            assert any(inner == w or (w == "memset" and inner and "memset" in inner) for w in writers), \
                "%s: written through %r, expected one of %s\n%s" % (function, inner, writers, excerpt(doc, function))


def test_chain_peak_and_attribution():
    # 2000 blocks of 10,000 bytes live at once through f0 -> f1 -> f2 -> malloc.
    with anon_watch() as watch:
        r, doc = launched([target("heap_chain"), "chain"])
    assert b"chain done" in r.stdout, r.stdout
    check_view(doc)
    check_near("peak", doc["peak"]["charged_bytes"], 20000000, rel=0.01)
    if touch_view():
        # The heap's pages, each charged to the first write: malloc's (each chunk's header, and the
        # top chunk's after it, land in a fresh page) or f2's memset; 2000 chunks of 10,016 bytes.
        heap_counters_zero(doc)
        check_anon_peak(doc, watch)
        charged, _, count = through(doc, "f2")
        within_pages("f2", charged, 2000 * chunk(10000))
        assert count * 4096 == charged, excerpt(doc, "f2")
        touch_stacks_ok(doc, "f2", ("malloc", "memset"))
        for s in stacks_through(doc, "f2"):
            f = functions(s)
            assert f.index("f2") < f.index("f1") < f.index("f0") < f.index("main"), f
        by_memset = sum(s["charged_bytes"] for s in stacks_through(doc, "f2") if "memset" in (functions(s)[0] or ""))
        assert 0.5 * charged < by_memset < charged, "memset made %d of %d resident\n%s" % (by_memset, charged,
                                                                                         excerpt(doc, "f2"))
        return
    charged, reserved, count = through(doc, "f2")
    assert (charged, count) == (malloc_bytes(doc, 10000, 2000), 2000), excerpt(doc, "f2")
    assert_heap_stacks(doc, "f2", {"malloc", "__libc_malloc"})
    for s in stacks_through(doc, "f2"):
        f = functions(s)
        assert f[1] == "f2", f
        assert f.index("f2") < f.index("f1") < f.index("f0") < f.index("main"), f
    # The allocator's own brk/mmap growth serving these calls is not charged a second time.
    others = [s for s in stacks_through(doc, "f2") if s["kind"] != "heap"]
    assert not others, excerpt(doc, "f2")


JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def test_preloaded_jemalloc():
    # An allocator other than glibc's, preloaded: its malloc family is hooked instead (its malloc
    # starts with an instruction glibc's does not, cmp $imm32,%rdi, which the emulator must know).
    assert os.path.exists(JEMALLOC), "libjemalloc2 is installed by tools/install-deps.sh"
    # Preloaded through env(1), so that ptfil itself (perhaps built with a sanitizer) does not load it;
    # the program is then the image env execs, which ptfil follows.
    r = launch(["/usr/bin/env", "LD_PRELOAD=" + JEMALLOC, target("heap_chain"), "chain"])
    assert r.returncode == 0 and b"chain done" in r.stdout, (r.returncode, r.stderr)
    assert b"cannot emulate" not in r.stderr, r.stderr
    doc = r.json
    check_view(doc)
    charged, _, count = through(doc, "f2")
    if touch_view():
        # Nothing of jemalloc's is hooked under touch. It keeps no header in its blocks: the blocks'
        # pages are f2's memset's, 2000 blocks of its 10,240-byte size class; its own metadata, written
        # inside its malloc (frames without names: its internal functions are not exported), a few more.
        heap_counters_zero(doc)
        by_memset = sum(s["charged_bytes"] for s in stacks_through(doc, "f2") if "memset" in (functions(s)[0] or ""))
        within_pages("f2's memset (jemalloc)", by_memset, 2000 * 10240, below=1, above=1)
        assert by_memset <= charged <= by_memset + 64 * 4096, (charged, by_memset, excerpt(doc, "f2"))
        return
    assert (charged, count) == (20000000, 2000), excerpt(doc, "f2")
    for s in stacks_through(doc, "f2"):
        assert s["frames"][0]["function"] == "malloc" and "jemalloc" in s["frames"][0]["module"], s["frames"][0]


def test_stop_budget():
    # N malloc/free pairs for two values of N: each extra pair costs exactly 2 stops (a return of
    # glibc's malloc, free's entry) and nothing else: no other stop of any kind.
    check_stop_budget(())


def test_stop_budget_exact_sizes():
    # The same with --exact-sizes: malloc is hooked at its entry too, 3 stops a pair (under touch,
    # where nothing is hooked, the option changes nothing: the same check as without it).
    check_stop_budget(("--exact-sizes",))


def check_stop_budget(options):
    n1, n2 = 2000, 22000
    c1 = launched([target("heap_chain"), "pairs", str(n1)], ptfil_args=("-i", "0", *options))[1]["counters"]
    c2 = launched([target("heap_chain"), "pairs", str(n2)], ptfil_args=("-i", "0", *options))[1]["counters"]
    dn = n2 - n1
    d = {k: c2.get(k, 0) - c1.get(k, 0) for k in set(c1) | set(c2)}
    msg = "counters for N=%d: %s\nfor N=%d: %s" % (n1, c1, n2, c2)
    if touch_view():
        # The touch view's cost follows page faults, not calls: 20,000 more pairs in recycled memory
        # cost no stop, no kernel record of a call, and no fault record either (a few at most).
        for c in (c1, c2):
            assert c["heap.allocs"] == 0 and c["heap.frees"] == 0, msg
            assert c["stops.bp_entry"] == 0 and c["stops.bp_return"] == 0, msg
        assert d["stops.total"] == 0, "ptrace stops depend on N under touch: " + msg
        assert d.get("kernel.records", 0) == 0, msg
        assert abs(d["touch.records"]) <= 8, "fault records depend on N under touch: " + msg
        return
    if kernel_path(c1):
        # The kernel path: 3 records per pair (malloc entry and return, free) and no ptrace stop at all.
        assert kernel_path(c2), msg
        assert d["kernel.records"] == 3 * dn, msg
        # A back-pressure stop is no per-pair cost: the ring filled while ptfil was off its CPU (a loaded
        # machine), and the thread waited for the drain. Each takes a ring's worth of records: a malloc's
        # entry record carries up to 8 KiB of stack, so 22,000 of them fill the 64 MiB ring at most 3 times.
        fills = (n2 + 1) * (8192 + 256) // (60 << 20) + 1
        assert c2["stops.backpressure"] <= fills and c1["stops.backpressure"] <= fills, msg
        assert d["stops.total"] - d["stops.backpressure"] == 0, "ptrace stops depend on N on the kernel path: " + msg
    elif options:
        assert "heap.one_stop_blocks" in c1 and c1["heap.one_stop_blocks"] == 0, msg
        assert d["stops.bp_entry"] + d["stops.bp_return"] == 3 * dn, msg
        assert d["stops.bp_entry"] == 2 * dn and d["stops.bp_return"] == dn, msg
        assert d["stops.total"] == 3 * dn, "stops other than the hooks depend on N: " + msg
    else:
        # glibc's malloc returns only through ret instructions: hooked there, one stop a call.
        assert d["heap.one_stop_blocks"] == dn and d["heap.usable_size_blocks"] == dn, msg
        assert d["stops.bp_entry"] == dn and d["stops.bp_return"] == dn, msg
        assert d["stops.total"] == 2 * dn, "stops other than the hooks depend on N: " + msg
    assert d["heap.allocs"] == dn and d["heap.frees"] == dn, msg
    # Absolute: two stops per allocating call plus one per free, up to STOP_SLACK.
    for c in (c1, c2):
        assert 0 <= stop_excess(c) <= STOP_SLACK, msg
        assert c["heap.allocs"] >= n1 and c["heap.frees"] >= n1, msg
    doc = launched([target("heap_chain"), "chain"], ptfil_args=("-i", "0", *options))[1]
    assert 0 <= stop_excess(doc["counters"]) <= STOP_SLACK, doc["counters"]
    assert doc["counters"]["heap.allocs"] >= 2000 and doc["counters"]["heap.frees"] >= 2000, doc["counters"]


R_LARGE_CHUNK = 1000000 + 16  # realloc_large's mmapped chunk: the block and glibc's header
LARGE_DROP = 8 * MiB + 16  # heap_drop's large block, mmapped: the block and glibc's header

# Live at the peak of `heap_chain realloc`, through each named function (see heap_chain.c), as asked
# for; charged at their usable sizes (realloc_expected) unless --exact-sizes.
REALLOC_EXPECTED = {
    "realloc_inplace": 30000,
    "realloc_moved": 24000,  # plus its blocker's block (realloc_blocker, 4,000), made from it
    "realloc_blocker": 0,
    "realloc_shrink": 16000,
    "realloc_null": 18000,
    "realloc_zero": 0,
    "realloc_large": 1000000,
    "align_posix": 13000,
    "align_aligned": 14336,
    "align_memalign": 15000,
    "align_valloc": 17000,
    "alloc_calloc": 19000,
    "alloc_reallocarray": 22000,
}


def realloc_expected(doc):
    """REALLOC_EXPECTED as doc charges it: the usable sizes of glibc's blocks (realloc_large's a mapping of
    its own), or the sizes asked for."""
    if not usable_sizes(doc):
        return dict(REALLOC_EXPECTED)
    return {fn: 0 if not n else glibc_mmapped_usable(n) if fn == "realloc_large" else glibc_usable(n)
            for fn, n in REALLOC_EXPECTED.items()}


def test_realloc_and_aligned_family():
    with anon_watch() as watch:
        r, doc = launched([target("heap_chain"), "realloc"])
    for flag in (b"shrink_inplace=1", b"moved=1", b"grow_inplace=1"):
        assert flag in r.stdout, "the target did not get the realloc case it needs: %r" % r.stdout
    check_view(doc)
    expected = realloc_expected(doc)
    total = sum(expected.values()) + malloc_bytes(doc, 4000)
    if touch_view():
        # The small blocks share pages: which function first wrote a page decides, not which block lies
        # there. What holds per function: realloc_large's block, a mapping of its own (moved by mremap)
        # is its pages, 1,000,000 bytes and the chunk's 16-byte header; realloc_zero's 50,000 bytes,
        # freed, stay resident (glibc keeps them for the next blocks), charged to it; and the whole
        # scenario made resident its live bytes plus what was freed in it, at page granularity.
        heap_counters_zero(doc)
        check_anon_peak(doc, watch)
        within_pages("realloc_large", through(doc, "realloc_large")[0], R_LARGE_CHUNK, below=0, above=0)
        assert through(doc, "realloc_zero")[0] >= 11 * 4096, excerpt(doc, "realloc_zero")
        freed = 50000 + (40000 - 16000) + 12000
        scenario = charged_through(doc, "run_realloc")
        assert total - 4096 <= scenario <= total + freed + 16 * 4096, "run_realloc %d, live %d, freed %d\n%s" % (
            scenario, total, freed, excerpt(doc, "run_realloc"))
        # The alloc view beside it has the large block's mapping, through realloc_large, all resident.
        within_pages("realloc_large (alloc view)", other_through(doc, "realloc_large"), R_LARGE_CHUNK, below=0,
                     above=0)
        peak = doc["peak"]["charged_bytes"]
        assert total <= peak <= total + 256 * 1024, "peak %d, expected %d plus start-up\n%s" % (peak, total,
                                                                                              excerpt(doc))
        return
    bad = []
    blocker = malloc_bytes(doc, 4000)
    assert usable_sizes(doc), "glibc's blocks not charged at their usable size: %r" % doc["counters"]
    for fn, want in expected.items():
        want += blocker if fn in ("realloc_moved", "realloc_blocker") else 0
        got = through(doc, fn)[0]
        if got != want:
            bad.append("%s: charged %d, expected %d\n%s" % (fn, got, want, excerpt(doc, fn)))
        if want:
            assert_heap_stacks(doc, fn)
    assert not bad, "\n".join(bad)
    # realloc(p, 0) freed the block: nothing of it is live.
    assert through(doc, "realloc_zero")[2] == 0, excerpt(doc, "realloc_zero")
    # One live block per function (the moved and the grown realloc leave one block, not two).
    for fn in ("realloc_inplace", "realloc_blocker", "realloc_shrink", "realloc_null", "realloc_large",
               "align_posix", "align_aligned", "align_memalign", "align_valloc", "alloc_calloc",
               "alloc_reallocarray"):
        assert through(doc, fn)[2] == 1, excerpt(doc, fn)
    # glibc's mremap inside realloc (and its mmap inside malloc) is not charged again.
    assert not [s for s in stacks_through(doc, "realloc_large") if s["kind"] != "heap"], excerpt(doc, "realloc_large")
    peak = doc["peak"]["charged_bytes"]
    assert total <= peak <= total + 256 * 1024, "peak %d, expected %d plus start-up\n%s" % (peak, total, excerpt(doc))


def test_sizes_as_glibc_counts_them():
    # 1,000 malloc and 100 calloc blocks of every size class up to 40,000 bytes, live at once. By
    # default every path charges glibc's blocks at their usable size, which the target sums with
    # malloc_usable_size itself; with --exact-sizes every block at the size asked for.
    for options in ((), ("--exact-sizes",)):
        r, doc = launched([target("heap_chain"), "sizes"], ptfil_args=("-i", "0", *options))
        got = {fn: (int(a), int(u)) for fn, a, u in re.findall(rb"(malloc|calloc) asked=(\d+) usable=(\d+)", r.stdout)}
        (m_asked, m_usable), (c_asked, c_usable) = got[b"malloc"], got[b"calloc"]
        charged, _, count = through(doc, "sized_blocks")
        check_view(doc)
        if touch_view():
            # No block has a size under touch: the heap's pages the 1,100 chunks fill (each block's usable
            # size and its 8-byte header), made resident by sized_blocks's malloc, calloc and memset.
            # (and the pages of run_sizes's static array of 1,100 pointers, which sized_blocks wrote itself).
            heap_counters_zero(doc)
            own = sum(s["charged_bytes"] for s in stacks_through(doc, "sized_blocks")
                      if functions(s)[0] == "sized_blocks")
            within_pages("run_sizes's array", own, 1100 * 8, below=1, above=1)
            within_pages("sized_blocks %s" % (options,), charged - own, m_usable + c_usable + 8 * 1100)
            touch_stacks_ok(doc, "sized_blocks", ("malloc", "calloc", "memset", "__libc_calloc", "sized_blocks"))
            continue
        assert count == 1100, excerpt(doc, "sized_blocks")
        assert_heap_stacks(doc, "sized_blocks", {"malloc", "__libc_malloc", "calloc", "__libc_calloc"})
        c = doc["counters"]
        if options:
            want = {m_asked + c_asked}
            assert c.get("heap.usable_size_blocks", 0) == 0, c
        else:
            want = {m_usable + c_usable}
            assert c["heap.usable_size_blocks"] >= 1100, c
        assert charged in want, "%s: charged %d, expected one of %s (malloc asked %d usable %d, calloc asked %d " \
            "usable %d)\n%s" % (options, charged, sorted(want), m_asked, m_usable, c_asked, c_usable,
                                 excerpt(doc, "sized_blocks"))


def check_calloc_touch(doc, touched):
    """Under touch the calloc'd GiB is charged to touch_tenth, which wrote its pages (all but the first,
    where calloc's mmapped chunk has its header: calloc_big's, with glibc's first tcache page); the
    reservation is the alloc view's mapping, through calloc_big, of 1 GiB with the same pages resident."""
    heap_counters_zero(doc)
    written = through(doc, "touch_tenth")[0]
    assert touched - 4096 <= written <= touched, (written, touched, excerpt(doc, "touch_tenth"))
    assert through(doc, "calloc_big")[0] <= 3 * 4096, excerpt(doc, "calloc_big")
    touch_stacks_ok(doc, "touch_tenth")
    reserved = sum(s["reserved_bytes"] for s in stacks_through(doc, "calloc_big", "other_view_stacks"))
    assert GiB <= reserved <= GiB + 8192, reserved
    check_near("calloc_big (alloc view)", other_through(doc, "calloc_big"), touched, rel=0.01)


def test_calloc_sparse():
    # calloc(1 GiB), every tenth page written: charged by resident pages, reserved in full.
    with anon_watch() as watch:
        r, doc = launched([target("heap_calloc")])
    touched = int(re.search(rb"touched=(\d+)", r.stdout).group(1))
    check_view(doc)
    if touch_view():
        check_calloc_touch(doc, touched)
        check_anon_peak(doc, watch)
        check_near("peak", doc["peak"]["charged_bytes"], touched, rel=0.03)
        assert doc["peak"]["reserved_bytes"] >= GiB, doc["peak"]
        return
    charged, reserved, count = through(doc, "calloc_big")
    check_near("calloc_big charged", charged, touched, rel=0.03)
    assert reserved == (glibc_mmapped_usable(GiB) if usable_sizes(doc) else GiB), excerpt(doc, "calloc_big")
    assert count == 1, excerpt(doc, "calloc_big")
    assert_heap_stacks(doc, "calloc_big", {"calloc", "__libc_calloc"})
    check_near("peak", doc["peak"]["charged_bytes"], touched, rel=0.03)
    assert doc["peak"]["reserved_bytes"] >= GiB, doc["peak"]


def test_large_block_option():
    # With --large-block above 1 GiB the same calloc is a small block: charged at its size.
    r, doc = launched([target("heap_calloc")], ptfil_args=("-i", "0", "--large-block", str(2 * GiB)))
    check_view(doc)
    if touch_view():
        # --large-block says how the alloc view charges a block; the touch view charges pages, the same.
        check_calloc_touch(doc, int(re.search(rb"touched=(\d+)", r.stdout).group(1)))
        return
    charged, reserved, count = through(doc, "calloc_big")
    size = glibc_mmapped_usable(GiB) if usable_sizes(doc) else GiB
    assert (charged, reserved, count) == (size, size, 1), excerpt(doc, "calloc_big")


def test_first_peak_kept():
    # 100,000 x 200 bytes, half freed, then 8 MiB written: 18.4 MB < 20 MB, the first peak stays.
    with anon_watch() as watch:
        r, doc = launched([target("heap_drop")])
    assert b"done" in r.stdout
    check_view(doc)
    if touch_view():
        # Freeing every other 200-byte block gives no page back (each page still holds live blocks):
        # resident memory only grows, and the peak is the later one, with the 8 MiB block: drop_small's
        # 100,000 chunks of 208 bytes, drop_large's 8 MiB, and main's own array of 100,000 pointers
        # (in .bss, which main wrote: the touch view charges it, the alloc view does not).
        heap_counters_zero(doc)
        check_anon_peak(doc, watch)
        small = through(doc, "drop_small")[0]
        within_pages("drop_small", small, 100000 * chunk(200))
        within_pages("drop_large", through(doc, "drop_large")[0], LARGE_DROP, below=0, above=1)
        array = sum(s["charged_bytes"] for s in doc["stacks"] if functions(s)[:1] == ["main"])
        within_pages("main's array of pointers", array, 100000 * 8, below=1, above=1)
        check_near("peak: the later plateau", doc["peak"]["charged_bytes"], small + LARGE_DROP + array, rel=0.01)
        return
    check_near("peak", doc["peak"]["charged_bytes"], 20000000, rel=0.01)
    charged, _, count = through(doc, "drop_small")
    assert (charged, count) == (malloc_bytes(doc, 200, 100000), 100000), excerpt(doc, "drop_small")
    assert through(doc, "drop_large")[0] == 0, "the later, lower plateau was reported\n" + excerpt(doc)
    assert_heap_stacks(doc, "drop_small", {"malloc", "__libc_malloc"})


def test_threads_checkpoint_exact():
    # 4 threads x 250,000 pairs; at the checkpoint 5,000 blocks, 4,500,000 bytes are held.
    with anon_watch() as watch:
        r, doc = launched([target("heap_threads")], timeout=540)
    assert b"done" in r.stdout
    check_view(doc)
    charged, _, count = through(doc, "hold_blocks")
    if touch_view():
        # Each thread's blocks fill pages of its own arena: the pages of 500 * (i+1) chunks of
        # 300 * (i+1) bytes each, held at the peak; the pairs recycle one chunk's memory and make
        # resident a page or two per thread at most. Not one malloc-family call stopped.
        heap_counters_zero(doc)
        check_anon_peak(doc, watch)
        # (hold_blocks also wrote the arrays of pointers to them, 5,000 pointers in all).
        own = sum(s["charged_bytes"] for s in stacks_through(doc, "hold_blocks") if functions(s)[0] == "hold_blocks")
        within_pages("hold_blocks's arrays of pointers", own, 5000 * 8, below=1, above=4)
        within_pages("hold_blocks", charged - own, sum(500 * (i + 1) * chunk(300 * (i + 1)) for i in range(4)),
                     below=4, above=8)
        assert through(doc, "pairs")[0] <= 4 * 2 * 4096, excerpt(doc, "pairs")
        touch_stacks_ok(doc, "hold_blocks")
        assert all("main" not in own_functions(s) and "pthread_create" in starter_functions(s)
                   for s in stacks_through(doc, "hold_blocks")), excerpt(doc, "hold_blocks")
        return
    held = sum(malloc_bytes(doc, 300 * (i + 1), 500 * (i + 1)) for i in range(4))  # 4,500,000 asked for
    assert (charged, count) == (held, 5000), excerpt(doc, "hold_blocks")
    assert through(doc, "thread_main")[0] == held, excerpt(doc, "thread_main")
    assert through(doc, "pairs")[0] == 0, "a pair's block is live at the peak\n" + excerpt(doc, "pairs")
    assert_heap_stacks(doc, "hold_blocks", {"malloc", "__libc_malloc"})
    assert all("main" not in own_functions(s) and "pthread_create" in starter_functions(s)
               for s in stacks_through(doc, "hold_blocks")), excerpt(doc, "hold_blocks")
    # No hit missed or doubled: 1,000,000 pair mallocs + 5,000 held, and as many frees, plus the
    # few made by libc and pthread_create (at most 100). At thread exit glibc frees what each
    # thread's tcache still caches (blocks already freed, so unknown to ptfil) and the tcache
    # itself: those are real calls of free, at most 7 blocks x 64 bins + 1 per thread.
    c = doc["counters"]
    unknown = c.get("heap.unknown_frees", 0)
    assert 1005000 <= c["heap.allocs"] <= 1005100, c
    assert 1005000 <= c["heap.frees"] - unknown <= 1005100, c
    assert c["heap.frees"] <= 1005100 + 4 * (7 * 64 + 1), c
    assert 0 <= stop_excess(c) <= STOP_SLACK, c


def test_shared_library_ctor_and_dlopen():
    # libheapctor.so's constructor allocates before main; libheapdl.so is dlopened, then allocates.
    r, doc = launched([target("heap_dso"), os.path.join(TARGETS, "libheapdl.so")])
    assert b"done" in r.stdout
    check_view(doc)
    charged, _, count = through(doc, "ctor_alloc")
    if touch_view():
        # The pages of 300 and 200 chunks of 10,016 bytes, written by each library's malloc and memset.
        heap_counters_zero(doc)
        within_pages("ctor_alloc", charged, 300 * chunk(10000))
        within_pages("dl_alloc", through(doc, "dl_alloc")[0], 200 * chunk(10000))
    else:
        assert (charged, count) == (malloc_bytes(doc, 10000, 300), 300), excerpt(doc, "ctor_alloc")
        charged, _, count = through(doc, "dl_alloc")
        assert (charged, count) == (malloc_bytes(doc, 10000, 200), 200), excerpt(doc, "dl_alloc")
    for fn, lib in (("ctor_alloc", "libheapctor.so"), ("dl_alloc", "libheapdl.so")):
        if touch_view():
            touch_stacks_ok(doc, fn, ("malloc", "memset"))
        else:
            assert_heap_stacks(doc, fn, {"malloc", "__libc_malloc"})
        for s in stacks_through(doc, fn):
            frame = s["frames"][functions(s).index(fn)]
            assert (frame["module"] or "").endswith("/" + lib), frame
    # The constructor ran before main: its stacks do not pass through main.
    assert all("main" not in functions(s) for s in stacks_through(doc, "ctor_alloc")), excerpt(doc, "ctor_alloc")
    assert all("heapdl_hold" in functions(s) for s in stacks_through(doc, "dl_alloc")), excerpt(doc, "dl_alloc")
    check_near("peak", doc["peak"]["charged_bytes"], 5000000, rel=0.03)
    if touch_view():
        # Nothing to hook in a new library under touch: no stop at the dynamic linker's hook, yet the
        # dlopened library's frames are named (its module found when the snapshot was written).
        assert doc["counters"]["stops.dl_debug"] == 0, doc["counters"]
        return
    # The dlopen reported itself through the dynamic linker's hook.
    base = launched([target("heap_chain"), "chain"])[1]["counters"]["stops.dl_debug"]
    assert doc["counters"]["stops.dl_debug"] > base >= 1, (doc["counters"]["stops.dl_debug"], base)


def hwm_growth(work, base):
    """Growth of the charged peak and of VmHWM from a baseline run to a workload run.

    Both numbers come from the same two traced runs: peak.charged_bytes and
    process.vmhwm_bytes (the process's own VmHWM, read by ptfil at exit) of each
    snapshot. Subtracting the baseline removes what both runs share and ptfil does not
    charge by design (file-backed code and data pages, which VmHWM counts).
    """
    charged = work["peak"]["charged_bytes"] - base["peak"]["charged_bytes"]
    hwm = work["process"]["vmhwm_bytes"] - base["process"]["vmhwm_bytes"]
    return charged, hwm


def test_cxx_new_delete():
    with anon_watch() as watch:
        r, doc = launched([target("heap_cxx")])
    assert b"done" in r.stdout
    check_view(doc)
    base = launched([target("heap_cxx"), "baseline"])[1]
    charged, _, count = through(doc, "build_nodes")
    if touch_view():
        # 50,000 nodes of 128 bytes (chunks of 144) made resident under build_nodes (by operator new's
        # malloc, writing each chunk's header first, or by the constructor), and the vector's
        # 8,000,000 bytes, a mapping of its own, under fill_vector.
        heap_counters_zero(doc)
        check_anon_peak(doc, watch)
        within_pages("build_nodes", charged, 50000 * chunk(128), below=1, above=2)
        vector = through(doc, "fill_vector")[0]
        within_pages("fill_vector", vector, 8000000 + 16, below=0, above=1)
        touch_stacks_ok(doc, "build_nodes")
        touch_stacks_ok(doc, "fill_vector")
        charged_growth, hwm = hwm_growth(doc, base)
        check_near("peak over the baseline run", charged_growth, charged + vector, rel=0.01)
        assert abs(charged_growth - hwm) <= 0.10 * hwm, (charged_growth, hwm)
        return
    assert (charged, count) == (malloc_bytes(doc, 128, 50000), 50000), excerpt(doc, "build_nodes")
    charged, _, count = through(doc, "fill_vector")
    vector = charged
    if usable_sizes(doc):
        # A large block, charged by its resident pages: at its usable size, it ends where its
        # chunk (the vector's 8,000,000 bytes, all written, and glibc's 16-byte header) ends.
        assert count == 1 and 8000000 <= charged < 8000000 + 4096, excerpt(doc, "fill_vector")
    else:
        assert (charged, count) == (8000000, 1), excerpt(doc, "fill_vector")
    for fn in ("build_nodes", "fill_vector"):
        assert_heap_stacks(doc, fn, {"malloc", "__libc_malloc"})
        for s in stacks_through(doc, fn):
            f = functions(s)
            between = f[1:f.index(fn)]
            assert any(x and (x.startswith("_Znw") or x.startswith("operator new")) for x in between), f
    charged, hwm = hwm_growth(doc, base)
    # 14,400,000 bytes asked for (a little more at usable sizes).
    check_near("peak over the baseline run", charged, malloc_bytes(doc, 128, 50000) + vector, rel=0.01)
    assert abs(doc["peak"]["charged_bytes"] - hwm) <= 0.10 * hwm, (
        "peak %d, VmHWM growth %d (VmHWM %d, baseline %d)" % (
            doc["peak"]["charged_bytes"], hwm, doc["process"]["vmhwm_bytes"], base["process"]["vmhwm_bytes"]))
    assert abs(charged - hwm) <= 0.10 * hwm, (charged, hwm)


def arena_stacks(doc, interpreter, key="stacks"):
    """CPython's arenas: anonymous mappings of 1 MiB (ARENA_SIZE) each, made by the interpreter
    itself (malloc's own mappings are inside a hooked call and not charged again). With symbols
    their stacks pass through _PyObject_ArenaMmap and new_arena; Debian's python3 has none for
    these static functions, so they are recognised by the module of the frame that called mmap
    and by their size (the interpreter's other direct mappings, its 16 KiB frame-stack chunks,
    are not arenas)."""
    out = []
    for s in doc[key]:
        f = functions(s)
        if s["kind"] != "mmap" or len(f) < 2 or "mmap" not in (f[0] or "") or s["reserved_bytes"] != s["count"] * MiB:
            continue
        # The frame that called mmap: the second with an address of its own (libc's mmap wrapper has
        # its own inlined call, __GI___mmap64, when libc's debug information is installed).
        called = [fr for fr in s["frames"] if not fr.get("inlined")]
        if "new_arena" in f or os.path.realpath(called[1]["module"] or "") == interpreter:
            out.append(s)
    return out


def test_python_list():
    # The peak charged for pylist.py over `python3 -c pass` against the growth of VmHWM over the
    # bare interpreter's (both measured on the same two traced runs: see hwm_growth).
    script = os.path.join(SRCDIR, "tests", "targets", "pylist.py")
    with anon_watch() as watch:
        r, doc = launched([PYTHON, script], timeout=300)
    assert b"built 1000000" in r.stdout, r.stdout
    check_view(doc)
    base = launched([PYTHON, "-c", "pass"])[1]
    charged, hwm = hwm_growth(doc, base)
    print("python: peak %d, baseline peak %d, growth %d; VmHWM %d, baseline %d, growth %d" % (
        doc["peak"]["charged_bytes"], base["peak"]["charged_bytes"], charged, doc["process"]["vmhwm_bytes"],
        base["process"]["vmhwm_bytes"], hwm))
    assert abs(charged - hwm) <= 0.10 * hwm, "charged growth %d, VmHWM growth %d\n%s" % (charged, hwm, excerpt(doc))
    interpreter = os.path.realpath(PYTHON)
    if touch_view():
        # Under touch a Python program is charged with its Python frames (read by the kernel at each
        # fault), its total still its RssAnon; the arenas are mappings, in the alloc view beside it,
        # resident as the objects written in them.
        heap_counters_zero(doc)
        check_anon_peak(doc, watch)
        for s in doc["stacks"]:
            assert s["kind"] == "touch", s
        mine = sum(s["charged_bytes"] for s in doc["stacks"]
                   if any(f["kind"] == "python" and f["file"] == script for f in s["frames"]))
        assert mine >= 0.85 * charged, "%d bytes under pylist.py's lines, of %d\n%s" % (mine, charged, excerpt(doc))
        arenas = arena_stacks(doc, interpreter, "other_view_stacks")
        assert sum(s["count"] for s in arenas) >= 122, "%d arenas of 1 MiB in the alloc view" % sum(
            s["count"] for s in arenas)
        check_near("arena charge (alloc view)", sum(s["charged_bytes"] for s in arenas), 128000000, rel=0.10)
        # 1,000,000 tuples and 2,000,000 ints, written by the functions that make them.
        made = charged_through(doc, "PyTuple_New") + charged_through(doc, "PyLong_FromLong") + \
            charged_through(doc, "_PyLong_FromLong") + charged_through(doc, "PyObject_Malloc")
        assert made >= 0.85 * charged, (made, charged, excerpt(doc))
        return
    arenas = arena_stacks(doc, interpreter)
    a_charged = sum(s["charged_bytes"] for s in arenas)
    a_count = sum(s["count"] for s in arenas)
    assert a_count >= 122, "%d arenas of 1 MiB, expected 128 MB of objects in them\n%s" % (a_count, excerpt(doc))
    # 1,000,000 tuples (64 bytes) and 2,000,000 ints (32 bytes) live in the arenas.
    check_near("arena charge", a_charged, 128000000, rel=0.10)
    assert a_charged >= 0.85 * charged, (a_charged, charged, excerpt(doc))


if __name__ == "__main__":
    main([test_chain_peak_and_attribution, test_preloaded_jemalloc, test_stop_budget, test_stop_budget_exact_sizes,
          test_sizes_as_glibc_counts_them, test_realloc_and_aligned_family, test_calloc_sparse,
          test_large_block_option, test_first_peak_kept, test_threads_checkpoint_exact,
          test_shared_library_ctor_and_dlopen, test_cxx_new_delete, test_python_list])
