#!/usr/bin/env python3
"""%%ptfil in a real Jupyter kernel (issue 27): Debian's python3-ipykernel, driven through
jupyter_client as a notebook drives it. A cell built to hold 200 MiB at once is profiled from
outside: its peak within 5%, its function named among "your lines", its output and a failing
cell's exception unchanged, and the kernel alive and untraced afterwards, its state kept.
"""
import os
import re
import shutil
import signal
import tempfile
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ptfiltest import PTFIL, SRCDIR, VIEW, main, missing, proc_status, run

PYTHON = "/usr/bin/python3"
MODULE_DIR = os.path.join(os.path.abspath(SRCDIR), "tools", "python")
TIMEOUT = 180


def kernel():
    if run([PYTHON, "-c", "import ipykernel, jupyter_client"], timeout=60).returncode != 0:
        raise missing("%s cannot import ipykernel and jupyter_client (tools/install-deps.sh installs "
                      "python3-ipykernel and python3-jupyter-client)" % PYTHON)
    sys.path.insert(0, "/usr/lib/python3/dist-packages")
    from jupyter_client.manager import KernelManager
    env = dict(os.environ, PATH="/usr/bin:/bin", PYTHONPATH=MODULE_DIR, PTFIL=PTFIL, PTFIL_VIEW=VIEW,
               PYDEVD_DISABLE_FILE_VALIDATION="1")
    env.pop("PYTHONHOME", None)
    km = KernelManager(kernel_cmd=[PYTHON, "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=TIMEOUT)
    return km, kc


def execute(kc, code):
    """Runs code in the kernel: (the reply's status, the iopub messages of the run)."""
    msgs = []
    reply = kc.execute_interactive(code, timeout=TIMEOUT, output_hook=msgs.append)
    return reply["content"]["status"], msgs


def streams(msgs):
    return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")


def displays(msgs):
    return [m["content"]["data"] for m in msgs if m["msg_type"] in ("display_data", "execute_result")]


def test_cell_profiled_from_outside():
    km, kc = kernel()
    pid = None
    try:
        status, msgs = execute(kc, "import os, numpy as np\nkept = 41\nprint(os.getpid())")
        assert status == "ok", msgs
        pid = int(streams(msgs).strip())
        status, msgs = execute(kc, "%load_ext ptfil")
        assert status == "ok", msgs

        keep = tempfile.mkdtemp(prefix="ptfil-keep-")
        cell = ("%%%%ptfil --keep %s\n" % keep +
                "def build_table(n):\n"
                "    a = np.ones(n)\n"
                "    return float(a.sum())\n"
                "total = build_table(200 * 2**20 // 8)\n"
                "print('total', total)\n")
        status, msgs = execute(kc, cell)
        assert status == "ok", msgs
        assert streams(msgs) == "total %r\n" % float(200 * 2**20 // 8), streams(msgs)
        shown = displays(msgs)
        assert shown and "text/html" in shown[-1] and "text/plain" in shown[-1], shown
        text = shown[-1]["text/plain"]
        print(text)
        m = re.search(r"this cell's peak ([0-9.]+) MiB", text)
        assert m, text
        assert abs(float(m.group(1)) - 200.0) <= 10.0, text  # within 5%
        # Its line, in the cell as the kernel compiled it (without the %%ptfil line), holds the 200 MiB.
        m = re.search(r"\n\s+([0-9.]+) MiB\s+[0-9.]+%\s+build_table \(\S+:2\)", text)
        assert m and abs(float(m.group(1)) - 200.0) <= 10.0, text
        assert "<iframe" in shown[-1]["text/html"], shown[-1]["text/html"][:2000]
        snap = re.search(r"snapshot: (\S+)", text).group(1)
        assert os.path.dirname(snap) == keep, (snap, keep)
        assert os.path.exists(snap) and os.path.exists(snap[:-3] + ".html"), snap
        shutil.rmtree(keep)

        # A cell that fails: its exception reaches the notebook as without the magic.
        status, msgs = execute(kc, "%%ptfil\nraise ValueError('boom from the cell')")
        errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
        assert errors and errors[0]["ename"] == "ValueError" and "boom" in errors[0]["evalue"], msgs

        # The kernel runs on, untraced, its state as it was.
        assert proc_status(pid, "TracerPid") == "0", proc_status(pid, "TracerPid")
        status, msgs = execute(kc, "print(kept + 1, total, os.getpid())")
        assert status == "ok" and streams(msgs).split() == ["42", repr(float(200 * 2**20 // 8)), str(pid)], msgs
    finally:
        try:
            kc.stop_channels()
        finally:
            km.shutdown_kernel(now=True)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    main([test_cell_profiled_from_outside])
