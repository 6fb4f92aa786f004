"""Mapping operations followed exactly: partial munmap, mremap grow/move/shrink, madvise, merged VMAs,
read-only memory, shared anonymous memory, brk. Each target scenario is built to a known peak."""
import os
import platform
import pwd
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import PTFIL, MiB, Skip, charged_through, check_near, functions, launch, launched, main, missing, reserved_through, \
    run_ptfil, stacks_through, target, view_json, workdir


def scenario(mode):
    """ptfil launch -- mapops MODE, which must run to its end: (the Run, its snapshot's JSON)."""
    r, doc = launched([target("mapops"), mode])
    assert ("%s done" % mode).encode() in r.stdout, r.stdout
    return r, doc


def test_partial_munmap():
    # 10 MiB written, its middle 4 MiB unmapped, then 8 MiB more: 14 MiB, not 18.
    _, doc = scenario("partial")
    check_near("peak", doc["peak"]["charged_bytes"], 14 * MiB)
    check_near("partial_map", charged_through(doc, "partial_map"), 6 * MiB)
    assert reserved_through(doc, "partial_map") == 6 * MiB
    assert sum(s["count"] for s in stacks_through(doc, "partial_map")) == 2, "the cut mapping is two pieces"
    check_near("partial_more", charged_through(doc, "partial_more"), 8 * MiB)


def test_failed_munmap_keeps_the_memory():
    # munmap is taken as done at its entry when it cannot fail; these three fail and change nothing.
    r, doc = scenario("badunmap")
    assert b"einval=3" in r.stdout, r.stdout
    check_near("peak", doc["peak"]["charged_bytes"], 14 * MiB)
    check_near("bad_map", charged_through(doc, "bad_map"), 10 * MiB)
    check_near("bad_more", charged_through(doc, "bad_more"), 4 * MiB)


def test_mremap_grow_move_shrink():
    # 4 MiB grown to 16 and written, moved, shrunk to 2, then 10 MiB more: the peak is 16.
    _, doc = scenario("mremap")
    check_near("peak", doc["peak"]["charged_bytes"], 16 * MiB)
    check_near("mremap_first", charged_through(doc, "mremap_first"), 4 * MiB)
    check_near("mremap_grow", charged_through(doc, "mremap_grow"), 12 * MiB)
    assert charged_through(doc, "mremap_after") < 1 * MiB


def test_madvise_dontneed_between_peaks():
    # 30 MiB written, dropped, 20 MiB written again: the first, higher peak is the one reported.
    _, doc = scenario("madvise")
    check_near("peak", doc["peak"]["charged_bytes"], 30 * MiB)
    check_near("madvise_map", charged_through(doc, "madvise_map"), 30 * MiB)


def test_merged_mappings_charged_separately():
    r, doc = scenario("merge")
    assert b"merged=1" in r.stdout, "the kernel did not merge the two mappings; the test proves nothing"
    check_near("merge_a", charged_through(doc, "merge_a"), 6 * MiB)
    check_near("merge_b", charged_through(doc, "merge_b"), 2 * MiB)
    assert reserved_through(doc, "merge_a") == 8 * MiB
    assert reserved_through(doc, "merge_b") == 8 * MiB


