"""tracer/stacks/pylayout.c against the CPython interpreters it claims to know, through tests/targets/pylayout_probe.

- The offsets ptfil reads with are those of each version's own internal headers: a C program compiled
  against them (python3.X-dev's Include/internal) prints offsetof() of every field, and the two must agree.
- The location table decoder gives, for every code unit of every code object of a few hundred
  standard-library modules, the line the interpreter itself reports (code.co_positions()).
- The reader of _Py_DebugOffsets, given the first bytes of a live 3.13's _PyRuntime (read with ctypes),
  builds the very layout compiled in for 3.13; it refuses 3.11's and 3.12's, which have none.
- The str decoder turns the raw bytes of str objects (read with ctypes from a live interpreter) of
  every kind (ASCII, Latin-1, UCS-2, UCS-4) into their UTF-8.

Each check is one test per version: 3.11 is Debian's /usr/bin/python3.11 and must be there; 3.12 and
3.13 are Debian's or pyenv's (ptfiltest.cpython), and their tests skip where there is neither.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import ptfiltest  # noqa: E402
from ptfiltest import Skip, cpython, main, target  # noqa: E402

PROBE = target("pylayout_probe")
MINORS = (11, 12, 13)


def interpreter(minor):
    """The CPython 3.<minor> to check: Debian's 3.11 must be there; another may be missing (a skip)."""
    if minor == 11:
        assert os.access("/usr/bin/python3.11", os.X_OK), "Debian's /usr/bin/python3.11 is missing"
        return "/usr/bin/python3.11"
    return cpython(minor)


def per_version(check):
    """One test per version of MINORS from check(minor, python), named after it: check_x -> test_x_311."""
    tests = []
    for minor in MINORS:
        def test(minor=minor):
            check(minor, interpreter(minor))
        test.__name__ = "test_%s_3%d" % (check.__name__[len("check_"):], minor)
        tests.append(test)
    return tests


OFFSETS_C = r"""
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_runtime.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_code.h>
#include <stdio.h>
#include <stddef.h>
#define P(name, value) printf("%s %u\n", name, (unsigned)(value))
#define NONE 65535u
int main(void)
{
	P("runtime_interp_head", offsetof(_PyRuntimeState, interpreters.head));
	P("interp_next", offsetof(PyInterpreterState, next));
	P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
	P("ts_next", offsetof(PyThreadState, next));
	P("ts_native_thread_id", offsetof(PyThreadState, native_thread_id));
#if PY_VERSION_HEX < 0x030d0000
	P("ts_cframe", offsetof(PyThreadState, cframe));
	P("cframe_current", offsetof(_PyCFrame, current_frame));
	P("ts_current_frame", NONE);
	P("frame_code", offsetof(_PyInterpreterFrame, f_code));
	P("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
#else
	P("ts_cframe", NONE);
	P("cframe_current", NONE);
	P("ts_current_frame", offsetof(PyThreadState, current_frame));
	P("frame_code", offsetof(_PyInterpreterFrame, f_executable));
	P("frame_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#endif
	P("frame_previous", offsetof(_PyInterpreterFrame, previous));
	P("frame_owner", offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX < 0x030c0000
	P("frame_is_entry", offsetof(_PyInterpreterFrame, is_entry));
#else
	P("frame_is_entry", NONE);
#endif
	P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
	P("code_filename", offsetof(PyCodeObject, co_filename));
	P("code_qualname", offsetof(PyCodeObject, co_qualname));
	P("code_linetable", offsetof(PyCodeObject, co_linetable));
	P("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
	P("code_firsttraceable", offsetof(PyCodeObject, _co_firsttraceable));
	P("ascii_size", sizeof(PyASCIIObject));
	P("compact_size", sizeof(PyCompactUnicodeObject));
	P("str_length", offsetof(PyASCIIObject, length));
	P("str_state", offsetof(PyASCIIObject, state));
	P("bytes_size", offsetof(PyVarObject, ob_size));
	P("bytes_data", offsetof(PyBytesObject, ob_sval));
	return 0;
}
"""


def run(argv, **kw):
    """ptfiltest.run with more time: a run of LINES_PY compiles 400 modules."""
    return ptfiltest.run(argv, timeout=300, **kw)


def check_offsets_match_the_headers(minor, py):
    inc = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"]).stdout.decode().strip()
    if not os.path.exists(os.path.join(inc, "internal", "pycore_frame.h")):
        assert minor != 11, "python3.11-dev's internal headers are missing under %s (tools/install-deps.sh installs python3-dev)" % inc
        raise Skip("%s has no internal headers at %s" % (py, inc))
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "off.c"), os.path.join(d, "off")
        with open(src, "w") as f:
            f.write(OFFSETS_C)
        cc = run(["cc", "-I", inc, "-o", exe, src])
        assert cc.returncode == 0, cc.stderr.decode()
        want = run([exe]).stdout.decode()
    got = run([PROBE, "offsets", str(minor)])
    assert got.returncode == 0, got
    ours = dict(line.split() for line in got.stdout.decode().splitlines())
    theirs = dict(line.split() for line in want.splitlines())
    assert ours == theirs, "3.%d: fields where ptfil's layout and the headers differ: %s" % (
        minor, {k: (ours.get(k), theirs.get(k)) for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k)})
    print("3.%d: %d fields, as the headers have them" % (minor, len(ours)))


