/*
 * Python frames read by the kernel (tracer/kernel/pyread.bpf.h), the user
 * side: describing a process's CPython to the BPF reader of either kernel
 * event source, and keeping the frames it read until the record of the
 * event they belong to comes. Both sources share it (faults.c, kheap.c).
 */
#ifndef PTFIL_PYREAD_H
#define PTFIL_PYREAD_H

#include <stddef.h>
#include <sys/types.h>

struct pyproc;
struct tracer;

/*
 * Writes what the BPF reader needs of process pid's CPython (py, PY_READY:
 * where _PyRuntime is, the layout pystack_detect chose, the process's PID
 * namespace) into the map fd (pyprocs). Returns 0, or -1 with why (size
 * bytes) saying why its frames cannot be read by the kernel.
 */
int pyread_describe(int fd, const struct pyproc *py, pid_t pid, char *why, size_t size);
/* Takes process pid out of map fd (it exited, or its image changed). */
void pyread_forget(int fd, pid_t pid);
/*
 * A KPY_REC record of either ring, len bytes: its frames kept for its
 * thread's next event (capture_keep_python), and the code objects in it
 * the reader did not know written into pycodes_fd (its thread stopped, they
 * are named in this drain). Returns 0, or -1 when the record is not one
 * (too short, a thread ptfil does not trace).
 */
int pyread_keep(struct tracer *T, const void *rec, size_t len, int pycodes_fd);

#endif
