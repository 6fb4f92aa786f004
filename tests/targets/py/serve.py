"""A long-running Python program to attach to: `serve.py`.

It prints "ready", then keeps one 256 KiB bytearray a tick (about 10 ms) in
hold(), called from serve(), until a line arrives on stdin; then it prints
how many it holds and "bye" and exits with status 4. ptfil attach must find
its Python frames although it started before ptfil did.
"""
import sys
import threading
import time


def hold(n):
    return bytearray(n)  # SITE: hold


def serve(stop):
    keep = []
    while not stop.is_set():
        keep.append(hold(256 * 1024))  # SITE: serve
        time.sleep(0.01)
        if len(keep) > 2000:
            keep.clear()
    return len(keep) > 0


def main():
    stop = threading.Event()
    print("ready", flush=True)
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    held = serve(stop)
    print("held %s" % held)
    print("bye")
    sys.exit(4)


main()
