"""A small NumPy program: load a matrix, scale it, multiply it by itself.

Profile it with `ptfil launch -- python3 numpy_demo.py`: each 32 MB array is charged to the
line that made it, and the buffers OpenBLAS maps for its threads only by what they really use.
"""
import numpy as np

N = 2000  # a 2000 x 2000 matrix of float64: 32 MB


def load(n):
    return np.ones((n, n))


def scale(a):
    return a * 0.5


def multiply(a):
    return a @ a


def main():
    a = load(N)
    b = scale(a)
    c = multiply(b)
    print("c[0, 0] = %.1f, %d MB in arrays" % (c[0, 0], (a.nbytes + b.nbytes + c.nbytes) // 10**6))


if __name__ == "__main__":
    main()
