/* What ptfil says at the end of a run: the peak, the children not profiled, the budget (--max-peak). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/fold.h"
#include "common/snap.h"
#include "tracer/core/session.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/tree.h"
#include "tracer/output/export.h"
#include "tracer/output/summary.h"
#include "tracer/stacks/stacks.h"

/* Own lines named at the end of a run. */
#define WHERE_SHOWN 3

/*
 * The largest own lines of stacks st[0..n) as one line of text: "load
 * (demo.py:12) 30.5 MiB 28%, scale (demo.py:16) 30.5 MiB 28%"; *top gets the
 * largest alone. NULL (and *top NULL) when no own line holds memory or
 * memory runs out.
 */
static char *where_text(const struct snap *s, const struct fold_own *own, const struct snap_stack *st, size_t n,
			uint64_t whole, char **top)
{
	size_t n_lines = 0, len = 0, shown = 0;
	struct fold_line *v = fold_lines(s, own, st, n, &n_lines);
	char *text = malloc(WHERE_SHOWN * 600);
	*top = NULL;
	if (!v || !text) {
		free(v);
		free(text);
		return NULL;
	}
	text[0] = '\0';
	for (size_t i = 0; i < n_lines && shown < WHERE_SHOWN; i++) {
		if (v[i].frame == UINT32_MAX || !v[i].charged)
			continue;
		char brief[400];
		fold_frame_brief(s, v[i].frame, brief, sizeof(brief));
		int k = snprintf(text + len, WHERE_SHOWN * 600 - len, "%s%s %.1f MiB (%.0f%%)", shown ? ", " : "",
				 brief, (double)v[i].charged / 1048576.0,
				 whole ? 100.0 * (double)v[i].charged / (double)whole : 0.0);
		/* Cut, never past the buffer: snprintf says what it would have written. */
		len = k < 0 ? len : len + (size_t)k >= WHERE_SHOWN * 600 ? WHERE_SHOWN * 600 - 1 : len + (size_t)k;
		if (shown++ == 0)
			*top = strdup(text);
	}
	free(v);
	if (!shown) {
		free(text);
		return NULL;
	}
	return text;
}

void summary_keep(struct tracer *T, const struct snap *s)
{
	struct export *e = T->exp;
	char *top = NULL, *tree_top = NULL;
	free(e->where);
	free(e->where_tree);
	free(e->where_top);
	e->where = where_text(s, T->opts.own, s->stacks, s->n_stacks, s->peak.charged, &top);
	e->where_tree = s->has_tree ? where_text(s, T->opts.own, s->tree_stacks, s->n_tree_stacks, s->tree_charged, &tree_top)
				    : NULL;
	e->where_top = s->has_tree ? tree_top : top;
	free(s->has_tree ? top : tree_top);
}

/* The profiled processes of the run, those done and those still in the table. */
static size_t profiled_count(struct tracer *T)
{
	size_t profiled = 0;
	for (size_t i = 0; i < T->tree->n_done; i++)
		profiled += T->tree->done[i].profiled;
	for (struct proc *q = T->procs; q; q = q->next)
		profiled += q->profiled;
	return profiled;
}

void summary_peak(struct tracer *T, struct proc *p, const char *path)
{
	const struct ledger_peak *pk = &alloc_view_ledger(p)->peak;
	const struct tree *t = T->tree;
	size_t profiled = profiled_count(T);
	/* A followed tree's combined peak is what a budget or a machine must hold: it comes first. */
	if (t->has_peak && profiled > 1) {
		notice("combined peak of the %zu processes profiled: %.1f MiB at %.2f s", profiled,
			(double)t->charged / 1048576.0, t->time);
		if (T->exp->where_tree)
			notice("your lines at the combined peak: %s", T->exp->where_tree);
	}
	notice("%speak %.1f MiB resident (%.1f MiB reserved) at %.2f s; process peak RSS %.1f MiB",
		t->has_peak && profiled > 1 ? "main process's " : "", (double)pk->charged / 1048576.0,
		(double)pk->reserved / 1048576.0, pk->time, (double)p->vmhwm / 1048576.0);
	if (T->exp->where)
		notice("your lines at the peak: %s", T->exp->where);
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t n = strlen(base);
	if (n > 3 && !strcmp(base + n - 3, ".gz"))
		n -= 3;
	notice("snapshot written to %s; the report: ptfil-view %s; the flame graph as a page: "
		"ptfil-view --html -o %.*s.html %s", path, path, (int)n, base, path);
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
	size_t profiled = profiled_count(T);
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
		error("%s %.1f MiB is over the budget of %.1f MiB (--max-peak); your largest line: %s; top stack, "
		      "%.1f MiB in pid %d: %s", what, (double)peak / 1048576.0, (double)T->opts.max_peak / 1048576.0,
		      T->exp->where_top ? T->exp->where_top : "none (no frame of your code holds memory)",
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
