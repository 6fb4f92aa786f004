"""Native frames named by source file and line, inlined calls as frames of their own, wherever the
debug information is: in the program, in a separate debug file found by .gnu_debuglink or by build id
under a debug directory (PTFIL_DEBUG_DIRS), on a debuginfod server (a real one, Debian's `debuginfod`,
started here on a loopback port), in MiniDebugInfo (names, no lines), or in libc6-dbg for libc.

`inlined` and `inlined_cxx` are built as release builds are (-O2 -g): make_table's 48 MiB block is
allocated by fill_rows, inlined into it; load_samples reserves a std::vector whose allocation runs
through the standard library's templates, all inlined into it.
"""
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, SRCDIR, bare, check_near, launch, main, target, view, workdir

INLINED = target("inlined")
INLINED_CXX = target("inlined_cxx")


def marker_line(source, marker):
    """The line number of the line of tests/targets/SOURCE that holds MARKER (a comment)."""
    with open(os.path.join(SRCDIR, "tests", "targets", source)) as f:
        for n, line in enumerate(f, 1):
            if marker in line:
                return n
    raise AssertionError("no %s in %s" % (marker, source))


def biggest(doc):
    return max(doc["stacks"], key=lambda s: s["charged_bytes"])


def frame_named(stack, name):
    for f in stack["frames"]:
        if f.get("function") and (f["function"] == name or f["function"].startswith(name + "(")):
            return f
    raise AssertionError("no frame %s in %s" % (name, [f.get("function") for f in stack["frames"]]))


def run_inlined(argv=None, env=None, ptfil_args=("-i", "0")):
    """Profiles the inlined target (or a copy of it): the run, and its largest stack (the 48 MiB table)."""
    argv = argv or [INLINED]
    want = bare(argv)
    r = launch(argv, env=env, ptfil_args=ptfil_args)
    assert r.returncode == want.returncode == 0, (r.returncode, r.stderr.decode())
    assert r.stdout == want.stdout, (r.stdout, want.stdout)
    top = biggest(r.json)
    check_near("the table", top["charged_bytes"], 48 * MiB, rel=0.01)
    return r, top


def check_inlined_lines(top):
    """The table's stack names fill_rows (inlined) at the malloc line, make_table at the call, main at its call."""
    fill = frame_named(top, "fill_rows")
    make = frame_named(top, "make_table")
    mainf = frame_named(top, "main")
    assert fill["inlined"] is True and make["inlined"] is False and mainf["inlined"] is False, top["frames"]
    for f in (fill, make, mainf):
        assert f["file"] and f["file"].endswith("tests/targets/inlined.c"), f
    assert fill["line"] == marker_line("inlined.c", "LINE_MALLOC"), fill
    assert make["line"] == marker_line("inlined.c", "LINE_CALL"), make
    assert mainf["line"] == marker_line("inlined.c", "LINE_MAIN"), mainf
    names = [f.get("function") for f in top["frames"]]
    # Innermost first: the inlined call comes right before the frame it was inlined into.
    assert names.index("fill_rows") + 1 == names.index("make_table"), names
    assert fill["offset"] == make["offset"] and fill["module"] == make["module"], (fill, make)


def test_inlined_call_and_caller_with_lines():
    r, top = run_inlined()
    check_inlined_lines(top)
    # The text report shows them as a reader expects: function (file:line), the inlined one marked.
    text = view(r.snapshot, timeout=60).stdout.decode()
    line = marker_line("inlined.c", "LINE_MALLOC")
    # The stack's frame lines (not the "your code:" head or "your lines", which name it too).
    shown = [l for l in text.splitlines() if re.match(r"\s+(\u2192 )?fill_rows \(", l) and "inlined.c:%d" % line in l]
    assert shown and "inlined" in shown[0].split(")")[-1], text


def test_cxx_templates_inlined_into_the_caller():
    want = bare([INLINED_CXX])
    r = launch([INLINED_CXX])
    assert r.returncode == 0 and r.stdout == want.stdout, (r.returncode, r.stderr.decode())
    top = biggest(r.json)
    check_near("the vector", top["charged_bytes"], 32000000, rel=0.01)
    load = frame_named(top, "load_samples")
    assert load["inlined"] is False and load["file"].endswith("inlined_cxx.cc"), load
    assert load["line"] == marker_line("inlined_cxx.cc", "LINE_RESERVE"), load
    frames = top["frames"]
    at = frames.index(load)
    inlined = [f for f in frames[:at] if f.get("inlined")]
    # std::vector<double>::reserve and the allocator calls under it, each at a line of the C++ headers.
    assert any(f["function"].startswith("std::vector<double") and "reserve" in f["function"] for f in inlined), \
        [f.get("function") for f in frames[:at]]
    for f in inlined:
        assert f["file"].startswith("/usr/include/c++/") and f["line"] > 0, f
    assert frame_named(top, "main")["line"] == marker_line("inlined_cxx.cc", "LINE_MAIN")


