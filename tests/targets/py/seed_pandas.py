"""The seed's data script: DataFrames built in functions, one copy kept needlessly, a plot.

load() builds 3 columns of ROWS rows (24 MB each at 8 bytes a value), enrich() copies the frame
and adds a column (the copy is kept), summarize() joins both side by side (the peak: about 175 MB
of column data live at once) and groups them; plot() draws the sums with matplotlib (Agg).
"""
import sys

import numpy as np
import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROWS = 1_000_000


def load(rows):
    rng = np.random.default_rng(1)
    return pd.DataFrame({"a": rng.random(rows), "b": rng.random(rows), "k": rng.integers(0, 100, rows)})


def enrich(df):
    out = df.copy()
    out["c"] = out["a"] * out["b"]
    return out


def summarize(df, kept):
    both = pd.concat([df, kept], axis=1, keys=["x", "y"])
    return both.groupby(("x", "k")).sum()


def plot(sums, path):
    fig, ax = plt.subplots()
    ax.plot(sums.index, sums.iloc[:, 0])
    fig.savefig(path)
    plt.close(fig)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/dev/null"
    df = load(ROWS)
    kept = enrich(df)
    sums = summarize(df, kept)
    plot(sums, out)
    print("groups", len(sums), "sum", round(float(sums.iloc[:, 0].sum()), 3))


main()
