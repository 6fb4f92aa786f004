"""Millions of small objects: a list of 2,000,000 tuples (an int and a short str each) and a
dict of 1,000,000 str -> int entries, built in build_list and build_dict, held together, then
dropped. CPython serves the small objects from its own arenas (pymalloc, 1 MiB mappings in
3.11), so most of the memory arrives through mmap, not through one malloc per object.
Usage: python3 bench/py_objects.py [SCALE]   (SCALE multiplies both counts; default 1)
"""
import sys


def build_list(n):
    return [(i, "s%d" % i) for i in range(n)]


def build_dict(n):
    return {"k%d" % i: i for i in range(n)}


def main():
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    held = build_list(int(2000000 * scale))
    table = build_dict(int(1000000 * scale))
    print(len(held), len(table))
    del held, table


if __name__ == "__main__":
    main()
