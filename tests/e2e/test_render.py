#!/usr/bin/env python3
"""End-to-end tests of ptfil-view's flame graph (--svg) and HTML report (--html).

Snapshots are written here with known stacks (test_view.Snapshot, an
independent writer of the format), and one comes from a real run of the seed
scenario. The SVG and the HTML are parsed as XML; the HTML report is then
opened in headless Chromium, driven through chromedriver with the W3C
WebDriver protocol (Python's standard library only): the frames, the timeline
and the tables are counted, a frame is clicked to zoom, the search and the
reserved layout are tried, and a screenshot of the seed scenario's report is
written to the build directory (and to docs/report.png with
PTFIL_UPDATE_SCREENSHOT=1).
"""
import base64
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptfiltest import ON_CI, BUILDDIR, PTFIL, SRCDIR, MiB, main, missing, target, view, view_json, view_output  # noqa: E402
from test_view import Snapshot  # noqa: E402

KiB = 1024
SVG = "{http://www.w3.org/2000/svg}"
XHTML = "{http://www.w3.org/1999/xhtml}"
NAMESPACES = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xhtml"}
GRAPH_W = 1180  # the flame graph's width in px, view_svg.c's GRAPH_W
TIMEOUT = 60

# ---- snapshots with known stacks ------------------------------------------------------------------

PROG = "/opt/app/bin/app"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
FRAMES = {  # key: (module, offset, function)
    "main": (0, 0x1100, "main"),
    "alpha": (0, 0x1200, "alpha"),
    "beta": (0, 0x1300, "beta"),
    "gamma": (0, 0x1400, "gamma"),
    "delta": (0, 0x1500, "delta"),
    "sparse_buf": (0, 0x1600, "sparse_buf"),
    "start_thread": (1, 0x94AC3, "start_thread"),
    "worker": (0, 0x1700, "worker"),
    "anon": (1, 0x126850, None),
    "stack": (-1, 0, "[main thread stack]"),
}
STACKS = [  # (frames outermost first, kind, charged, reserved, count)
    (["main", "alpha", "beta"], "h", 40 * MiB, 40 * MiB, 1000),
    (["main", "alpha", "gamma"], "m", 10 * MiB, 10 * MiB, 1),
    (["main", "alpha"], "h", 5 * MiB, 5 * MiB, 20),
    (["main", "delta", "sparse_buf"], "m", 1 * MiB, 128 * MiB, 1),
    (["start_thread", "worker", "sparse_buf"], "m", 2 * MiB, 256 * MiB, 2),
    (["start_thread", "anon"], "m", 3 * MiB, 3 * MiB, 1),
    (["stack"], "p", 132 * KiB, 132 * KiB, 1),
]
LIVE = [
    (["start_thread", "worker", "sparse_buf"], "m", 2 * MiB, 256 * MiB, 2),
    (["main", "alpha"], "h", 1 * MiB, 1 * MiB, 3),
    (["stack"], "p", 132 * KiB, 132 * KiB, 1),
]
SAMPLES = [(0.0, 0, 2 * MiB), (0.1, 3 * MiB, 6 * MiB), (0.2, 20 * MiB, 24 * MiB), (0.3, 45 * MiB, 50 * MiB),
           (0.4, 60 * MiB, 66 * MiB), (0.5, 12 * MiB, 20 * MiB)]
PEAK_TIME = 0.42
COUNTERS = [("seccomp", 120), ("syscall-exit", 60), ("signal", 2)]


def label(key):
    module, offset, function = FRAMES[key]
    if function:
        return function
    return "%s + 0x%x" % (os.path.basename([PROG, LIBC][module]), offset)


def build_snapshot(stacks=STACKS, live=LIVE, samples=SAMPLES, frames=FRAMES, argv=("./app", "--size", "big"),
                   modules=(PROG, LIBC), counters=COUNTERS, mode="launch", version=None, pid=4242, peak_time=PEAK_TIME):
    """A snapshot whose stacks are given as lists of frame keys, outermost first."""
    s = Snapshot()
    top = (1 << 64) - 1
    charged = min(top, sum(x[2] for x in stacks))
    reserved = min(top, sum(x[3] for x in stacks))
    s.header(list(argv), pid=pid, mode=mode, peak=(peak_time, charged, reserved, min(top, charged + 3 * MiB)),
             duration=0.55, vmhwm=min(top, charged + 4 * MiB))
    if version is not None:
        s.lines = [l for l in s.lines if not l.startswith("V ")]
        s.add("V", s.ref(version))
    for path in modules:
        s.add("m", s.ref(path), "-", "555555554000")
    keys = list(frames)
    for key in keys:
        module, offset, function = frames[key]
        s.add("f", module, "%x" % offset, s.ref(function))
    trie = {}

    def node(path):
        parent = 0
        for depth in range(1, len(path) + 1):
            prefix = tuple(path[:depth])
            if prefix not in trie:
                s.add("n", parent, keys.index(path[depth - 1]))
                trie[prefix] = len(trie) + 1
            parent = trie[prefix]
        return parent

    for path, kind, c, r, n in stacks:
        s.add("k", node(path), kind, c, r, n)
    for path, kind, c, r, n in live:
        s.add("l", node(path), kind, c, r, n)
    for t, c, rss in samples:
        s.add("t", repr(t), c, rss)
    for name, n in counters:
        s.add("c", s.ref(name), n)
    return s