def libc_debug_installed():
    out = subprocess.run(["readelf", "-n", "/lib/x86_64-linux-gnu/libc.so.6"], capture_output=True, text=True).stdout
    bid = [l.split()[-1] for l in out.splitlines() if "Build ID" in l][0]
    return os.path.exists("/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:]))


def test_libc_named_from_libc6_dbg():
    """libc6-dbg (tools/install-deps.sh installs it) puts libc's DWARF under /usr/lib/debug/.build-id."""
    assert libc_debug_installed(), "libc6-dbg is not installed: run tools/install-deps.sh"
    r, top = run_inlined()
    m = frame_named(top, "malloc")
    assert m["module"].endswith("libc.so.6") and m["file"] == "malloc/malloc.c" and m["line"] > 0, m
    start = frame_named(top, "__libc_start_main")
    assert start["file"] and start["line"] > 0, start


def split_copy(d, debuglink=True, mini=False):
    """A stripped copy of the inlined target in d, its DWARF and symbols in d/inlined.debug."""
    exe, dbg = os.path.join(d, "inlined"), os.path.join(d, "inlined.debug")
    shutil.copy(INLINED, exe)
    subprocess.run(["objcopy", "--only-keep-debug", exe, dbg], check=True)
    subprocess.run(["strip", "--strip-all", exe], check=True)
    if debuglink:
        subprocess.run(["objcopy", "--add-gnu-debuglink=" + dbg, exe], check=True, cwd=d)
    return exe, dbg


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    return [l.split()[-1] for l in out.splitlines() if "Build ID" in l][0]


def empty_debug_dirs(d):
    """An environment whose debug directory is an empty one: only what the test sets up is found."""
    empty = os.path.join(d, "no-debug")
    os.makedirs(empty, exist_ok=True)
    env = dict(os.environ, PTFIL_DEBUG_DIRS=empty)
    env.pop("DEBUGINFOD_URLS", None)
    return env


def test_stripped_without_debug_info_says_what_is_missing():
    d = workdir()
    exe, dbg = split_copy(d, debuglink=False)
    os.unlink(dbg)
    r, top = run_inlined([exe], env=empty_debug_dirs(d))
    names = [f.get("function") for f in top["frames"]]
    assert "make_table" not in names and "fill_rows" not in names, names
    # Its frames read module + offset, and the report says which module had no symbols and what gives them.
    own = [f for f in top["frames"] if f["module"] == exe]
    assert own and all(f.get("function") is None and not f.get("file") for f in own), own
    text = view(r.snapshot, timeout=60).stdout.decode()
    assert "inlined + 0x" in text, text
    assert "?? " not in text, text
    miss = [l for l in text.splitlines() if l.startswith("symbols  no symbols in ") and "inlined" in l]
    assert miss and "DEBUGINFOD_URLS" in text, text
    # JSON says the same, for a program to act on.
    missing = {m["module"]: m for m in r.json["debug_info_missing"]}
    assert missing[exe]["symbols"] == "none" and missing[exe]["lines"] is False, missing


def test_split_debug_found_by_debuglink():
    d = workdir()
    exe, _ = split_copy(d)
    r, top = run_inlined([exe], env=empty_debug_dirs(d))
    check_inlined_lines(top)


def test_split_debug_found_by_build_id_under_a_debug_dir():
    d = workdir()
    exe, dbg = split_copy(d, debuglink=False)
    root = os.path.join(d, "debugroot")
    bid = build_id(exe)
    os.makedirs(os.path.join(root, ".build-id", bid[:2]))
    os.rename(dbg, os.path.join(root, ".build-id", bid[:2], bid[2:] + ".debug"))
    env = empty_debug_dirs(d)
    env["PTFIL_DEBUG_DIRS"] = env["PTFIL_DEBUG_DIRS"] + ":" + root
    r, top = run_inlined([exe], env=env)
    check_inlined_lines(top)


def test_debuglink_to_another_build_is_not_used():
    """A debug file beside the program from another build (another build id) must not name its frames."""
    d = workdir()
    exe, dbg = split_copy(d)
    other = os.path.join(d, "other")
    os.makedirs(other)
    # The heap_cxx target's debug information under the name the link asks for.
    subprocess.run(["objcopy", "--only-keep-debug", target("heap_cxx"), dbg], check=True)
    r, top = run_inlined([exe], env=empty_debug_dirs(d))
    names = [f.get("function") for f in top["frames"]]
    assert "make_table" not in names and "build_nodes" not in names, names


def test_minidebuginfo_gives_names_without_lines():
    """A .gnu_debugdata section (xz-compressed symbol table, as Fedora ships) names static functions."""
    d = workdir()
    exe, dbg = split_copy(d, debuglink=False)
    mini = os.path.join(d, "mini")
    syms = os.path.join(d, "keep")
    with open(syms, "w") as f:
        f.write("make_table\nmain\n")
    subprocess.run(["objcopy", "-S", "--remove-section", ".gdb_index", "--remove-section", ".comment",
                    "--keep-symbols=" + syms, dbg, mini], check=True)
    subprocess.run(["xz", "-f", mini], check=True)
    subprocess.run(["objcopy", "--add-section", ".gnu_debugdata=" + mini + ".xz", exe], check=True)
    os.unlink(dbg)
    r, top = run_inlined([exe], env=empty_debug_dirs(d))
    make = frame_named(top, "make_table")
    assert make["module"] == exe and not make.get("file") and not make.get("line"), make
    assert not any(f.get("inlined") for f in top["frames"]), top["frames"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Debuginfod:
    """Debian's debuginfod serving the ELF and debug files under a directory, on a loopback port."""

    def __init__(self, d, files_dir):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(d, "debuginfod.log"), "w")
        self.proc = subprocess.Popen(["debuginfod", "-d", os.path.join(d, "db.sqlite"), "-p", str(self.port),
                                      "-F", files_dir, "-t", "1", "-g", "0"],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_for(self, bid, timeout=60):
        """Until the server serves bid's debug file (it scans its directory in the background)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.proc.poll() is None, "debuginfod exited: see %s" % self.log.name
            try:
                with urllib.request.urlopen("%s/buildid/%s/debuginfo" % (self.url, bid), timeout=5) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError("debuginfod did not serve %s within %ss" % (bid, timeout))

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def test_debuginfod_names_a_stripped_program():
    if not shutil.which("debuginfod"):
        raise AssertionError("debuginfod is not installed: run tools/install-deps.sh")
    d = workdir()
    served = os.path.join(d, "served")
    os.makedirs(served)
    exe, dbg = split_copy(d, debuglink=False)
    os.rename(dbg, os.path.join(served, "inlined.debug"))
    server = Debuginfod(d, served)
    try:
        server.wait_for(build_id(exe))
        env = empty_debug_dirs(d)
        env["DEBUGINFOD_URLS"] = server.url
        env["DEBUGINFOD_CACHE_PATH"] = os.path.join(d, "cache")
        r, top = run_inlined([exe], env=env)
        check_inlined_lines(top)
        assert r.json["counters"]["symbols.fetched"] >= 1, r.json["counters"]
    finally:
        server.close()


def test_debug_file_inside_a_container():
    """A program and its debug file that exist only inside the target's own mount namespace (as in a
    container): the debug file is found through the target's root (/proc/PID/root)."""
    d = workdir()
    exe, dbg = split_copy(d, debuglink=False)
    bid = build_id(exe)
    app = os.path.join(d, "app")  # empty outside; a private tmpfs inside
    os.makedirs(app)
    inner = ('mount -t tmpfs ptfil-test "$0" && mkdir -p "$0/debug/.build-id/$3" && cp "$1" "$0/inlined" && '
             'cp "$2" "$0/debug/.build-id/$3/$4.debug" && exec "$0/inlined"')
    ns = ["unshare", "--mount", "--propagation", "private"] if os.geteuid() == 0 else \
        ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]
    env = empty_debug_dirs(d)
    env["PTFIL_DEBUG_DIRS"] = os.path.join(app, "debug")
    argv = ns + ["sh", "-c", inner, app, exe, dbg, bid[:2], bid[2:]]
    r = launch(argv, env=env)
    assert r.returncode == 0, (r.returncode, r.stderr.decode())
    assert not os.listdir(app), "the test's mount namespace leaked into %s" % app
    top = biggest(r.json)
    check_near("the table", top["charged_bytes"], 48 * MiB, rel=0.01)
    check_inlined_lines(top)


