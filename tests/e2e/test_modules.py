"""Which file ptfil reads for an object mapped in the target: the image that is mapped, never another.

A library replaced on disk while a program runs (every service after a package upgrade: its maps say
"libfoo.so (deleted)") is read through /proc/PID/map_files, or not at all: ptfil never takes the new
file's symbol offsets and writes int3 into the old code. A library it cannot verify (its build id in
the target's memory against the file's) gets one warning and is left alone. A program that exists only
inside another mount namespace (a container's /app/server) is read through /proc/PID/root, so its
frames have names and its stacks go on through them.

modrep allocates through libmodrep.so, which defines the malloc family; libmodrep1.so and libmodrep2.so
are two builds of it whose malloc family lies, in build 2, where build 1 keeps a block of code bytes
that the program checksums ("sum"): an int3 written there from build 2's offsets changes the sum.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, PTFIL, Attached, Lines, check_near, charged_through, exec_mappings, functions, launch, \
    main, malloc_bytes, mapping_differences, stacks_through, target, workdir

MODREP = target("modrep")
LOOP = target("attach_loop")
# Without these two capabilities /proc/PID/map_files cannot be opened (the kernel asks for one of them):
# ptfil then reaches files by their path under /proc/PID/root only, as a non-root user's ptfil does.
NO_MAP_FILES = ["setpriv", "--bounding-set", "-sys_admin,-checkpoint_restore"]


def can_open_map_files():
    """Whether this process may open /proc/PID/map_files entries (root, or CAP_CHECKPOINT_RESTORE)."""
    try:
        with os.scandir("/proc/self/map_files") as it:
            for entry in it:
                with open(entry.path, "rb") as f:
                    f.read(4)
                return True
    except PermissionError:
        return False
    return False


def without_map_files():
    """The command prefix that runs ptfil without what map_files needs (nothing when it lacks it anyway)."""
    if not can_open_map_files():
        return []
    r = subprocess.run(NO_MAP_FILES + ["cat", "/proc/self/status"], capture_output=True, timeout=30)
    assert r.returncode == 0, "cannot drop capabilities with setpriv: %s" % r.stderr.decode()
    return NO_MAP_FILES


class AttachedVia(Attached):
    """Attached, with ptfil started under a command prefix (setpriv dropping capabilities)."""

    def __init__(self, argv, prefix=(), **kw):
        self.prefix = list(prefix)
        super().__init__(argv, **kw)

    def attach(self, *options, interval="50", wait=True):
        cmd = [*self.prefix, PTFIL, "attach", "-o", self.snap, "-i", str(interval), *options, str(self.pid)]
        self.ptfil_started = time.time()
        with open(os.path.join(self.dir, "ptfil.stdout"), "wb") as out:
            self.ptfil = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE,
                                          start_new_session=True)
        self.err = Lines(self.ptfil.stderr)
        if wait:
            self.wait_attached()


def replace_file(src, dst):
    """Puts a copy of src at dst the way a package manager does: a new file renamed over the old one."""
    tmp = dst + ".new"
    shutil.copyfile(src, tmp)
    os.rename(tmp, dst)


def ask(a, command, reply_prefix):
    """Sends a command to modrep and returns its reply line."""
    n = sum(1 for s in a.out.text().splitlines() if s.startswith(reply_prefix))
    a.send(command)
    return a.out.wait_for(lambda s: s.startswith(reply_prefix), 30, n + 1)


def frames_in(doc, path):
    """Every frame of every stack (at the peak and live at the end) whose module is path."""
    return [f for key in ("stacks", "live_at_end") for s in doc[key] for f in s["frames"] if f.get("module") == path]


def run_replaced(prefix):
    """modrep with libmodrep.so (build 1) loaded from a temporary directory, replaced on disk by build 2
    while it runs; ptfil attaches (under prefix), the program allocates 8 MiB and sums its library's code
    block, ptfil detaches. Checks that the program's sum and end are as untraced and that no byte of its
    code changed; returns (ptfil's stderr, the snapshot, the library's path)."""
    libdir = workdir()
    lib = os.path.join(libdir, "libmodrep.so")
    shutil.copyfile(target("libmodrep1.so"), lib)
    with AttachedVia(["env", "LD_LIBRARY_PATH=" + libdir, MODREP], prefix) as a:
        assert "build 1" in a.out.text(), a.out.text()
        sum_before = [s for s in a.out.text().splitlines() if s.startswith("sum ")][0]
        replace_file(target("libmodrep2.so"), lib)
        with open("/proc/%d/maps" % a.pid) as f:
            assert "%s (deleted)" % lib in f.read(), "the running program does not map the replaced library"
        code_before = exec_mappings(a.pid)
        a.attach()
        assert ask(a, "alloc", "allocated") == "allocated"
        assert ask(a, "sum", "sum ") == sum_before, "the library's code changed while ptfil was attached"
        a.signal(signal.SIGINT)
        rc, err = a.finish()
        assert rc == 0, (rc, err)
        diffs = mapping_differences(code_before, exec_mappings(a.pid))
        assert not diffs, "the target's code changed across attach and detach:\n" + "\n".join(diffs)
        assert ask(a, "sum", "sum ") == sum_before
        status, out = a.target_finish()
        assert status == 5 and out.endswith(b"bye\n"), (status, out)
        doc = a.json()
    shutil.rmtree(libdir, ignore_errors=True)
    return err, doc, lib


def test_replaced_library_read_from_its_mapped_image():
    # With map_files, the library's own (deleted) file is read: it is verified, hooked and named.
    err, doc, lib = run_replaced([])
    if not can_open_map_files():
        assert "cannot verify %s" % lib in err, err
        print("note: /proc/PID/map_files cannot be opened here; the replaced library was refused, as it must be")
        return
    assert "cannot verify" not in err, err
    # Its malloc is hooked (under it, libc's is nested and not counted again): its frame is named from build 1.
    stacks = stacks_through(doc, "modrep_alloc")
    check_near("modrep_alloc", sum(s["charged_bytes"] for s in stacks), 8 * MiB, rel=0.05)
    names = {f.get("function") for f in frames_in(doc, lib)}
    assert "malloc" in names, (lib, names)
    # The snapshot names the library by the path a user knows, not by a /proc path ptfil opened it through.
    assert not [f for s in doc["stacks"] for f in s["frames"] if (f.get("module") or "").startswith("/proc/")]


def test_unverifiable_library_left_alone():
    # Without map_files, the file at the library's path is build 2: another build id. The library is
    # never hooked, its file never used (its frames have no names), and one warning says so.
    err, doc, lib = run_replaced(without_map_files())
    warnings = [s for s in err.splitlines() if "cannot verify %s" % lib in s]
    assert len(warnings) == 1, err
    assert "build id" in warnings[0], warnings[0]
    lib_frames = frames_in(doc, lib)
    assert lib_frames and all(f.get("function") is None for f in lib_frames), lib_frames
    # The C library's malloc still sees the allocation, made through the unhooked library.
    check_near("modrep_alloc", charged_through(doc, "modrep_alloc"), 8 * MiB, rel=0.05)


def in_mount_namespace(workdir_path, binary):
    """The command that starts binary as workdir_path/server in a new mount namespace where a private tmpfs
    is mounted on workdir_path (an empty directory outside): the file exists inside only."""
    inner = 'mount -t tmpfs ptfil-test "$0" && cp "$1" "$0/server" && exec "$0/server" 100'
    if os.geteuid() == 0:
        ns = ["unshare", "--mount", "--propagation", "private"]
    else:
        ns = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]
    return ns + ["sh", "-c", inner, workdir_path, binary]


def container_binary(prefix):
    app = workdir()
    server = os.path.join(app, "server")
    with AttachedVia(in_mount_namespace(app, LOOP), prefix) as a:
        assert not os.path.exists(server), "the test's mount namespace leaked: %s exists outside" % server
        assert os.path.exists("/proc/%d/root%s" % (a.pid, server)), "%s is not inside the target" % server
        code_before = exec_mappings(a.pid)
        a.attach()
        time.sleep(1)
        a.signal(signal.SIGINT)
        rc, err = a.finish()
        assert rc == 0, (rc, err)
        diffs = mapping_differences(code_before, exec_mappings(a.pid))
        assert not diffs, "the target's code changed across attach and detach:\n" + "\n".join(diffs)
        os.kill(a.pid, signal.SIGUSR2)
        status, out = a.target_finish()
        assert status == 7, (status, out)
        doc = a.json()
    os.rmdir(app)
    # The server's own functions have names, and the unwinding goes on through them to main and past it.
    chains = [functions(s) for s in stacks_through(doc, "scratch_work", key="stacks") +
              stacks_through(doc, "ring_alloc", key="live_at_end")]
    assert chains, [functions(s) for s in doc["live_at_end"]][:8]
    for fs in chains:
        assert "main" in fs and fs.index("main") > max(fs.index(f) for f in ("scratch_work", "ring_alloc") if f in fs), fs
        assert "__libc_start_call_main" in fs or "__libc_start_main" in fs, fs
    frames = frames_in(doc, server)
    assert frames and all(f.get("function") for f in frames), frames
    assert doc["counters"]["heap.allocs"] > 0
    assert "cannot verify" not in err and "cannot open" not in err, err


def test_container_binary_named():
    # Through map_files where ptfil may open it.
    container_binary([])


def test_container_binary_named_by_its_root():
    # Through /proc/PID/root alone.
    container_binary(without_map_files())


def test_code_mapped_twice_named():
    # code_copy maps part of its own executable a second time, elsewhere (as V8 maps node's builtins),
    # and allocates 100 blocks of 10,000 bytes from copy_alloc running in that copy. The frame there is
    # named from the executable's file at the offset the copy maps, and the stack goes on through it.
    r = launch([target("code_copy")])
    assert r.returncode == 0 and b"copy done" in r.stdout, (r.returncode, r.stdout, r.stderr)
    assert b"cannot verify" not in r.stderr, r.stderr
    doc = r.json
    st = stacks_through(doc, "copy_alloc")
    assert st, "no stack through copy_alloc: the frame in the copy is not named\n%s" % [
        functions(s)[:6] for s in doc["stacks"][:8]]
    assert sum(s["count"] for s in st) == 100, [(s["count"], functions(s)) for s in st]
    assert sum(s["charged_bytes"] for s in st) == malloc_bytes(doc, 10000, 100), [
        (s["charged_bytes"], functions(s)) for s in st]
    for s in st:
        f = functions(s)
        assert f[0] in ("malloc", "__libc_malloc") and f[1] == "copy_alloc" and "main" in f[2:], f
        frame = s["frames"][1]
        assert (frame["module"] or "").endswith("/code_copy"), frame


if __name__ == "__main__":
    main([test_replaced_library_read_from_its_mapped_image, test_unverifiable_library_left_alone,
          test_container_binary_named, test_container_binary_named_by_its_root, test_code_mapped_twice_named])
