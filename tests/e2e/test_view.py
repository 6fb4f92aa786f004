#!/usr/bin/env python3
"""End-to-end tests of ptfil-view: snapshots written here in the documented
format (docs/snapshot-format.md) with Python's gzip module, then the text
report, the JSON document and the error paths checked."""

import gzip
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptfiltest import VIEW, unittest_main, view  # noqa: E402

MiB = 1 << 20


class Snapshot:
    """Writes the snapshot text format, an independent second implementation of it."""

    def __init__(self, version=1):
        self.lines = ["ptfil-snapshot %d" % version, "# written by test_view.py"]
        self.strings = {}

    def ref(self, text):
        if text is None:
            return "-"
        if text not in self.strings:
            self.strings[text] = len(self.strings)
            self.lines.append("s " + self.escape(text))
        return str(self.strings[text])

    @staticmethod
    def escape(text):
        out = []
        for b in text.encode("utf-8", "surrogateescape"):
            if b == 0x5C:
                out.append(b"\\\\")
            elif b == 0x0A:
                out.append(b"\\n")
            elif b < 0x20 or b == 0x7F:
                out.append(b"\\x%02x" % b)
            else:
                out.append(bytes([b]))
        return b"".join(out).decode("utf-8", "surrogateescape")

    def add(self, tag, *fields):
        self.lines.append(" ".join([tag] + [str(f) for f in fields]))

    def header(self, argv, pid=4242, mode="launch", start=1700000000.25,
               duration=1.5, exit_status=0, vmhwm=60 * MiB, page_size=4096,
               peak=(0.75, 54 * MiB, 562 * MiB, 57 * MiB)):
        self.add("V", self.ref("0.1.0-test"))
        self.add("o", self.ref(mode))
        for a in argv:
            self.add("a", self.ref(a))
        self.add("i", pid)
        self.add("T", repr(start))
        self.add("d", repr(duration))
        self.add("x", exit_status)
        self.add("w", vmhwm)
        self.add("z", page_size)
        self.add("p", repr(peak[0]), peak[1], peak[2], peak[3])

    def text(self, end=True):
        return "\n".join(self.lines + (["e"] if end else [])) + "\n"

    def gzip_bytes(self, end=True):
        return gzip.compress(self.text(end).encode("utf-8", "surrogateescape"))


# The seed scenario, as ptfil would write it: 50 MiB mapped and written by
# main_big_map, four threads each mapping 128 MiB and touching 1 MiB.
PROG = "/work/tests/targets/sparse_threads"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
ARGV = ["./sparse_threads", "hello world", "line\nbreak", "na\u00efve \u2713"]
FRAMES = [  # (module, offset, function)
    (0, 0x1234, "main_big_map"),
    (0, 0x1300, "main"),
    (1, 0x271CA, "__libc_start_call_main"),
    (0, 0x1200, "thread_fn"),
    (1, 0x94AC3, "start_thread"),
    (1, 0x126850, None),            # unknown function in libc
    (-1, 0, "[before attach]"),     # pseudo frame
]
# node: (parent, frame); node 0 is the root
NODES = [None, (0, 2), (1, 1), (2, 0), (0, 5), (4, 4), (5, 3), (0, 6)]
STACKS = [  # (node, kind, charged, reserved, count)
    (6, "m", 4 * MiB, 512 * MiB, 4),
    (3, "m", 50 * MiB, 50 * MiB, 1),
    (7, "p", 132 * 1024, 132 * 1024, 1),
]
LIVE = [(6, "m", 4 * MiB, 512 * MiB, 4)]
SAMPLES = [(0.0, 0, 1 * MiB), (0.5, 4 * MiB, 8 * MiB), (0.75, 54 * MiB, 57 * MiB)]
COUNTERS = [("seccomp", 120), ("signal", 2)]


def seed_snapshot(version=1):
    s = Snapshot(version)
    s.header(ARGV)
    s.add("m", s.ref(PROG), "-", "555555554000")
    s.add("m", s.ref(LIBC), s.ref("0123456789abcdef"), "7ffff7c00000")
    for module, offset, function in FRAMES:
        s.add("f", module, "%x" % offset, s.ref(function))
    for parent, frame in NODES[1:]:
        s.add("n", parent, frame)
    for node, kind, charged, reserved, count in STACKS:
        s.add("k", node, kind, charged, reserved, count)
    for node, kind, charged, reserved, count in LIVE:
        s.add("l", node, kind, charged, reserved, count)
    for t, charged, rss in SAMPLES:
        s.add("t", repr(t), charged, rss)
    for name, count in COUNTERS:
        s.add("c", s.ref(name), count)
    return s


def tree_snapshot(procs, tree=None, tree_stacks=(), pid=4242):
    """The seed snapshot in format 4 with a process tree: procs are (pid, ppid, profiled, peak, peak time,
    at the combined peak, VmHWM, start, end, command, file); tree is (time, bytes) of the combined peak;
    tree_stacks are (node, kind, charged, reserved, count, process number)."""
    s = seed_snapshot(version=4)
    for p in procs:
        s.add("P", p[0], p[1], p[2], p[3], repr(p[4]), p[5], p[6], repr(p[7]), p[8] if p[8] == -1 else repr(p[8]),
              s.ref(p[9]), s.ref(p[10]))
    if tree:
        s.add("r", repr(tree[0]), tree[1])
    for st in tree_stacks:
        s.add("j", *st)
    return s


