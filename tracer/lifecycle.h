/*
 * The life of a traced process and thread (lifecycle.c): each is made with
 * every module's part of it, set up once its image can be read, set up again
 * after exec, and dropped with all it owns. core/session.h has the tables.
 */
#ifndef PTFIL_LIFECYCLE_H
#define PTFIL_LIFECYCLE_H

#include <sys/types.h>

struct tracer;
struct tracee;
struct proc;

/* Adds thread tid, finding (or creating) its process from /proc/TID/status. NULL after error(). */
struct tracee *lifecycle_add_thread(struct tracer *T, pid_t tid);
/*
 * Forgets thread t (gone, or let go): it is retired, never waited for again,
 * and freed. A process that is not profiled goes with its last thread.
 */
void lifecycle_remove_thread(struct tracer *T, struct tracee *t);
/* Process p goes: its line of the tree is kept (memory/tree.h), it leaves the table and is freed. */
void lifecycle_drop_proc(struct tracer *T, struct proc *p);
/* Frees a process and all it owns (not its threads, not its place in the table). */
void lifecycle_proc_free(struct proc *p);
/* Frees a thread and all it owns (not its place in the table). */
void lifecycle_thread_free(struct tracee *t);

/*
 * Process p can be read now (after its exec, or at attach or fork): its
 * residency files opened, its modules loaded, its fault count taken. Returns
 * 0, or -1 when its memory cannot be read.
 */
int lifecycle_ready(struct tracer *T, struct proc *p);
/*
 * At thread t's exec event, before anything else: the old image's
 * breakpoints and probes are forgotten (its text is gone), and a non-leader
 * thread that execed takes over the leader's tid.
 */
void lifecycle_new_image(struct tracer *T, struct tracee *t);
/*
 * Which view p gets for its image now (kernel/faults.h: faults_view), and
 * its touch view set up (its faults followed) or dropped. Returns the view,
 * an enum charge_view.
 */
int lifecycle_set_view(struct tracer *T, struct proc *p);
/* Sets up profiled process p after its exec: an empty ledger, its files and modules, its hooks. 0 or -1. */
int lifecycle_exec(struct tracer *T, struct proc *p);

#endif
