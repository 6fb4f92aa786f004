"""A Python list of 12 million distinct ints built by one line of build_list (the line marked BUILD):
about 100 MiB of int objects (32 bytes each) and list slots (8 each) that pymalloc carves from
arenas, made resident page by page by that line. Prints one line and exits with status 0
(tests/e2e/test_pykernel.py). The first argument, when given, is the count in millions.
"""
import sys

N = 12


def build_list(n):
    base = 1 << 40
    return [base + i for i in range(n)]  # BUILD


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else N
    xs = build_list(n * 1000000)
    print("ints: %d" % len(xs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
