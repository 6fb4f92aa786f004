#!/usr/bin/env python3
"""Where ptfil writes its snapshot (-o): a device node stays a device, a FIFO stays a FIFO and its
reader gets one whole snapshot, a symlink stays a link and the file it names is written; an output
that cannot be written is refused before the program runs or the process is attached (exit status 2,
one line), and a snapshot that cannot be written during the run is reported once, not at every tick.

The device node is made here with mknod (a null device, 1:3, in a temporary directory), never the
system's /dev/null: that test needs root."""
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import MiB, PTFIL, Attached, Lines, Skip, charged_through, check_near, main, run_ptfil, target, view_json, \
    workdir

TIMEOUT = 60


def launch_behave(output, cwd=None, extra=()):
    """ptfil launch -o OUTPUT -- behave exit 0: maps and writes 8 MiB in make_work."""
    return run_ptfil(["launch", "-q", "-i", "0", *extra, "-o", output, "--", target("behave"), "exit", "0"],
                     cwd=cwd)


def one_gzip_member(data):
    """The text of data, which must be exactly one gzip stream: one snapshot, not two written one after
    the other."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    text = d.decompress(data)
    assert d.eof, "the gzip stream is cut short (%d bytes)" % len(data)
    assert d.unused_data == b"", "%d bytes after the first snapshot's gzip stream" % len(d.unused_data)
    return text


def check_behave_snapshot(path):
    """The snapshot of behave exit 0: its 8 MiB charged to make_work, its exit status 0."""
    doc = view_json(path)
    assert doc["process"]["exit_status"] == 0, doc["process"]
    check_near("make_work", charged_through(doc, "make_work"), 8 * MiB, rel=0.05)


def check_snapshot_bytes(data, d):
    """Snapshot bytes received through a pipe: one gzip stream of a snapshot that ptfil-view reads."""
    text = one_gzip_member(data)
    assert text.startswith(b"ptfil-snapshot "), text[:40]
    path = os.path.join(d, "received.gz")
    with open(path, "wb") as f:
        f.write(data)
    check_behave_snapshot(path)


def test_char_device_stays_a_device():
    if os.geteuid() != 0:
        raise Skip("a character device made by mknod needs root")
    d = workdir()
    node = os.path.join(d, "null")
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    rc, _, err = launch_behave(node)
    st = os.lstat(node)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3), \
        "the device node %s was replaced: mode %o (ptfil exited %d: %s)" % (node, st.st_mode, rc, err)
    assert rc == 0, (rc, err)
    assert sorted(os.listdir(d)) == ["null"], os.listdir(d)
    shutil.rmtree(d)


def test_fifo_gets_one_snapshot_and_stays_a_fifo():
    d = workdir()
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    got = os.path.join(d, "got.gz")
    # The reader is there first, as with ptfil -o >(gzip -dc | ...).
    with open(got, "wb") as out:
        reader = subprocess.Popen(["cat", fifo], stdout=out, start_new_session=True)
    try:
        rc, _, err = launch_behave(fifo)
        try:
            reader.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            raise AssertionError("the FIFO's reader never saw the end of the snapshot (ptfil exited %d: %s)"
                                 % (rc, err))
    finally:
        if reader.poll() is None:
            os.killpg(reader.pid, signal.SIGKILL)
            reader.wait()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced (ptfil exited %d: %s)" % (rc, err)
    assert rc == 0, (rc, err)
    with open(got, "rb") as f:
        check_snapshot_bytes(f.read(), d)
    assert sorted(os.listdir(d)) == ["fifo", "got.gz", "received.gz"], os.listdir(d)
    shutil.rmtree(d)


def test_pipe_as_dev_fd():
    """-o >(gunzip | ...) hands ptfil /dev/fd/N, the write end of a pipe."""
    d = workdir()
    r, w = os.pipe()
    chunks = []
    drain = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(r, 65536), b"")), daemon=True)
    drain.start()
    try:
        rc, _, err = run_ptfil(["launch", "-q", "-i", "0", "-o", "/dev/fd/%d" % w, "--", target("behave"), "exit",
                                "0"], pass_fds=(w,))
    finally:
        os.close(w)
    drain.join(TIMEOUT)
    os.close(r)
    assert rc == 0, (rc, err)
    check_snapshot_bytes(b"".join(chunks), d)
    shutil.rmtree(d)


def test_symlink_stays_a_link():
    d = workdir()
    other = os.path.join(d, "elsewhere")
    os.mkdir(other)
    real = os.path.join(other, "real.gz")
    with open(real, "w") as f:
        f.write("an older snapshot\n")
    link = os.path.join(d, "link.gz")
    os.symlink("elsewhere/real.gz", link)
    rc, _, err = launch_behave(link)
    assert os.path.islink(link), "the symlink %s was replaced (ptfil exited %d: %s)" % (link, rc, err)
    assert os.readlink(link) == "elsewhere/real.gz", os.readlink(link)
    assert rc == 0, (rc, err)
    check_behave_snapshot(real)
    assert sorted(os.listdir(other)) == ["real.gz"], os.listdir(other)
    # A link to a file that does not exist yet: the file is made, the link stays.
    dangling = os.path.join(d, "new-link.gz")
    os.symlink("elsewhere/new.gz", dangling)
    rc, _, err = launch_behave(dangling)
    assert rc == 0, (rc, err)
    assert os.path.islink(dangling) and os.readlink(dangling) == "elsewhere/new.gz"
    check_behave_snapshot(os.path.join(other, "new.gz"))
    assert sorted(os.listdir(d)) == ["elsewhere", "link.gz", "new-link.gz"], os.listdir(d)
    shutil.rmtree(d)


def check_refused_before_run(args, output, cwd):
    """ptfil ARGS, whose program would create MARKER in cwd: refused with exit status 2 and one line
    naming output, and the program never ran."""
    marker = os.path.join(cwd, "MARKER")
    rc, _, err = run_ptfil(args, cwd=cwd)
    assert not os.path.exists(marker), "the program ran before the bad output %s was found (exit %d: %s)" % (
        output, rc, err)
    assert rc == 2, (output, rc, err)
    lines = err.splitlines()
    assert len(lines) == 1 and output in lines[0], "not one line naming %s: %r" % (output, err)


def test_bad_output_refused_before_the_program_runs():
    d = workdir()
    marker = os.path.join(d, "MARKER")
    program = ["sh", "-c", "touch %s" % marker]
    plain = os.path.join(d, "plain")
    with open(plain, "w") as f:
        f.write("a regular file\n")
    bad = [os.path.join(d, "no", "such", "dir", "s.gz"),   # a missing directory
           os.path.join(plain, "s.gz"),                    # under a regular file: fails for root too
           d,                                              # a directory
           "/proc/ptfil-test-s.gz"]                        # where nobody, root included, makes a file
    for output in bad:
        check_refused_before_run(["launch", "-q", "-o", output, "--", *program], output, d)
    # Without -o, the default name goes in the current directory.
    rc, _, err = run_ptfil(["launch", "-q", "--", *program], cwd="/proc")
    assert not os.path.exists(marker), "the program ran in an unwritable directory (exit %d: %s)" % (rc, err)
    assert rc == 2 and len(err.splitlines()) == 1 and "current directory" in err, (rc, err)
    assert sorted(os.listdir(d)) == ["plain"], os.listdir(d)
    shutil.rmtree(d)


def test_attach_with_bad_output_leaves_the_target_alone():
    with Attached([target("attach_loop"), "100"]) as a:
        bad = os.path.join(a.dir, "no", "such", "s.gz")
        tracer_pids = set()
        a.attach("-o", bad, wait=False)
        deadline = time.time() + 20
        while a.ptfil.poll() is None and time.time() < deadline:
            tracer_pids.add(a.status("TracerPid"))
            time.sleep(0.005)
        tracer_pids.add(a.status("TracerPid"))
        assert a.ptfil.poll() is not None, "ptfil attach -o %s did not exit: %s" % (bad, a.err.text())
        rc, err = a.finish()
        assert tracer_pids == {"0"}, "the target was traced: TracerPid %s" % sorted(tracer_pids)
        assert rc == 2, (rc, err)
        assert len(err.splitlines()) == 1 and bad in err, err
        assert a.running() and a.state() in ("R", "S"), a.state()
        os.kill(a.pid, signal.SIGUSR2)
        status, out = a.target_finish()
        assert status == 7 and b"usr2 1\n" in out, (status, out)


def test_write_failure_during_run_reported_once():
    """The output's directory removed while the program makes new peaks: each checkpoint fails, and
    is reported once; the end reports it again, and ptfil exits 1."""
    d = workdir()
    out_dir = os.path.join(d, "out")
    os.mkdir(out_dir)
    snap = os.path.join(out_dir, "s.gz")
    # A new peak every 20 ms for about 2 s, after a line on stdin.
    program = ["python3", "-c", "import sys, time\n"
               "print('ready', flush=True)\n"
               "sys.stdin.readline()\n"
               "keep = []\n"
               "for i in range(100):\n"
               "    keep.append(bytearray(256 * 1024))\n"
               "    time.sleep(0.02)\n"]
    p = subprocess.Popen([PTFIL, "launch", "-q", "-i", "20", "-o", snap, "--", *program], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    out, err = Lines(p.stdout), Lines(p.stderr)
    try:
        out.wait_for(lambda s: s == "ready", TIMEOUT)
        shutil.rmtree(out_dir)
        p.stdin.write(b"go\n")
        p.stdin.close()
        p.wait(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    out.join(5)
    err.join(5)
    text = err.text()
    assert p.returncode == 1, (p.returncode, text)
    about = [line for line in text.splitlines() if snap in line]
    # Once from the checkpoints, once from the end.
    assert 1 <= len(about) <= 2, "%d lines about %s:\n%s" % (len(about), snap, text)
    assert "no snapshot written" in text, text
    shutil.rmtree(d)


if __name__ == "__main__":
    main([test_char_device_stays_a_device, test_fifo_gets_one_snapshot_and_stays_a_fifo, test_pipe_as_dev_fd,
          test_symlink_stays_a_link, test_bad_output_refused_before_the_program_runs,
          test_attach_with_bad_output_leaves_the_target_alone, test_write_failure_during_run_reported_once])
