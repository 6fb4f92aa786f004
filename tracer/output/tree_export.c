/* The process tree in the main process's snapshot (memory/tree.h has the tree itself). */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/snap.h"
#include "tracer/core/session.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/tree.h"
#include "tracer/output/export.h"
#include "tracer/output/snapshot.h"
#include "tracer/stacks/stacks.h"

/* The tree's entry for a process still there (the main one, or one running at the end). */
static int from_live(struct tracer *T, struct proc *p, struct snap_proc *o)
{
	o->pid = p->pid;
	o->ppid = p->parent;
	o->profiled = p->profiled;
	const struct ledger *l = alloc_view_ledger(p);
	o->peak = l->has_peak ? l->peak.charged : 0;
	o->peak_time = l->peak.time;
	o->at_combined = p->profiled && p->tree->gen && p->tree->gen == T->tree->gen ? p->tree->charged : 0;
	o->vmhwm = p->vmhwm;
	o->start = p->started;
	o->end = p->end_time ? p->end_time : -1;
	/* A launched program keeps the command line it was given (tracer_opts). */
	char *const *argv = p->argv ? p->argv : p->pid == T->main_pid ? T->opts.argv : NULL;
	o->command = tree_command(argv);
	o->file = snapshot_file_name(T, p);
	return (argv && argv[0] && !o->command) ? -1 : 0;
}

static int from_done(const struct tree_proc *q, struct snap_proc *o, unsigned gen)
{
	o->pid = q->pid;
	o->ppid = q->ppid;
	o->profiled = q->profiled;
	o->peak = q->peak;
	o->peak_time = q->peak_time;
	o->at_combined = q->gen && q->gen == gen ? q->at_combined : 0;
	o->vmhwm = q->vmhwm;
	o->start = q->start;
	o->end = q->end ? q->end : -1;
	o->command = q->command ? strdup(q->command) : NULL;
	o->file = q->file ? strdup(q->file) : NULL;
	return (q->command && !o->command) || (q->file && !o->file) ? -1 : 0;
}

/* Where a tree entry came from while it is built: a process still there, or one gone. */
struct slot {
	struct proc *p;
	const struct tree_proc *q;
	struct snap_proc o;
};

static int by_start(const void *pa, const void *pb)
{
	const struct snap_proc *a = &((const struct slot *)pa)->o, *b = &((const struct slot *)pb)->o;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

static int add_stack(struct snap *s, size_t *cap, uint32_t node, char kind, const struct ledger_charge *c, uint32_t proc)
{
	if (!c->charged && !c->count)
		return 0;
	if (grow_array(&s->tree_stacks, cap, s->n_tree_stacks + 1, sizeof(*s->tree_stacks), 64))
		return -1;
	s->tree_stacks[s->n_tree_stacks++] =
		(struct snap_stack){ node, kind, c->charged, c->reserved, c->count, proc };
	return 0;
}

/* Slot i's stacks at the combined peak, as tree stacks of process i of s. */
static int add_stacks(struct tracer *T, struct snap *s, size_t *cap, const struct slot *sl, uint32_t i,
		      const uint32_t *map)
{
	unsigned gen = T->tree->gen;
	if (sl->p) {
		struct proc *p = sl->p;
		if (!p->profiled || p->tree->gen != gen)
			return 0;
		/* The ledger's arrays run past the stacks it has seen (they grow by steps): those are zero. */
		for (size_t j = 0; j < p->tree->n_at_tree && j < T->stacks->n_nodes; j++) {
			char kind = j < alloc_view_ledger(p)->n_stacks && alloc_view_ledger(p)->kind[j] ? alloc_view_ledger(p)->kind[j] : SNAP_KIND_MMAP;
			if (add_stack(s, cap, map[j], kind, &p->tree->at_tree[j], i))
				return -1;
		}
		return 0;
	}
	if (sl->q->gen != gen)
		return 0;
	for (size_t j = 0; j < sl->q->n_charges; j++) {
		const struct tree_charge *tc = &sl->q->charges[j];
		struct ledger_charge c = { tc->charged, tc->reserved, tc->count };
		if (tc->stack < T->stacks->n_nodes && add_stack(s, cap, map[tc->stack], tc->kind, &c, i))
			return -1;
	}
	return 0;
}

int tree_export(struct tracer *T, struct snap *s, const uint32_t *map)
{
	tree_settle(T);
	struct tree *t = T->tree;
	size_t n = t->n_done;
	for (struct proc *p = T->procs; p; p = p->next)
		n += p->profiled || (!T->attach && p->end_time);
	struct slot *v = calloc(n ? n : 1, sizeof(*v));
	s->procs = calloc(n ? n : 1, sizeof(*s->procs));
	int rc = -1;
	size_t k = 0, profiled = 0;
	if (!v || !s->procs)
		goto out;
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!p->profiled && (T->attach || !p->end_time))
			continue;
		profiled += p->profiled;
		v[k].p = p;
		if (from_live(T, p, &v[k++].o))
			goto out;
	}
	for (size_t i = 0; i < t->n_done; i++) {
		profiled += t->done[i].profiled;
		v[k].q = &t->done[i];
		if (from_done(&t->done[i], &v[k++].o, t->gen))
			goto out;
	}
	/* The main process first, then the others as they started. */
	for (size_t i = 1; i < k; i++)
		if (v[i].o.pid == T->main_pid) {
			struct slot m = v[i];
			memmove(&v[1], &v[0], i * sizeof(m));
			v[0] = m;
			break;
		}
	if (k > 2)
		qsort(&v[1], k - 1, sizeof(*v), by_start);
	for (size_t i = 0; i < k; i++) {
		s->procs[i] = v[i].o;
		memset(&v[i].o, 0, sizeof(v[i].o));  /* its strings are s's now */
	}
	s->n_procs = k;
	rc = 0;
	if (!t->has_peak || profiled < 2)
		goto out;
	s->has_tree = 1;
	s->tree_time = t->time;
	s->tree_charged = t->charged;
	size_t cap = 0;
	for (size_t i = 0; i < k && rc == 0; i++)
		rc = add_stacks(T, s, &cap, &v[i], (uint32_t)i, map);
out:
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].o.command);
		free(v[i].o.file);
	}
	free(v);
	return rc;
}

