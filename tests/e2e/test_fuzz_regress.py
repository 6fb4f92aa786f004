#!/usr/bin/env python3
"""ptfil-view on every input in tests/fuzz/regress/: the hostile files made by
hand and the ones the fuzzer found (tests/fuzz/fuzz.mk). In every output mode,
each one is either shown (exit 0) or refused with one clean line on stderr that
names the file and the line (exit 1, nothing on stdout); never a signal, a
usage error, a hang or a partial report."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptfiltest import SRCDIR, VIEW, unittest_main, view  # noqa: E402

REGRESS = os.path.join(SRCDIR, "tests", "fuzz", "regress")
TIMEOUT = 60

# The hand-made hostile files: each must be refused, with this in its message.
REFUSED = {
    "after-end.txt": "line 29: data after the end marker",
    "bad-escape.txt": "line 20: bad escape in string",
    "binary.bin": "line 1: not a ptfil snapshot (no 'ptfil-snapshot' first line)",
    "control-in-message.txt": "line 1: malformed format version '1\\x0d'",
    "corrupt-crc.gz": "corrupt gzip data (incorrect data check)",
    "deep-trie.gz": "line 4110: stack node 4097 is more than 4096 frames deep",
    "deep-stacks-repeated.txt": "line 5199: the stacks named so far hold 4390928 frames in all, more than 4388096",
    "duplicate-stack.txt": "line 25: duplicate 'k' record for node 2, kind 'm'",
    "empty-field.txt": "line 24: empty field",
    "empty.txt": "empty file, not a ptfil snapshot",
    "escape-in-message.txt": "line 24: unknown stack kind '\\x1b[2J'",
    "escape-nul.txt": "line 20: bad escape in string",
    "escape-trailing-backslash.txt": "line 20: bad escape in string",
    "hex-upper-case.txt": "line 17: malformed module base '55555555400A' (lower-case hexadecimal expected)",
    "huge-count.txt": "line 24: count '99999999999999999999' out of range",
    "huge-node.txt": "line 24: stack node 4294967297 refers to nothing (only 3 defined so far)",
    "line-too-long.gz": "line 12: line longer than 1048576 bytes",
    "missing-peak.txt": "line 27: end marker before the required 'p' record",
    "module-out-of-range.txt": "line 21: module 3 out of range",
    "newer-version.txt": "line 1: snapshot format 6 is newer than this ptfil-view reads (5); upgrade ptfil",
    "node-cycle.txt": "line 14: parent node 1 refers to nothing (only 1 defined so far)",
    "nul-byte.txt": "line 20: NUL byte in line",
    "python-frame-in-v1.txt": "line 23: unknown tag 'y' in a format 1 snapshot (Python frames are format 2)",
    "python-frame-no-file.txt": "line 19: Python frame without a source file ('-')",
    "python-line-out-of-range.txt": "line 19: line number 4294967296 out of range",
    "real-overflow.txt": "line 10: malformed start time '1e999'",
    "timeline-backwards.txt": "line 26: sample time 0.5 is before the previous sample's",
    "too-many-fields.txt": "line 9: too many fields (expected 1)",
    "truncated-mid-line.txt": "line 24: truncated (the last line has no newline)",
    "truncated.gz": "line 11: truncated (the gzip stream ends early)",
    "unknown-tag.txt": "line 25: unknown tag 'Q'",
    # The views (format 5): tests/golden/touch.snap, each with one thing wrong.
    "view-after-stacks.txt": "line 70: the 'v' record comes after stack records",
    "touch-kind-in-v4.txt": "line 69: unknown stack kind 't' in a format 4 snapshot (touch stacks are format 5)",
    "link-node-undefined.txt": "line 80: alloc node 14 refers to nothing (only 14 defined so far)",
    "other-view-touch-kind.txt": "line 78: stack kind 't' in a 'K' record",
    "duplicate-link.txt": "line 82: duplicate 'X' record for touch node 12, alloc node 6",
    "view-unknown.txt": "line 21: unknown view 'both' (alloc or touch)",
    "view-twice.txt": "line 22: duplicate 'v' record",
}

# Hand-made files that are hostile but valid: each must be shown.
SHOWN = {"deep-trie-limit.gz", "amplified-strings.txt", "long-module-name.txt", "long-module-name-found.txt",
         "amplified-python-files.txt", "touch-links-dangling.txt"}

# Problems with the whole file rather than a line of it.
WHOLE_FILE = ("empty file, not a ptfil snapshot",)

MODES = {
    "text": [],
    "json": ["--json"],
    "folded": ["--folded"],
    "svg": ["--svg"],
    "html": ["--html"],
    "diff": ["--diff"],
}


def regress_files():
    return sorted(os.path.join(REGRESS, n) for n in os.listdir(REGRESS)
                  if os.path.isfile(os.path.join(REGRESS, n)))


def view_mode(mode, path):
    """ptfil-view in the output mode of MODES on path (twice for the diff): the CompletedProcess."""
    return view(*MODES[mode], *([path, path] if mode == "diff" else [path]), timeout=TIMEOUT)


def gzip_member(data):
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def write_bomb(path, head, body, repeat):
    """A gzip file of head then body repeated: one gzip member per repetition, each compressed a
    thousand times (the most deflate does), so 1 GiB costs a second to make and 1 MB of disk."""
    member = gzip_member(body)
    with open(path, "wb") as f:
        f.write(gzip_member(head))
        for _ in range(repeat):
            f.write(member)


def view_with_usage(path):
    """ptfil-view PATH: (its CompletedProcess, the CPU seconds it used, its peak RSS in KiB), measured
    by wait4 on it alone. Killed after TIMEOUT seconds."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([VIEW, path], stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        killer = threading.Timer(TIMEOUT, p.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            killer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        if killer.finished.is_set() and p.returncode == -signal.SIGKILL:
            raise AssertionError("ptfil-view %s did not finish in %d s" % (path, TIMEOUT))
        out.seek(0)
        err.seek(0)
        r = subprocess.CompletedProcess(p.args, p.returncode, out.read(), err.read())
    return r, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


