#!/usr/bin/env python3
"""Golden files for ptfil-view, and the diff.

The fixtures in tests/golden/ are snapshots: four written by ptfil itself from
the bundled targets (the seed scenario, a malloc chain, a realloc run, C++
containers), one written by hand with names a renderer must escape, and one
written by hand in format 2 with a Python program's stacks (Python frames
among native ones; python_after.snap is the same program after a change, for
the diff), and one written for these tests in format 3 with a C++ program's
source lines and inlined calls (srclines_after.snap is it rebuilt, lines
moved and a call no longer inlined, for the diff), and one written for these
tests in format 4 with a process tree (tree.snap: `gcc -c` of two files
followed with --follow-forks, its combined peak and every process's stacks
then; tree.101.snap is the snapshot of one of its children, for --pid), and
one written for these tests in format 5 in the touch view (touch.snap: each
resident page charged to the stack that made it resident, with the alloc
view of the same moment beside it, a sparse 128 MiB mapping with 1 MiB
resident and a heap block, and the links between the two views). The
format-1 fixtures stay
format 1: old files must still read. Each
output mode of ptfil-view is compared with the expected file beside them with
`diff -u`. PTFIL_UPDATE_GOLDEN=1 rewrites the expected files (then read the
git diff before committing them).

The golden files only pin what was reviewed once; the checks that do not
depend on them recompute the folded stacks and the diffs from the snapshot
text with a second, independent reader written here.
"""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptfiltest import MiB, SRCDIR, VIEW, unittest_main, view  # noqa: E402

GOLDEN = os.path.join(SRCDIR, "tests", "golden")
EXPECTED = os.path.join(GOLDEN, "expected")
UPDATE = os.environ.get("PTFIL_UPDATE_GOLDEN") == "1"
TIMEOUT = 60

FIXTURES = ["seed.snap.gz", "heap_chain.snap", "heap_realloc.snap", "cxx.snap", "hostile.snap", "python.snap",
            "srclines.snap", "tree.snap", "touch.snap"]
VIEWS = {
    "txt": [],
    "top3.txt": ["--top", "3", "--depth", "4"],
    "json": ["--json"],
    "folded": ["--folded"],
    "live.folded": ["--folded", "--live"],
}
DIFFS = {
    # name: (before, after)
    "chain-vs-realloc": ("heap_chain.snap", "heap_realloc.snap"),
    "tree-vs-self": ("tree.snap", "tree.snap"),
    "python-vs-after": ("python.snap", "python_after.snap"),
    "srclines-vs-after": ("srclines.snap", "srclines_after.snap"),
    "chain-vs-touch": ("heap_chain.snap", "touch.snap"),  # two views: said, and compared all the same
}
DIFF_VIEWS = {"txt": [], "json": ["--json"], "folded": ["--folded"]}


def slurp(path):
    with open(path, "rb") as f:
        return f.read()


# ---- an independent reader of the snapshot text (docs/snapshot-format.md) ----

def unescape(text):
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c == 0x5C:
            n = text[i + 1]
            if n == 0x5C:
                out.append(0x5C)
                i += 2
            elif n == ord("n"):
                out.append(0x0A)
                i += 2
            else:
                out.append(int(text[i + 2:i + 4], 16))
                i += 4
        else:
            out.append(c)
            i += 1
    return bytes(out)


def read_snapshot(path):
    data = slurp(path)
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    snap = {"strings": [], "modules": [], "frames": [], "nodes": [(0, None)], "k": [], "l": [], "j": [], "P": [],
            "r": None, "view": "alloc", "K": [], "X": []}
    for line in data.split(b"\n")[1:]:
        if not line or line.startswith(b"#"):
            continue
        tag, rest = line[:1], line[2:]
        if tag == b"s":
            snap["strings"].append(unescape(rest))
            continue
        f = rest.split(b" ") if rest else []
        if tag == b"m":
            snap["modules"].append(snap["strings"][int(f[0])])
        elif tag == b"f":
            fn = None if f[2] == b"-" else snap["strings"][int(f[2])]
            snap["frames"].append((int(f[0]), int(f[1], 16), fn))
        elif tag == b"g":
            # A native frame with its source line (format 3): labels use neither the line nor the inlining.
            fn = None if f[2] == b"-" else snap["strings"][int(f[2])]
            snap["frames"].append((int(f[0]), int(f[1], 16), fn))
            snap.setdefault("src", {})[len(snap["frames"]) - 1] = (
                None if f[3] == b"-" else snap["strings"][int(f[3])], int(f[4]), f[5] == b"1")
        elif tag == b"y":
            # A Python frame: (None, line, function, file); numbered with the `f` frames.
            fn = None if f[1] == b"-" else snap["strings"][int(f[1])]
            snap["frames"].append((None, int(f[0]), fn, snap["strings"][int(f[2])]))
        elif tag == b"n":
            snap["nodes"].append((int(f[0]), int(f[1])))
        elif tag in (b"k", b"l", b"K"):
            snap[tag.decode()].append((int(f[0]), f[1].decode(), int(f[2]), int(f[3]), int(f[4])))
        elif tag == b"v":
            # The view (format 5): alloc without it.
            snap["view"] = snap["strings"][int(f[0])].decode()
        elif tag == b"X":
            # A link between the views: touch node, alloc node, bytes.
            snap["X"].append((int(f[0]), int(f[1]), int(f[2])))
        elif tag == b"P":
            # A process of the tree (format 4): pid, ppid, profiled, peak, peak time, at the combined peak,
            # VmHWM, start, end, command, file.
            snap["P"].append({"pid": int(f[0]), "ppid": int(f[1]), "profiled": f[2] == b"1", "peak": int(f[3]),
                              "peak_time": float(f[4]), "at_combined": int(f[5]), "vmhwm": int(f[6]),
                              "start": float(f[7]), "end": float(f[8]),
                              "command": None if f[9] == b"-" else snap["strings"][int(f[9])],
                              "file": None if f[10] == b"-" else snap["strings"][int(f[10])]})
        elif tag == b"r":
            snap["r"] = (float(f[0]), int(f[1]))
        elif tag == b"j":
            # A stack at the combined peak: as `k`, then the process by its number among the P records.
            snap["j"].append((int(f[0]), f[1].decode(), int(f[2]), int(f[3]), int(f[4]), int(f[5])))
    return snap


