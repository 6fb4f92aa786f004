/* The process tree and its combined peak (see tree.h). */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/snap.h"
#include "tracer/core/session.h"
#include "tracer/run.h"
#include "tracer/ptrace/mapcalls.h"
#include "tracer/memory/tree.h"

static void tree_proc_fin(struct tree_proc *q)
{
	free(q->command);
	free(q->file);
	free(q->charges);
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
		if (now - p->faults_checked_at >= TREE_INHERITED_REFRESH / 10)
			sysc_refresh_if_faulted(T, p);
		if (p->inherited && now - p->inherited_at >= TREE_INHERITED_REFRESH) {
			p->inherited_at = now;
			ledger_refresh_inherited(&p->ledger);
		}
		sum += p->ledger.charged;
	}
	struct tree *t = &T->tree;
	if (t->has_peak && sum <= t->charged)
		return;
	t->gen++;
	t->has_peak = 1;
	t->time = tracer_now(T);
	t->charged = sum;
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!live(p))
			continue;
		const struct ledger *l = &p->ledger;
		size_t cap = p->n_at_tree;
		if (grow_array(&p->at_tree, &cap, l->n_stacks, sizeof(*p->at_tree), l->n_stacks)) {
			p->n_at_tree = 0;
			warning("out of memory copying the combined peak");
			continue;
		}
		p->n_at_tree = l->n_stacks;
		if (l->n_stacks)
			memcpy(p->at_tree, l->by_stack, l->n_stacks * sizeof(*p->at_tree));
		p->tree_gen = t->gen;
		p->tree_charged = l->charged;
	}
}

/* The file name (no directory) of p's own snapshot, or NULL. The caller frees. */
static char *snapshot_file(struct tracer *T, struct proc *p)
{
	if (!p->profiled || !p->ready || !T->output)
		return NULL;
	char *path = run_snapshot_path(T, p, 0);
	if (!path)
		return NULL;
	const char *slash = strrchr(path, '/');
	char *name = strdup(slash ? slash + 1 : path);
	free(path);
	return name;
}

void tree_note(struct tracer *T, struct proc *p)
{
	struct tree *t = &T->tree;
	if (!p->profiled && (T->attach || p->pid == T->main_pid))
		return;
	if (!p->profiled && !p->end_time)
		return;  /* never seen to run on its own (a thread's bookkeeping, a vfork child that vanished) */
	if (grow_array(&t->done, &t->cap_done, t->n_done + 1, sizeof(*t->done), 16))
		return;
	struct tree_proc *q = &t->done[t->n_done];
	memset(q, 0, sizeof(*q));
	q->pid = p->pid;
	q->ppid = p->parent;
	q->profiled = p->profiled;
	q->peak = p->ledger.has_peak ? p->ledger.peak.charged : 0;
	q->peak_time = p->ledger.peak.time;
	q->vmhwm = p->vmhwm;
	q->start = p->started;
	q->end = p->end_time;
	q->command = tree_command(p->argv);
	q->file = snapshot_file(T, p);
	if (p->profiled && p->tree_gen && p->tree_gen == t->gen) {
		q->gen = p->tree_gen;
		q->at_combined = p->tree_charged;
		size_t n = 0;
		for (size_t i = 0; i < p->n_at_tree; i++)
			n += p->at_tree[i].charged || p->at_tree[i].count;
		q->charges = calloc(n ? n : 1, sizeof(*q->charges));
		for (size_t i = 0; q->charges && i < p->n_at_tree; i++) {
			const struct ledger_charge *c = &p->at_tree[i];
			if (!c->charged && !c->count)
				continue;
			char kind = i < p->ledger.n_stacks && p->ledger.kind[i] ? p->ledger.kind[i] : SNAP_KIND_MMAP;
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

/* The tree's entry for a process still there (the main one, or one running at the end). */
static int from_live(struct tracer *T, struct proc *p, struct snap_proc *o)
{
	o->pid = p->pid;
	o->ppid = p->parent;
	o->profiled = p->profiled;
	o->peak = p->ledger.has_peak ? p->ledger.peak.charged : 0;
	o->peak_time = p->ledger.peak.time;
	o->at_combined = p->profiled && p->tree_gen && p->tree_gen == T->tree.gen ? p->tree_charged : 0;
	o->vmhwm = p->vmhwm;
	o->start = p->started;
	o->end = p->end_time ? p->end_time : -1;
	/* A launched program keeps the command line it was given (tracer_opts). */
	char *const *argv = p->argv ? p->argv : p->pid == T->main_pid ? T->opts.argv : NULL;
	o->command = tree_command(argv);
	o->file = snapshot_file(T, p);
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
	unsigned gen = T->tree.gen;
	if (sl->p) {
		struct proc *p = sl->p;
		if (!p->profiled || p->tree_gen != gen)
			return 0;
		/* The ledger's arrays run past the stacks it has seen (they grow by steps): those are zero. */
		for (size_t j = 0; j < p->n_at_tree && j < T->stacks.n_nodes; j++) {
			char kind = j < p->ledger.n_stacks && p->ledger.kind[j] ? p->ledger.kind[j] : SNAP_KIND_MMAP;
			if (add_stack(s, cap, map[j], kind, &p->at_tree[j], i))
				return -1;
		}
		return 0;
	}
	if (sl->q->gen != gen)
		return 0;
	for (size_t j = 0; j < sl->q->n_charges; j++) {
		const struct tree_charge *tc = &sl->q->charges[j];
		struct ledger_charge c = { tc->charged, tc->reserved, tc->count };
		if (tc->stack < T->stacks.n_nodes && add_stack(s, cap, map[tc->stack], tc->kind, &c, i))
			return -1;
	}
	return 0;
}

int tree_export(struct tracer *T, struct snap *s, const uint32_t *map)
{
	struct tree *t = &T->tree;
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

int tree_top(struct tracer *T, uint32_t *node, pid_t *pid, uint64_t *charged)
{
	struct tree *t = &T->tree;
	int found = -1;
	*charged = 0;
	if (!t->has_peak)
		return -1;
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!p->profiled || p->tree_gen != t->gen)
			continue;
		for (size_t j = 0; j < p->n_at_tree; j++)
			if (p->at_tree[j].charged > *charged || found < 0) {
				if (!p->at_tree[j].charged && found >= 0)
					continue;
				*charged = p->at_tree[j].charged;
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