class FuzzRegressTest(unittest.TestCase):
    def check_outcome(self, mode, path, r):
        """One run's outcome: shown, or refused cleanly. Returns the error line, or None when shown."""
        self.assertGreaterEqual(r.returncode, 0, "killed by signal %d" % -r.returncode)
        self.assertIn(r.returncode, (0, 1), r.stderr.decode("utf-8", "replace"))
        if r.returncode == 0:
            return None
        self.assertEqual(r.stdout, b"", "a refused snapshot must leave stdout empty")
        err = r.stderr
        self.assertTrue(err.endswith(b"\n") and err.count(b"\n") == 1, "not one line: %r" % err)
        line = err[:-1]
        self.assertFalse(re.search(rb"[\x00-\x1f\x7f]", line), "control byte in the message: %r" % err)
        text = line.decode("utf-8", "replace")
        prefix = "ptfil-view: %s: " % path
        self.assertTrue(text.startswith(prefix), "the message does not name the file: %r" % text)
        problem = text[len(prefix):]
        self.assertTrue(re.match(r"line [1-9][0-9]*: \S", problem) or problem in WHOLE_FILE,
                        "the message names no line: %r" % text)
        return problem

    def test_every_file_every_mode(self):
        files = regress_files()
        self.assertTrue(files, "%s is empty" % REGRESS)
        for path in files:
            problems = {}
            for mode in MODES:
                with self.subTest(file=os.path.basename(path), mode=mode):
                    r = view_mode(mode, path)
                    problems[mode] = self.check_outcome(mode, path, r)
            # Reading comes before rendering: a file is refused in every mode, for the same reason.
            with self.subTest(file=os.path.basename(path), mode="all"):
                self.assertLessEqual(len(set(problems.values())), 1, problems)

    def test_hostile_files_are_refused(self):
        present = {os.path.basename(p) for p in regress_files()}
        for name, expected in sorted(REFUSED.items()):
            with self.subTest(file=name):
                self.assertIn(name, present)
                path = os.path.join(REGRESS, name)
                for mode in ("text", "json", "diff"):
                    r = view_mode(mode, path)
                    self.assertEqual(r.returncode, 1, "%s: %r" % (mode, r.stderr))
                    problem = self.check_outcome(mode, path, r)
                    self.assertIn(expected, problem)

    def check_bomb(self, head, body, repeat, expected):
        """A 1 MB gzip of 1 GiB: refused for what it is, within a few seconds of CPU (the reader used to
        read it all: 14 to 20 s for blank lines) and without holding it in memory."""
        d = tempfile.mkdtemp(prefix="ptfil-bomb-")
        try:
            path = os.path.join(d, "bomb.gz")
            write_bomb(path, head, body, repeat)
            self.assertLess(os.path.getsize(path), 2 << 20)
            r, cpu, maxrss_kib = view_with_usage(path)
            self.assertLess(cpu, 5.0, "ptfil-view used %.1f s of CPU on a 1 MB file" % cpu)
            self.assertLess(maxrss_kib, 256 << 10, "ptfil-view grew to %d MiB on a 1 MB file" % (maxrss_kib >> 10))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(expected, self.check_outcome("text", path, r))
        finally:
            shutil.rmtree(d)

    def test_gzip_bomb_of_blank_lines(self):
        self.check_bomb(b"ptfil-snapshot 2\n", b"\n" * (1 << 20), 1024,
                        "more than 1 MiB of blank lines and comments: not a ptfil snapshot, or corrupted")

    def test_gzip_bomb_of_records(self):
        # Strings of 64 KiB: every line a valid record, 1 GiB of them.
        line = b"s " + b"a" * (64 << 10) + b"\n"
        self.check_bomb(b"ptfil-snapshot 2\n", line * 256, 64,
                        "MiB, over 64 times its size as no snapshot does: not a ptfil snapshot, or corrupted")

    def test_hostile_but_valid_files_are_shown(self):
        for name in sorted(SHOWN):
            with self.subTest(file=name):
                path = os.path.join(REGRESS, name)
                for mode in ("text", "json"):
                    r = view_mode(mode, path)
                    self.assertEqual(r.returncode, 0, "%s: %r" % (mode, r.stderr))
                    self.assertNotEqual(r.stdout, b"")


if __name__ == "__main__":
    unittest_main("test_fuzz_regress", [VIEW])
