/* Snapshot files (snapshot.c): their names, and writing them at the end, at new peaks and on SIGUSR1. */
#ifndef PTFIL_SNAPSHOT_H
#define PTFIL_SNAPSHOT_H

struct tracer;
struct proc;

/*
 * Where process p's snapshot goes: the output path for the main process,
 * STEM.PID.gz for another (STEM: the output without .gz), and with live = N
 * > 0, STEM.live-N.gz (STEM.PID.live-N.gz). Caller frees; NULL out of memory.
 */
char *snapshot_path(struct tracer *T, struct proc *p, unsigned live);
/* The file name (no directory) of p's own snapshot, or NULL when it has none. Caller frees. */
char *snapshot_file_name(struct tracer *T, struct proc *p);
/* Writes process p's peak snapshot, or with live its present state under the next live name. 0 or -1 after error(). */
int snapshot_write(struct tracer *T, struct proc *p, int live);
/* Rewrites the snapshot of every process whose peak grew, at most once a second each. */
void snapshot_checkpoint(struct tracer *T);

#endif
