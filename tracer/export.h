/*
 * From the tracer's tables to a snapshot file (export.c).
 */
#ifndef PTFIL_EXPORT_H
#define PTFIL_EXPORT_H

struct tracer;
struct proc;

/*
 * Writes process p's snapshot to path: its peak, or with live, what
 * is live now in place of the peak. Returns 0, or -1 after error().
 */
int tracer_write_snapshot(struct tracer *T, struct proc *p, int live, const char *path);

#endif