# A followed run: the main process (the seed program), a shell it started, and under the shell two workers
# of one command; the combined peak (at 0.6 s) is not the sum of their own peaks.
TREE_PROCS = [
    (4242, 0, 1, 54 * MiB, 0.75, 4 * MiB, 60 * MiB, 0.0, 1.5, "./sparse_threads hello", None),
    (4300, 4242, 1, 1 * MiB, 0.1, 1 * MiB, 2 * MiB, 0.05, 1.2, "/bin/sh -c work", "run.4300.gz"),
    (4301, 4300, 1, 100 * MiB, 0.6, 100 * MiB, 110 * MiB, 0.1, 0.9, "/usr/bin/worker --id 1", "run.4301.gz"),
    (4302, 4300, 1, 80 * MiB, 1.0, 30 * MiB, 90 * MiB, 0.2, -1, "/usr/bin/worker --id 2", "run.4302.gz"),
]
TREE_STACKS = [(3, "m", 4 * MiB, 4 * MiB, 1, 0), (0, "p", 1 * MiB, 1 * MiB, 1, 1),
               (6, "m", 100 * MiB, 128 * MiB, 1, 2), (6, "m", 30 * MiB, 128 * MiB, 1, 3)]


def expected_frames(node):
    """The frames of a stack node, innermost first, as the JSON should show them."""
    out = []
    while node:
        parent, frame = NODES[node]
        module, offset, function = FRAMES[frame]
        out.append({
            "kind": "native",
            "function": function,
            "file": None,
            "line": None,
            "module": [PROG, LIBC][module] if module >= 0 else None,
            "build_id": [None, "0123456789abcdef"][module] if module >= 0 else None,
            "offset": offset,
            "inlined": False,
        })
        node = parent
    return out


class ViewTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="test_view.")
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def assert_read_error(self, path, *words):
        r = view(path)
        err = r.stderr.decode("utf-8", "replace")
        self.assertEqual(r.returncode, 1, err)
        self.assertEqual(r.stdout, b"")
        self.assertEqual(err.count("\n"), 1, err)
        self.assertTrue(err.startswith("ptfil-view: %s: " % path), err)
        for w in words:
            self.assertIn(w, err)
        # JSON mode fails the same way, with nothing on stdout.
        r = view("--json", path)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, b"")
        return err

    # ---- the report -------------------------------------------------------

    def test_text_report(self):
        path = self.write("seed.gz", seed_snapshot().gzip_bytes())
        r = view(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")
        out = r.stdout.decode("utf-8")
        lines = out.splitlines()
        self.assertLessEqual(len(lines), 50, out)
        self.assertIn("./sparse_threads 'hello world' 'line\\x0abreak' 'na\u00efve \u2713'", out)
        self.assertIn("pid 4242", out)
        self.assertIn("launch", out)
        self.assertIn("1.50 s", out)
        self.assertIn("exit status 0", out)
        self.assertIn("54.0 MiB charged at 750.0 ms, 562.0 MiB reserved", out)
        self.assertIn("57.0 MiB at the peak, VmHWM 60.0 MiB", out)
        self.assertIn("sparse   508.0 MiB reserved but not resident, in 1 stack", out)
        # The top stack is the 50 MiB one, innermost frame marked first.
        first = lines.index(next(l for l in lines if l.startswith("#1 ")))
        self.assertIn("50.0 MiB", lines[first])
        self.assertIn("92.6%", lines[first])
        self.assertIn("mmap, 1 live", lines[first])
        # Headed by the program's own frame (its module is not the system's), then the frames.
        self.assertEqual(lines[first + 1].strip(), "your code: main_big_map (sparse_threads)")
        self.assertEqual(lines[first + 2].strip(), "\u2192 main_big_map (sparse_threads + 0x1234)")
        self.assertEqual(lines[first + 3].strip(), "main (sparse_threads + 0x1300)")
        self.assertEqual(lines[first + 4].strip(), "__libc_start_call_main (libc.so.6 + 0x271ca)")
        # "your lines": the peak by own frame, largest first, the stack without one last.
        mine = lines.index(next(l for l in lines if l.startswith("your lines at the peak")))
        self.assertEqual([l.split() for l in lines[mine + 1:mine + 4]],
                         [["50.0", "MiB", "92.6%", "main_big_map", "(sparse_threads)"],
                          ["4.0", "MiB", "7.4%", "thread_fn", "(sparse_threads)"],
                          ["132.0", "KiB", "0.2%", "(in", "no", "frame", "of", "your", "code:", "1", "stack)"]])
        # The second is the threads' sparse stack, flagged.
        second = lines.index(next(l for l in lines if l.startswith("#2 ")))
        self.assertIn("4.0 MiB", lines[second])
        self.assertIn("reserved 512.0 MiB", lines[second])
        self.assertEqual(lines[second + 1].strip(), "sparse: reserved 512.0 MiB, resident 4.0 MiB")
        self.assertEqual(lines[second + 2].strip(), "your code: thread_fn (sparse_threads)")
        self.assertEqual(lines[second + 3].strip(), "\u2192 thread_fn (sparse_threads + 0x1200)")
        # A frame with no symbol: its module and offset, as flame graphs name it.
        self.assertEqual(lines[second + 5].strip(), "libc.so.6 + 0x126850")
        # The pseudo stack: a name without a module.
        third = lines.index(next(l for l in lines if l.startswith("#3 ")))
        self.assertIn("132.0 KiB", lines[third])
        self.assertIn("pseudo", lines[third])
        self.assertEqual(lines[third + 1].strip(), "\u2192 [before attach]")
        end = lines.index(next(l for l in lines if "functions at the peak" in l))
        self.assertNotIn("sparse:", "\n".join(lines[first:second] + lines[third:end]))

    def test_functions(self):
        """Per-function totals: inclusive counts a function once per stack, self only where innermost."""
        s = Snapshot()
        s.header(["./rec"], peak=(0.5, 7 * MiB, 7 * MiB, 8 * MiB))
        s.add("m", s.ref("/bin/rec"), "-", "400000")
        for i, name in enumerate(["main", "walk", "leaf", "other"]):
            s.add("f", 0, "%x" % (0x1000 + 16 * i), s.ref(name))
        # main -> walk -> walk -> leaf (recursion), and main -> other
        s.add("n", 0, 0)   # 1 main
        s.add("n", 1, 1)   # 2 walk
        s.add("n", 2, 1)   # 3 walk (recursive)
        s.add("n", 3, 2)   # 4 leaf
        s.add("n", 1, 3)   # 5 other
        s.add("k", 4, "h", 3 * MiB, 3 * MiB, 3)
        s.add("k", 3, "h", 1 * MiB, 1 * MiB, 1)   # walk itself allocates
        s.add("k", 5, "m", 3 * MiB, 3 * MiB, 1)
        out = view(self.write("rec.gz", s.gzip_bytes())).stdout.decode()
        rows = {}
        lines = out.splitlines()
        start = lines.index("4 functions at the peak, by inclusive bytes:")
        self.assertEqual(lines[start + 1].split(), ["inclusive", "share", "self", "share", "function"])
        for l in lines[start + 2:start + 6]:
            f = l.split()
            rows[f[-1]] = (f[0] + " " + f[1], f[3] + " " + f[4])
        self.assertEqual(rows["main"], ("7.0 MiB", "0 B"))
        self.assertEqual(rows["walk"], ("4.0 MiB", "1.0 MiB"))   # not 7 MiB: counted once per stack
        self.assertEqual(rows["leaf"], ("3.0 MiB", "3.0 MiB"))
        self.assertEqual(rows["other"], ("3.0 MiB", "3.0 MiB"))
        self.assertEqual([l.split()[-1] for l in lines[start + 2:start + 6]], ["main", "walk", "leaf", "other"])

    def test_live_at_exit(self):
        """What was still live at exit is listed as leak candidates; not once the process lives on."""
        path = self.write("seed.gz", seed_snapshot().gzip_bytes())
        out = view(path).stdout.decode()
        self.assertIn("still live at exit: 4.0 MiB charged, 512.0 MiB reserved, in 1 stack (leak candidates)", out)
        tail = out[out.index("still live at exit"):]
        self.assertIn("\u2192 thread_fn (sparse_threads + 0x1200)", tail)
        self.assertNotIn("main_big_map", tail)
        s = seed_snapshot()
        s.lines = [l if not l.startswith("x ") else "x -1" for l in s.lines]
        out = view(self.write("running.gz", s.gzip_bytes())).stdout.decode()
        self.assertIn("still live when written: 4.0 MiB charged", out)
        self.assertNotIn("leak candidates", out)

    def test_top_and_depth(self):
        path = self.write("seed.gz", seed_snapshot().gzip_bytes())
        out = view("--top", "1", path).stdout.decode()
        self.assertIn("top 1 of 3 stacks", out)
        self.assertIn("#1 ", out)
        self.assertNotIn("#2 ", out)
        self.assertIn("... 2 more stacks: 4.1 MiB", out)
        out = view("--depth", "1", path).stdout.decode()
        out = out[:out.index("functions at the peak")]
        self.assertIn("main_big_map", out)
        self.assertNotIn("__libc_start_call_main", out)
        self.assertIn("... 2 more", out)

    def test_deep_stack_is_cut(self):
        s = Snapshot()
        s.header(["./deep"])
        s.add("m", s.ref("/bin/deep"), "-", "400000")
        for i in range(30):
            s.add("f", 0, "%x" % (0x1000 + i), s.ref("f%d" % i))
            s.add("n", i, i)
        s.add("k", 30, "m", 1 * MiB, 1 * MiB, 1)
        out = view(self.write("deep.gz", s.gzip_bytes())).stdout.decode()
        self.assertIn("\u2192 f29 (deep + 0x101d)", out)
        self.assertIn("f18 (deep + 0x1012)", out)
        self.assertNotIn("f17 ", out)
        self.assertIn("... 18 more", out)

    def test_hostile_names_are_escaped(self):
        s = Snapshot()
        s.header(["./x\x1b[2J"])
        s.add("f", -1, "7f00", s.ref("evil\x1b]0;title\x07\udcff"))
        s.add("n", 0, 0)
        s.add("k", 1, "h", 10, 10, 1)
        r = view(self.write("evil.gz", s.gzip_bytes()))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"\x1b", r.stdout)
        self.assertNotIn(b"\x07", r.stdout)
        self.assertIn(b"evil\\x1b]0;title\\x07\\xff (0x7f00)", r.stdout)
        doc = json.loads(view("--json", self.write("evil.gz", s.gzip_bytes())).stdout)
        self.assertEqual(doc["stacks"][0]["frames"][0]["function"], "evil\x1b]0;title\x07\ufffd")
        self.assertEqual(doc["process"]["command"], ["./x\x1b[2J"])

    # ---- source lines and inlined calls (format 3) ---------------------------

    def source_snapshot(self, evil_file="/src/app/\x1b[2J<b>&\"x\";\udcff.c", vec_line=12, inline=True,
                        charged=3 * MiB):
        """main -> make_vector (an inlined push_back in it) -> libblob (no symbols) -> malloc; and a leak."""
        s = Snapshot(3)
        s.header(["./app"], peak=(0.5, charged + 4096, charged + 4096, charged + 8192))
        s.add("m", s.ref("/opt/app/bin/app"), "-", "555555554000")
        s.add("m", s.ref(LIBC), s.ref("0123456789abcdef"), "7ffff7c00000")
        s.add("m", s.ref("/opt/vendor/libblob.so"), "-", "7ffff7a00000")
        s.add("g", 0, "1100", s.ref("main"), s.ref("/src/app/main.c"), 40, 0)                      # 0
        s.add("g", 0, "1200", s.ref("make_vector"), s.ref("/src/app/vec.cc"), vec_line, 0)         # 1
        s.add("g", 0, "1200" if inline else "1800", s.ref("push_back"),
              s.ref("/usr/include/c++/12/bits/stl_vector.h"), 1189, 1 if inline else 0)         # 2
        s.add("f", 2, "2d1c0", "-")                                                              # 3
        s.add("g", 1, "a50a0", s.ref("malloc"), s.ref("malloc/malloc.c"), 3287, 0)                # 4
        s.add("g", 0, "1300", s.ref("parse"), s.ref(evil_file), 7, 0)                              # 5
        s.add("g", 2, "2d200", "-", s.ref("blob.c"), 0, 0)                                          # 6
        for parent, frame in ((0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (1, 5), (6, 4), (1, 6)):
            s.add("n", parent, frame)
        s.add("k", 5, "h", charged, charged, 3)
        s.add("k", 7, "h", 4096, 4096, 1)
        s.add("k", 8, "m", 8192, 8192, 1)
        s.add("l", 7, "h", 4096, 4096, 1)
        return s

    def test_source_lines_text(self):
        path = self.write("src.gz", self.source_snapshot().gzip_bytes())
        r = view("--depth", "10", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.decode()
        self.assertIn("    \u2192 malloc (malloc/malloc.c:3287, libc.so.6 + 0xa50a0)\n"
                      "      libblob.so + 0x2d1c0\n"
                      "      push_back (/usr/include/c++/12/bits/stl_vector.h:1189) [inlined]\n"
                      "      make_vector (/src/app/vec.cc:12, app + 0x1200)\n"
                      "      main (/src/app/main.c:40, app + 0x1100)\n", out)
        # A frame with a file but no name or line; the hostile file made harmless.
        self.assertIn("    \u2192 libblob.so + 0x2d200 (blob.c)\n", out)
        self.assertIn("      parse (/src/app/\\x1b[2J<b>&\"x\";\\xff.c:7, app + 0x1300)\n", out)
        self.assertNotIn(b"\x1b", r.stdout)
        self.assertNotIn("??", out)
        # The functions table names functions, not lines.
        self.assertRegex(out, r"\n +3\.0 MiB +[0-9.]+% +0 B +0\.0%  push_back\n")
        self.assertRegex(out, r"\n +3\.0 MiB +[0-9.]+% +0 B +0\.0%  libblob\.so \+ 0x2d1c0\n")

    def test_source_lines_json(self):
        path = self.write("src.gz", self.source_snapshot().gzip_bytes())
        doc = json.loads(view("--json", path).stdout)
        self.assertEqual(doc["snapshot_format_version"], 3)
        frames = doc["stacks"][0]["frames"]
        self.assertEqual(frames[0], {"kind": "native", "function": "malloc", "file": "malloc/malloc.c", "line": 3287,
                                     "module": LIBC, "build_id": "0123456789abcdef", "offset": 0xa50a0,
                                     "inlined": False})
        self.assertEqual(frames[1], {"kind": "native", "function": None, "file": None, "line": None,
                                     "module": "/opt/vendor/libblob.so", "build_id": None, "offset": 0x2d1c0,
                                     "inlined": False})
        self.assertEqual((frames[2]["function"], frames[2]["line"], frames[2]["inlined"]), ("push_back", 1189, True))
        self.assertEqual((frames[3]["function"], frames[3]["offset"], frames[3]["inlined"]),
                         ("make_vector", frames[2]["offset"], False))
        leak = doc["live_at_end"][0]["frames"]
        self.assertEqual(leak[1]["file"], "/src/app/\x1b[2J<b>&\"x\";\ufffd.c")
        blob = doc["stacks"][1]["frames"][0]
        self.assertEqual((blob["function"], blob["file"], blob["line"]), (None, "blob.c", None))

    def test_source_lines_flame(self):
        """Folded stacks and flame graphs: names without lines; the file and line in the tooltip."""
        path = self.write("src.gz", self.source_snapshot().gzip_bytes())
        folded = view("--folded", path).stdout.decode()
        self.assertEqual(folded.splitlines(), [
            "main;make_vector;push_back;libblob.so + 0x2d1c0;malloc %d" % (3 * MiB),
            "main;libblob.so + 0x2d200 8192",
            "main;parse;malloc 4096",
        ])
        svg = view("--svg", path).stdout.decode()
        self.assertIn("<title>push_back\nin app\nat /usr/include/c++/12/bits/stl_vector.h:1189\n"
                      "inlined into its caller\n", svg)
        self.assertIn("<title>make_vector\nin app\nat /src/app/vec.cc:12\ncharged ", svg)
        self.assertIn("<title>libblob.so + 0x2d1c0\nin libblob.so\ncharged ", svg)
        self.assertIn(">push_back</text>", svg)
        # malloc is reached from two lines' calls (make_vector's and parse's): two nodes, each with its line.
        self.assertEqual(svg.count("<title>malloc\nin libc.so.6\nat malloc/malloc.c:3287\n"), 2)
        html = view("--html", path).stdout.decode()
        for doc_text in (svg, html):
            self.assertNotIn("\x1b", doc_text)
            self.assertNotIn("<b>", doc_text)
        self.assertIn('<span class="fn" title="malloc/malloc.c:3287, libc.so.6 + 0xa50a0">malloc</span>', html)
        self.assertIn('<span class="fn">libblob.so + 0x2d1c0</span>', html)
        self.assertIn('<span class="fn" title="/usr/include/c++/12/bits/stl_vector.h:1189">push_back</span> '
                      '<span class="mod">[inlined]</span>', html)
        self.assertIn('<span class="fn">make_vector</span> <span class="mod">/src/app/vec.cc:12, app + 0x1200</span>',
                      html)
        self.assertIn('/src/app/\\x1b[2J&lt;b&gt;&amp;&quot;x&quot;;\\xff.c:7', html)

    def test_source_lines_diff(self):
        """A rebuild that moves lines and stops inlining a call still matches every stack by name."""
        before = self.write("a.gz", self.source_snapshot().gzip_bytes())
        after = self.write("b.gz", self.source_snapshot(vec_line=14, inline=False, charged=5 * MiB).gzip_bytes())
        doc = json.loads(view("--diff", "--json", before, after).stdout)
        self.assertEqual((doc["changes_total"], doc["stacks_grown"], doc["stacks_shrunk"]), (1, 1, 0))
        frames = doc["changes"][0]["frames"]
        self.assertEqual([f["function"] for f in frames], ["malloc", "libblob.so + 0x2d1c0", "push_back",
                                                            "make_vector", "main"])
        self.assertEqual(frames[0], {"kind": "native", "function": "malloc", "file": "malloc/malloc.c",
                                     "line": 3287, "module": "libc.so.6", "inlined": False})
        self.assertEqual((frames[2]["line"], frames[2]["inlined"]), (1189, None))   # inlined in one run only
        self.assertEqual((frames[3]["file"], frames[3]["line"]), ("/src/app/vec.cc", None))  # lines 12 and 14
        out = view("--diff", before, after).stdout.decode()
        self.assertIn("1 stack grew, 0 shrank", out)
        self.assertIn("    \u2192 malloc (malloc/malloc.c:3287, libc.so.6)\n"
                      "      libblob.so + 0x2d1c0 (libblob.so)\n"
                      "      push_back (/usr/include/c++/12/bits/stl_vector.h:1189, app) [partly inlined]\n"
                      "      make_vector (/src/app/vec.cc, app)\n"
                      "      main (/src/app/main.c:40, app)\n", out)
        folded = view("--diff", "--folded", before, after).stdout.decode()
        self.assertIn("main;make_vector;push_back;libblob.so + 0x2d1c0;malloc %d %d\n" % (3 * MiB, 5 * MiB), folded)

    # ---- JSON --------------------------------------------------------------

    def test_json(self):
        path = self.write("seed.gz", seed_snapshot().gzip_bytes())
        r = view("--json", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")
        doc = json.loads(r.stdout)
        self.assertEqual(doc["format_version"], 1)
        self.assertEqual(doc["snapshot_format_version"], 1)
        self.assertEqual(doc["ptfil_version"], "0.1.0-test")
        p = doc["process"]
        self.assertEqual(p["pid"], 4242)
        self.assertEqual(p["command"], ARGV)
        self.assertEqual(p["mode"], "launch")
        self.assertEqual(p["start_time"], 1700000000.25)
        self.assertEqual(p["duration_s"], 1.5)
        self.assertEqual(p["exit_status"], 0)
        self.assertEqual(p["vmhwm_bytes"], 60 * MiB)
        self.assertEqual(p["page_size"], 4096)
        self.assertEqual(doc["peak"], {"time_s": 0.75, "charged_bytes": 54 * MiB,
                                       "reserved_bytes": 562 * MiB, "rss_bytes": 57 * MiB})
        self.assertEqual(doc["stacks_total"], 3)
        want = sorted(STACKS, key=lambda st: (-st[2], -st[3]))
        self.assertEqual(len(doc["stacks"]), len(want))
        kinds = {"m": "mmap", "b": "brk", "h": "heap", "p": "pseudo"}
        for got, (node, kind, charged, reserved, count) in zip(doc["stacks"], want):
            self.assertEqual(got["charged_bytes"], charged)
            self.assertEqual(got["reserved_bytes"], reserved)
            self.assertEqual(got["count"], count)
            self.assertEqual(got["kind"], kinds[kind])
            self.assertEqual(got["sparse"], reserved >= 4 * charged and reserved - charged >= MiB)
            self.assertEqual(got["frames"], expected_frames(node))
        self.assertEqual(doc["stacks"][0]["frames"][0]["function"], "main_big_map")
        self.assertEqual(len(doc["live_at_end"]), 1)
        self.assertEqual(doc["live_at_end"][0]["frames"], expected_frames(6))
        self.assertEqual(doc["timeline"], [{"time_s": t, "charged_bytes": c, "rss_bytes": r}
                                           for t, c, r in SAMPLES])
        self.assertEqual(doc["counters"], dict(COUNTERS))
        for v in (doc["process"]["pid"], doc["peak"]["charged_bytes"],
                  doc["stacks"][0]["frames"][0]["offset"]):
            self.assertIsInstance(v, int)
        # --top limits the JSON stacks too when given.
        doc = json.loads(view("--json", "--top", "1", path).stdout)
        self.assertEqual(len(doc["stacks"]), 1)
        self.assertEqual(doc["stacks_total"], 3)

    def test_json_not_exited_and_plain_text(self):
        s = Snapshot()
        s.header(["./still-running"], mode="attach", exit_status=-1)
        s.add("k", 0, "b", 0, 0, 0)
        # An uncompressed snapshot is read too.
        r = view("--json", self.write("plain.txt", s.text().encode()))
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertIsNone(doc["process"]["exit_status"])
        self.assertEqual(doc["process"]["mode"], "attach")
        self.assertEqual(doc["stacks"][0]["frames"], [])
        self.assertEqual(doc["counters"], {})
        out = view(self.write("plain.txt", s.text().encode())).stdout.decode()
        self.assertIn("had not exited", out)
        self.assertIn("(no call stack)", out)

    # ---- errors ------------------------------------------------------------

    # ---- a process tree (format 4) ------------------------------------------

    def tree(self, procs=TREE_PROCS, stacks=TREE_STACKS, combined=(0.6, 135 * MiB), name="run.gz"):
        return self.write(name, tree_snapshot(procs, combined, stacks).gzip_bytes())

    def test_tree_report(self):
        path = self.tree()
        r = view(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")
        out = r.stdout.decode()
        self.assertIn("\n4 processes, 4 profiled, each under the one that started it:\n", out)
        # The tree: each process under the one that started it, indented by two spaces a level.
        self.assertIn("    4242   54.0 MiB  750.0 ms     4.0 MiB   3.0%  ./sparse_threads hello\n"
                      "    4300    1.0 MiB  100.0 ms     1.0 MiB   0.7%    /bin/sh -c work\n"
                      "    4301  100.0 MiB  600.0 ms   100.0 MiB  74.1%      /usr/bin/worker --id 1\n"
                      "    4302   80.0 MiB    1.00 s    30.0 MiB  22.2%      /usr/bin/worker --id 2\n"
                      "combined peak 135.0 MiB at 600.0 ms (sum of the processes' own peaks 235.0 MiB)\n", out)
        # The combined peak's stacks end in their process.
        self.assertIn("#1   100.0 MiB  74.1%  reserved 128.0 MiB  mmap, 1 live\n"
                      "      your code: thread_fn (sparse_threads)\n"
                      "    \u2192 thread_fn (sparse_threads + 0x1200)\n"
                      "      start_thread (libc.so.6 + 0x94ac3)\n"
                      "      libc.so.6 + 0x126850\n"
                      "      [pid 4301: /usr/bin/worker --id 1]\n", out)
        self.assertIn("#4     1.0 MiB   0.7%  reserved 1.0 MiB  pseudo, 1 live\n"
                      "      (no call stack)\n"
                      "      [pid 4300: /bin/sh -c work]\n", out)
        self.assertIn("\nthe main process alone (pid 4242; ptfil-view --pid PID shows any one):\n"
                      "peak     54.0 MiB charged at 750.0 ms", out)

        # Folded: one root per command, the two workers merged under "worker".
        r = view("--folded", path)
        folded = dict(l.rsplit(" ", 1) for l in r.stdout.decode().splitlines())
        self.assertEqual(folded, {
            "worker;libc.so.6 + 0x126850;start_thread;thread_fn": str(130 * MiB),
            "sparse_threads;__libc_start_call_main;main;main_big_map": str(4 * MiB),
            "sh;[no stack]": str(MiB),
        })
        # --pid of the main process: its own stacks alone, as a format-3 snapshot showed them.
        r = view("--folded", "--pid", "4242", path)
        self.assertEqual(r.stdout, view("--folded", self.write("seed.gz", seed_snapshot().gzip_bytes())).stdout)

        doc = json.loads(view("--json", path).stdout)
        self.assertEqual(doc["tree"]["combined_peak_bytes"], 135 * MiB)
        self.assertEqual(doc["tree"]["time_s"], 0.6)
        self.assertEqual(doc["tree"]["processes"][3], {
            "pid": 4302, "ppid": 4300, "command": "/usr/bin/worker --id 2", "profiled": True,
            "peak_bytes": 80 * MiB, "peak_time_s": 1.0, "at_combined_peak_bytes": 30 * MiB,
            "vmhwm_bytes": 90 * MiB, "start_s": 0.2, "end_s": None, "file": "run.4302.gz"})
        self.assertEqual([(st["pid"], st["charged_bytes"]) for st in doc["combined_peak_stacks"]],
                         [(4301, 100 * MiB), (4302, 30 * MiB), (4242, 4 * MiB), (4300, MiB)])
        self.assertEqual(doc["combined_peak_stacks"][0]["frames"], expected_frames(6))

    def test_tree_pid(self):
        """--pid N shows the child's own snapshot, as viewing its file does; bad names and pids are refused."""
        path = self.tree()
        child = seed_snapshot(version=4)
        self.write("run.4301.gz", child.gzip_bytes())
        direct = view(os.path.join(self.dir, "run.4301.gz"))
        for args in ([], ["--json"], ["--folded"], ["--svg"]):
            with self.subTest(args=args):
                r = view(*args, "--pid", "4301", path)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout, view(*args, os.path.join(self.dir, "run.4301.gz")).stdout)
        self.assertEqual(view("--pid", "4301", path).stdout, direct.stdout)
        # Relative to SNAPSHOT's directory, not the current one.
        r = view("--pid", "4301", "run.gz", cwd=self.dir)
        self.assertEqual(r.stdout, direct.stdout)

        def refused(pid, snap, *words):
            r = view("--pid", str(pid), snap)
            err = r.stderr.decode("utf-8", "replace")
            self.assertEqual(r.returncode, 1, err)
            self.assertEqual(r.stdout, b"")
            self.assertEqual(err.count("\n"), 1, err)
            for w in words:
                self.assertIn(w, err)

        refused(4302, path, "run.4302.gz", "missing")
        refused(999, path, "no process 999")
        # A file name from the file must name a file beside it: no directory, no "..".
        self.write("secret.gz", child.gzip_bytes())
        os.mkdir(os.path.join(self.dir, "sub"))
        for bad in ("../secret.gz", "..", ".", "sub/../secret.gz", "/etc/passwd", "sub/x"):
            with self.subTest(file=bad):
                procs = list(TREE_PROCS)
                procs[2] = procs[2][:10] + (bad,)
                snap = self.tree(procs, name="bad.gz")
                refused(4301, os.path.join(self.dir, "sub", "..", "bad.gz") if bad == "." else snap,
                        "invalid file name")
        # Not profiled: no snapshot of its own.
        procs = list(TREE_PROCS) + [(4400, 4242, 0, 0, 0.0, 0, 3 * MiB, 1.0, 1.1, "cat", None)]
        refused(4400, self.tree(procs, name="np.gz"), "was not profiled")
        # --pid is for one snapshot, not a diff.
        r = view("--diff", "--pid", "4301", path, path)
        self.assertEqual(r.returncode, 2)

    def test_unprofiled_children(self):
        """Without --follow-forks: the children seen, not profiled, in one line; no combined peak."""
        procs = [(4242, 0, 1, 54 * MiB, 0.75, 0, 60 * MiB, 0.0, 1.5, "./sparse_threads", None),
                 (4243, 4242, 0, 0, 0.0, 0, 240 * MiB, 0.1, 1.2, "/usr/lib/gcc/cc1 -quiet big.c", None),
                 (4244, 4242, 0, 0, 0.0, 0, 8 * MiB, 1.2, 1.4, "as -o big.o", None)]
        path = self.write("np.gz", tree_snapshot(procs).gzip_bytes())
        out = view(path).stdout.decode()
        self.assertIn("\nchildren 2 processes not profiled, the largest peak RSS 240.0 MiB "
                      "(/usr/lib/gcc/cc1 -quiet big.c); --follow-forks profiles them\n", out)
        self.assertNotIn("combined peak", out)
        doc = json.loads(view("--json", path).stdout)
        self.assertIsNone(doc["tree"]["combined_peak_bytes"])
        self.assertIsNone(doc["tree"]["time_s"])
        self.assertEqual(doc["tree"]["processes"][1]["vmhwm_bytes"], 240 * MiB)
        self.assertIsNone(doc["tree"]["processes"][1]["peak_bytes"])
        self.assertEqual(doc["combined_peak_stacks"], [])
        # The folded stacks are the process's own peak, as before.
        self.assertEqual(view("--folded", path).stdout,
                         view("--folded", self.write("seed.gz", seed_snapshot().gzip_bytes())).stdout)
        # A snapshot without a tree has no "tree" in JSON.
        self.assertNotIn("tree", json.loads(view("--json", self.write("seed.gz", seed_snapshot().gzip_bytes())).stdout))

    def test_tree_hostile(self):
        """Commands from the file are escaped everywhere; a ppid cycle and pid reuse still list every process."""
        evil = "\x1b[2J<b>&\"evil\";\udcff --x"
        procs = [(4242, 0, 1, MiB, 0.1, MiB, MiB, 0.0, 1.0, "main", None),
                 (7, 8, 1, MiB, 0.1, MiB, MiB, 0.0, 1.0, evil, "a.gz"),
                 (8, 7, 1, MiB, 0.1, MiB, MiB, 0.0, 1.0, "/x/" + evil, "b.gz"),
                 (7, 4242, 1, MiB, 0.1, MiB, MiB, 0.5, 1.0, "again", "c.gz")]
        stacks = [(3, "m", MiB, MiB, 1, 1), (3, "m", MiB, MiB, 1, 2), (6, "m", MiB, MiB, 1, 3)]
        path = self.write("evil.gz", tree_snapshot(procs, (0.5, 4 * MiB), stacks).gzip_bytes())
        for args in ([], ["--folded"], ["--svg"], ["--html"], ["--json"], ["--top", "1"]):
            with self.subTest(args=args):
                r = view(*args, path)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNotIn(b"\x1b", r.stdout)
                if "--svg" in args or "--html" in args:
                    self.assertNotIn(b"<b>", r.stdout)
                    self.assertIn(b"&lt;b&gt;&amp;", r.stdout)
        out = view(path).stdout.decode()
        self.assertIn("      [pid 7: \\x1b[2J<b>&\"evil\";\\xff --x]\n", out)
        for pid in ("4242", "7", "8"):
            self.assertTrue(any(l.split()[:1] == [pid] for l in out.splitlines()), pid)
        self.assertIn("4 processes, 4 profiled", out)
        folded = view("--folded", path).stdout.decode()
        self.assertIn("\\x1b[2J<b>&\"evil\":\\xff;__libc_start_call_main;main;main_big_map " + str(2 * MiB), folded)
        doc = json.loads(view("--json", path).stdout)
        self.assertEqual(doc["tree"]["processes"][1]["command"], "\x1b[2J<b>&\"evil\";\ufffd --x")

    def test_missing_file(self):
        self.assert_read_error(os.path.join(self.dir, "absent.gz"), "No such file")

    def test_truncated_gzip(self):
        data = seed_snapshot().gzip_bytes()
        for cut in (len(data) // 2, len(data) - 4, 12):
            path = self.write("cut%d.gz" % cut, data[:cut])
            self.assert_read_error(path, "truncated")

    def test_no_end_marker(self):
        path = self.write("noend.gz", seed_snapshot().gzip_bytes(end=False))
        self.assert_read_error(path, "truncated (no end marker)")

    def test_corrupt(self):
        data = bytearray(seed_snapshot().gzip_bytes())
        data[len(data) // 2] ^= 0x55
        self.assert_read_error(self.write("corrupt.gz", bytes(data)))
        s = seed_snapshot()
        s.add("n", 99, 0)
        self.assert_read_error(self.write("badref.gz", s.gzip_bytes()),
                               "parent node 99 refers to nothing")
        self.assert_read_error(self.write("random.bin", bytes(range(256)) * 16),
                               "not a ptfil snapshot")

    def test_newer_version(self):
        path = self.write("v7.gz", seed_snapshot(version=7).gzip_bytes())
        err = self.assert_read_error(path, "line 1:")
        self.assertIn("snapshot format 7 is newer than this ptfil-view reads (5); upgrade ptfil", err)

    # ---- command line ------------------------------------------------------

    def test_usage(self):
        r = view("--version")
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.decode().startswith("ptfil-view "))
        r = view("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--json", r.stdout.decode())
        for args in ([], ["--bogus", "x"], ["--top"], ["--top", "ten", "x"], ["a", "b"]):
            r = view(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(r.stdout, b"")
            self.assertTrue(r.stderr.startswith(b"ptfil-view: "), r.stderr)


if __name__ == "__main__":
    unittest_main("test_view", [VIEW])
