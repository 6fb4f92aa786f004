/*
 * What launch and attach share: the session's set-up, ptfil's own signal
 * handlers and timer, snapshot names, and writing snapshots (run.c).
 */
#ifndef PTFIL_RUN_H
#define PTFIL_RUN_H

struct tracer;
struct tracer_opts;
struct proc;

#define RUN_CAUGHT 5
int run_init(struct tracer *T, const struct tracer_opts *o);
void run_fin(struct tracer *T);
/* ptfil's SIGINT, SIGQUIT, SIGTERM, SIGHUP: passed on to the program (launch) or leave (attach); SIGUSR1: dump. */
void run_install_handlers(int attach);
/* What they were before run_install_handlers (for a launched child before exec). */
void run_restore_handlers(void);
void run_start_timer(unsigned interval_ms);
void run_stop_timer(void);
/*
 * Where process p's snapshot goes: the output path for the main process,
 * STEM.PID.gz for another (STEM: the output without .gz), and with live = N
 * > 0, STEM.live-N.gz (STEM.PID.live-N.gz). Caller frees; NULL out of memory.
 */
char *run_snapshot_path(struct tracer *T, struct proc *p, unsigned live);
/* Writes process p's peak snapshot, or with live its present state under the next live name. 0 or -1 after error(). */
int run_write(struct tracer *T, struct proc *p, int live);
/* Rewrites the snapshot of every process whose peak grew, at most once a second each. */
void run_checkpoint(struct tracer *T);
void run_summary(struct proc *p, const char *path);
/* Launch without --follow-forks: one line on the children that ran unprofiled, if any. */
void run_summary_children(struct tracer *T);
/*
 * --max-peak: when the peak (the combined peak with --follow-forks) passed
 * the budget, one line on stderr with the peak, the budget and the top
 * stack, and PTFIL_EXIT_OVER_BUDGET in place of a successful rc.
 */
int run_budget(struct tracer *T, struct proc *p, int rc);

#endif