def test_read_only_memory():
    # Reads of untouched memory map the shared zero page: not memory the process uses. Some
    # kernels (pvm_no_zero_page) have no zero page and allocate real pages: then they are charged
    # as the kernel counts them. The target reports which, from its own RssAnon.
    r, doc = scenario("zeropage")
    read_resident = int(re.search(rb"read_resident=(-?\d+)", r.stdout).group(1))
    if read_resident < 1 * MiB:
        assert charged_through(doc, "zero_map") == 0, charged_through(doc, "zero_map")
    else:
        print("note: this kernel has no shared zero page; reads made %d MiB resident" % (read_resident // MiB))
        check_near("zero_map", charged_through(doc, "zero_map"), read_resident, slack=256 * 1024)
    assert reserved_through(doc, "zero_map") == 40 * MiB
    check_near("zero_written", charged_through(doc, "zero_written"), 4 * MiB)


def zero_page_for_root_and_user(plain):
    """The zero-page scenario run by root and by a user who is not root (nobody, through setpriv):
    both are charged the same, the 40 MiB only read (the shared zero page) not at all. The alloc view
    on the ptrace path: the one nobody may use (the kernel path and the touch view need CAP_BPF and
    CAP_PERFMON). plain: pagemap as a kernel before 6.7 has it (PTFIL_PAGEMAP=plain: no PAGEMAP_SCAN),
    where such a user sees no frame numbers and so cannot tell the zero page apart page by page."""
    if os.geteuid() != 0:
        raise Skip("running the program as another user needs root")
    if not shutil.which("setpriv"):
        raise missing("no setpriv (util-linux) to run ptfil as another user")
    release = tuple(int(x) for x in re.findall(r"\d+", platform.release())[:2])
    if not plain and release < (6, 7):
        raise Skip("Linux %s has no PAGEMAP_SCAN: test_zero_page_capped_without_pagemap_scan covers it" %
                   platform.release())
    nobody = pwd.getpwnam("nobody")
    d = workdir()
    env = dict(os.environ, PTFIL_PAGEMAP="plain") if plain else None
    try:
        # nobody may not enter the build directory (a clone under /root): ptfil and the target are
        # copied into a directory it owns, where the snapshots go too.
        os.chown(d, nobody.pw_uid, nobody.pw_gid)
        os.chmod(d, 0o755)
        for f in (PTFIL, target("mapops")):
            shutil.copy(f, d)
        as_nobody = ["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid, "--clear-groups"]
        docs = {}
        for who, prefix in (("root", ()), ("nobody", as_nobody)):
            snap = os.path.join(d, who + ".gz")
            rc, out, err = run_ptfil(["launch", "-q", "-i", "0", "--charge=alloc", "--heap-events=ptrace", "-o", snap, "--",
                                      "./mapops", "zeropage"], prefix=prefix, cwd=d, env=env)
            assert rc == 0 and b"zeropage done" in out, (who, rc, out, err)
            if plain and who == "nobody":
                # The warning says what the charge is then: capped by smaps Rss, not "only read is charged".
                assert "zero page" in err and "smaps Rss" in err, (who, err)
            else:
                assert "zero page" not in err, (who, err)
            read_resident = int(re.search(rb"read_resident=(-?\d+)", out).group(1))
            if read_resident >= 1 * MiB:
                raise Skip("this kernel has no shared zero page: reads made %d MiB resident" % (read_resident // MiB))
            docs[who] = view_json(snap)
        for who, doc in docs.items():
            assert charged_through(doc, "zero_map") == 0, (who, charged_through(doc, "zero_map"))
            assert reserved_through(doc, "zero_map") == 40 * MiB, who
            check_near(who + " zero_written", charged_through(doc, "zero_written"), 4 * MiB)
        # The same peak to the page: the program is deterministic, and only who runs ptfil differs.
        peaks = {who: doc["peak"]["charged_bytes"] for who, doc in docs.items()}
        assert abs(peaks["root"] - peaks["nobody"]) <= 64 * 1024, peaks
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_zero_page_same_for_root_and_user():
    """PAGEMAP_SCAN's zero-page flag (Linux 6.7+, no privilege needed) tells the zero page apart."""
    zero_page_for_root_and_user(plain=False)


def test_zero_page_capped_without_pagemap_scan():
    """Without PAGEMAP_SCAN, as a user who is not root: a page not the process's alone (the zero page,
    or one shared with a parent or child) is charged only within what smaps counts of its mapping
    beyond the mapping's exclusive pages. (Here the 40 MiB read and the 4 MiB written are adjacent
    anonymous mappings, which the kernel merges into one: a cap by the mapping's Rss alone would
    charge zero_map the 4 MiB written.)"""
    zero_page_for_root_and_user(plain=True)


def test_shared_anonymous():
    _, doc = scenario("shared")
    check_near("shared_map", charged_through(doc, "shared_map"), 12 * MiB)


def test_brk_heap():
    _, doc = scenario("brk")
    check_near("peak", doc["peak"]["charged_bytes"], 24 * MiB)
    stacks = stacks_through(doc, "brk_grow")
    check_near("brk_grow", sum(s["charged_bytes"] for s in stacks), 24 * MiB)
    assert all(s["kind"] == "brk" for s in stacks), stacks


def test_file_mappings_not_charged():
    # The program's own code and libraries are file-backed: nothing in the report comes from them.
    _, doc = scenario("shared")
    assert all(s["kind"] in ("mmap", "brk", "pseudo") for s in doc["stacks"])
    # Everything live at the end is anonymous memory the program or its loader made.
    check_near("peak", doc["peak"]["charged_bytes"], 12 * MiB)


def test_static_program_runs_mappings_only():
    # No dynamic linker, so no malloc-family hooks: the program runs as it would, its mappings charged.
    r = launch([target("mapops_static"), "partial"])
    assert r.returncode == 0 and b"partial done" in r.stdout, (r.returncode, r.stderr)
    doc = r.json
    check_near("peak", doc["peak"]["charged_bytes"], 14 * MiB)
    check_near("partial_more", charged_through(doc, "partial_more"), 8 * MiB)
    assert doc["counters"]["stops.bp_entry"] == 0


def test_static_program_unwound_from_its_eh_frame():
    # gcc -static links no .eh_frame_hdr, and mapops_static keeps no frame pointers: its stacks come from
    # its own .eh_frame, each mapping under the chain of functions the target was written with.
    import subprocess
    headers = subprocess.run(["readelf", "-lW", target("mapops_static")], capture_output=True, timeout=30).stdout
    assert b"GNU_EH_FRAME" not in headers, "mapops_static has an .eh_frame_hdr: this test no longer proves anything"
    r = launch([target("mapops_static"), "partial"])
    assert r.returncode == 0 and b"partial done" in r.stdout, (r.returncode, r.stderr)
    doc = r.json
    for fn in ("partial_map", "partial_more"):
        stacks = stacks_through(doc, fn)
        assert stacks, [functions(s) for s in doc["stacks"]]
        for s in stacks:
            f = functions(s)
            at = f.index(fn)
            assert "mmap" in (f[0] or ""), f
            assert f[at - 1] == "map_anon" and f[at + 1:at + 3] == ["partial", "main"], f
    check_near("partial_map", charged_through(doc, "partial_map"), 6 * MiB)


if __name__ == "__main__":
    main([test_partial_munmap, test_failed_munmap_keeps_the_memory, test_mremap_grow_move_shrink, test_madvise_dontneed_between_peaks,
          test_merged_mappings_charged_separately, test_read_only_memory, test_zero_page_same_for_root_and_user,
          test_zero_page_capped_without_pagemap_scan,
          test_shared_anonymous, test_brk_heap,
          test_file_mappings_not_charged, test_static_program_runs_mappings_only,
          test_static_program_unwound_from_its_eh_frame])