def expected_frames(stacks, labels=label):
    """Every distinct prefix of the stacks' label paths, with its inclusive (charged, reserved) bytes."""
    out = {}
    for path, kind, c, r, n in stacks:
        names = tuple(labels(k) for k in path)
        for depth in range(1, len(names) + 1):
            p = names[:depth]
            oc, orr = out.get(p, (0, 0))
            out[p] = (oc + c, orr + r)
    return out


def is_sparse(charged, reserved):
    """view_is_sparse: reserves 4x what is resident, and at least 1 MiB unused."""
    return reserved > charged and reserved - charged >= MiB and charged <= reserved // 4


# ---- running ptfil-view and reading its output ----------------------------------------------------

class Dir:
    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="test_render.")

    def file(self, name, data=None):
        p = os.path.join(self.path, name)
        if data is not None:
            with open(p, "wb") as f:
                f.write(data)
        return p

    def snapshot(self, name, snap):
        return self.file(name, snap.gzip_bytes())

    def cleanup(self):
        shutil.rmtree(self.path, ignore_errors=True)


def render(d, fmt, *snaps, name=None, extra=()):
    """Runs ptfil-view --svg/--html -o FILE; returns (path, bytes)."""
    out = d.file(name or "out.%s" % fmt)
    args = ["--" + fmt, "-o", out, *extra]
    if len(snaps) == 2:
        args.append("--diff")
    view_output(*args, *snaps)
    with open(out, "rb") as f:
        return out, f.read()


def parse(data):
    return ET.fromstring(data)


def svg_frames(root):
    """[(label path, <g>)] for every <g class="frame"> in document order, paths read from data-p and the
    first line of each frame's <title>."""
    paths = [()]
    out = []
    for g in root.iter(SVG + "g"):
        if g.get("class") != "frame":
            continue
        p = int(g.get("data-p"))
        assert 0 <= p < len(paths), "data-p %d before its parent" % p
        name = g.find(SVG + "title").text.split("\n")[0]
        path = paths[p] + (name,)
        paths.append(path)
        out.append((path, g))
    return out


def flame_svg(root):
    """The <svg class="ptfil-flame"> in a document (the root itself for --svg)."""
    if root.tag == SVG + "svg" and root.get("class") == "ptfil-flame":
        return root
    for e in root.iter(SVG + "svg"):
        if e.get("class") == "ptfil-flame":
            return e
    raise AssertionError("no flame graph")


def folded_frames(snap_path):
    """The frames as ptfil-view --folded shows them (every distinct prefix of its stacks)."""
    r = view("--folded", snap_path, timeout=TIMEOUT)
    assert r.returncode == 0, "ptfil-view --folded %s failed (%d): %s" % (snap_path, r.returncode,
                                                                        r.stderr.decode(errors="replace"))
    out = set()
    for line in r.stdout.decode("utf-8").splitlines():
        stack = line.rsplit(" ", 1)[0]
        names = tuple(stack.split(";"))
        for depth in range(1, len(names) + 1):
            out.add(names[:depth])
    return out


def check_clean_markup(data, what):
    """Valid UTF-8 without a raw control byte, C1 control or non-character; no network URL but the namespaces."""
    text = data.decode("utf-8")  # raises on invalid UTF-8
    bad = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0 or
           (ord(c) & 0xFFFE) == 0xFFFE or 0xFDD0 <= ord(c) <= 0xFDEF]
    assert not bad, "%s: raw control or non-character %r" % (what, bad[:5])
    urls = set(re.findall(r"(?i)\b(?:https?|ftp|wss?)://[^\s\"'<>)]*", text)) - NAMESPACES
    assert not urls, "%s: network URLs %r" % (what, urls)
    assert not re.search(r"(?i)\bsrc\s*=|@import|url\((?!#)", text), "%s: an external resource" % what
    return text


def scripts_of(text):
    return re.findall(r"(?s)<script[^>]*>(.*?)</script>", text)


def node_check(text, what, d):
    """node --check on each script, when node is installed: not required on a developer's machine (the
    rest of the test runs without it), but under CI, which installs it (nodejs), its absence fails."""
    node = shutil.which("node")
    if not node:
        assert not ON_CI, "node is not installed: .ci/run installs nodejs for node --check of the scripts"
        print("note: no node here: the scripts of %s are not checked with node --check" % what)
        return
    for i, s in enumerate(scripts_of(text)):
        s = s.replace("<![CDATA[", "").replace("]]>", "")
        p = d.file("script-%d.js" % i, s.encode())
        r = subprocess.run([node, "--check", p], capture_output=True, timeout=TIMEOUT)
        assert r.returncode == 0, "%s: script %d: %s" % (what, i, r.stderr.decode())


