"""A list of 1,000,000 small tuples of fresh ints, built in build_list, held, then dropped.

Each element is a 2-tuple (64 bytes in CPython's small-object allocator, with its GC header)
and two ints above the small-int cache (32 bytes each): about 128 MB in pymalloc arenas, plus
the list's 8 MB array of pointers from malloc. Prints the process's VmHWM at the end.
"""
import sys

N = 1000000


def build_list(n):
    return [(i + 1000, i + 1001) for i in range(n)]


def vmhwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return -1


def main():
    held = build_list(int(sys.argv[1]) if len(sys.argv) > 1 else N)
    print("built", len(held))
    del held
    print("vmhwm=%d" % vmhwm())


if __name__ == "__main__":
    main()
