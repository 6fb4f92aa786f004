/* What ptfil says at the end of a run: the peak, the children not profiled, the budget (--max-peak). */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "tracer/core/session.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/tree.h"
#include "tracer/output/export.h"
#include "tracer/output/summary.h"
#include "tracer/stacks/stacks.h"

void summary_peak(struct proc *p, const char *path)
{
	const struct ledger_peak *pk = &alloc_view_ledger(p)->peak;
	notice("peak %.1f MiB resident (%.1f MiB reserved) at %.2f s; process peak RSS %.1f MiB",
		(double)pk->charged / 1048576.0, (double)pk->reserved / 1048576.0, pk->time,
		(double)p->vmhwm / 1048576.0);
	notice("snapshot written to %s; read it with: ptfil-view %s", path, path);
}

/* The program's name in an unprofiled child's command line (a compiler's runs for lines): its start, *len its length. */
static const char *unprofiled_name(const struct tree *t, int *len)
{
	const char *cmd = t->unprofiled_command ? t->unprofiled_command : "?";
	size_t n = strcspn(cmd, " ");
	const char *base = cmd;
	for (const char *q = cmd; q < cmd + n; q++)
		if (*q == '/')
			base = q + 1;
	*len = (int)(cmd + n - base);
	return base;
}

void summary_children(struct tracer *T)
{
	const struct tree *t = T->tree;
	size_t profiled = 0;
	for (size_t i = 0; i < t->n_done; i++)
		profiled += t->done[i].profiled;
	for (struct proc *q = T->procs; q; q = q->next)
		profiled += q->profiled;
	if (t->has_peak && profiled > 1)
		notice("combined peak of the %zu processes profiled: %.1f MiB at %.2f s (ptfil-view shows the tree)",
			profiled, (double)t->charged / 1048576.0, t->time);
	if (!t->unprofiled)
		return;
	int len;
	const char *base = unprofiled_name(t, &len);
	notice("%llu child process%s %s not profiled; the largest, %.*s (pid %d), peaked at %.1f MiB RSS: "
		"--follow-forks profiles them", (unsigned long long)t->unprofiled,
		t->unprofiled == 1 ? "" : "es", t->unprofiled == 1 ? "was" : "were", len, base,
		(int)t->unprofiled_pid, (double)t->unprofiled_hwm / 1048576.0);
}

int summary_budget(struct tracer *T, struct proc *p, int rc)
{
	if (!T->opts.max_peak || !p)
		return rc;
	alloc_touch_settle(p);
	const struct ledger *l = alloc_view_ledger(p);
	uint64_t peak = l->peak.charged, charged = 0;
	uint32_t node = STACKS_ROOT;
	pid_t who = p->pid;
	const char *what = "peak";
	size_t profiled = 0;
	for (size_t i = 0; i < T->tree->n_done; i++)
		profiled += T->tree->done[i].profiled;
	for (struct proc *q = T->procs; q; q = q->next)
		profiled += q->profiled;
	if (T->opts.follow_forks && profiled > 1 && tree_top(T, &node, &who, &charged) == 0) {
		peak = T->tree->charged;
		what = "combined peak";
	} else {
		for (size_t j = 0; j < l->n_at_peak; j++)
			if (l->at_peak[j].charged > charged) {
				charged = l->at_peak[j].charged;
				node = (uint32_t)j;
			}
	}
	int over = peak > T->opts.max_peak;
	if (over) {
		char *stack = export_stack_text(T, node, 4);
		error("%s %.1f MiB is over the budget of %.1f MiB (--max-peak); top stack, %.1f MiB in pid %d: %s",
			what, (double)peak / 1048576.0, (double)T->opts.max_peak / 1048576.0,
			(double)charged / 1048576.0, (int)who, stack ? stack : "?");
		free(stack);
	}
	/*
	 * The budget is the whole tree's: a child that ran unprofiled (no -f) is
	 * measured by its own high-water mark, all it had resident at once
	 * (shared pages too: more than it would be charged), and fails the run
	 * just as well.
	 */
	const struct tree *t = T->tree;
	if (t->unprofiled && t->unprofiled_hwm > T->opts.max_peak) {
		int len;
		const char *base = unprofiled_name(t, &len);
		error("child process %.*s (pid %d), not profiled, peaked at %.1f MiB RSS, over the budget of %.1f MiB "
		      "(--max-peak); --follow-forks (-f) profiles it", len, base, (int)t->unprofiled_pid,
		      (double)t->unprofiled_hwm / 1048576.0, (double)T->opts.max_peak / 1048576.0);
		over = 1;
	}
	if (!over)
		return rc;
	/* A program that failed says so first: its own status is kept. */
	return rc == 0 ? PTFIL_EXIT_OVER_BUDGET : rc;
}
