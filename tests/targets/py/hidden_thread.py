"""A Python program whose thread state no longer names its thread: `hidden_thread.py`.

It overwrites native_thread_id in its own PyThreadState (through ctypes: CPython keeps that field
for debuggers and profilers, and reads it for nothing else) with an id no thread has, then keeps a
16 MiB bytearray made in grow() and exits with status 6. ptfil finds the interpreter but no
thread state for the thread that allocates, as it would in a container whose thread ids it could
not map: those stacks show native frames only, and ptfil must say so (tests/e2e/test_container.py).
"""
import ctypes
import sys
import threading

MiB = 1 << 20


def hide():
    get = ctypes.pythonapi.PyThreadState_Get
    get.restype = ctypes.c_void_p
    words = (ctypes.c_uint64 * 64).from_address(get())
    tid = threading.get_native_id()
    at = [i for i in range(len(words)) if words[i] == tid]
    if len(at) != 1:
        print("hidden_thread: the thread id %d is %d times in the thread state" % (tid, len(at)), file=sys.stderr)
        sys.exit(2)
    words[at[0]] = 0x7ffffff0


def grow():
    return bytearray(16 * MiB)  # SITE: grow


hide()
kept = grow()
print("hidden_thread: %d MiB" % (len(kept) // MiB))
sys.exit(6)
