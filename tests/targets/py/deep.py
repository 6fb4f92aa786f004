"""A Python stack deeper than ptfil reads (PY_MAX_FRAMES, 256): descend recurses 300 calls deep and
allocates 8 MiB at the bottom, held until "deep done" is printed."""
import sys

sys.setrecursionlimit(2000)
held = []


def descend(depth):
    if depth == 0:
        held.append(bytearray(8 * 1024 * 1024))  # BOTTOM
        return
    descend(depth - 1)


descend(300)
print("deep done", flush=True)