# ---- WebDriver ------------------------------------------------------------------------------------

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def die_with_parent():
    """In the child before exec: SIGKILL when the test dies, however it dies (PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """Headless Chromium through chromedriver, spoken to in W3C WebDriver over HTTP. A context manager:
    on leaving, the session is deleted and chromedriver's process group killed, whatever happened."""

    ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1500",
            "--disable-dev-shm-usage", "--hide-scrollbars"]

    def __init__(self, d):
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        driver = shutil.which("chromedriver")
        if not chromium or not driver:
            raise AssertionError("the HTML report is tested in headless Chromium: install the Debian packages "
                                 "chromium and chromium-driver (tools/install-deps.sh does); missing: %s" %
                                 ", ".join(n for n, p in (("chromium", chromium), ("chromedriver", driver)) if not p))
        self.session = None
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        # No proxy from the environment for a connection to ourselves.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.log_path = d.file("chromedriver.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([driver, "--port=%d" % self.port], stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent)
        try:
            deadline = time.time() + 30
            while True:
                try:
                    if self.request("GET", "/status", timeout=5).get("ready"):
                        break
                except (OSError, AssertionError):
                    pass
                if self.proc.poll() is not None or time.time() > deadline:
                    raise AssertionError("chromedriver did not start (exit status %r); log:\n%s" % (
                        self.proc.poll(), self.log_text()))
                time.sleep(0.1)
            caps = {"browserName": "chrome",
                    "goog:chromeOptions": {"binary": chromium, "args": self.ARGS}}
            v = self.request("POST", "/session", {"capabilities": {"alwaysMatch": caps}}, timeout=90)
            self.session = v["sessionId"]
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-4000:].decode(errors="replace")
        except OSError:
            return ""

    def request(self, method, path, body=None, timeout=30):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json; charset=utf-8"})
        try:
            with self.opener.open(req, timeout=timeout) as r:
                doc = json.load(r)
        except urllib.error.HTTPError as e:
            try:
                v = json.load(e).get("value", {})
            except ValueError:
                v = {}
            raise AssertionError("WebDriver %s %s: %s: %s" % (method, path, v.get("error", e.code),
                                                             v.get("message", "")[:2000])) from None
        return doc.get("value") if "value" in doc else doc

    def cmd(self, method, path, body=None, timeout=30):
        return self.request(method, "/session/%s%s" % (self.session, path), body, timeout)

    def go(self, path):
        self.cmd("POST", "/url", {"url": "file://" + os.path.abspath(path)}, timeout=60)

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find(self, css):
        return self.cmd("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def click(self, css):
        self.cmd("POST", "/element/%s/click" % self.find(css), {})

    def type(self, css, text):
        self.cmd("POST", "/element/%s/value" % self.find(css), {"text": text})

    def screenshot(self):
        return base64.b64decode(self.cmd("GET", "/screenshot", timeout=60))

    def close(self):
        try:
            if self.session:
                self.cmd("DELETE", "", timeout=20)
        except Exception:
            pass
        finally:
            self.session = None
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            self.log.close()


# What the browser sees of the flame graph: per frame (document order) its label, parent index, the box's
# rendered width and height, whether it is displayed, and the classes.
FRAMES_JS = """
var svg = document.querySelector('svg.ptfil-flame');
var total = svg.querySelector('g.total rect.b').getBoundingClientRect();
var out = [];
svg.querySelectorAll('g.frame').forEach(function (g) {
    var r = g.querySelector('rect.b').getBoundingClientRect();
    var res = g.querySelector('rect.res');
    out.push({i: +g.getAttribute('data-i'), label: g.querySelector('title').textContent.split('\\n')[0],
              p: +g.getAttribute('data-p'), width: r.width, height: r.height, left: r.left,
              shown: getComputedStyle(g).display !== 'none', cls: g.getAttribute('class'),
              res: res && getComputedStyle(res).display !== 'none' ? res.getBoundingClientRect().width : null});
});
return {total: total.width, left: total.left, frames: out, zoom: svg.getAttribute('data-zoom'),
        mode: svg.getAttribute('data-mode'), matches: svg.getAttribute('data-matches')};
"""


def browser_frames(b):
    v = b.js(FRAMES_JS)
    paths = [()]
    for f in v["frames"]:
        f["path"] = paths[f["p"]] + (f["label"],)
        paths.append(f["path"])
    v["by_path"] = {f["path"]: f for f in v["frames"]}
    return v


def near(a, b, tol):
    return abs(a - b) <= tol


# ---- the tests ------------------------------------------------------------------------------------

def test_svg_frames_and_widths():
    d = Dir()
    try:
        snap = d.snapshot("tree.gz", build_snapshot())
        path, data = render(d, "svg", snap)
        text = check_clean_markup(data, "svg")
        root = parse(data)
        assert root.tag == SVG + "svg", root.tag
        frames = svg_frames(root)
        want = expected_frames(STACKS)
        got = [p for p, g in frames]
        assert len(got) == len(set(got)), "a frame drawn twice: %r" % got
        assert set(got) == set(want), "frames: got %r, expected %r" % (sorted(got), sorted(want))
        assert root.get("data-pruned") == "0", root.get("data-pruned")
        assert int(root.get("data-frames")) == len(want)
        folded = folded_frames(snap)
        assert folded == set(got), "SVG and --folded disagree: %r" % (folded ^ set(got))

        total_c = sum(x[2] for x in STACKS)
        total_r = sum(x[3] for x in STACKS)
        total = [g for g in root.iter(SVG + "g") if g.get("class") == "total"]
        assert len(total) == 1
        assert int(total[0].get("data-w")) == total_c and int(total[0].get("data-wr")) == total_r
        xs = {}
        for p, g in frames:
            c, r = want[p]
            rect = g.find(SVG + "rect")
            assert rect.get("class") == "b"
            width = float(rect.get("width"))
            # Width is charged bytes, exactly to the written precision.
            assert near(width, GRAPH_W * c / total_c, 0.006), (p, width, GRAPH_W * c / total_c)
            assert int(g.get("data-w")) == c and int(g.get("data-wr")) == r, (p, g.attrib)
            # The reserved layout's width ratio is the reserved bytes'.
            assert near(int(g.get("data-wr")) / total_r, r / total_r, 1e-12)
            # A child sits inside its parent, after its earlier siblings.
            xs[p] = float(rect.get("x"))
            if len(p) > 1:
                assert xs[p[:-1]] - 0.006 <= xs[p] <= xs[p[:-1]] + GRAPH_W * want[p[:-1]][0] / total_c, p
            sparse = is_sparse(c, r)
            assert (g.get("data-sparse") == "1") == sparse, (p, g.attrib)
            assert (g.find(SVG + "rect[@class='sp']") is not None) == sparse, p
        # The sparse frames of the fixture: both sparse_buf stacks and the frames above them that are mostly reserved.
        assert {p for p, g in frames if g.get("data-sparse")} == {
            ("main", "delta"), ("main", "delta", "sparse_buf"), ("start_thread",), ("start_thread", "worker"),
            ("start_thread", "worker", "sparse_buf")}
        # Offsets: each frame's data-o is the sum of its earlier siblings' weights.
        by_parent = {}
        for p, g in frames:
            by_parent.setdefault(p[:-1], []).append(g)
        for parent, gs in by_parent.items():
            acc = accr = 0
            for g in gs:
                assert int(g.get("data-o")) == acc and int(g.get("data-or")) == accr, (parent, g.attrib)
                acc += int(g.get("data-w"))
                accr += int(g.get("data-wr"))
        # Pseudo frames are grey.
        stack = dict(frames)[("[main thread stack]",)].find(SVG + "rect").get("fill")
        r, g_, b = (int(stack[i:i + 2], 16) for i in (1, 3, 5))
        assert r == g_ == b, stack
        # Self-contained: the style and script are inline, the script in CDATA with no "]]>" of its own.
        assert text.count("]]>") == 2 and text.count("<![CDATA[") == 2
        assert len(scripts_of(text)) == 1
        node_check(text, "svg", d)
        # The title line: command, pid, peak charged and reserved.
        title = [t for t in root.iter(SVG + "text") if t.get("class") == "title"][0].text
        assert "./app --size big" in title, title
        sub = [t for t in root.iter(SVG + "text") if t.get("class") == "subtitle"][0].text
        assert "pid 4242" in sub and "61.1 MiB charged" in sub and "442.1 MiB reserved" in sub, sub
    finally:
        d.cleanup()


def test_svg_live():
    d = Dir()
    try:
        snap = d.snapshot("tree.gz", build_snapshot())
        path, data = render(d, "svg", snap, extra=["--live"])
        root = parse(data)
        got = {p for p, g in svg_frames(root)}
        assert got == set(expected_frames(LIVE)), got
        title = [t for t in root.iter(SVG + "text") if t.get("class") == "title"][0].text
        assert title.startswith("Still live at the end"), title
    finally:
        d.cleanup()


def test_svg_diff():
    d = Dir()
    try:
        before = d.snapshot("before.gz", build_snapshot())
        doubled = [(p, k, c * 2, r * 2, n) if p == ["main", "alpha", "gamma"] else (p, k, c, r, n)
                   for p, k, c, r, n in STACKS]
        after = d.snapshot("after.gz", build_snapshot(stacks=doubled))
        path, data = render(d, "svg", before, after)
        check_clean_markup(data, "diff svg")
        root = parse(data)
        assert root.get("data-diff") == "1"
        frames = svg_frames(root)
        assert {p for p, g in frames} == set(expected_frames(STACKS))
        grown = {p for p, g in frames if g.get("data-diff") == "grow"}
        shrunk = {p for p, g in frames if g.get("data-diff") == "shrink"}
        assert grown == {("main",), ("main", "alpha"), ("main", "alpha", "gamma")}, grown
        assert not shrunk, shrunk
        assert all(g.get("data-diff") in ("grow", "same") for p, g in frames)
        tip = dict(frames)[("main", "alpha", "gamma")].find(SVG + "title").text
        assert "10.0 MiB \u2192 20.0 MiB (+10.0 MiB, +100.0%)" in tip, tip
        # Growth is red, the unchanged grey.
        fill = dict(frames)[("main", "alpha", "gamma")].find(SVG + "rect").get("fill")
        assert int(fill[1:3], 16) > int(fill[5:7], 16) + 60, fill
        same = dict(frames)[("start_thread",)].find(SVG + "rect").get("fill")
        assert same[1:3] == same[3:5] == same[5:7], same
        legend = " ".join(t.text or "" for t in root.iter(SVG + "text"))
        assert "grew" in legend and "shrank" in legend
        # Width: the larger of the two sides.
        total_after = sum(x[2] for x in doubled)
        w = float(dict(frames)[("main", "alpha", "gamma")].find(SVG + "rect").get("width"))
        assert near(w, GRAPH_W * 20 * MiB / total_after, 0.006), w
        # The HTML diff: the same flame graph, both runs' facts, and the stack that grew.
        path, data = render(d, "html", before, after)
        check_clean_markup(data, "diff html")
        root = parse(data)
        assert len(svg_frames(flame_svg(root))) == len(frames)
        rows = root.find(".//%stable[@id='changes-table']/%stbody" % (XHTML, XHTML))
        assert len(rows) == 1, ET.tostring(rows)
        assert "gamma" in "".join(rows[0].itertext()) and "+10.0 MiB" in "".join(rows[0].itertext())
        facts = root.find(".//%stable[@id='facts-table']" % XHTML)
        assert len(facts.find(XHTML + "thead")[0]) == 3  # the name column, before, after
    finally:
        d.cleanup()


def hostile_snapshot():
    evil = {
        "ctl": (0, 0x10, "evil\x1b]0;title\x07\udcff"),
        "cdata": (0, 0x20, "a]]>b"),
        "script": (0, 0x30, "</script><b>bold</b><script>x()</script>"),
        "markup": (0, 0x40, "x<y && z>\"w\" 'q'"),
        "nonchar": (0, 0x50, "bad\ufffe\uffff\u0085\u2028\u2029 end"),
        "anon": (1, 0x60, None),
    }
    stacks = [(["ctl", "cdata", "script"], "m", 8 * MiB, 64 * MiB, 1),
              (["ctl", "markup"], "h", 4 * MiB, 4 * MiB, 1),
              (["nonchar", "anon"], "m", 2 * MiB, 2 * MiB, 1)]
    argv = ["./x\x1b[2J", "a]]>b", "</script><script>alert(1)</script>", "q'\"&<>", "bad\udcffutf8\x01\x7f",
            "\u2028\u2029\ufffe"]
    modules = ["/tmp/evil<mod>&\"'\x07\udcfe]]>.so", "/lib/</script>\x01lib.so"]
    counters = [("stop<&>\x01\udcff]]>", 7), ("</script>", 1)]
    return build_snapshot(stacks=stacks, live=stacks[:1], frames=evil, argv=argv, modules=modules,
                          counters=counters, mode="launch<x>&\x02", version="0.1</script>]]>"), stacks, evil


def test_hostile_strings():
    d = Dir()
    try:
        snap_obj, stacks, evil = hostile_snapshot()
        snap = d.snapshot("evil.gz", snap_obj)
        outputs = [("svg", render(d, "svg", snap, name="e.svg")[1]),
                   ("html", render(d, "html", snap, name="e.html")[1]),
                   ("diff svg", render(d, "svg", snap, snap, name="d.svg")[1]),
                   ("diff html", render(d, "html", snap, snap, name="d.html")[1])]
        for what, data in outputs:
            text = check_clean_markup(data, what)
            root = parse(data)  # well-formed XML
            tags = {e.tag.split("}")[-1] for e in root.iter()}
            assert "b" not in tags, "%s: a hostile <b> became an element" % what
            # The only script elements and CDATA ends are ours.
            n_scripts = 1 if what.endswith("svg") else 2
            assert sum(1 for e in root.iter() if e.tag.split("}")[-1] == "script") == n_scripts, what
            assert len(re.findall(r"(?i)</script", text)) == n_scripts, what
            assert len(re.findall(r"(?i)<script", text)) == n_scripts, what
            assert text.count("]]>") == (2 if what.endswith("svg") else 3), what
            assert "<b>" not in text and "a]]>b" not in text and "<mod>" not in text, what
            # Each hostile string is there, escaped: XML reads it back.
            all_text = "".join(root.itertext())
            assert "a]]>b" in all_text, what
            assert "</script><b>bold</b>" in all_text, what
            assert "x<y && z>\"w\" 'q'" in all_text, what
            assert "evil\\x1b]0;title\\x07\\xff" in all_text, what
            attrs = " ".join(v for e in root.iter() for v in e.attrib.values())
            assert "\x1b" not in attrs and "\x1b" not in all_text
            if not what.startswith("diff"):
                assert "./x\\x1b[2J" in all_text, what
                assert "'</script><script>alert(1)</script>'" in all_text, what
            node_check(text, what, d)
        html = outputs[1][1].decode()
        assert "stop&lt;&amp;&gt;\\x01\\xff]]&gt;" in html, "the counter name"
        assert "launch&lt;x&gt;&amp;\\x02" in html, "the mode"
        assert "0.1&lt;/script&gt;]]&gt;" in html, "the version"
        assert "evil&lt;mod&gt;&amp;&quot;&apos;\\x07\\xfe]]&gt;.so" in html, "the module path"
    finally:
        d.cleanup()


def test_large_snapshot_is_bounded():
    """100,000 stacks: frames narrower than 0.1 px are left out and counted, so the file stays small."""
    d = Dir()
    try:
        rnd = random.Random(5)
        branching = [4, 8, 8, 8, 8, 6]
        frames = {}
        stacks = []

        def key(level, i):
            k = "L%d_%d" % (level, i)
            if k not in frames:
                frames[k] = (0, 0x1000 + len(frames), "function_%d_%d" % (level, i))
            return k

        def walk(prefix, level):
            if level == len(branching):
                c = rnd.randint(1, 4 * MiB)
                stacks.append((prefix, "h", c, c * rnd.randint(1, 3), 1))
                return
            for i in range(branching[level]):
                walk(prefix + [key(level, i)], level + 1)

        walk([], 0)
        assert len(stacks) >= 98000
        snap = d.snapshot("large.gz", build_snapshot(stacks=stacks, live=[], frames=frames))
        start = time.time()
        path, data = render(d, "svg", snap)
        took = time.time() - start
        root = parse(data)
        drawn = svg_frames(root)
        total = len(expected_frames(stacks, labels=lambda k: k))
        pruned = int(root.get("data-pruned"))
        assert pruned > 0 and len(drawn) + pruned == total, (len(drawn), pruned, total)
        assert len(drawn) <= 25000
        assert len(data) < 12 * MiB, len(data)
        note = [t.text for t in root.iter(SVG + "text") if t.get("class") == "note"][0]
        assert "%d of %d frames narrower than" % (pruned, total) in note, note
        html_path, html = render(d, "html", snap)
        assert len(html) < 14 * MiB, len(html)
        parse(html)
        print("100,000 stacks: %d frames, %d drawn, SVG %d bytes (%.1f s), HTML %d bytes" % (
            total, len(drawn), len(data), took, len(html)))
    finally:
        d.cleanup()


def test_timeline_downsampled():
    d = Dir()
    try:
        n = 5000
        samples = [(i * 0.01, (i * 7919) % 1000 * KiB, (i * 7919) % 1000 * KiB + MiB) for i in range(n)]
        samples[3333] = (33.33, 900 * MiB, 901 * MiB)
        snap = d.snapshot("long.gz", build_snapshot(samples=samples, peak_time=33.33))
        path, data = render(d, "html", snap)
        root = parse(data)
        chart = [e for e in root.iter(SVG + "svg") if e.get("class") == "timeline"][0]
        assert chart.get("data-samples") == str(n)
        for cls in ("charged", "rss"):
            line = [e for e in chart.iter(SVG + "polyline") if e.get("class") == cls][0]
            points = line.get("points").split()
            assert len(points) == 2000, len(points)
            values = [int(v) for v in line.get("data-v").split(",")]
            assert len(values) == 2000
            assert max(values) == (900 * MiB if cls == "charged" else 901 * MiB), "the bucket maximum is kept"
        caption = "".join(root.find(".//%sfigcaption" % XHTML).itertext())
        assert "downsampled to 2000 points" in caption, caption
        assert len(data) < 1 * MiB, len(data)
    finally:
        d.cleanup()


def test_extreme_numbers():
    """Times and sizes at the edges of what the format allows render in bounded time and stay valid."""
    d = Dir()
    try:
        top = (1 << 64) - 1
        stacks = [(["main", "alpha"], "m", top, top, top), (["main", "beta"], "h", top, top, 1),
                  (["start_thread"], "m", 0, 0, 0)]
        samples = [(-1e300, top, top), (0.0, 0, 0), (1e300, top, 1)]
        snap = build_snapshot(stacks=stacks, live=stacks, samples=samples, peak_time=1e300)
        path = d.snapshot("extreme.gz", snap)
        for fmt in ("svg", "html"):
            out, data = render(d, fmt, path, name="x." + fmt)
            check_clean_markup(data, fmt)
            root = parse(data)
            assert len(data) < 200 * KiB, len(data)
        out, data = render(d, "svg", path, path, name="xd.svg")
        parse(data)
        # An empty snapshot: no stacks, no samples.
        empty = build_snapshot(stacks=[], live=[], samples=[], counters=[])
        path = d.snapshot("empty.gz", empty)
        for fmt in ("svg", "html"):
            out, data = render(d, fmt, path, name="e." + fmt)
            root = parse(data)
            assert not svg_frames(flame_svg(root))
    finally:
        d.cleanup()


def check_report_in_browser(b, html_path, snap, stacks, live, samples):
    """The fixture's report in Chromium: frames, timeline, tables, zoom, reset, search, reserved."""
    b.go(html_path)
    want = expected_frames(stacks)
    v = browser_frames(b)
    assert len(v["frames"]) == len(want), (len(v["frames"]), len(want))
    assert set(v["by_path"]) == set(want)
    total_w = v["total"]
    assert total_w > 500, total_w
    total_c = sum(x[2] for x in stacks)
    total_r = sum(x[3] for x in stacks)
    for p, f in v["by_path"].items():
        assert f["width"] > 0 and f["height"] > 0 and f["shown"], f
        assert near(f["width"] / total_w, want[p][0] / total_c, 0.002), (p, f["width"], total_w)
    initial = {p: f["width"] for p, f in v["by_path"].items()}

    # The timeline: one point per sample on each line, and the peak marker at the peak's time.
    t = b.js("""
        var svg = document.querySelector('svg.timeline');
        var c = svg.querySelector('polyline.charged'), r = svg.querySelector('polyline.rss');
        var dot = svg.querySelector('g.peak circle'), box = dot.getBoundingClientRect();
        var line = c.getBoundingClientRect();
        return {charged: c.points.numberOfItems, rss: r.points.numberOfItems, cx: dot.cx.baseVal.value,
                t: +svg.querySelector('g.peak').getAttribute('data-t'), t0: +svg.getAttribute('data-t0'),
                t1: +svg.getAttribute('data-t1'), x0: +svg.getAttribute('data-px0'),
                x1: +svg.getAttribute('data-px1'), dot: box.width, line: line.width};""")
    assert t["charged"] == len(samples) and t["rss"] == len(samples), t
    assert t["t"] == PEAK_TIME, t
    assert near(t["cx"], t["x0"] + (PEAK_TIME - t["t0"]) / (t["t1"] - t["t0"]) * (t["x1"] - t["x0"]), 0.06), t
    assert t["dot"] > 0 and t["line"] > 0, t

    # The tables.
    rows = b.js("""
        var n = function (id) { var t = document.getElementById(id);
            return t ? t.querySelectorAll(':scope > tbody > tr:not(.more)').length : -1; };
        return {top: n('top-table'), functions: n('functions-table'), sparse: n('sparse-table'),
                live: n('live-table'), counters: document.querySelectorAll('table.counters tr').length};""")
    n_functions = len({k for path, *_ in stacks for k in path})
    assert rows == {"top": min(10, len(stacks)), "functions": min(10, n_functions),
                    "sparse": sum(1 for x in stacks if is_sparse(x[2], x[3])), "live": len(live),
                    "counters": len(COUNTERS)}, rows

    # A real click on main;alpha zooms to it: it spans the graph, frames outside its subtree go.
    alpha = v["by_path"][("main", "alpha")]
    b.click('svg.ptfil-flame g.frame[data-i="%d"] rect.b' % alpha["i"])
    z = browser_frames(b)
    assert z["zoom"] == str(alpha["i"]), z["zoom"]
    for p, f in z["by_path"].items():
        inside = p[:2] == ("main", "alpha")
        if inside or p == ("main",):
            assert f["shown"], p
        else:
            assert not f["shown"] or f["width"] == 0, (p, f)
    assert near(z["by_path"][("main", "alpha")]["width"], z["total"], 0.5), z["by_path"][("main", "alpha")]
    assert near(z["by_path"][("main",)]["width"], z["total"], 0.5)
    beta = z["by_path"][("main", "alpha", "beta")]["width"]
    assert near(beta / z["total"], 40 / 55, 0.002), beta
    # Reset.
    b.click('[data-act="reset"]')
    r = browser_frames(b)
    assert r["zoom"] == "0"
    for p, f in r["by_path"].items():
        assert f["shown"] and near(f["width"], initial[p], 0.05), (p, f["width"], initial[p])

    # Search: the frames whose label holds the text are marked.
    b.type('input[data-act="search-input"]', "sparse")
    s = browser_frames(b)
    marked = {p for p, f in s["by_path"].items() if "match" in f["cls"].split()}
    assert marked == {p for p in want if "sparse" in p[-1]} and len(marked) == 2, marked
    status = b.js("return document.querySelector('[data-act=\"search-status\"]').textContent")
    assert status.startswith("2 frames match"), status
    b.click('[data-act="clear"]')
    s = browser_frames(b)
    assert not any("match" in f["cls"].split() for f in s["frames"])

    # The reserved layout: widths by reserved bytes, each box's resident part solid.
    b.click('[data-act="mode"]')
    m = browser_frames(b)
    assert m["mode"] == "reserved"
    for p, f in m["by_path"].items():
        assert near(f["width"] / m["total"], want[p][1] / total_r, 0.002), (p, f["width"])
        assert f["res"] is not None and near(f["res"], f["width"] * min(1, want[p][0] / want[p][1]), 0.05), (p, f)
    sp = m["by_path"][("main", "delta", "sparse_buf")]
    assert sp["res"] < sp["width"] / 50, sp  # 1 MiB resident of 128 MiB
    label_text = b.js("return document.querySelector('button[data-act=\"mode\"]').textContent")
    assert "reserved" in label_text.split("(")[0], label_text
    b.click('[data-act="mode"]')
    assert browser_frames(b)["mode"] == "charged"


def test_html_in_chromium():
    d = Dir()
    try:
        snap = d.snapshot("tree.gz", build_snapshot())
        html_path, html = render(d, "html", snap, name="report.html")
        svg_path, svg = render(d, "svg", snap, name="flame.svg")
        text = check_clean_markup(html, "html")
        root = parse(html)
        assert len(svg_frames(flame_svg(root))) == len(expected_frames(STACKS))
        node_check(text, "html", d)
        hostile, stacks, evil = hostile_snapshot()
        evil_snap = d.snapshot("evil.gz", hostile)
        evil_html, _ = render(d, "html", evil_snap, name="evil.html")
        with Browser(d) as b:
            check_report_in_browser(b, html_path, snap, STACKS, LIVE, SAMPLES)
            # The standalone SVG works in the browser by itself.
            b.go(svg_path)
            v = browser_frames(b)
            assert len(v["frames"]) == len(expected_frames(STACKS))
            gamma = v["by_path"][("main", "alpha", "gamma")]
            b.click('g.frame[data-i="%d"] rect.b' % gamma["i"])
            z = browser_frames(b)
            assert z["zoom"] == str(gamma["i"]) and near(z["by_path"][("main", "alpha", "gamma")]["width"],
                                                         z["total"], 0.5)
            assert not z["by_path"][("start_thread",)]["shown"]
            b.click('[data-act="reset"]')
            assert browser_frames(b)["zoom"] == "0"
            # The hostile report: our two scripts and nothing else, every frame drawn.
            b.go(evil_html)
            h = b.js("""return {scripts: document.scripts.length, title: document.title,
                                bold: document.querySelectorAll('b').length,
                                frames: document.querySelectorAll('svg.ptfil-flame g.frame').length};""")
            assert h["scripts"] == 2 and h["bold"] == 0, h
            assert h["frames"] == len(expected_frames(stacks, labels=lambda k: evil[k][2] or k)), h
            assert "</script><script>alert(1)</script>" in h["title"], h
    finally:
        d.cleanup()


def launch_in(cwd, argv, snapshot):
    """ptfil launch -q -i 10 -o snapshot -- argv, run from cwd (so the report shows the command as a user
    types it), in its own session, killed if it outlives TIMEOUT; it must exit 0."""
    proc = subprocess.Popen([PTFIL, "launch", "-q", "-i", "10", "-o", snapshot, "--", *argv], cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err


def keep_screenshot(png, build_name, docs_name):
    """A PNG of a report: kept in the build directory, and as docs/docs_name with PTFIL_UPDATE_SCREENSHOT=1."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10000, len(png)
    with open(os.path.join(BUILDDIR, build_name), "wb") as f:
        f.write(png)
    if os.environ.get("PTFIL_UPDATE_SCREENSHOT") == "1":
        with open(os.path.join(SRCDIR, "docs", docs_name), "wb") as f:
            f.write(png)
        print("wrote %s" % os.path.join(SRCDIR, "docs", docs_name))


def test_seed_scenario_rendered():
    """A real run of the seed scenario, rendered: the 50 MiB and the four sparse thread buffers show as
    such, in the SVG and in the report in Chromium, whose screenshot is kept."""
    d = Dir()
    try:
        snapshot = d.file("seed.gz")
        launch_in(os.path.dirname(target("sparse_threads")), ["./sparse_threads"], snapshot)
        doc = view_json(snapshot)
        svg_path, svg = render(d, "svg", snapshot, name="seed.svg")
        html_path, html = render(d, "html", snapshot, name="seed.html")
        check_clean_markup(svg, "seed svg")
        check_clean_markup(html, "seed html")
        root = parse(svg)
        frames = dict(svg_frames(root))
        folded = folded_frames(snapshot)
        assert set(frames) <= folded, set(frames) - folded
        assert len(folded) == int(root.get("data-frames")) + int(root.get("data-pruned")), len(folded)
        total = int([g for g in root.iter(SVG + "g") if g.get("class") == "total"][0].get("data-w"))
        assert total == doc["peak"]["charged_bytes"] or abs(total - doc["peak"]["charged_bytes"]) < MiB, total
        load = [g for p, g in frames.items() if p[-1] == "load_dataset"]
        assert len(load) == 1 and abs(int(load[0].get("data-w")) - 50 * MiB) < 2 * MiB, load
        bufs = [g for p, g in frames.items() if p[-1] == "thread_buffer_alloc"]
        assert len(bufs) == 1, list(frames)
        assert bufs[0].get("data-sparse") == "1" and int(bufs[0].get("data-wr")) == 4 * 128 * MiB
        assert abs(int(bufs[0].get("data-w")) - 4 * MiB) < MiB
        print("seed scenario: SVG %d bytes (%s frames, %s pruned), HTML %d bytes" % (
            len(svg), root.get("data-frames"), root.get("data-pruned"), len(html)))
        with Browser(d) as b:
            b.go(html_path)
            v = browser_frames(b)
            assert len(v["frames"]) == int(root.get("data-frames"))
            assert all(f["height"] > 0 for f in v["frames"])
            n = b.js("return document.querySelector('svg.timeline polyline.charged').points.numberOfItems")
            assert n == len(doc["timeline"]) or (n == 2000 and len(doc["timeline"]) > 2000), (n, len(doc["timeline"]))
            png = b.screenshot()
        keep_screenshot(png, "report-screenshot.png", "report.png")
    finally:
        d.cleanup()


def test_numpy_demo_rendered():
    """The README's headline demo (make demo) rendered: in the flame graph each array's Python frame is
    as wide as the array, and OpenBLAS's buffers are sparse; the report works in Chromium and its
    screenshot is kept (docs/report-numpy.png with PTFIL_UPDATE_SCREENSHOT=1)."""
    python = "/usr/bin/python3"
    if subprocess.run([python, "-c", "import numpy"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        raise missing("%s cannot import numpy (tools/install-deps.sh installs python3-numpy)" % python)
    pydir = os.path.join(SRCDIR, "tests", "targets", "py")
    src = open(os.path.join(pydir, "numpy_demo.py")).read().splitlines()
    line_of = lambda pattern: next(i for i, t in enumerate(src, 1) if re.search(pattern, t))
    n = int(re.search(r"^N = (\d+)", "\n".join(src), re.M).group(1))
    d = Dir()
    try:
        snapshot = d.file("numpy.gz")
        launch_in(pydir, [python, "numpy_demo.py"], snapshot)
        svg_path, svg = render(d, "svg", snapshot, name="numpy.svg")
        html_path, html = render(d, "html", snapshot, name="numpy.html")
        check_clean_markup(svg, "numpy svg")
        check_clean_markup(html, "numpy html")
        root = parse(svg)
        frames = svg_frames(root)
        for fn, pattern in (("load", r"return np\.ones"), ("scale", r"return a \* "), ("multiply", r"return a @ a")):
            # CPython names the main script by its absolute path, from the real working directory.
            want = "%s (%s:%d)" % (fn, os.path.join(os.path.realpath(pydir), "numpy_demo.py"), line_of(pattern))
            w = sum(int(g.get("data-w")) for p, g in frames if p[-1] == want)
            # multiply's frame also holds OpenBLAS's buffer for the main thread (a few MiB resident).
            assert n * n * 8 * 0.97 <= w <= n * n * 8 + (8 * MiB if fn == "multiply" else MiB), (want, w)
        sparse = [g for p, g in frames if g.get("data-sparse") == "1" and int(g.get("data-wr")) >= 64 * MiB]
        assert sparse, "no sparse frame of 64 MiB reserved or more"
        with Browser(d) as b:
            b.go(html_path)
            v = browser_frames(b)
            assert len(v["frames"]) == int(root.get("data-frames"))
            png = b.screenshot()
        keep_screenshot(png, "report-numpy-screenshot.png", "report-numpy.png")
        print("numpy demo: SVG %d bytes (%s frames, %s pruned), HTML %d bytes" % (
            len(svg), root.get("data-frames"), root.get("data-pruned"), len(html)))
    finally:
        d.cleanup()


if __name__ == "__main__":
    # make check's timeout sends SIGTERM: leave through the finally blocks, which end the browser.
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))
    main([test_svg_frames_and_widths, test_svg_live, test_svg_diff, test_hostile_strings,
          test_large_snapshot_is_bounded, test_timeline_downsampled, test_extreme_numbers, test_html_in_chromium,
          test_seed_scenario_rendered, test_numpy_demo_rendered])