def test_static_stripped_program_degrades_gracefully():
    """A static executable stripped of everything: module + offset frames, the peak still right."""
    d = workdir()
    exe = os.path.join(d, "mapops_static")
    shutil.copy(target("mapops_static"), exe)
    subprocess.run(["strip", "--strip-all", exe], check=True)
    want = bare([exe, "seed"])
    r = launch([exe, "seed"], env=empty_debug_dirs(d))
    assert r.returncode == want.returncode, (r.returncode, r.stderr.decode())
    assert r.stdout == want.stdout
    frames = [f for s in r.json["stacks"] for f in s["frames"] if f["kind"] == "native" and f["module"] == exe]
    assert frames and all(not f.get("function") for f in frames), frames[:5]
    text = view(r.snapshot, timeout=60).stdout.decode()
    assert "mapops_static + 0x" in text, text


if __name__ == "__main__":
    main([test_inlined_call_and_caller_with_lines, test_cxx_templates_inlined_into_the_caller,
          test_libc_named_from_libc6_dbg, test_stripped_without_debug_info_says_what_is_missing,
          test_split_debug_found_by_debuglink, test_split_debug_found_by_build_id_under_a_debug_dir,
          test_debuglink_to_another_build_is_not_used, test_minidebuginfo_gives_names_without_lines,
          test_debuginfod_names_a_stripped_program, test_debug_file_inside_a_container,
          test_static_stripped_program_degrades_gracefully])
