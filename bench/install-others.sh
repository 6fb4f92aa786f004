#!/bin/sh
# The optional set-up of the benchmark suite (bench/README.md): the profilers bench/run compares
# ptfil with (heaptrack, valgrind's massif), and NumPy with OpenBLAS for the NumPy workload.
# Debian's python3-numpy alone runs on the reference BLAS, single-threaded; with
# libopenblas0-pthread installed it uses OpenBLAS, as most NumPy installations do. Does nothing
# when everything is there; never run by `make check` or by bench/run.
# libbpf-dev, bpftool, clang, libelf-dev: bench/kernel-probe (the BPF heap-event measurement).
# sqlite3 and git: the real programs of bench/run (gcc comes with build-essential, perl with Debian).
set -eu
exec "$(dirname "$0")/../tools/install-deps.sh" heaptrack valgrind python3-numpy libopenblas0-pthread \
	libbpf-dev bpftool clang libelf-dev sqlite3 git
