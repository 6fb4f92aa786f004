/* The process tree and its combined peak (see tree.h). */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/snap.h"
#include "tracer/core/session.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/peak.h"
#include "tracer/memory/tree.h"

static void tree_proc_fin(struct tree_proc *q)
{
	free(q->command);
	free(q->file);
	free(q->charges);
}

void tree_share_fin(struct tree_share *s)
{
	free(s->at_tree);
	s->at_tree = NULL;
	s->n_at_tree = 0;
}

void tree_fin(struct tree *t)
{
	for (size_t i = 0; i < t->n_done; i++)
		tree_proc_fin(&t->done[i]);
	free(t->done);
	free(t->unprofiled_command);
	memset(t, 0, sizeof(*t));
}

char *tree_command(char *const *argv)
{
	if (!argv || !argv[0])
		return NULL;
	size_t n = 0;
	for (char *const *a = argv; *a && n < 4096; a++)
		n += strlen(*a) + 1;
	if (n > 4096)
		n = 4096;
	char *s = malloc(n + 1);
	if (!s)
		return NULL;
	size_t k = 0;
	for (char *const *a = argv; *a && k < n; a++) {
		if (k)
			s[k++] = ' ';
		size_t len = strlen(*a);
		if (len > n - k)
			len = n - k;
		memcpy(s + k, *a, len);
		k += len;
	}
	s[k] = '\0';
	return s;
}

/* Whether p counts toward the tree's sum now: profiled, set up, and still running. */
static int live(const struct proc *p)
{
	return p->profiled && p->ready && p->nthreads > 0;
}

/*
 * How often a forked child's inherited ranges are measured again: writing a
 * page it shares with its parent (either side) moves it from one to the other
 * without a fault the kernel counts for the writer, so the fault counter that
 * paces other refreshes does not see it.
 */
#define TREE_INHERITED_REFRESH 0.01

void tree_check_peak(struct tracer *T)
{
	if (!T->opts.follow_forks)
		return;
	uint64_t sum = 0;
	double now = tracer_now(T);
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!live(p))
			continue;
		/*
		 * The others' charges as they are now: a process that wrote its memory
		 * and then waits is measured at its own releases only. At most once a
		 * millisecond each (a fault counter read); the process releasing is
		 * measured by its caller.
		 */
		if (now - p->pk->faults_checked_at >= TREE_INHERITED_REFRESH / 10)
			peak_refresh_if_faulted(T, p);
		if (p->tree->inherited && now - p->tree->inherited_at >= TREE_INHERITED_REFRESH) {
			p->tree->inherited_at = now;
			ledger_refresh_inherited(p->ledger);
		}
		sum += alloc_view_ledger(p)->charged;
	}
	struct tree *t = T->tree;
	if (t->has_peak && sum <= t->charged)
		return;
	t->gen++;
	t->has_peak = 1;
	t->time = tracer_now(T);
	t->charged = sum;
	t->pending = 1;
}

void tree_settle(struct tracer *T)
{
	struct tree *t = T->tree;
	if (!t->pending)
		return;
	t->pending = 0;
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!live(p))
			continue;
		const struct ledger *l = alloc_view_ledger(p);
		size_t cap = p->tree->n_at_tree;
		if (grow_array(&p->tree->at_tree, &cap, l->n_stacks, sizeof(*p->tree->at_tree), l->n_stacks)) {
			p->tree->n_at_tree = 0;
			warning("out of memory copying the combined peak");
			continue;
		}
		p->tree->n_at_tree = l->n_stacks;
		if (l->n_stacks)
			memcpy(p->tree->at_tree, l->by_stack, l->n_stacks * sizeof(*p->tree->at_tree));
		p->tree->gen = t->gen;
		p->tree->charged = l->charged;
	}
}

void tree_note(struct tracer *T, struct proc *p, char *file)
{
	tree_settle(T);
	struct tree *t = T->tree;
	if ((!p->profiled && (T->attach || p->pid == T->main_pid)) ||
	    /* never seen to run on its own (a thread's bookkeeping, a vfork child that vanished) */
	    (!p->profiled && !p->end_time) ||
	    grow_array(&t->done, &t->cap_done, t->n_done + 1, sizeof(*t->done), 16)) {
		free(file);
		return;
	}
	struct tree_proc *q = &t->done[t->n_done];
	memset(q, 0, sizeof(*q));
	q->pid = p->pid;
	q->ppid = p->parent;
	q->profiled = p->profiled;
	const struct ledger *l = alloc_view_ledger(p);
	q->peak = l->has_peak ? l->peak.charged : 0;
	q->peak_time = l->peak.time;
	q->vmhwm = p->vmhwm;
	q->start = p->started;
	q->end = p->end_time;
	q->command = tree_command(p->argv);
	q->file = file;
	if (p->profiled && p->tree->gen && p->tree->gen == t->gen) {
		q->gen = p->tree->gen;
		q->at_combined = p->tree->charged;
		size_t n = 0;
		for (size_t i = 0; i < p->tree->n_at_tree; i++)
			n += p->tree->at_tree[i].charged || p->tree->at_tree[i].count;
		q->charges = calloc(n ? n : 1, sizeof(*q->charges));
		for (size_t i = 0; q->charges && i < p->tree->n_at_tree; i++) {
			const struct ledger_charge *c = &p->tree->at_tree[i];
			if (!c->charged && !c->count)
				continue;
			char kind = i < alloc_view_ledger(p)->n_stacks && alloc_view_ledger(p)->kind[i] ? alloc_view_ledger(p)->kind[i] : SNAP_KIND_MMAP;
			q->charges[q->n_charges++] = (struct tree_charge){ (uint32_t)i, kind, c->charged, c->reserved, c->count };
		}
	}
	t->n_done++;
	if (!p->profiled) {
		t->unprofiled++;
		if (p->vmhwm >= t->unprofiled_hwm) {
			t->unprofiled_hwm = p->vmhwm;
			t->unprofiled_pid = p->pid;
			free(t->unprofiled_command);
			t->unprofiled_command = q->command ? strdup(q->command) : NULL;
		}
	}
}

int tree_top(struct tracer *T, uint32_t *node, pid_t *pid, uint64_t *charged)
{
	tree_settle(T);
	struct tree *t = T->tree;
	int found = -1;
	*charged = 0;
	if (!t->has_peak)
		return -1;
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!p->profiled || p->tree->gen != t->gen)
			continue;
		for (size_t j = 0; j < p->tree->n_at_tree; j++)
			if (p->tree->at_tree[j].charged > *charged || found < 0) {
				if (!p->tree->at_tree[j].charged && found >= 0)
					continue;
				*charged = p->tree->at_tree[j].charged;
				*node = (uint32_t)j;
				*pid = p->pid;
				found = 0;
			}
	}
	for (size_t d = 0; d < t->n_done; d++) {
		const struct tree_proc *q = &t->done[d];
		if (q->gen != t->gen)
			continue;
		for (size_t j = 0; j < q->n_charges; j++)
			if (q->charges[j].charged > *charged || found < 0) {
				*charged = q->charges[j].charged;
				*node = q->charges[j].stack;
				*pid = q->pid;
				found = 0;
			}
	}
	return found;
}
