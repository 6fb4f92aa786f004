"""ptfil's command line: help, version, usage errors, programs that cannot run, the default snapshot name."""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import main, ptfil, target, view, view_json, workdir


def test_help_and_version():
    r = ptfil("--help")
    assert r.returncode == 0 and b"ptfil launch" in r.stdout and b"--interval" in r.stdout and b"--output" in r.stdout
    r = ptfil("launch", "--help")
    assert r.returncode == 0 and b"ptfil launch" in r.stdout
    r = ptfil("--version")
    assert r.returncode == 0 and r.stdout.startswith(b"ptfil ")
    v = view("--version")
    assert v.returncode == 0 and v.stdout.split()[-1] == r.stdout.split()[-1]


def test_usage_errors_exit_2():
    for args in ([], ["frobnicate"], ["launch"], ["launch", "--interval", "soon", "--", "/bin/true"],
                 ["launch", "--no-such-option", "--", "/bin/true"]):
        r = ptfil(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert r.stderr, args
        # What went wrong and where the rest is, not the whole help.
        lines = r.stderr.decode().splitlines()
        assert len(lines) <= 4, (args, lines)
        assert "Profile the peak memory" not in r.stderr.decode(), (args, lines)
    for args in ([], ["launch", "--no-such-option", "--", "/bin/true"]):
        err = ptfil(*args).stderr.decode()
        assert "Usage: ptfil launch" in err and "ptfil --help" in err, (args, err)
    err = ptfil("launch", "--no-such-option", "--", "/bin/true").stderr.decode()
    assert err.startswith("ptfil: unknown option '--no-such-option'"), err


def test_missing_program_127():
    d = workdir()
    r = ptfil("launch", "-o", os.path.join(d, "s.gz"), "--", "/nonexistent/program")
    assert r.returncode == 127, (r.returncode, r.stderr)
    assert b"cannot run /nonexistent/program" in r.stderr and b"No such file" in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(d, "s.gz"))


def test_not_executable_126():
    d = workdir()
    path = os.path.join(d, "data.txt")
    with open(path, "w") as f:
        f.write("not a program\n")
    r = ptfil("launch", "-o", os.path.join(d, "s.gz"), "--", path)
    assert r.returncode == 126, (r.returncode, r.stderr)
    assert b"Permission denied" in r.stderr, r.stderr


def test_default_snapshot_name_and_summary():
    d = workdir()
    r = ptfil("launch", "--", target("behave"), "exit", "0", cwd=d)
    assert r.returncode == 0, r.stderr
    snaps = glob.glob(os.path.join(d, "ptfil-behave-*.gz"))
    assert len(snaps) == 1, os.listdir(d)
    pid = int(snaps[0].rsplit("-", 1)[1][:-3])
    doc = view_json(snaps[0])
    assert doc["process"]["pid"] == pid
    assert doc["process"]["command"] == [target("behave"), "exit", "0"]
    # The summary names the file and how to read it.
    assert os.path.basename(snaps[0]).encode() in r.stderr and b"ptfil-view" in r.stderr, r.stderr


def test_program_options_are_its_own():
    d = workdir()
    r = ptfil("launch", "-q", "-o", os.path.join(d, "s.gz"), "--", "/bin/echo", "-o", "--help")
    assert r.returncode == 0 and r.stdout == b"-o --help\n", r.stdout


def test_unwritable_snapshot_is_an_error():
    # Found before the program runs: a usage error (tests/e2e/test_output.py).
    r = ptfil("launch", "-q", "-o", "/nonexistent-dir/s.gz", "--", target("behave"), "exit", "0")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert b"/nonexistent-dir/s.gz" in r.stderr, r.stderr


if __name__ == "__main__":
    main([test_help_and_version, test_usage_errors_exit_2, test_missing_program_127, test_not_executable_126,
          test_default_snapshot_name_and_summary, test_program_options_are_its_own,
          test_unwritable_snapshot_is_an_error])
