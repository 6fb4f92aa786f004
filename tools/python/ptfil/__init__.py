"""ptfil in IPython and Jupyter: %%ptfil profiles one cell of the running kernel from outside.

    %load_ext ptfil
    %%ptfil
    frame = build_frame()

The kernel is not restarted and nothing is loaded into it: ptfil attaches to the kernel's process
(ptrace, and the kernel's own probes where it may), the cell runs as it would, ptfil detaches, and
the cell's peak is shown under its output: the bytes above what the kernel held before, the lines
of the cell (and of your own modules) that held them, and the flame graph. The cell's output and
any exception it raises reach the notebook as without the magic.

ptfil cannot trace its own parent, so it is started through a shell that leaves at once (ptfil's
parent is then init, or the nearest subreaper). The programs are $PTFIL and $PTFIL_VIEW when set,
else ptfil and ptfil-view on $PATH. %%ptfil --keep DIR keeps the snapshot and the page in DIR.
"""
import html
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

__all__ = ["load_ipython_extension", "profile_cell"]

ATTACH_TIMEOUT = 60.0
DETACH_TIMEOUT = 120.0


class PtfilError(RuntimeError):
    """ptfil could not profile the cell: the reason, as ptfil said it."""


def _program(name, env):
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        raise PtfilError("%s not found: install ptfil (make install) or set $%s to it" % (name, env))
    return path


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _attach(pid, snapshot, log):
    """Starts ptfil attach PID in the background, not as our child; returns its pid once attached."""
    ptfil = _program("ptfil", "PTFIL")
    script = 'log=$1; shift; "$@" </dev/null >/dev/null 2>"$log" & echo $!'
    r = subprocess.run(["/bin/sh", "-c", script, "sh", log, ptfil, "attach", "-o", snapshot, str(pid)],
                       capture_output=True, text=True, start_new_session=True, timeout=30)
    if r.returncode != 0 or not r.stdout.strip().isdigit():
        raise PtfilError("cannot start ptfil: %s" % (r.stderr.strip() or r.stdout.strip()))
    tracer = int(r.stdout.strip())
    deadline = time.monotonic() + ATTACH_TIMEOUT
    while time.monotonic() < deadline:
        text = _read(log)
        if "attached to process %d" % pid in text:
            return tracer
        if not _alive(tracer):
            raise PtfilError("ptfil did not attach: %s" % (text.strip() or "it exited"))
        time.sleep(0.02)
    _stop(tracer)
    raise PtfilError("ptfil did not attach within %.0f s: %s" % (ATTACH_TIMEOUT, _read(log).strip()))


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _stop(tracer):
    """Ctrl-C to ptfil: it detaches and writes the snapshot. Waits for it to be gone."""
    try:
        os.kill(tracer, signal.SIGINT)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + DETACH_TIMEOUT
    while _alive(tracer) and time.monotonic() < deadline:
        time.sleep(0.02)
    if _alive(tracer):
        raise PtfilError("ptfil (pid %d) did not detach within %.0f s" % (tracer, DETACH_TIMEOUT))


def _view(*args):
    r = subprocess.run([_program("ptfil-view", "PTFIL_VIEW"), *args], capture_output=True, timeout=300)
    if r.returncode != 0:
        raise PtfilError("ptfil-view %s: %s" % (" ".join(args), r.stderr.decode(errors="replace").strip()))
    return r.stdout.decode(errors="replace")


def _before_attach(stack):
    return [f.get("function") for f in stack["frames"]] == ["[before attach]"]


class CellProfile:
    """What one cell's run held: peak (bytes above what the kernel held before the cell), the
    kernel's whole peak, "your lines" as the report gives them, and the files."""

    def __init__(self, snapshot, page):
        self.snapshot, self.page = snapshot, page
        doc = json.loads(_view("--json", snapshot))
        self.view = doc.get("view")
        self.process_peak = doc["peak"]["charged_bytes"]
        before = sum(s["charged_bytes"] for s in doc["stacks"] if _before_attach(s))
        self.peak = self.process_peak - before
        self.report = _view(snapshot)
        m = re.search(r"\nyour lines at the peak[^\n]*\n((?:  [^\n]*\n)*)", self.report)
        self.lines = m.group(1).rstrip("\n").splitlines() if m else []

    def text(self):
        head = "ptfil: this cell's peak %.1f MiB (the kernel's %.1f MiB, %s view)" % (
            self.peak / 1048576.0, self.process_peak / 1048576.0, self.view)
        return "\n".join([head, "your lines at the peak:"] + self.lines + ["snapshot: %s" % self.snapshot])

    def _repr_html_(self):
        rows = "".join("<tr><td><code>%s</code></td></tr>" % html.escape(l.strip()) for l in self.lines)
        frame = ""
        if self.page and os.path.exists(self.page):
            frame = ('<iframe style="width:100%%;height:640px;border:1px solid #ccc" srcdoc="%s"></iframe>'
                     % html.escape(_read(self.page), quote=True))
        return ("<div><b>ptfil</b>: this cell's peak <b>%.1f MiB</b> (the kernel's %.1f MiB, %s view)"
                "<table><tr><th>your lines at the peak</th></tr>%s</table>%s<div>snapshot: <code>%s</code></div></div>"
                % (self.peak / 1048576.0, self.process_peak / 1048576.0, html.escape(str(self.view)), rows, frame,
                   html.escape(self.snapshot)))

    def __repr__(self):
        return self.text()


def profile_cell(shell, cell, keep=None):
    """Runs cell in shell (an IPython InteractiveShell) under ptfil attach; returns (result, CellProfile)."""
    d = keep or tempfile.mkdtemp(prefix="ptfil-cell-")
    os.makedirs(d, exist_ok=True)
    stamp = "%d-%d" % (os.getpid(), int(time.time() * 1000))
    snapshot = os.path.join(d, "cell-%s.gz" % stamp)
    page = os.path.join(d, "cell-%s.html" % stamp)
    log = os.path.join(d, "cell-%s.log" % stamp)
    tracer = _attach(os.getpid(), snapshot, log)
    try:
        result = shell.run_cell(cell, store_history=False)
    finally:
        _stop(tracer)
    if not os.path.exists(snapshot):
        raise PtfilError("ptfil wrote no snapshot: %s" % _read(log).strip())
    _view("--html", "-o", page, snapshot)
    return result, CellProfile(snapshot, page)


def _ptfil_magic(line, cell):
    from IPython import get_ipython
    from IPython.display import display
    args = shlex.split(line)
    keep = None
    if args[:1] == ["--keep"] and len(args) == 2:
        keep = args[1]
    elif args:
        raise PtfilError("usage: %%ptfil [--keep DIR]")
    result, prof = profile_cell(get_ipython(), cell, keep)
    display(prof)
    return None


def load_ipython_extension(ipython):
    ipython.register_magic_function(_ptfil_magic, magic_kind="cell", magic_name="ptfil")
