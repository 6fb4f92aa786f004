"""A multiprocessing.Pool of 2 forked workers that hold 40 MB each at the same time.

Each worker runs hold_block once (map with chunksize 1 over two tasks): it allocates a 40,000,000-byte
bytearray (zero-filled, so resident) and waits at a barrier of 2 before letting it go. A worker
blocked at the barrier takes no second task, so the two tasks run in the two workers, and both
blocks are held at once when the second worker reaches the barrier. The workers' pids go to
stderr ("pool: worker pid N"); stdout is the same in every run. Exits 0.
"""
import multiprocessing
import os
import sys

BLOCK = 40 * 1000 * 1000
barrier = None


def init(b):
    global barrier
    barrier = b


def hold_block(i):
    block = bytearray(BLOCK)
    print("pool: worker pid %d" % os.getpid(), file=sys.stderr, flush=True)
    barrier.wait(timeout=120)
    return len(block) + i


if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    b = ctx.Barrier(2)
    with ctx.Pool(2, initializer=init, initargs=(b,)) as pool:
        print(pool.map(hold_block, range(2), chunksize=1), flush=True)
    print("pool done", flush=True)
