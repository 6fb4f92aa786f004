/*
 * Processes that are there already (attach) or appear (fork, vfork, exec):
 * followed, or cleaned of the breakpoints they inherited and let go; and
 * anonymous memory that no hooked call made, found in the maps (follow.c).
 */
#ifndef PTFIL_FOLLOW_H
#define PTFIL_FOLLOW_H

#include <sys/types.h>

#include "common/u64map.h"

struct tracer;
struct tracee;
struct proc;

/* A process's part (struct proc's rec): attach, the maps as last compared with the ledger. */
struct reconcile {
	double at;             /* when the maps were last compared */
	struct u64map seen;    /* starts of mappings already looked at */
};

void follow_reconcile_init(struct reconcile *r);
void follow_reconcile_fin(struct reconcile *r);

/*
 * Starts profiling p, which is running already: its memory now is charged
 * to the pseudo frame named pseudo; with arm, its breakpoints go in (tid is
 * a stopped thread of it). Returns 0, or -1 after error().
 */
int proc_follow(struct tracer *T, struct proc *p, pid_t tid, const char *pseudo, int arm);
/* True when p is a vfork child that still runs in its parent's address space. */
int proc_shares_vm(const struct proc *p);
/* A new child's first stop (sig: the signal it stopped with, to pass on). Returns 1 when it was let go. */
int procs_first_stop(struct tracer *T, struct tracee *t, int sig);
/* After exec, before the new image is set up. Returns 1 when the thread was let go. */
int procs_exec(struct tracer *T, struct tracee *t);
/*
 * Attach mode, at most once a second: anonymous mappings that no hooked call
 * made (a raw mmap system call, the dynamic linker's own; under the touch
 * view, which hooks nothing, every one made since the attach) and that hold
 * no heap block go to the alloc view under the pseudo frame [unhooked mmap].
 */
void proc_reconcile(struct tracer *T, struct proc *p);

#endif