def safe(raw):
    """The label text rules of tools/flame.h: control bytes and invalid UTF-8 as \\xHH."""
    out = []
    i = 0
    while i < len(raw):
        for n in (4, 3, 2, 1):
            try:
                ch = raw[i:i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(ch) == 1 and (n > 1 or (0x20 <= raw[i] < 0x7F)):
                out.append(ch)
                i += n
                break
        else:
            out.append("\\x%02x" % raw[i])
            i += 1
    s = "".join(out)
    if len(s.encode()) > 400:
        s = s.encode()[:397].decode("utf-8", "ignore") + "..."
    return s


def short_file(path):
    """A Python source file as labels show it: its module path (docs/json-output.md)."""
    cut = None
    for site in (b"/site-packages/", b"/dist-packages/"):
        i = path.rfind(site)
        if i >= 0 and path[i + len(site):] and (cut is None or i + len(site) > cut):
            cut = i + len(site)
    if cut is None:
        for m in re.finditer(rb"/lib(?:64)?/python3\.[0-9]+t?/", path):
            if path[m.end():]:
                cut = m.end()
    return path[cut:] if cut is not None else path


def label(snap, fi, with_line=True):
    if snap["frames"][fi][0] is None:
        _, line, fn, file = snap["frames"][fi]
        text = (fn or b"?") + b" (" + (short_file(file) if file else b"?")
        if with_line and line:
            text += b":%d" % line
        return safe(text + b")")
    module, offset, fn = snap["frames"][fi]
    if fn:
        return safe(fn)
    if module >= 0:
        return safe(snap["modules"][module].rsplit(b"/", 1)[-1]) + " + 0x%x" % offset
    return "0x%x" % offset


def stack_labels(snap, node):
    """Labels of a stack, outermost first."""
    out = []
    while node:
        parent, frame = snap["nodes"][node]
        out.append(label(snap, frame))
        node = parent
    return list(reversed(out)) or ["[no stack]"]


def process_label(proc):
    """A process's outermost frame at the combined peak: its command's first word, base name."""
    word = (proc["command"] or b"").split(b" ", 1)[0].rsplit(b"/", 1)[-1]
    return safe(word) if word else "[pid %d]" % proc["pid"]


def folded_expected(snap, which="k"):
    """Folded stacks computed from the snapshot: {"a;b;c": bytes}, zero entries dropped.
    For the combined peak ("j"), each stack under its process's command."""
    out = {}
    for rec in snap[which]:
        node, charged = rec[0], rec[2]
        labels = stack_labels(snap, node)
        if which == "j":
            labels = [process_label(snap["P"][rec[5]])] + labels
        key = ";".join(l.replace(";", ":") for l in labels)
        out[key] = out.get(key, 0) + charged
    return {k: v for k, v in out.items() if v}


def parse_folded(text, columns=1):
    out = {}
    for line in text.splitlines():
        parts = line.rsplit(" ", columns)
        vals = tuple(int(x) for x in parts[1:])
        out[parts[0]] = vals[0] if columns == 1 else vals
    return out


class GoldenTest(unittest.TestCase):
    maxDiff = None

    def compare(self, name, args):
        # Run beside the fixtures and name them bare: outputs that show file names stay the same anywhere.
        r = view(*args, cwd=GOLDEN)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(r.stderr, b"")
        expected = os.path.join(EXPECTED, name)
        if UPDATE:
            os.makedirs(EXPECTED, exist_ok=True)
            with open(expected, "wb") as f:
                f.write(r.stdout)
            return
        self.assertTrue(os.path.exists(expected), "no golden file %s (run with PTFIL_UPDATE_GOLDEN=1)" % expected)
        with tempfile.NamedTemporaryFile(prefix="golden.", suffix="." + name) as got:
            got.write(r.stdout)
            got.flush()
            d = subprocess.run(["diff", "-u", expected, got.name], stdout=subprocess.PIPE, timeout=TIMEOUT)
        self.assertEqual(d.returncode, 0, "output differs from %s:\n%s" % (expected, d.stdout.decode(errors="replace")))

    def test_golden_views(self):
        for fixture in FIXTURES:
            for suffix, args in VIEWS.items():
                with self.subTest(fixture=fixture, view=suffix):
                    self.compare("%s.%s" % (fixture, suffix), args + [fixture])

    def test_golden_diffs(self):
        for name, (a, b) in DIFFS.items():
            for suffix, args in DIFF_VIEWS.items():
                with self.subTest(diff=name, view=suffix):
                    self.compare("%s.diff.%s" % (name, suffix),
                                 ["--diff"] + args + [a, b])

    # ---- checks that do not rely on the golden files ----------------------

    def test_folded_matches_snapshot(self):
        """Every stack's bytes, outermost frame first, as the snapshot holds them; totals equal the peak's stacks."""
        for fixture in FIXTURES:
            with self.subTest(fixture=fixture):
                path = os.path.join(GOLDEN, fixture)
                snap = read_snapshot(path)
                sets = (("k", []), ("l", ["--live"]))
                if snap["r"]:
                    # A followed run: the combined peak by default, the main process's own with --pid.
                    sets = (("j", []), ("k", ["--pid", str(snap["P"][0]["pid"])]), ("l", ["--live"]))
                for which, args in sets:
                    r = view("--folded", "--raw-frames", *args, path)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(parse_folded(r.stdout.decode()), folded_expected(snap, which))
                    self.assertEqual(sum(parse_folded(r.stdout.decode()).values()),
                                     sum(k[2] for k in snap[which]))
                    # Folded by default: import machinery gone, every byte still there.
                    r = view("--folded", *args, path)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    folded = parse_folded(r.stdout.decode())
                    self.assertEqual(sum(folded.values()), sum(k[2] for k in snap[which]))
                    self.assertFalse([k for k in folded if "<frozen importlib._bootstrap" in k], folded)

    def test_functions_of_the_chain(self):
        """The malloc chain: f0, f1 and f2 each hold the 2000 blocks of 10000 bytes inclusively, f2 as self."""
        out = view(os.path.join(GOLDEN, "heap_chain.snap")).stdout.decode()
        rows = {}
        lines = out.splitlines()
        start = next(i for i, l in enumerate(lines) if "functions at the peak" in l)
        for l in lines[start + 2:]:
            if not l.strip():
                break
            f = l.split()
            rows[f[-1]] = (f[0] + " " + f[1], f[3] + " " + f[4])
        self.assertEqual(rows["f0"][0], "19.1 MiB")   # 20,000,000 bytes
        self.assertEqual(rows["f2"][0], "19.1 MiB")
        self.assertEqual(rows["f0"][1], "0 B")
        self.assertEqual(rows["malloc"][1], "19.1 MiB")  # the innermost frame is the hooked function

    def test_python_frames(self):
        """python.snap: Python frames read as FUNCTION (FILE:LINE); a function's lines count as one function."""
        path = os.path.join(GOLDEN, "python.snap")
        snap = read_snapshot(path)
        out = view("--top", "0", "--depth", "30", "--raw-frames", path).stdout.decode()
        lines = out.splitlines()
        start = next(i for i, l in enumerate(lines) if "functions at the peak" in l)
        rows = {}
        for l in lines[start + 2:]:
            if not l.strip():
                break
            rows[l[37:]] = (l[:10].strip(), l[18:28].strip())
        self.assertEqual(rows["make_arrays (demo.py)"], ("80.0 MiB", "0 B"))   # lines 12 and 14
        self.assertEqual(rows["<module> (demo.py)"], ("130.0 MiB", "0 B"))
        self.assertEqual(rows["JSONDecoder.raw_decode (json/decoder.py)"], ("4.0 MiB", "0 B"))
        self.assertEqual(rows["Model._grow.<locals>.step (toolkit/model.py)"], ("8.0 MiB", "0 B"))
        self.assertEqual(rows["? (<string>)"], ("2.0 MiB", "0 B"))
        self.assertFalse([r for r in rows if re.search(r"\.py:[0-9]+\)$", r)], "a row per line")
        # Every Python frame's function, in the functions table, as the independent reader groups them.
        groups = {label(snap, i, with_line=False) for i, fr in enumerate(snap["frames"])
                  if fr[0] is None and any(n[1] == i for n in snap["nodes"][1:])}
        self.assertTrue(groups <= set(rows), groups - set(rows))
        # The stack listing names the whole file and the line.
        self.assertIn("      load_config (/home/u/proj/settings.py:20)\n", out)
        self.assertIn("      Model._grow.<locals>.step (/home/u/venv/lib/python3.11/site-packages/toolkit/model.py)\n", out)
        # By default the import system's frames are one frame, named by what was imported, at the
        # script's line that imported it; the user's own frame heads each stack.
        folded = view("--top", "0", "--depth", "30", path).stdout.decode()
        self.assertNotIn("<frozen importlib._bootstrap", folded)
        self.assertIn("      [import numpy]\n      <module> (demo.py:3)\n", folded)
        self.assertIn("      your code: load_config (/home/u/proj/settings.py:20)\n", folded)
        self.assertIn("      your code: make_arrays (demo.py:12)\n", folded)
        self.assertIn("      <module> (/home/u/venv/lib/python3.11/site-packages/numpy/__init__.py:130)\n", out)
        self.assertNotIn("\x1b", out)

        # A stack with Python frames shows its innermost frame, the user's own frames whatever the
        # depth and the call the innermost of them made, then up to --depth frames from its innermost
        # Python frame outwards; what is left out is counted.
        out = view("--top", "2", "--depth", "2", path).stdout.decode()
        self.assertIn("      your code: make_arrays (demo.py:12)\n"
                      "    \u2192 malloc (libc.so.6 + 0xa50a0)\n"
                      "      PyByteArray_Resize (python3.11 + 0x1c2f40)\n"
                      "      make_arrays (demo.py:12)\n"
                      "      <module> (demo.py:30)\n#2 ", out)
        self.assertIn("      your code: <module> (demo.py:3)\n"
                      "    \u2192 mmap (libc.so.6 + 0x11eb10)\n"
                      "      ... 10 more\n"
                      "      [import numpy]\n"
                      "      <module> (demo.py:3)\n", out)
        # With --raw-frames, every import-system frame is there to count and, past the user's, to list.
        out = view("--top", "2", "--depth", "4", "--raw-frames", path).stdout.decode()
        self.assertIn("      _find_and_load (<frozen importlib._bootstrap>:1176)\n      <module> (demo.py:3)\n", out)
        after = os.path.join(GOLDEN, "python_after.snap")
        out = view("--diff", "--depth", "1", path, after).stdout.decode()
        self.assertIn("    \u2192 malloc (libc.so.6)\n      ... 1 more\n      make_arrays (demo.py:12)\n"
                      "      ... 1 more\n#2 ", out)
        self.assertIn("      ... 1 more\n      JSONDecoder.raw_decode (json/decoder.py:353)\n      ... 4 more\n", out)
        before, doubled, _, _ = self.doubled("python.snap", 2)  # the OpenBLAS buffers of `import numpy`
        diff_html = view("--diff", "--html", before, doubled).stdout.decode()
        self.assertTrue('<span class="arrow">\u2026</span> <span class="arrow">\u2190</span> <span class="fn py" '
                        'title="/home/u/venv/lib/python3.11/site-packages/numpy/__init__.py">'
                        '&lt;module&gt; (numpy/__init__.py:130)</span> <span class="arrow">\u2190</span> '
                        '<span class="arrow">\u2026</span>' in diff_html)

        # JSON: one schema for both kinds of frame.
        doc = json.loads(view("--json", path).stdout)
        kinds = set()
        for st in doc["stacks"] + doc["live_at_end"]:
            for fr in st["frames"]:
                kinds.add(fr["kind"])
                self.assertEqual(set(fr), {"kind", "function", "file", "line", "module", "build_id", "offset",
                                           "inlined"})
                self.assertFalse(fr["inlined"])
                if fr["kind"] == "native":
                    self.assertEqual((fr["file"], fr["line"]), (None, None))  # format 2: no source lines
                else:
                    self.assertEqual((fr["module"], fr["build_id"], fr["offset"]), (None, None, None))
                    self.assertIsInstance(fr["file"], str)
                    self.assertTrue(fr["line"] is None or fr["line"] > 0)
        self.assertEqual(kinds, {"native", "python"})
        frames = [fr for st in doc["stacks"] for fr in st["frames"] if fr["kind"] == "python"]
        self.assertIn({"kind": "python", "function": "Model._grow.<locals>.step",
                       "file": "/home/u/venv/lib/python3.11/site-packages/toolkit/model.py", "line": None,
                       "module": None, "build_id": None, "offset": None, "inlined": False}, frames)
        self.assertIn(None, [fr["function"] for fr in frames])
        self.assertIn("evil\x1b[2J;name</b>\ufffd", [fr["function"] for fr in frames])

        # The flame graph and the page: labels, the whole file in the tooltip, nothing unescaped.
        svg = view("--svg", path).stdout.decode()
        self.assertIn("<title>make_arrays (demo.py:12)\nin demo.py\n", svg)
        self.assertIn("<title>JSONDecoder.raw_decode (json/decoder.py:353)\nin /usr/lib/python3.11/json/decoder.py\n", svg)
        html = view("--html", path).stdout.decode()
        # (assertTrue: a failed assertIn would print the whole page)
        self.assertTrue(">make_arrays (demo.py)</span>" in html)
        self.assertTrue('<span class="fn py">load_config</span> <span class="mod">/home/u/proj/settings.py:20</span>'
                        in html)
        self.assertTrue('<span class="fn py" title="demo.py:12">make_arrays</span> <span class="mod">demo.py:12</span>'
                        in html)
        self.assertTrue('<span class="arrow">\u2026</span> <span class="arrow">\u2190</span> <span class="fn py" '
                        'title="/home/u/venv/lib/python3.11/site-packages/numpy/__init__.py:130">&lt;module&gt;</span> '
                        '<span class="mod">numpy/__init__.py:130</span>' in html)
        for doc_text in (svg, html):
            self.assertFalse("\x1b" in doc_text)
            self.assertFalse("name</b>" in doc_text)

    def test_source_lines(self):
        """srclines.snap: native frames with file:line, inlined calls marked, a module without symbols."""
        path = os.path.join(GOLDEN, "srclines.snap")
        snap = read_snapshot(path)
        out = view("--depth", "12", path).stdout.decode()
        self.assertIn("    \u2192 malloc (malloc/malloc.c:3287, libc.so.6 + 0xa50a0)\n"
                      "      operator new(unsigned long) (libstdc++.so.6.0.30 + 0xae0fc)\n"
                      "      std::__new_allocator<Point>::allocate(unsigned long, void const*) "
                      "(/usr/include/c++/12/bits/new_allocator.h:147) [inlined]\n", out)
        self.assertIn("      load_points (/home/u/src/vecdemo/points.cc:27, vecdemo + 0x1b80)\n", out)
        self.assertIn("      load_points (/home/u/src/vecdemo/points.cc:31, vecdemo + 0x1bc4)\n", out)
        self.assertIn("      libblob.so + 0x2d1c0\n      libblob.so + 0x2d9f4\n", out)
        self.assertIn("      init_plugins (/home/u/src/vecdemo/plugins.cc, vecdemo + 0x1c10)\n", out)
        self.assertIn("parse_config (/home/u/src/vecdemo/\\x1b[31mevil;<b>\\xff.cc:9, vecdemo + 0x1d00)", out)
        self.assertNotIn("\x1b", out)
        self.assertNotIn("??", out)
        # JSON: every frame as the snapshot has it.
        doc = json.loads(view("--json", path).stdout)
        self.assertEqual(doc["snapshot_format_version"], 3)
        seen = set()
        for st in doc["stacks"] + doc["live_at_end"]:
            for fr in st["frames"]:
                i = next(i for i, f in enumerate(snap["frames"])
                         if f[1] == fr["offset"] and (f[2] and f[2].decode()) == fr["function"])
                file, line, inlined = snap.get("src", {}).get(i, (None, 0, False))
                if file is not None and b"evil" not in file:
                    self.assertEqual(fr["file"], file.decode())
                self.assertEqual(fr["line"], line if file is not None and line else None)
                self.assertIs(fr["inlined"], inlined)
                seen.add(i)
        self.assertEqual(seen, set(range(len(snap["frames"]))))
        self.assertIn("/home/u/src/vecdemo/\x1b[31mevil;<b>\ufffd.cc", [fr["file"] for st in doc["stacks"]
                                                                       for fr in st["frames"]])
        # Built again with lines moved and push_back no longer inlined: the diff still matches every stack.
        after = os.path.join(GOLDEN, "srclines_after.snap")
        doc = json.loads(view("--diff", "--json", path, after).stdout)
        self.assertEqual((doc["changes_total"], doc["stacks_grown"]), (1, 1))
        (c,) = doc["changes"]
        self.assertEqual((c["before_bytes"], c["after_bytes"]), (32 << 20, 40 << 20))
        by_name = {fr["function"]: fr for fr in c["frames"]}
        self.assertEqual(by_name["load_points"]["file"], "/home/u/src/vecdemo/points.cc")
        self.assertIsNone(by_name["load_points"]["line"])  # lines 27 and 31, then 29 and 33
        self.assertIsNone(by_name["std::vector<Point, std::allocator<Point> >::push_back(Point const&)"]["inlined"])
        self.assertIs(by_name["std::__new_allocator<Point>::allocate(unsigned long, void const*)"]["inlined"], True)
        self.assertEqual(by_name["malloc"]["line"], 3287)
        # The flame graph: labels without lines, the file and line in the tooltip, inlining said there.
        svg = view("--svg", path).stdout.decode()
        # (assertTrue: a failed assertIn would print the whole document)
        self.assertTrue("<title>load_points\nin vecdemo\nat /home/u/src/vecdemo/points.cc\ncharged " in svg)
        self.assertTrue("<title>std::vector&lt;Point, std::allocator&lt;Point&gt; &gt;::push_back(Point const&amp;)\n"
                        "in vecdemo\nat /usr/include/c++/12/bits/stl_vector.h:1287\ninlined into its caller\n" in svg)
        self.assertTrue("<title>libblob.so + 0x2d1c0\nin libblob.so\ncharged " in svg)
        live_svg = view("--svg", "--live", path).stdout.decode()  # the leak: parse_config, whose file is hostile
        self.assertTrue("<title>parse_config\nin vecdemo\nat /home/u/src/vecdemo/\\x1b[31mevil;&lt;b&gt;\\xff.cc:9\n"
                        in live_svg)
        html = view("--html", path).stdout.decode()
        self.assertTrue('<span class="fn">parse_config</span> <span class="mod">/home/u/src/vecdemo/\\x1b[31mevil;'
                        '&lt;b&gt;\\xff.cc:9, vecdemo + 0x1d00</span>' in html)
        self.assertTrue('<span class="fn" title="malloc/malloc.c:3287, libc.so.6 + 0xa50a0">malloc</span>' in html)
        self.assertTrue('<span class="fn">load_points</span> <span class="mod">/home/u/src/vecdemo/points.cc:27, '
                        'vecdemo + 0x1b80</span>' in html)
        self.assertTrue('<span class="fn">std::__new_allocator&lt;Point&gt;::allocate(unsigned long, void const*)</span> '
                        '<span class="mod">/usr/include/c++/12/bits/new_allocator.h:147</span> '
                        '<span class="mod">[inlined]</span>' in html)
        self.assertTrue('<span class="fn">libblob.so + 0x2d1c0</span>' in html)
        for doc_text in (svg, live_svg, html):
            self.assertFalse("\x1b" in doc_text)
            self.assertFalse("<b>" in doc_text)

    def test_process_tree(self):
        """tree.snap: the processes, the combined peak against the sum of own peaks, the stacks by process."""
        path = os.path.join(GOLDEN, "tree.snap")
        snap = read_snapshot(path)
        out = view(path).stdout.decode()
        when, combined = snap["r"]
        self.assertEqual(combined, (300 << 20) + (512 << 10))
        self.assertIn("\ncombined peak 300.5 MiB at 1.20 s (sum of the processes' own peaks 349.0 MiB)\n", out)
        self.assertIn("5 processes, 4 profiled, each under the one that started it:\n", out)
        # Each process's line: pid, own peak and when, at the combined peak (bytes and share), command indented.
        self.assertIn("     100    1.0 MiB   50.0 ms   512.0 KiB   0.2%  gcc -O2 -c big.c other.c\n", out)
        self.assertIn("     101  240.0 MiB    1.20 s   240.0 MiB  79.9%    "
                      "/usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet big.c -O2\n", out)
        self.assertIn("     103  100.0 MiB    1.00 s    60.0 MiB  20.0%    "
                      "/usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet other.c -O2\n", out)
        self.assertIn("     104          -         -           -      -    /usr/libexec/gcc/collect2 --version "
                      "(not profiled, peak RSS 2.0 MiB)\n", out)
        # The tree first, then the main process's own report.
        self.assertLess(out.index("combined peak"), out.index("the main process alone (pid 100;"))
        self.assertLess(out.index("the main process alone"), out.index("\npeak     1.1 MiB charged at 50.0 ms"))
        # The largest stack at the combined peak: cc1's (pid 101), its process as the outermost frame.
        self.assertIn("#1   200.0 MiB  66.6%  reserved 256.0 MiB  mmap, 40 live\n"
                      "    \u2192 mmap64 (libc.so.6 + 0x11e9a0)\n"
                      "      ggc_internal_alloc (cc1 + 0x40000)\n"
                      "      c_parse_file (cc1 + 0x30000)\n"
                      "      toplev::main (cc1 + 0x20000)\n"
                      "      main (cc1 + 0x10000)\n"
                      "      [pid 101: /usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet big.c -O2]\n#2 ", out)

        # Folded: one root per command, the two cc1 processes merged.
        folded = parse_folded(view("--folded", path).stdout.decode())
        self.assertEqual({k.split(";")[0] for k in folded}, {"cc1", "gcc"})
        self.assertEqual(sum(folded.values()), combined)
        self.assertEqual(folded["cc1;main;toplev::main;c_parse_file;ggc_internal_alloc;mmap64"], 250 << 20)
        svg = view("--svg", path).stdout.decode()
        self.assertTrue("<title>cc1\nprocess: pids 101, 103\ncharged 300.0 MiB, 99.8% of all" in svg)
        self.assertTrue("combined peak 300.5 MiB at 1.20 s (sum of the processes' own peaks 349.0 MiB)" in svg)
        html = view("--html", path).stdout.decode()
        self.assertTrue('<section id="processes">' in html)
        self.assertTrue("Combined peak of the processes" in html)

        # JSON: the tree as the P records say, and the combined peak's stacks with their pid.
        doc = json.loads(view("--json", path).stdout)
        tree = doc["tree"]
        self.assertEqual((tree["combined_peak_bytes"], tree["time_s"]), (combined, when))
        self.assertEqual([p["pid"] for p in tree["processes"]], [p["pid"] for p in snap["P"]])
        for got, p in zip(tree["processes"], snap["P"]):
            self.assertEqual(got["ppid"], p["ppid"])
            self.assertEqual(got["command"], p["command"].decode())
            self.assertEqual(got["profiled"], p["profiled"])
            self.assertEqual(got["peak_bytes"], p["peak"] if p["profiled"] else None)
            self.assertEqual(got["at_combined_peak_bytes"], p["at_combined"] if p["profiled"] else None)
            self.assertEqual(got["vmhwm_bytes"], p["vmhwm"])
            self.assertEqual(got["file"], p["file"].decode() if p["file"] else None)
        self.assertEqual(doc["combined_peak_stacks_total"], len(snap["j"]))
        self.assertEqual(doc["combined_peak_stacks"][0]["pid"], 101)
        self.assertEqual(doc["combined_peak_stacks"][0]["charged_bytes"], 200 << 20)
        self.assertEqual(sum(st["charged_bytes"] for st in doc["combined_peak_stacks"]), combined)

        # --pid: a child's own snapshot, as if opened directly; the main one alone, without its tree.
        for args in ([], ["--json"], ["--folded"]):
            with self.subTest(args=args):
                by_pid = view(*args, "--pid", "101", "tree.snap", cwd=GOLDEN)
                direct = view(*args, "tree.101.snap", cwd=GOLDEN)
                self.assertEqual(by_pid.returncode, 0, by_pid.stderr)
                self.assertEqual(by_pid.stdout, direct.stdout)
        main = view("--pid", "100", path).stdout.decode()
        self.assertNotIn("combined peak", main)
        self.assertIn("peak     1.1 MiB charged at 50.0 ms", main)
        self.assertNotIn("tree", json.loads(view("--json", "--pid", "100", path).stdout))
        self.assertEqual(parse_folded(view("--folded", "--pid", "100", path).stdout.decode()),
                         folded_expected(snap, "k"))

    def test_touch_view(self):
        """touch.snap: the view said everywhere, touch stacks as resident, the sparse line from the alloc view
        beside them, and each stack's links to the other view."""
        path = os.path.join(GOLDEN, "touch.snap")
        snap = read_snapshot(path)
        self.assertEqual(snap["view"], "touch")
        out = view(path).stdout.decode()
        self.assertIn("\nview     touch: memory charged to the code that made it resident (its first write to each "
                      "page), with the alloc view\n", out)
        # The peak's reservations and the sparse line are the alloc view's: touch stacks reserve nothing.
        self.assertEqual(sum(k[3] for k in snap["K"]), 136 * MiB + 132 * 1024)
        self.assertIn("\npeak     9.1 MiB charged at 500.0 ms, 136.1 MiB reserved (alloc view)\n", out)
        self.assertIn("\nsparse   127.0 MiB reserved but not resident, in 1 stack of the alloc view "
                      "(reserved 128.0 MiB, resident 1.0 MiB):\n"
                      "   128.0 MiB reserved, 1.0 MiB resident; your code: map_arena (/home/u/src/touchdemo.c:20)\n", out)
        # A touch stack reads as resident, its count in pages; under it, the alloc stacks its pages lie in.
        self.assertIn("#1     6.0 MiB  65.7%  resident, 1536 pages\n"
                      "      reserved by: load_table (/home/u/src/touchdemo.c:30) 6.0 MiB\n"
                      "      your code: load_table (/home/u/src/touchdemo.c:32)\n"
                      "    \u2192 __memset_avx2_unaligned_erms (", out)
        self.assertIn("#3     1.0 MiB  11.0%  resident, 256 pages\n"
                      "      reserved by: map_arena (/home/u/src/touchdemo.c:20) 1.0 MiB\n", out)
        # The alloc view at the same peak, each stack with what made it resident (at most two links each).
        self.assertIn("3 stacks in the alloc view at the same peak", out)
        self.assertIn("#1     8.0 MiB  87.6%  reserved 8.0 MiB  heap, 1 live\n"
                      "      made resident by: load_table (/home/u/src/touchdemo.c:32) 6.0 MiB\n"
                      "      made resident by: parse_rows (/home/u/src/touchdemo.c:35) 2.0 MiB\n"
                      "      your code: load_table (/home/u/src/touchdemo.c:30)\n"
                      "    \u2192 malloc (", out)
        self.assertIn("#2     1.0 MiB  11.0%  reserved 128.0 MiB  mmap, 1 live\n"
                      "      sparse: reserved 128.0 MiB, resident 1.0 MiB\n"
                      "      made resident by: fill_arena (/home/u/src/touchdemo.c:25) 1.0 MiB\n", out)
        self.assertNotIn("heap,", out.split("in the alloc view")[0])
        # Each link of the file once from each side (every stack is listed), none under what was live at the end.
        self.assertEqual(out.count("      reserved by: "), len(snap["X"]))
        self.assertEqual(out.count("      made resident by: "), len(snap["X"]))
        self.assertNotIn(" by: ", out.split("live at exit")[-1])

        # JSON: the view, touch stacks, the other view's stacks and the links by their places in the lists.
        doc = json.loads(view("--json", path).stdout)
        self.assertEqual(doc["view"], "touch")
        self.assertEqual([s["kind"] for s in doc["stacks"]], ["touch", "touch", "touch", "pseudo"])
        self.assertEqual(doc["other_view_stacks_total"], len(snap["K"]))
        self.assertEqual(sorted((s["kind"], s["charged_bytes"], s["reserved_bytes"]) for s in doc["other_view_stacks"]),
                         sorted(({"m": "mmap", "h": "heap", "p": "pseudo"}[k[1]], k[2], k[3]) for k in snap["K"]))
        self.assertEqual([s["sparse"] for s in doc["other_view_stacks"]], [False, True, False])
        self.assertEqual(doc["peak"]["reserved_bytes"], sum(k[3] for k in snap["K"]))
        self.assertEqual(doc["links_total"], len(snap["X"]))

        def names(st):
            return [fr["function"] for fr in reversed(st["frames"])] or ["[no stack]"]
        got = {(tuple(names(doc["stacks"][x["stack"]])), tuple(names(doc["other_view_stacks"][x["other_view_stack"]])),
                x["bytes"]) for x in doc["links"]}
        want = {(tuple(stack_labels(snap, a)), tuple(stack_labels(snap, b)), n) for a, b, n in snap["X"]}
        self.assertEqual(got, want)
        self.assertEqual([x["bytes"] for x in doc["links"]], sorted((x[2] for x in snap["X"]), reverse=True))
        # --top 1: only the links whose two stacks are listed.
        top = json.loads(view("--json", "--top", "1", path).stdout)
        self.assertEqual([(x["stack"], x["other_view_stack"], x["bytes"]) for x in top["links"]], [(0, 0, 6 * MiB)])
        self.assertEqual(top["links_total"], 4)

        # The flame graph and the page say the view; folded stacks stay as flamegraph.pl reads them.
        svg = view("--svg", path).stdout.decode()
        self.assertTrue('<text class="subtitle view" x="10" y="64">view touch: memory charged to the code that made it '
                        'resident (its first write to each page)</text>' in svg)
        self.assertTrue("\nkind resident</title>" in svg)
        html = view("--html", path).stdout.decode()
        self.assertTrue('<p class="sub view">view touch: memory charged to the code that made it resident (its first '
                        'write to each page), with the alloc view</p>' in html)
        self.assertTrue('<span class="kind k-resident">resident</span>' in html)
        self.assertTrue("Reserved at the peak (alloc view)" in html)
        self.assertTrue("in 1 sparse stack of the alloc view" in html)
        for line in view("--folded", path).stdout.decode().splitlines():
            self.assertRegex(line, r"^[^ ].* [0-9]+$")
        # Every view says the alloc view of an old file too.
        for fixture in ("heap_chain.snap", "tree.snap"):
            old = os.path.join(GOLDEN, fixture)
            self.assertIn("\nview     alloc: memory charged to the code that allocated it\n", view(old).stdout.decode())
            self.assertEqual(json.loads(view("--json", old).stdout)["view"], "alloc")
            self.assertTrue('view alloc: memory charged to the code that allocated it</text>' in
                            view("--svg", old).stdout.decode())

        # A diff across the two views says so in one line, and compares all the same.
        chain = os.path.join(GOLDEN, "heap_chain.snap")
        out = view("--diff", chain, path).stdout.decode()
        self.assertIn("\nview     differs: before alloc (charged to the code that allocated it), after touch (charged to "
                      "the code that made it resident); stacks compared all the same\n", out)
        self.assertIn("4 stacks grew, 5 shrank", out)
        ddoc = json.loads(view("--diff", "--json", chain, path).stdout)
        self.assertEqual((ddoc["before"]["view"], ddoc["after"]["view"]), ("alloc", "touch"))
        self.assertIn("view     touch: ", view("--diff", path, path).stdout.decode())

        # The touch view alone (no alloc view beside it): nothing tells what was reserved.
        with open(path, "rb") as f:
            lines = [l for l in f.read().split(b"\n") if not l.startswith((b"K ", b"X "))]
        d = tempfile.mkdtemp(prefix="test_golden.")
        self.addCleanup(shutil.rmtree, d)
        alone = os.path.join(d, "alone.snap")
        with open(alone, "wb") as f:
            f.write(b"\n".join(lines))
        out = view(alone).stdout.decode()
        self.assertIn("\nview     touch: memory charged to the code that made it resident (its first write to each "
                      "page)\n", out)
        self.assertIn("\npeak     9.1 MiB charged at 500.0 ms\n", out)
        self.assertIn("\nsparse   not known: touch stacks reserve nothing, and this snapshot has no alloc view beside "
                      "them\n", out)
        self.assertNotIn("reserved by", out)
        self.assertNotIn("alloc view at the same peak", out)
        doc = json.loads(view("--json", alone).stdout)
        self.assertIsNone(doc["peak"]["reserved_bytes"])
        self.assertNotIn("other_view_stacks", doc)
        self.assertNotIn("links", doc)

    def test_diff_of_itself_is_empty(self):
        for fixture in FIXTURES:
            with self.subTest(fixture=fixture):
                path = os.path.join(GOLDEN, fixture)
                r = view("--diff", path, path)
                self.assertEqual(r.returncode, 0, r.stderr)
                out = r.stdout.decode()
                self.assertIn("0 stacks grew, 0 shrank", out)
                self.assertIn("\nno stack changed\n", out)
                self.assertNotIn("#1 ", out)
                doc = json.loads(view("--diff", "--json", path, path).stdout)
                self.assertEqual(doc["changes"], [])
                self.assertEqual(doc["changes_total"], 0)
                self.assertEqual(doc["before_charged_bytes"], doc["after_charged_bytes"])
                folded = parse_folded(view("--diff", "--folded", path, path).stdout.decode(), 2)
                self.assertTrue(folded)
                self.assertTrue(all(a == b for a, b in folded.values()))

    def doubled(self, fixture, pick):
        """A copy of fixture with the `k` record `pick` (an index into the k records) doubled."""
        path = os.path.join(GOLDEN, fixture)
        data = slurp(path)
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        lines = data.split(b"\n")
        ks = [i for i, l in enumerate(lines) if l.startswith(b"k ")]
        f = lines[ks[pick]].split(b" ")
        f[3], f[4], f[5] = (b"%d" % (2 * int(x)) for x in f[3:6])
        lines[ks[pick]] = b" ".join(f)
        d = tempfile.mkdtemp(prefix="test_golden.")
        self.addCleanup(shutil.rmtree, d)
        out = os.path.join(d, "doubled.snap")
        with open(out, "wb") as fh:
            fh.write(b"\n".join(lines))
        return path, out, int(f[3]) // 2, int(f[1])

    def test_diff_one_stack_doubled(self):
        """Doubling one stack shows exactly that stack, grown by its own size, in text, JSON and folded."""
        for fixture, pick in (("seed.snap.gz", 0), ("heap_chain.snap", 0), ("cxx.snap", 1), ("hostile.snap", 1),
                              ("python.snap", 4), ("srclines.snap", 2)):
            with self.subTest(fixture=fixture):
                before, after, size, node = self.doubled(fixture, pick)
                snap = read_snapshot(before)
                labels = stack_labels(snap, node)
                # Stacks with the same labels merge: the expected change is the sum of theirs.
                key = ";".join(labels)
                merged = sum(k[2] for k in snap["k"] if ";".join(stack_labels(snap, k[0])) == key)

                doc = json.loads(view("--diff", "--json", before, after).stdout)
                self.assertEqual(doc["changes_total"], 1)
                self.assertEqual(doc["stacks_grown"], 1)
                self.assertEqual(doc["stacks_shrunk"], 0)
                (c,) = doc["changes"]
                self.assertEqual(c["before_bytes"], merged)
                self.assertEqual(c["after_bytes"], merged + size)
                self.assertEqual([fr["function"] for fr in c["frames"]], list(reversed(labels)))
                self.assertEqual(doc["after_charged_bytes"] - doc["before_charged_bytes"], size)

                out = view("--diff", before, after).stdout.decode()
                self.assertIn("1 stack grew, 0 shrank", out)
                self.assertIn("1 stack changed", out)
                self.assertIn("#1 ", out)
                self.assertNotIn("#2 ", out)

                folded = parse_folded(view("--diff", "--folded", before, after).stdout.decode(), 2)
                changed = {k: v for k, v in folded.items() if v[0] != v[1]}
                fkey = ";".join(l.replace(";", ":") for l in labels)
                self.assertEqual(changed, {fkey: (merged, merged + size)})

    def test_diff_usage(self):
        path = os.path.join(GOLDEN, "heap_chain.snap")
        r = view("--diff", path)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--diff needs two snapshots", r.stderr.decode())
        r = view("--diff", path, path, path)
        self.assertEqual(r.returncode, 2)
        r = view(path, path)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--diff compares two", r.stderr.decode())
        r = view("--diff", path, "/nonexistent/after.gz")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, b"")
        self.assertIn("/nonexistent/after.gz", r.stderr.decode())

    def test_output_file(self):
        """-o writes the file whole, or leaves what was there when the snapshot is bad."""
        d = tempfile.mkdtemp(prefix="test_golden.")
        self.addCleanup(shutil.rmtree, d)
        out = os.path.join(d, "out.folded")
        path = os.path.join(GOLDEN, "heap_chain.snap")
        r = view("--folded", "-o", out, path)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"", b""))
        self.assertEqual(slurp(out), view("--folded", path).stdout)
        bad = os.path.join(d, "bad.snap")
        with open(bad, "wb") as f:
            f.write(slurp(path)[:500])
        r = view("--folded", "-o", out, bad)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(slurp(out), view("--folded", path).stdout)
        self.assertEqual(sorted(os.listdir(d)), ["bad.snap", "out.folded"])
        r = view("--folded", "-o", os.path.join(d, "no", "such", "dir.txt"), path)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot create", r.stderr.decode())

    def test_full_disk(self):
        """A full disk: a clear error, exit 1, no partial file left behind."""
        if not os.path.exists("/dev/full"):
            self.fail("/dev/full is missing")
        with open("/dev/full", "wb") as full:
            r = subprocess.run([VIEW, "--json", os.path.join(GOLDEN, "cxx.snap")], stdout=full,
                               stderr=subprocess.PIPE, timeout=TIMEOUT)
        self.assertEqual(r.returncode, 1)
        self.assertIn("No space left on device", r.stderr.decode())


if __name__ == "__main__":
    unittest_main("test_golden", [VIEW])