RUNTIME_PY = r"""
import ctypes, sys
runtime = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
print("%x %s" % (sys.hexversion, ctypes.string_at(runtime, 1024).hex()))
"""


def check_debug_offsets_of_live_interpreter(minor, py):
    """3.11 and 3.12 have no _Py_DebugOffsets: refused. 3.13's give the compiled-in layout."""
    r = run([py, "-c", RUNTIME_PY])
    assert r.returncode == 0, r.stderr.decode()
    version, raw = r.stdout.decode().split()
    got = run([PROBE, "debug", version, raw]).stdout.decode()
    if minor < 13:
        assert got.startswith("refused: ") and "_Py_DebugOffsets" in got, (minor, got)
        return
    assert not got.startswith("refused"), "3.%d: %s" % (minor, got)
    ours = dict(line.split() for line in got.splitlines())
    compiled = dict(line.split() for line in run([PROBE, "offsets", str(minor)]).stdout.decode().splitlines())
    assert ours == compiled, "3.%d: fields where _Py_DebugOffsets and the compiled-in layout differ: %s" % (
        minor, {k: (ours.get(k), compiled.get(k)) for k in set(ours) | set(compiled) if ours.get(k) != compiled.get(k)})
    print("3.%d: its _Py_DebugOffsets give the compiled-in layout, %d fields" % (minor, len(ours)))


# Every code object of the modules, with the line co_positions() gives each code unit.
LINES_PY = r"""
import glob, os, sys, sysconfig
std = sysconfig.get_paths()["stdlib"]
files = sorted(glob.glob(os.path.join(std, "*.py")) + glob.glob(os.path.join(std, "json", "*.py")) +
               glob.glob(os.path.join(std, "asyncio", "*.py")))[:int(sys.argv[3])]
tables, lines = open(sys.argv[1], "w"), open(sys.argv[2], "w")
def walk(co):
    yield co
    for c in co.co_consts:
        if hasattr(c, "co_linetable"):
            yield from walk(c)
n = 0
for path in files:
    try:
        top = compile(open(path, encoding="utf-8").read(), path, "exec")
    except (SyntaxError, UnicodeDecodeError, ValueError):
        continue
    for co in walk(top):
        units = len(co.co_code) // 2
        pos = [p[0] or 0 for p in co.co_positions()]
        assert len(pos) == units, (co, len(pos), units)
        tables.write("%d %s %d\n" % (co.co_firstlineno, co.co_linetable.hex(), units))
        lines.write(" ".join(map(str, pos)) + "\n")
        n += 1
print(n)
"""


def check_line_of_every_instruction(minor, py):
    with tempfile.TemporaryDirectory() as d:
        tables, lines = os.path.join(d, "tables"), os.path.join(d, "lines")
        r = run([py, "-c", LINES_PY, tables, lines, "400"])
        assert r.returncode == 0, r.stderr.decode()
        codes = int(r.stdout)
        with open(tables, "rb") as f:
            got = run([PROBE, "lines"], stdin=f)
        assert got.returncode == 0, got.stderr
        with open(lines) as f:
            want = f.read().splitlines()
        have = got.stdout.decode().splitlines()
        assert len(have) == len(want) == codes, (len(have), len(want), codes)
        units = sum(len(w.split()) for w in want)
        bad = [i for i in range(codes) if have[i] != want[i]]
        assert not bad, "3.%d: %d of %d code objects decode to other lines, first:\n%s\n%s" % (
            minor, len(bad), codes, have[bad[0]][:300], want[bad[0]][:300])
        print("3.%d: %d code objects, %d code units, every line as co_positions() has it" % (minor, codes, units))
        assert codes > 5000, codes


STR_PY = r"""
import ctypes, sys
samples = ["", "x", "hello_world.py", "café", "naïve " * 40, "λ-calculus", "数据框架.py", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "a\ud800b",
           "<frozen importlib._bootstrap>", "pkg/" * 300 + "deep.py"]
for s in samples:
    raw = ctypes.string_at(id(s), sys.getsizeof(s))
    print(raw.hex(), s.encode("utf-8", "replace").hex() if "\ud800" not in s else "61efbfbd62", sys.getsizeof(s))
"""


def check_str_objects_of_every_kind(minor, py):
    r = run([py, "-c", STR_PY])
    assert r.returncode == 0, r.stderr.decode()
    for line in r.stdout.decode().splitlines():
        raw, want, size = line.split(" ") if line.count(" ") == 2 else (line.split(" ")[0], "", line.split(" ")[-1])
        got = run([PROBE, "str", str(minor), raw]).stdout.decode().split()
        assert got and got[0] != "refused", (minor, want)
        text, need = (got[0], int(got[1])) if len(got) == 2 else ("", int(got[0]))
        assert text == want, "3.%d: %r decoded as %r" % (minor, bytes.fromhex(want), bytes.fromhex(text))
        # The object's header and characters, without the terminating NUL, lie within its size.
        assert need < int(size), (minor, need, size)
        # A read cut short of the characters gives the characters that were read, never more.
        cut = run([PROBE, "str", str(minor), raw[:2 * (need - 2)]]).stdout.decode().split()
        if want:
            assert bytes.fromhex(want).startswith(bytes.fromhex(cut[0]) if len(cut) == 2 else b""), (minor, cut)


if __name__ == "__main__":
    main(per_version(check_offsets_match_the_headers) + per_version(check_debug_offsets_of_live_interpreter) +
         per_version(check_line_of_every_instruction) + per_version(check_str_objects_of_every_kind))
