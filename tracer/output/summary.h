/* What ptfil prints on stderr at the end of a run (summary.c). */
#ifndef PTFIL_SUMMARY_H
#define PTFIL_SUMMARY_H

struct tracer;
struct proc;

/* The peak of p and where its snapshot is (path). */
void summary_peak(struct proc *p, const char *path);
/* Launch: the combined peak of a tree, and one line on the children that ran unprofiled, if any. */
void summary_children(struct tracer *T);
/*
 * --max-peak: when the peak (the combined peak with --follow-forks) passed
 * the budget, one line on stderr with the peak, the budget and the top
 * stack, and PTFIL_EXIT_OVER_BUDGET in place of a successful rc.
 */
int summary_budget(struct tracer *T, struct proc *p, int rc);

#endif
