"""A Python program to run inside a container (`unshare -fp --mount-proc python3 boxed.py`).

Inside its own PID namespace the interpreter names each thread by the id the thread has there
(1 for the main thread), not by the id ptfil sees from outside; tests/e2e/test_container.py checks
that ptfil still finds the Python frames of the main thread and of a second thread.

boxed.py: keeps a 24 MiB bytearray made by the main thread and a 12 MiB one made by a second
thread, each on a line marked "# SITE: NAME", prints one line and exits with status 5.
boxed.py serve: prints "ready", then a second thread keeps one 256 KiB bytearray a tick (about
10 ms) in hold() until a line arrives on stdin; then it prints "bye" and exits with status 4.
"""
import sys
import threading
import time

MiB = 1 << 20
keep = []


def fill_main():
    keep.append(bytearray(24 * MiB))  # SITE: main


def fill_thread():
    keep.append(bytearray(12 * MiB))  # SITE: thread


def hold(n):
    return bytearray(n)  # SITE: hold


def serve(stop):
    held = []
    while not stop.is_set():
        held.append(hold(256 * 1024))
        time.sleep(0.01)
        if len(held) > 400:
            held.clear()


def once():
    fill_main()
    t = threading.Thread(target=fill_thread)
    t.start()
    t.join()
    print("boxed: %d MiB" % (sum(len(b) for b in keep) // MiB))
    sys.exit(5)


def serving():
    stop = threading.Event()
    worker = threading.Thread(target=serve, args=(stop,))
    worker.start()
    print("ready", flush=True)
    sys.stdin.readline()
    stop.set()
    worker.join()
    print("bye")
    sys.exit(4)


if sys.argv[1:] == ["serve"]:
    serving()
else:
    once()
