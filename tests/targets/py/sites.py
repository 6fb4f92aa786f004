"""Allocation sites in every shape of Python call ptfil must read: each makes one bytearray of a
known size on a line marked "# SITE: NAME", and all of them stay alive until the end, so every one
is live at the peak. Prints one line and exits with status 3 (tests/e2e/test_python.py).
"""
import asyncio
import sys
import threading

MiB = 1 << 20
keep = []


# A plain call chain: main -> plain_outer -> plain_inner.
def plain_inner():
    keep.append(bytearray(24 * MiB))  # SITE: plain


def plain_outer():
    plain_inner()


# A closure: its qualified name is closure_outer.<locals>.inner.
def closure_outer():
    def inner():
        keep.append(bytearray(5 * MiB))  # SITE: closure
    inner()


class Holder:
    def method(self):
        keep.append(bytearray(20 * MiB))  # SITE: method


def chunks():
    yield bytearray(12 * MiB)  # SITE: generator


def consume():
    for chunk in chunks():
        keep.append(chunk)


async def decode():
    return bytearray(10 * MiB)  # SITE: async


async def fetch():
    await asyncio.sleep(0)
    keep.append(await decode())


def recurse(depth):
    if depth == 0:
        keep.append(bytearray(6 * MiB))  # SITE: recursion
        return
    recurse(depth - 1)


def callback(size):
    return bytearray(size)  # SITE: callback


def apply_callbacks():
    keep.extend(map(callback, [8 * MiB]))


def comprehension():
    keep.extend([bytearray(n * MiB) for n in (4,)])  # SITE: comprehension


# Three threads allocate at the same time, each in its own function.
barrier = threading.Barrier(3)


def worker_a():
    barrier.wait()
    keep.append(bytearray(7 * MiB))  # SITE: thread_a


def worker_b():
    barrier.wait()
    keep.append(bytearray(9 * MiB))  # SITE: thread_b


def worker_c():
    barrier.wait()
    keep.append(bytearray(11 * MiB))  # SITE: thread_c


def run_threads():
    threads = [threading.Thread(target=f) for f in (worker_a, worker_b, worker_c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    plain_outer()
    closure_outer()
    Holder().method()
    consume()
    asyncio.run(fetch())
    recurse(4)
    apply_callbacks()
    comprehension()
    run_threads()
    total = sum(len(b) for b in keep)
    print("sites: %d buffers, %d MiB" % (len(keep), total // MiB))
    return 3


if __name__ == "__main__":
    sys.exit(main())
