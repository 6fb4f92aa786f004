/* What ptfil prints on stderr at the end of a run (summary.c). */
#ifndef PTFIL_SUMMARY_H
#define PTFIL_SUMMARY_H

struct tracer;
struct proc;
struct snap;

/*
 * Keeps from the main process's snapshot s, as written at its peak, the
 * lines of the user's own code that held the most (common/fold.h): at the
 * peak, and at the combined peak of a tree (T->exp). Out of memory, it
 * keeps nothing: the end of the run then says less.
 */
void summary_keep(struct tracer *T, const struct snap *s);
/*
 * The peak of p, the user's lines that held most of it (with a tree, the
 * combined peak's first), and where its snapshot is (path), with the
 * commands that show it.
 */
void summary_peak(struct tracer *T, struct proc *p, const char *path);
/* Launch: one line on the children that ran unprofiled, if any (the combined peak is summary_peak's). */
void summary_children(struct tracer *T);
/*
 * --max-peak: when the peak (the combined peak with --follow-forks) passed
 * the budget, one line on stderr with the peak, the budget and the top
 * stack, and PTFIL_EXIT_OVER_BUDGET in place of a successful rc.
 */
int summary_budget(struct tracer *T, struct proc *p, int rc);

#endif
